"""sys.sp_cdc_enable_table with a transaction open on the table: it waits for
the table's open writers (engine option enable_table_waits, the default), or
not (UNCONFIRMED: both are modelled, ENGINE.md)."""

import threading
import time
import unittest

from .support import EngineTest

ENABLE_V2 = ("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', "
             "@role_name = NULL, @capture_instance = N'dbo_orders_v2'")


class EnableWaits(EngineTest):
    def setUp(self):
        super().setUp()
        self.ok("CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, v int)")
        self.enable_cdc()
        self.capture()
        self.writer = self.session()
        self.ok("BEGIN TRAN; INSERT dbo.orders VALUES (1, 1)", self.writer)

    def _in_thread(self, sql, session):
        out = {}

        def run():
            out["items"] = self.run_sql(sql, session)
        t = threading.Thread(target=run)
        t.start()
        return t, out

    def ids_in(self, ci):
        self.capture()
        return sorted(r[0] for r in self.rows("SELECT id FROM cdc.%s_CT" % ci))

    def test_waits_for_the_open_writer(self):
        enabler = self.session()
        t, out = self._in_thread(ENABLE_V2, enabler)
        time.sleep(0.3)
        self.assertTrue(t.is_alive(), "sp_cdc_enable_table did not wait")
        # a transaction that has not written the table queues behind the enable
        other = self.session()
        t2, out2 = self._in_thread("INSERT dbo.orders VALUES (9, 9)", other)
        time.sleep(0.3)
        self.assertTrue(t2.is_alive(), "a new writer overtook the pending enable")
        # the open writer goes on and commits
        self.ok("INSERT dbo.orders VALUES (2, 2); COMMIT", self.writer)
        t.join(5)
        t2.join(5)
        self.assertFalse(t.is_alive() or t2.is_alive())
        self.assertFalse([i for i in out["items"] + out2["items"] if hasattr(i, "number")])
        # the whole open transaction is before the new instance's start
        self.assertEqual(self.ids_in("dbo_orders"), [1, 2, 9])
        self.assertEqual(self.ids_in("dbo_orders_v2"), [9])
        start = self.scalar("SELECT sys.fn_cdc_get_min_lsn(N'dbo_orders_v2')")
        commit_1 = self.rows("SELECT __$start_lsn FROM cdc.dbo_orders_CT WHERE id = 1")[0][0]
        self.assertLess(commit_1, start)

    def test_lock_timeout(self):
        enabler = self.session()
        items = self.run_sql("SET LOCK_TIMEOUT 100; " + ENABLE_V2, enabler)
        self.assertEqual([i.number for i in items if hasattr(i, "number")], [1222])
        self.ok("COMMIT", self.writer)
        self.assertEqual(self.rows("SELECT COUNT(*) FROM cdc.change_tables"), [(1,)])

    def test_no_wait_switch(self):
        self.engine.control("set_option", {"name": "enable_table_waits", "value": False})
        self.ok(ENABLE_V2)            # returns at once
        self.ok("INSERT dbo.orders VALUES (2, 2); COMMIT", self.writer)
        # the new instance has only what the transaction wrote after the enable
        self.assertEqual(self.ids_in("dbo_orders"), [1, 2])
        self.assertEqual(self.ids_in("dbo_orders_v2"), [2])
        begin, commit = self.rows("SELECT tran_begin_lsn, start_lsn FROM cdc.lsn_time_mapping "
                                  "WHERE tran_id <> 0x00 ORDER BY start_lsn DESC")[0]
        start = self.scalar("SELECT sys.fn_cdc_get_min_lsn(N'dbo_orders_v2')")
        self.assertLess(begin, start)
        self.assertGreater(commit, start)

    def test_unknown_option(self):
        with self.assertRaises(ValueError):
            self.engine.control("set_option", {"name": "nope", "value": True})


if __name__ == "__main__":
    unittest.main()
