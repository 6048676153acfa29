"""CDC cleanup while a change table is being read: readers see change tables
WITH (NOLOCK) semantics (no statement snapshot), and cleanup raises the low
watermark first, then deletes in batches of the threshold, each committed on
its own (ENGINE.md, CDC model, cleanup)."""

import datetime
import threading
import unittest

from .support import CachedRow, EngineTest, ResultSet


class CleanupDuringRead(EngineTest):
    def setUp(self):
        super().setUp()
        self.ok("CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, v int)")
        self.enable_cdc()
        self.capture()
        # three transactions: 2500 rows, 10 rows, 5 rows, a second apart (the
        # cleanup procedure moves its mark back to the first commit of the
        # same commit time: transactions in one datetime tick would be kept)
        self.ok("INSERT dbo.orders (id, v) SELECT n, n FROM (%s) x" % self._numbers(1, 2500))
        self._tick()
        self.ok("INSERT dbo.orders (id, v) SELECT n, n FROM (%s) x" % self._numbers(2501, 2510))
        self._tick()
        self.ok("INSERT dbo.orders (id, v) SELECT n, n FROM (%s) x" % self._numbers(2511, 2515))
        self.capture()
        self.commits = [r[0] for r in self.rows(
            "SELECT start_lsn FROM cdc.lsn_time_mapping WHERE tran_id <> 0x00 ORDER BY start_lsn")]
        self.assertEqual(len(self.commits), 3)

    def _tick(self):
        """Move the server's clock one second on."""
        now = datetime.datetime.fromisoformat(self.engine.control("clock", {})["utc"])
        self.engine.control("clock", {"utc": (now + datetime.timedelta(seconds=1)).isoformat()})

    @staticmethod
    def _numbers(lo, hi):
        return " UNION ALL ".join("SELECT %d AS n" % i for i in range(lo, hi + 1))

    def _reader(self, sql):
        """Start a streaming read and pull its first row (the statement has
        begun: its first chunk of rows is read)."""
        items = self.engine.execute_batch(self.s, sql)
        rs = next(i for i in items if isinstance(i, ResultSet))
        it = (r.values if isinstance(r, CachedRow) else r for r in rs.rows)
        first = next(it)
        return items, it, first

    def _cleanup_to_third(self, threshold=None):
        args = {"capture_instance": "dbo_orders", "low_water_mark": "0x" + self.commits[2].hex()}
        if threshold is not None:
            args["threshold"] = threshold
        self.engine.control("cleanup", args)

    def _assert_rows_vanish(self, sql, id_of):
        items, it, first = self._reader(sql)
        self._cleanup_to_third()
        ids = [id_of(first)] + [id_of(r) for r in it]
        for _ in items:
            pass
        # the first chunk (1000 rows) was read before the cleanup; the rest of
        # the first two transactions vanished, the third one is there
        self.assertEqual(ids, list(range(1, 1001)) + list(range(2511, 2516)))

    def test_function_read_in_lsn_order_sees_concurrent_deletes(self):
        """ORDER BY __$start_lsn is the change table's clustered order: the
        function's rows stream, and cleanup deletes rows not yet read."""
        mn, mx = self.lsn_window()
        self._assert_rows_vanish(
            "SELECT id FROM cdc.fn_cdc_get_all_changes_dbo_orders(0x%s, 0x%s, N'all') "
            "ORDER BY __$start_lsn" % (mn.hex(), mx.hex()),
            lambda r: r[0])

    def test_function_read_in_seqval_order_is_sorted_first(self):
        """ORDER BY __$start_lsn, __$seqval, __$operation is not the clustered
        order (__$command_id comes second): a sort reads the whole window
        before the first row, so a cleanup after the first row deletes nothing
        the read still returns."""
        mn, mx = self.lsn_window()
        items, it, first = self._reader(
            "SELECT id FROM cdc.fn_cdc_get_all_changes_dbo_orders(0x%s, 0x%s, N'all') "
            "ORDER BY __$start_lsn, __$seqval, __$operation" % (mn.hex(), mx.hex()))
        self._cleanup_to_third()
        ids = [first[0]] + [r[0] for r in it]
        for _ in items:
            pass
        self.assertEqual(ids, list(range(1, 2516)))

    def test_direct_read_sees_concurrent_deletes(self):
        self._assert_rows_vanish(
            "SELECT id FROM cdc.dbo_orders_CT ORDER BY __$start_lsn, __$command_id, __$seqval, __$operation",
            lambda r: r[0])

    def test_user_tables_keep_statement_snapshots(self):
        items, it, first = self._reader("SELECT id FROM dbo.orders ORDER BY id")
        self.ok("DELETE dbo.orders WHERE id > 1500")
        ids = [first[0]] + [r[0] for r in it]
        for _ in items:
            pass
        self.assertEqual(ids, list(range(1, 2516)))

    def test_mark_first_then_batches_of_the_threshold(self):
        """Each step of a cleanup as a reader between the statements sees it."""
        db = self.engine.databases["cdcdb"]
        ci = db.cdc.instances["dbo_orders"]
        seen = []

        def between():
            ct_rows = sum(1 for k in ci.ct.keys if ci.ct.rows[k].xmax is None)
            seen.append((ci.start_lsn == self.commits[2], ct_rows))

        with self.engine.lock:
            deleted = self.engine.cdc.cleanup(db, ci, self.commits[2], threshold=1000, between=between)
        self.assertEqual(deleted, 2510)
        # the mark moved before any row was deleted, then 1000, 1000, 510 rows went
        self.assertEqual(seen[:4], [(True, 2515), (True, 1515), (True, 515), (True, 5)])
        self.assertTrue(all(mark for mark, _ in seen))

    def test_control_and_procedure_use_the_threshold(self):
        db = self.engine.databases["cdcdb"]
        db.cdc.job["threshold"] = 700
        statements = []
        real_publish = self.engine.publish_seq

        def counting(seq):
            statements.append(seq)
            real_publish(seq)
        self.engine.publish_seq = counting
        try:
            self._cleanup_to_third()
        finally:
            self.engine.publish_seq = real_publish
        # 2510 change rows in batches of 700 (4 statements), the mapping rows in one
        self.assertEqual(len(statements), 4 + 1)
        self.assertEqual(self.rows("SELECT count(*) FROM cdc.dbo_orders_CT"), [(5,)])

    def test_reader_in_another_thread_between_batches(self):
        """The procedure releases the engine lock between its statements."""
        db = self.engine.databases["cdcdb"]
        ci = db.cdc.instances["dbo_orders"]
        observed = []
        stop = threading.Event()
        reader = self.session()

        def poll():
            while not stop.is_set():
                n = self.rows("SELECT count(*) FROM cdc.dbo_orders_CT", reader)[0][0]
                mark = self.rows("SELECT sys.fn_cdc_get_min_lsn(N'dbo_orders')", reader)[0][0]
                observed.append((n, mark))
        t = threading.Thread(target=poll)
        t.start()
        try:
            self.ok("EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_orders', "
                    "@low_water_mark = 0x%s, @threshold = 100" % self.commits[2].hex())
        finally:
            stop.set()
            t.join()
        # (the procedure moves the mark to the first commit of the same commit
        # time, so it may keep the second transaction too)
        final_mark = ci.start_lsn
        final_n = self.rows("SELECT count(*) FROM cdc.dbo_orders_CT")[0][0]
        self.assertIn(final_mark, self.commits[1:])
        # some reads happened in the middle of the cleanup: the mark was already
        # raised while rows below it were still there; no read saw rows deleted
        # under the old mark
        middle = [n for n, mark in observed if mark == final_mark and final_n < n < 2515]
        self.assertTrue(middle, observed[:20])
        self.assertFalse([n for n, mark in observed if mark != final_mark and n < 2515])

if __name__ == "__main__":
    unittest.main()
