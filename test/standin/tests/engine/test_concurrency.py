"""Concurrent writers while the capture job runs: the change tables must hold
every committed change exactly once, whole transactions per commit LSN, in
commit order, and nothing from rolled-back transactions."""

import random
import threading
import time

from .support import EngineTest, SqlError


class ConcurrentCaptureTest(EngineTest):
    def test_exact_history_under_concurrency(self):
        self.ok("CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL, w int NULL)")
        self.ok("EXEC sys.sp_cdc_enable_db")
        self.ok("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL")
        self.engine.control("set_capture_interval", {"seconds": 0.005})
        committed = []            # (writer, txn number, [(op, id, v)])
        lock = threading.Lock()
        errors = []

        def writer(n):
            s = self.session()
            rng = random.Random(n)
            for k in range(40):
                base = n * 100000 + k * 10
                stmts = ["INSERT t (id, v) VALUES (%d, %d)" % (base + j, k) for j in range(rng.randint(1, 3))]
                stmts.append("UPDATE t SET v = v + 1 WHERE id = %d" % base)
                rollback = rng.random() < 0.2
                sql = "BEGIN TRAN; " + "; ".join(stmts) + ("; ROLLBACK" if rollback else "; COMMIT")
                items = self.run_sql(sql, s)
                errs = [i for i in items if isinstance(i, SqlError)]
                if errs:
                    errors.append(errs)
                elif not rollback:
                    with lock:
                        committed.append((n, k, len(stmts) - 1))
        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        self.assertEqual(errors, [])
        # drain: wait until the queue is empty, then one more cycle
        deadline = time.time() + 10
        while self.engine.databases["cdcdb"].cdc.log and time.time() < deadline:
            time.sleep(0.01)
        self.engine.control("capture_freeze", {})
        self.capture()
        rows = self.rows("SELECT __$start_lsn, __$seqval, __$operation, id, v FROM cdc.dbo_t_CT "
                         "ORDER BY __$start_lsn, __$command_id, __$seqval, __$operation")
        by_txn = {}
        for lsn, seq, op, id_, v in rows:
            by_txn.setdefault(lsn, []).append((op, id_, v))
        self.assertEqual(len(by_txn), len(committed))
        expected_rows = sum(n_ins + 2 for _, _, n_ins in committed)     # inserts + update pair
        self.assertEqual(len(rows), expected_rows)
        self.assertEqual(len(set((r[0], r[1], r[2]) for r in rows)), len(rows))   # no duplicates
        ids_inserted = sorted(r[3] for r in rows if r[2] == 2)
        self.assertEqual(ids_inserted, [r[0] for r in self.rows("SELECT id FROM t ORDER BY id")])
        mapping = self.rows("SELECT start_lsn FROM cdc.lsn_time_mapping WHERE tran_id <> 0x00 ORDER BY start_lsn")
        self.assertEqual([m[0] for m in mapping], sorted(by_txn))
        # every transaction's rows: inserts then the update pair, all with seqval < commit LSN
        for lsn, ops in by_txn.items():
            self.assertEqual([o[0] for o in ops][-2:], [3, 4])
        self.assertTrue(all(r[1] < r[0] for r in rows))


class PrintTest(EngineTest):
    def test_constant_print_does_not_wait_for_a_long_statement(self):
        # another session's statement holds the engine lock for a while; a
        # batch ending with PRINT of a constant (mssql_cdc ends every batch so)
        # must not wait for it after its own result is out
        release = threading.Event()
        held = threading.Event()

        def long_statement():
            with self.engine.lock:
                held.set()
                release.wait(5)
        th = threading.Thread(target=long_statement)
        th.start()
        held.wait(5)
        t0 = time.monotonic()
        items = self.run_sql("PRINT N'mssql_cdc: end of batch'")
        elapsed = time.monotonic() - t0
        release.set()
        th.join()
        self.assertEqual([i.message for i in items], ["mssql_cdc: end of batch"])
        self.assertLess(elapsed, 1.0)
        # a PRINT of an expression still runs like any statement
        self.assertEqual([i.message for i in self.run_sql("PRINT 'a' + 'b'")], ["ab"])
