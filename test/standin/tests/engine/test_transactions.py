"""Transactions, isolation (READ COMMITTED / SNAPSHOT), 3951/3952/3960/1222, login errors."""

import threading
import time

from .support import EngineTest, EnvChange, ResultSet, SqlError


class TransactionTest(EngineTest):
    def setUp(self):
        super().setUp()
        self.ok("CREATE TABLE t (id int PRIMARY KEY, v int)")
        self.ok("INSERT t VALUES (1, 1), (2, 2)")

    def test_commit_rollback_and_envchange(self):
        items = self.ok("BEGIN TRAN; INSERT t VALUES (3, 3); SELECT @@TRANCOUNT")
        self.assertEqual(items[0].kind, "begin_tran")
        self.assertEqual(items[-1].rows, [(1,)])
        other = self.session()
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM t", other), 2)     # uncommitted is invisible
        items = self.ok("ROLLBACK")
        self.assertEqual(items[0].kind, "rollback_tran")
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM t"), 2)
        self.ok("BEGIN TRANSACTION x; BEGIN TRAN; UPDATE t SET v = 9 WHERE id = 1; COMMIT; SELECT @@TRANCOUNT")
        self.ok("COMMIT TRAN")
        self.assertEqual(self.scalar("SELECT v FROM t WHERE id = 1", other), 9)

    def test_3902_3903(self):
        self.error("COMMIT", 3902)
        self.error("ROLLBACK", 3903)

    def test_error_in_transaction_keeps_it_open(self):
        items = self.run_sql("BEGIN TRAN; INSERT t VALUES (3, 3); INSERT t VALUES (1, 1); SELECT @@TRANCOUNT")
        self.assertEqual(items[-1].rows, [(1,)])
        self.ok("COMMIT")
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM t"), 3)

    def test_xact_abort_rolls_back(self):
        items = self.run_sql("SET XACT_ABORT ON; BEGIN TRAN; INSERT t VALUES (3, 3); INSERT t VALUES (1, 1); SELECT 1")
        self.assertIsInstance(items[-1], EnvChange)
        self.assertEqual(items[-1].kind, "rollback_tran")
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM t"), 2)

    def test_batch_abort_rolls_back_transaction(self):
        items = self.run_sql("BEGIN TRAN; INSERT t VALUES (3, 3);\nINSERT t VALUES ('x', 1); SELECT 1")
        self.assertEqual(items[-2].number, 245)
        self.assertEqual(items[-2].line, 2)
        self.assertEqual(items[-1].kind, "rollback_tran")
        self.assertEqual(self.scalar("SELECT @@TRANCOUNT"), 0)
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM t"), 2)

    def test_savepoint(self):
        self.ok("BEGIN TRAN; INSERT t VALUES (3, 3); SAVE TRAN sp; INSERT t VALUES (4, 4); ROLLBACK TRAN sp; COMMIT")
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM t"), 3)

    def test_close_session_rolls_back(self):
        s2 = self.session()
        self.ok("BEGIN TRAN; INSERT t VALUES (3, 3)", s2)
        self.engine.close_session(s2)
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM t"), 2)

    def test_lock_timeout_1222(self):
        s2 = self.session()
        self.ok("BEGIN TRAN; UPDATE t SET v = 5 WHERE id = 1", s2)
        t0 = time.monotonic()
        err, _ = self.error("SET LOCK_TIMEOUT 100; UPDATE t SET v = 6 WHERE id = 1", 1222)
        self.assertGreaterEqual(time.monotonic() - t0, 0.09)
        self.assertEqual(err.message, "Lock request time out period exceeded.")
        self.ok("ROLLBACK", s2)

    def test_writer_waits_for_commit(self):
        s2 = self.session()
        self.ok("BEGIN TRAN; UPDATE t SET v = 5 WHERE id = 1", s2)
        done = []

        def writer():
            done.append(self.run_sql("UPDATE t SET v = v + 1 WHERE id = 1"))
        th = threading.Thread(target=writer)
        th.start()
        time.sleep(0.1)
        self.assertFalse(done)
        self.ok("COMMIT", s2)
        th.join(5)
        self.assertEqual(self.scalar("SELECT v FROM t WHERE id = 1"), 6)


class SnapshotTest(EngineTest):
    def setUp(self):
        super().setUp()
        self.ok("CREATE TABLE t (id int PRIMARY KEY, v int)")
        self.ok("INSERT t VALUES (1, 1), (2, 2)")

    def test_3952_when_not_allowed_catalog_reads_ok(self):
        items = self.run_sql("SET TRANSACTION ISOLATION LEVEL SNAPSHOT; BEGIN TRAN; "
                             "SELECT COUNT(*) FROM sys.tables; SELECT * FROM t; COMMIT")
        sets = [i for i in items if isinstance(i, ResultSet)]
        errs = [i for i in items if isinstance(i, SqlError)]
        self.assertEqual(sets[0].rows, [(1,)])
        self.assertEqual(errs[0].number, 3952)
        self.assertEqual(errs[0].message, "Snapshot isolation transaction failed accessing database 'cdcdb' because "
                         "snapshot isolation is not allowed in this database. Use ALTER DATABASE to allow snapshot "
                         "isolation.")

    def test_3951_switch_after_start(self):
        self.ok("ALTER DATABASE cdcdb SET ALLOW_SNAPSHOT_ISOLATION ON")
        err, _ = self.error("BEGIN TRAN; SELECT * FROM t; SET TRANSACTION ISOLATION LEVEL SNAPSHOT; SELECT * FROM t", 3951)
        self.ok("ROLLBACK")

    def test_snapshot_reads_stable_view(self):
        self.ok("ALTER DATABASE cdcdb SET ALLOW_SNAPSHOT_ISOLATION ON")
        self.assertEqual(self.rows("SELECT snapshot_isolation_state, snapshot_isolation_state_desc FROM sys.databases "
                                   "WHERE database_id = DB_ID()"), [(1, "ON")])
        reader = self.session()
        self.ok("SET TRANSACTION ISOLATION LEVEL SNAPSHOT; BEGIN TRANSACTION; SELECT COUNT(*) FROM t", reader)
        self.ok("INSERT t VALUES (3, 3); UPDATE t SET v = 10 WHERE id = 1; DELETE FROM t WHERE id = 2")
        self.assertEqual(self.rows("SELECT id, v FROM t ORDER BY id", reader), [(1, 1), (2, 2)])
        # read committed sees the latest committed state
        self.assertEqual(self.rows("SELECT id, v FROM t ORDER BY id"), [(1, 10), (3, 3)])
        self.ok("COMMIT", reader)
        self.assertEqual(self.rows("SELECT id, v FROM t ORDER BY id", reader), [(1, 10), (3, 3)])

    def test_3960_update_conflict(self):
        self.ok("ALTER DATABASE cdcdb SET ALLOW_SNAPSHOT_ISOLATION ON")
        s2 = self.session()
        self.ok("SET TRANSACTION ISOLATION LEVEL SNAPSHOT; BEGIN TRAN; SELECT * FROM t", s2)
        self.ok("UPDATE t SET v = 7 WHERE id = 1")
        items = self.run_sql("UPDATE t SET v = 8 WHERE id = 1; SELECT 1", s2)
        self.assertEqual(items[0].number, 3960)
        self.assertEqual(items[1].kind, "rollback_tran")
        self.assertEqual(len(items), 2)                       # batch aborted
        self.assertEqual(self.scalar("SELECT @@TRANCOUNT", s2), 0)

    def test_lazy_scan_survives_concurrent_writes(self):
        self.ok("CREATE TABLE big (id int PRIMARY KEY, v int)")
        self.engine.control("fill_table", {"table": "big", "rows": 5000})
        items = self.engine.execute_batch(self.s, "SELECT id FROM big ORDER BY id")
        rs = next(iter(items))
        it = iter(rs.rows)
        first = [next(it) for _ in range(10)]
        other = self.session()
        self.ok("DELETE FROM big WHERE id > 2500; INSERT big VALUES (100000, 1)", other)
        rest = list(it)
        ids = [r.values[0] for r in first + rest]
        self.assertEqual(ids, list(range(1, 5001)))          # statement-level consistency


class LoginTest(EngineTest):
    def test_18456_and_4060(self):
        with self.assertRaises(SqlError) as cm:
            self.engine.login("sa", "wrong", "cdcdb")
        self.assertEqual((cm.exception.number, cm.exception.severity, cm.exception.state), (18456, 14, 1))
        self.assertEqual(cm.exception.message, "Login failed for user 'sa'.")
        with self.assertRaises(SqlError) as cm:
            self.engine.login("sa", "Passw0rd!", "nodb")
        self.assertEqual(cm.exception.number, 4060)
        self.assertEqual(cm.exception.message, 'Cannot open database "nodb" requested by the login. The login failed.')
        s = self.engine.login("sa", "Passw0rd!", "")
        self.assertEqual(s.database, "master")

    def test_use_database(self):
        s = self.engine.login("sa", "Passw0rd!", "")
        items = self.ok("USE cdcdb; SELECT DB_NAME()", s)
        self.assertEqual(items[0].kind, "database")
        self.assertEqual(items[1].number, 5701)
        self.assertEqual(items[-1].rows, [("cdcdb",)])
        self.error("USE nodb", 911, s)


class DeadlockTest(EngineTest):
    def test_1205_victim(self):
        self.ok("CREATE TABLE t (id int PRIMARY KEY, v int)")
        self.ok("INSERT t VALUES (1, 1), (2, 2)")
        a, b = self.session(), self.session()
        self.ok("BEGIN TRAN; UPDATE t SET v = 10 WHERE id = 1", a)
        self.ok("BEGIN TRAN; UPDATE t SET v = 20 WHERE id = 2", b)
        out = []
        th = threading.Thread(target=lambda: out.append(self.run_sql("UPDATE t SET v = 11 WHERE id = 2", a)))
        th.start()
        time.sleep(0.1)
        items = self.run_sql("UPDATE t SET v = 21 WHERE id = 1", b)     # closes the cycle: b is the victim
        self.assertEqual(items[0].number, 1205)
        self.assertEqual(items[1].kind, "rollback_tran")
        th.join(5)
        self.assertEqual(out[0][0].count, 1)
        self.ok("COMMIT", a)
        self.assertEqual(self.rows("SELECT v FROM t ORDER BY id"), [(10,), (11,)])


class SnapshotStartTest(EngineTest):
    def test_max_lsn_read_fixes_the_snapshot(self):
        self.ok("ALTER DATABASE cdcdb SET ALLOW_SNAPSHOT_ISOLATION ON")
        self.ok("CREATE TABLE t (id int PRIMARY KEY)")
        self.ok("EXEC sys.sp_cdc_enable_db")
        reader = self.session()
        self.ok("SET TRANSACTION ISOLATION LEVEL SNAPSHOT; BEGIN TRANSACTION; SELECT sys.fn_cdc_get_max_lsn()", reader)
        self.ok("INSERT t VALUES (1)")
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM t", reader), 0)
        self.ok("COMMIT", reader)

    def test_streamed_rows_do_not_leak_snapshots(self):
        self.ok("ALTER DATABASE cdcdb SET ALLOW_SNAPSHOT_ISOLATION ON")
        self.ok("CREATE TABLE t (id int PRIMARY KEY)")
        self.ok("EXEC sys.sp_cdc_enable_db")
        self.ok("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL")
        self.ok("INSERT t VALUES (1), (2)")
        self.capture()
        self.ok("SET TRANSACTION ISOLATION LEVEL SNAPSHOT")
        self.rows("DECLARE @f binary(10) = sys.fn_cdc_get_min_lsn(N'dbo_t'), @t binary(10) = sys.fn_cdc_get_max_lsn(); "
                  "SELECT id, sys.fn_cdc_map_lsn_to_time(__$start_lsn) FROM cdc.fn_cdc_get_all_changes_dbo_t(@f, @t, N'all')")
        self.assertEqual(self.engine.active_snaps, {})
