"""The `restore` control (a point-in-time restore, a failover that lost the
tail) and sys.database_recovery_status with its visibility rules."""

import unittest
import uuid

from .support import EngineTest, SqlError


class RecoveryStatus(EngineTest):
    SQL = ("SELECT database_id, database_guid, recovery_fork_guid, first_recovery_fork_guid, fork_point_lsn "
           "FROM sys.database_recovery_status WHERE database_id = DB_ID()")

    def test_one_row_per_database_with_guids(self):
        rows = self.rows(self.SQL)
        self.assertEqual(len(rows), 1)
        db_id, guid, fork, first, point = rows[0]
        self.assertIsInstance(guid, uuid.UUID)
        self.assertEqual(fork, first)
        self.assertIsNone(point)
        self.assertEqual(len(self.rows("SELECT database_id FROM sys.database_recovery_status")), 2)

    def test_visibility_follows_view_any_database(self):
        nobody = self.session("nobody")
        # granted to public by default
        self.assertEqual(len(self.rows(self.SQL, nobody)), 1)
        self.ok("DENY VIEW ANY DATABASE TO nobody")
        self.assertEqual(self.rows(self.SQL, nobody), [])
        # master stays visible
        self.assertEqual([r[0] for r in self.rows("SELECT database_id FROM sys.database_recovery_status",
                                                  nobody)], [1])
        self.ok("REVOKE VIEW ANY DATABASE FROM nobody")
        self.assertEqual(len(self.rows(self.SQL, nobody)), 1)
        self.ok("REVOKE VIEW ANY DATABASE FROM public")
        self.assertEqual(self.rows(self.SQL, nobody), [])
        self.ok("GRANT VIEW ANY DATABASE TO nobody")
        self.assertEqual(len(self.rows(self.SQL, nobody)), 1)
        # sysadmin always sees it; only sysadmin may change server permissions
        self.ok("DENY VIEW ANY DATABASE TO sa")
        self.assertEqual(len(self.rows(self.SQL)), 1)
        self.error("DENY VIEW ANY DATABASE TO nobody", 15247, session=nobody)
        self.error("DENY VIEW ANY DATABASE TO nosuchlogin", 15151)


class Restore(EngineTest):
    def setUp(self):
        super().setUp()
        self.ok("CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, v int)")
        self.ok("CREATE TABLE dbo.plain (id int NOT NULL PRIMARY KEY)")
        self.enable_cdc()
        self.capture()
        self.ok("INSERT dbo.orders VALUES (1, 10), (2, 20)")
        self.ok("INSERT dbo.plain VALUES (1)")
        self.capture()
        self.max_at_point = self.scalar("SELECT sys.fn_cdc_get_max_lsn()")
        # the restore point: after the last commit so far (the plain insert)
        self.point = self.engine.databases["cdcdb"].lsn.current().to_bytes(10, "big")
        self.ok("BEGIN TRAN; UPDATE dbo.orders SET v = 11 WHERE id = 1; DELETE dbo.orders WHERE id = 2; "
                "INSERT dbo.orders VALUES (3, 30); UPDATE dbo.orders SET v = 31 WHERE id = 3; COMMIT")
        self.ok("INSERT dbo.plain VALUES (2)")
        self.capture()
        self.ok("INSERT dbo.orders VALUES (4, 40)")      # committed, not yet captured
        self.old_max = self.scalar("SELECT sys.fn_cdc_get_max_lsn()")
        self.guids = self.rows("SELECT database_guid, recovery_fork_guid FROM sys.database_recovery_status "
                               "WHERE database_id = DB_ID()")[0]

    def restore(self, **args):
        return self.engine.control("restore", dict(args, lsn="0x" + self.point.hex()))

    def test_everything_above_the_lsn_is_gone(self):
        out = self.restore()
        self.assertEqual(out["transactions_undone"], 3)
        self.assertEqual(self.rows("SELECT id, v FROM dbo.orders ORDER BY id"), [(1, 10), (2, 20)])
        self.assertEqual(self.rows("SELECT id FROM dbo.plain"), [(1,)])
        self.assertEqual(self.scalar("SELECT sys.fn_cdc_get_max_lsn()"), self.max_at_point)
        self.assertEqual(self.rows("SELECT COUNT(*) FROM cdc.dbo_orders_CT WHERE __$start_lsn > 0x%s"
                                   % self.point.hex()), [(0,)])
        self.assertEqual(self.rows("SELECT COUNT(*) FROM cdc.dbo_orders_CT"), [(2,)])
        # the uncaptured transaction is lost too
        self.capture()
        self.assertEqual(self.rows("SELECT COUNT(*) FROM cdc.dbo_orders_CT"), [(2,)])

    def test_new_fork_and_guids(self):
        self.restore()
        guid, fork, first, point = self.rows(
            "SELECT database_guid, recovery_fork_guid, first_recovery_fork_guid, fork_point_lsn "
            "FROM sys.database_recovery_status WHERE database_id = DB_ID()")[0]
        self.assertEqual(guid, self.guids[0])
        self.assertNotEqual(fork, self.guids[1])
        self.assertEqual(first, self.guids[1])
        b = self.point
        self.assertEqual(int(point), int.from_bytes(b[:4], "big") * 10 ** 15 + int.from_bytes(b[4:8], "big") * 10 ** 5
                         + int.from_bytes(b[8:], "big"))
        self.restore(new_database_guid=True)
        self.assertNotEqual(self.rows("SELECT database_guid FROM sys.database_recovery_status "
                                      "WHERE database_id = DB_ID()")[0][0], self.guids[0])

    def test_failover_keeps_the_identity(self):
        self.restore(new_fork=False)
        self.assertEqual(self.rows("SELECT database_guid, recovery_fork_guid FROM sys.database_recovery_status "
                                   "WHERE database_id = DB_ID()")[0], self.guids)

    def test_new_history_reuses_the_lost_lsn_range(self):
        self.restore()
        self.ok("INSERT dbo.orders VALUES (5, 50)")
        self.capture()
        lsn = self.rows("SELECT MAX(start_lsn) FROM cdc.lsn_time_mapping WHERE tran_id <> 0x00")[0][0]
        self.assertGreater(lsn, self.point)
        self.assertLessEqual(lsn, self.old_max)      # even the very same LSN as a lost commit
        self.assertEqual(self.rows("SELECT id FROM cdc.dbo_orders_CT WHERE __$start_lsn = 0x%s" % lsn.hex()),
                         [(5,)])

    def test_capture_instance_created_later_is_gone(self):
        self.ok("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'plain', @role_name = NULL")
        out = self.restore()
        self.assertEqual(out["capture_instances_dropped"], ["dbo_plain"])
        self.assertEqual(self.rows("SELECT COUNT(*) FROM cdc.change_tables"), [(1,)])

    def test_refused_while_a_transaction_is_open(self):
        other = self.session()
        self.ok("BEGIN TRAN; INSERT dbo.orders VALUES (9, 90)", other)
        with self.assertRaises(ValueError):
            self.restore()
        self.ok("ROLLBACK", other)
        self.restore()

    def test_refused_below_a_cleanup_mark(self):
        self.engine.control("cleanup", {"capture_instance": "dbo_orders"})
        with self.assertRaises(ValueError):
            self.restore()


if __name__ == "__main__":
    unittest.main()
