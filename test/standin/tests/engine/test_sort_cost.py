"""A blocking Sort takes time before its first row, in proportion to the rows
it sorts (engine option sort_row_cost_us, ENGINE.md "Sorts take time"); a
read the clustered index serves streams at once."""

import time

from .support import EngineTest


class SortCost(EngineTest):
    def setUp(self):
        super().setUp()
        self.ok("CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, v int)")
        self.enable_cdc()
        self.capture()
        for lo in range(1, 2001, 500):
            self.ok("INSERT dbo.orders (id, v) SELECT n, n FROM (%s) x" % " UNION ALL ".join(
                "SELECT %d AS n" % i for i in range(lo, lo + 500)))
        self.capture()
        self.engine.control("sort_cost", {"us_per_row": 200})   # 2000 rows: 0.4 s
        self.mn, self.mx = self.lsn_window()

    def _first_row_seconds(self, sql):
        t0 = time.monotonic()
        rows = self.rows(sql)
        self.assertEqual(len(rows), 2000)
        return time.monotonic() - t0

    def test_function_sorted_by_seqval_waits(self):
        took = self._first_row_seconds(
            "SELECT id FROM cdc.fn_cdc_get_all_changes_dbo_orders(0x%s, 0x%s, N'all') "
            "ORDER BY __$start_lsn, __$seqval, __$operation" % (self.mn.hex(), self.mx.hex()))
        self.assertGreaterEqual(took, 0.4)

    def test_clustered_order_and_no_order_stream(self):
        for sql in ("SELECT id FROM cdc.dbo_orders_CT ORDER BY __$start_lsn, __$command_id, __$seqval, __$operation",
                    "SELECT id FROM cdc.fn_cdc_get_all_changes_dbo_orders(0x%s, 0x%s, N'all')"
                    % (self.mn.hex(), self.mx.hex()),
                    "SELECT id FROM cdc.fn_cdc_get_all_changes_dbo_orders(0x%s, 0x%s, N'all') "
                    "ORDER BY __$start_lsn" % (self.mn.hex(), self.mx.hex())):
            self.assertLess(self._first_row_seconds(sql), 0.3, sql)

    def test_cost_is_per_sorted_row(self):
        self.engine.control("sort_cost", {"us_per_row": 0})
        took = self._first_row_seconds("SELECT id FROM dbo.orders ORDER BY v DESC")
        self.assertLess(took, 0.3)
        self.engine.control("sort_cost", {"us_per_row": 500})
        self.assertGreaterEqual(self._first_row_seconds("SELECT id FROM dbo.orders ORDER BY v DESC"), 1.0)
