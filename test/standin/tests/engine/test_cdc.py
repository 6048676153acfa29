"""CDC scenarios: capture job, change rows, masks, LOB rules, LSN functions, errors 313/229/208,
procedure errors (22901, 22962, 22926, 22931, 22939, 22960, 22964, 22957, 4711)."""

import time

from .support import EngineTest, ResultSet
from standin.engine.cdc_functions import is_bit_set

ZERO = bytes(10)
MSG_313 = ("An insufficient number of arguments were supplied for the procedure or function "
           "cdc.fn_cdc_get_all_changes_ ... .")


class CdcBase(EngineTest):
    def setUp(self):
        super().setUp()
        self.ok("CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, amount decimal(18,2), note nvarchar(max), "
                "old text NULL, c AS (id * 2))")
        self.enable_cdc()


class CaptureTest(CdcBase):
    def test_max_lsn_null_until_capture_then_dummy_rows(self):
        self.assertIsNone(self.scalar("SELECT sys.fn_cdc_get_max_lsn()"))
        self.assertIsNone(self.scalar("SELECT sys.fn_cdc_get_min_lsn(N'dbo_orders')"))
        self.assertEqual(self.capture(), 0)
        mn, mx = self.lsn_window()
        self.assertIsNotNone(mn)
        self.assertLessEqual(mn, mx)
        self.capture()
        mx2 = self.scalar("SELECT sys.fn_cdc_get_max_lsn()")
        self.assertGreater(mx2, mx)                                       # idle cycle: dummy row moves max LSN
        self.assertEqual(self.rows("SELECT tran_id FROM cdc.lsn_time_mapping"), [(ZERO,), (ZERO,)])
        self.assertEqual(self.changes(), [])
        self.assertIsNone(self.scalar("SELECT MAX(start_lsn) FROM cdc.lsn_time_mapping WHERE tran_id <> 0x00"))

    def test_insert_update_delete_rows(self):
        self.capture()
        self.ok("INSERT orders (id, amount, note, old) VALUES (1, 10, N'n1', 'o1')")
        self.ok("BEGIN TRAN; UPDATE orders SET amount = 11 WHERE id = 1; DELETE FROM orders WHERE id = 1; COMMIT")
        self.assertEqual(self.capture(), 2)
        rows = self.changes(cols="__$operation, __$update_mask, id, amount, note, old, c")
        self.assertEqual([r[0] for r in rows], [2, 3, 4, 1])
        ins, before, after, dele = rows
        self.assertEqual(ins[1], b"\x1f")                                 # 5 captured columns: all bits
        self.assertEqual(ins[2:], (1, 10, "n1", "o1", None))             # computed column always NULL
        self.assertEqual(before[1], b"\x02")                              # ordinal 2 = amount
        self.assertEqual(after[1], b"\x02")
        self.assertEqual(before[2:], (1, 10, None, None, None))          # max LOB unchanged -> NULL in op 3; text NULL
        self.assertEqual(after[2:], (1, 11, "n1", "o1", None))
        self.assertEqual(dele[2:], (1, 11, "n1", None, None))            # text NULL in op 1, max keeps value
        lsns = self.changes(cols="__$start_lsn, __$seqval, __$operation")
        self.assertLess(lsns[0][0], lsns[1][0])
        self.assertEqual(lsns[1][0], lsns[3][0])                          # one transaction, one commit LSN
        self.assertEqual(lsns[1][1], lsns[2][1])                          # 3/4 share seqval
        self.assertLess(lsns[2][1], lsns[3][1])
        self.assertTrue(all(r[1] < r[0] for r in lsns))                   # seqval < commit LSN
        all_only = self.changes(option="all", cols="__$operation")
        self.assertEqual([r[0] for r in all_only], [2, 4, 1])

    def test_metadata_of_tvf_and_ct(self):
        self.capture()
        mn, mx = self.lsn_window()
        items = self.ok("SELECT * FROM cdc.fn_cdc_get_all_changes_dbo_orders(0x%s, 0x%s, N' ALL ')" % (mn.hex(), mx.hex()))
        cols = [(c.name, c.type.sql()) for c in items[0].columns]
        self.assertEqual(cols[:4], [("__$start_lsn", "binary(10)"), ("__$seqval", "binary(10)"),
                                    ("__$operation", "int"), ("__$update_mask", "varbinary(128)")])
        self.assertEqual([c[0] for c in cols[4:]], ["id", "amount", "note", "old", "c"])
        ct = self.ok("SELECT * FROM cdc.dbo_orders_CT")[0]
        names = [c.name for c in ct.columns]
        self.assertEqual(names[:5], ["__$start_lsn", "__$end_lsn", "__$seqval", "__$operation", "__$update_mask"])
        self.assertEqual(names[-1], "__$command_id")

    def test_pk_change_is_delete_insert(self):
        self.ok("INSERT orders (id) VALUES (1)")
        self.capture()
        self.ok("UPDATE orders SET id = 5 WHERE id = 1")
        self.assertEqual(self.capture(), 1)
        rows = self.changes(cols="__$operation, id")
        self.assertEqual(rows[-2:], [(1, 1), (2, 5)])

    def test_multi_table_transaction_shares_commit_lsn(self):
        self.ok("CREATE TABLE dbo.items (k int PRIMARY KEY, v int)")
        self.enable_cdc("items")
        self.ok("CREATE TABLE dbo.plain (k int PRIMARY KEY)")
        self.capture()
        self.ok("BEGIN TRAN; INSERT orders (id) VALUES (1); INSERT items VALUES (1, 1); INSERT plain VALUES (1); COMMIT")
        self.ok("INSERT plain VALUES (2)")                                 # non-CDC transaction: no CT rows
        self.assertEqual(self.capture(), 1)
        a = self.changes(cols="__$start_lsn")
        b = self.changes(ci="dbo_items", cols="__$start_lsn")
        self.assertEqual(a, b)
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM cdc.lsn_time_mapping WHERE tran_id <> 0x00"), 1)
        t = self.scalar("SELECT sys.fn_cdc_map_lsn_to_time(0x%s)" % a[0][0].hex())
        self.assertEqual(t, self.scalar("SELECT tran_end_time FROM cdc.lsn_time_mapping WHERE start_lsn = 0x%s"
                                        % a[0][0].hex()))

    def test_uncommitted_and_rolled_back_not_published(self):
        self.capture()
        s2 = self.session()
        self.ok("BEGIN TRAN; INSERT orders (id) VALUES (1)", s2)
        self.ok("BEGIN TRAN; INSERT orders (id) VALUES (2); ROLLBACK")
        self.assertEqual(self.capture(), 0)
        self.ok("COMMIT", s2)
        self.assertEqual(self.capture(), 1)
        self.assertEqual(self.changes(cols="id"), [(1,)])

    def test_large_transaction_published_whole(self):
        self.capture()
        self.ok("CREATE TABLE dbo.big (id int PRIMARY KEY, v int)")
        self.enable_cdc("big")
        self.capture()
        batch = "BEGIN TRAN; " + "; ".join(
            "INSERT big VALUES " + ", ".join("(%d, 1)" % (k * 1000 + i) for i in range(1000)) for k in range(100)) + \
            "; COMMIT"
        self.ok(batch)
        self.engine.databases["cdcdb"].cdc.job["maxtrans"] = 1
        self.assertEqual(self.capture(), 1)
        n = self.scalar("SELECT COUNT(*) FROM cdc.dbo_big_CT")
        self.assertEqual(n, 100000)
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM (SELECT DISTINCT __$start_lsn FROM cdc.dbo_big_CT) AS d"), 1)
        # keyset paging over the single transaction
        mn, mx = self.lsn_window("dbo_big")
        got, last = 0, None
        while True:
            where = ""
            if last:
                where = ("WHERE (__$start_lsn = 0x{0} AND __$seqval = 0x{1} AND __$operation > {2}) OR "
                         "(__$start_lsn = 0x{0} AND __$seqval > 0x{1}) OR (__$start_lsn > 0x{0})").format(
                    last[0].hex(), last[1].hex(), last[2])
            page = self.rows("SELECT TOP (20000) __$start_lsn, __$seqval, __$operation FROM "
                             "cdc.fn_cdc_get_all_changes_dbo_big(0x%s, 0x%s, N'all') %s "
                             "ORDER BY __$start_lsn, __$seqval, __$operation" % (mn.hex(), mx.hex(), where))
            if not page:
                break
            got += len(page)
            last = page[-1]
        self.assertEqual(got, 100000)

    def test_maxtrans_limits_transactions_per_scan(self):
        self.capture()
        for i in range(5):
            self.ok("INSERT orders (id) VALUES (%d)" % i)
        cdc = self.engine.databases["cdcdb"].cdc
        cdc.job["maxtrans"], cdc.job["maxscans"] = 2, 1
        self.assertEqual(self.capture(), 2)
        self.assertEqual(self.capture(), 2)
        self.assertEqual(self.capture(), 1)

    def test_capture_freeze_and_background_job(self):
        self.engine.control("set_capture_interval", {"seconds": 0.02})
        self.engine.control("capture_freeze", {})
        time.sleep(0.1)
        self.assertIsNone(self.scalar("SELECT sys.fn_cdc_get_max_lsn()"))
        self.ok("INSERT orders (id) VALUES (1)")
        self.engine.control("capture_resume", {})
        deadline = time.time() + 5
        while time.time() < deadline and not self.scalar("SELECT COUNT(*) FROM cdc.dbo_orders_CT"):
            time.sleep(0.02)
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM cdc.dbo_orders_CT"), 1)
        self.engine.control("capture_freeze", {})

    def test_update_mask_many_columns_and_is_bit_set(self):
        cols = ", ".join("c%d int NULL" % i for i in range(2, 11))
        self.ok("CREATE TABLE dbo.wide (c1 int PRIMARY KEY, %s)" % cols)
        self.enable_cdc("wide")
        self.ok("INSERT wide (c1) VALUES (1)")
        self.ok("UPDATE wide SET c10 = 5")
        self.capture()
        masks = self.changes("dbo_wide", cols="__$operation, __$update_mask")
        self.assertEqual(masks[0], (2, b"\x03\xff"))
        self.assertEqual(masks[1], (3, b"\x02\x00"))
        self.assertEqual(masks[2], (4, b"\x02\x00"))
        self.assertTrue(is_bit_set(10, b"\x02\x00"))
        self.assertEqual(self.scalar("SELECT sys.fn_cdc_is_bit_set(10, 0x0200)"), True)
        self.assertEqual(self.scalar("SELECT sys.fn_cdc_is_bit_set(1, 0x0200)"), False)
        self.assertEqual(self.scalar("SELECT sys.fn_cdc_get_column_ordinal(N'dbo_wide', N'c10')"), 10)

    def test_lob_op4_strict_option(self):
        self.engine.options["lob_op4_unchanged_null"] = True
        self.ok("INSERT orders (id, note) VALUES (1, N'big')")
        self.ok("UPDATE orders SET amount = 1")
        self.capture()
        rows = self.changes(cols="__$operation, note")
        self.assertEqual(rows[-1], (4, None))


class FunctionTest(CdcBase):
    def test_increment_decrement(self):
        self.assertEqual(self.scalar("SELECT sys.fn_cdc_increment_lsn(0x0000002A000001F0FFFF)"),
                         bytes.fromhex("0000002A000001F10000"))
        self.assertEqual(self.scalar("SELECT sys.fn_cdc_decrement_lsn(0x0000002A000001F10000)"),
                         bytes.fromhex("0000002A000001F0FFFF"))
        self.assertIsNone(self.scalar("SELECT sys.fn_cdc_increment_lsn(NULL)"))

    def test_min_lsn_unknown_is_zero(self):
        self.capture()
        self.assertEqual(self.scalar("SELECT sys.fn_cdc_get_min_lsn(N'nope')"), ZERO)

    def test_map_time_to_lsn(self):
        self.capture()
        self.ok("INSERT orders (id) VALUES (1)")
        self.capture()
        lsn, t = self.rows("SELECT start_lsn, tran_end_time FROM cdc.lsn_time_mapping WHERE tran_id <> 0x00")[0]
        v = self.rows("SELECT sys.fn_cdc_map_time_to_lsn('largest less than or equal', tran_end_time) "
                      "FROM cdc.lsn_time_mapping WHERE start_lsn = 0x%s" % lsn.hex())[0][0]
        self.assertGreaterEqual(v, lsn)
        self.assertIsNone(self.scalar("SELECT sys.fn_cdc_map_time_to_lsn('largest less than', '1900-01-01')"))
        self.assertIsNone(self.scalar("SELECT sys.fn_cdc_map_lsn_to_time(0x00000000000000000001)"))


class ErrorTest(CdcBase):
    def test_313_cases(self):
        self.ok("INSERT orders (id) VALUES (1)")
        self.capture()
        mn, mx = self.lsn_window()
        q = "SELECT * FROM cdc.fn_cdc_get_all_changes_dbo_orders(%s, %s, %s)"
        for args in [("NULL", "0x" + mx.hex(), "N'all'"),
                     ("0x" + mn.hex(), "NULL", "N'all'"),
                     ("0x" + mn.hex(), "0x" + mx.hex(), "N'bogus'"),
                     ("0x00000000000000000001", "0x" + mx.hex(), "N'all'"),
                     ("0x" + mn.hex(), "0xFFFFFFFF000000000000", "N'all'"),
                     ("0x" + mx.hex(), "0x" + mn.hex(), "N'all'")]:
            err, items = self.error(q % args, 313)
            self.assertEqual((err.severity, err.state, err.message), (16, 3, MSG_313))
            self.assertFalse(any(isinstance(i, ResultSet) for i in items))
        # from = to = an LSN without rows: empty result with full metadata
        rs = self.ok(q % ("0x" + mx.hex(), "0x" + mx.hex(), "N'all'"))[0]
        self.assertEqual(len(rs.columns), 4 + 5)

    def test_313_after_cleanup(self):
        self.capture()
        self.ok("INSERT orders (id) VALUES (1)")
        self.capture()
        old_min, mx = self.lsn_window()
        self.ok("INSERT orders (id) VALUES (2)")
        self.capture()
        self.engine.control("cleanup", {"capture_instance": "dbo_orders"})
        new_min = self.scalar("SELECT sys.fn_cdc_get_min_lsn(N'dbo_orders')")
        self.assertGreater(new_min, old_min)
        self.error("DECLARE @to binary(10) = sys.fn_cdc_get_max_lsn(); "
                   "SELECT * FROM cdc.fn_cdc_get_all_changes_dbo_orders(0x%s, @to, N'all')" % old_min.hex(), 313)
        # rows below the new low water mark are gone; the mark's own transaction stays
        self.assertEqual(self.rows("SELECT id FROM cdc.dbo_orders_CT"), [(2,)])

    def test_208_after_disable_and_net_changes(self):
        self.capture()
        self.ok("EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'orders', "
                "@capture_instance = N'dbo_orders'")
        err, _ = self.error("SELECT * FROM cdcdb.cdc.fn_cdc_get_all_changes_dbo_orders(0x00, 0x00, N'all')", 208)
        self.assertEqual(err.message, "Invalid object name 'cdcdb.cdc.fn_cdc_get_all_changes_dbo_orders'.")
        self.error("SELECT * FROM cdc.fn_cdc_get_net_changes_dbo_orders(0x00, 0x00, N'all')", 208)
        self.assertEqual(self.scalar("SELECT is_tracked_by_cdc FROM sys.tables WHERE name = N'orders'"), False)
        self.assertEqual(self.scalar("SELECT sys.fn_cdc_get_min_lsn(N'dbo_orders')"), ZERO)

    def test_disable_db_then_enable_again(self):
        # sp_cdc_disable_db drops the cdc schema and user: enabling again works
        self.capture()
        mx = self.scalar("SELECT sys.fn_cdc_get_max_lsn()")
        self.ok("EXEC sys.sp_cdc_disable_db")
        self.assertEqual(self.scalar("SELECT is_cdc_enabled FROM sys.databases WHERE database_id = DB_ID()"), False)
        self.assertIsNone(self.scalar("SELECT sys.fn_cdc_get_max_lsn()"))
        self.assertEqual(self.scalar("SELECT sys.fn_cdc_get_min_lsn(N'dbo_orders')"), ZERO)
        self.ok("EXEC sys.sp_cdc_enable_db")
        self.enable_cdc()
        self.ok("INSERT orders (id, amount) VALUES (7, 1)")
        self.capture()
        self.assertEqual(self.rows("SELECT id FROM cdc.dbo_orders_CT"), [(7,)])
        self.assertGreater(self.scalar("SELECT sys.fn_cdc_get_max_lsn()"), mx)    # LSNs go on

    def test_4711_truncate(self):
        err, _ = self.error("TRUNCATE TABLE orders", 4711)
        self.assertEqual(err.message, "Cannot truncate table 'orders' because it is published for replication or "
                         "enabled for Change Data Capture.")

    def test_enable_table_errors(self):
        self.ok("CREATE TABLE heap (a int)")
        self.error("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'missing', "
                   "@role_name = NULL", 22931)
        self.error("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', "
                   "@role_name = NULL", 22926)
        self.error("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'heap', "
                   "@role_name = NULL, @supports_net_changes = 1", 22939)
        self.error("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders'", 201)
        self.error("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', "
                   "@role_name = NULL, @bogus = 1", 8145)
        self.ok("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', "
                "@role_name = NULL, @capture_instance = N'dbo_orders_v2'")
        err, _ = self.error("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', "
                            "@role_name = NULL, @capture_instance = N'v3'", 22962)
        self.assertTrue(err.message.startswith("Two capture instances already exist for source table 'dbo.orders'."))
        self.error("EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'orders', "
                   "@capture_instance = N'nope'", 22960)
        self.error("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'heap', @role_name = NULL, "
                   "@capture_instance = N'%s'" % ("x" * 101), 22927)

    def test_22901_db_not_enabled(self):
        self.ok("EXEC sys.sp_cdc_disable_db")
        err, _ = self.error("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', "
                            "@role_name = NULL", 22901)
        self.assertTrue(err.message.startswith("The database 'cdcdb' is not enabled for Change Data Capture."))
        self.assertEqual(self.scalar("SELECT is_cdc_enabled FROM sys.databases WHERE name = 'cdcdb'"), False)

    def test_cleanup_procedure_errors(self):
        self.capture()
        time.sleep(0.01)      # distinct tran_end_time values (cleanup groups equal times)
        self.ok("INSERT orders (id) VALUES (1)")
        self.capture()
        time.sleep(0.01)
        self.capture()
        lsns = [r[0] for r in self.rows("SELECT start_lsn FROM cdc.lsn_time_mapping ORDER BY start_lsn")]
        not_a_commit = (int.from_bytes(lsns[-1], "big") - 1).to_bytes(10, "big")
        self.error("EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_orders', "
                   "@low_water_mark = 0x%s" % not_a_commit.hex(), 22964)
        self.ok("EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_orders', @low_water_mark = 0x%s, "
                "@threshold = 5000" % lsns[-1].hex())
        err, _ = self.error("EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_orders', "
                            "@low_water_mark = 0x%s" % lsns[1].hex(), 22957)
        self.assertIn("is not within the Change Data Capture timeline", err.message)

    def test_second_capture_instance_with_new_column(self):
        self.ok("INSERT orders (id) VALUES (1)")
        self.capture()
        self.ok("ALTER TABLE orders ADD extra int NULL")
        self.ok("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', "
                "@role_name = NULL, @capture_instance = N'dbo_orders_v2'")
        self.ok("INSERT orders (id, extra) VALUES (2, 42)")
        self.capture()
        self.assertEqual(self.changes(cols="id")[-1], (2,))
        v2 = self.changes("dbo_orders_v2", cols="id, extra")
        self.assertEqual(v2, [(2, 42)])
        old_cols = [c.name for c in self.ok("SELECT TOP (0) * FROM cdc.dbo_orders_CT")[0].columns]
        self.assertNotIn("extra", old_cols)
        self.assertEqual(self.rows("SELECT capture_instance FROM cdc.change_tables ORDER BY create_date"),
                         [("dbo_orders",), ("dbo_orders_v2",)])
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM cdc.ddl_history"), 1)

    def test_dropped_captured_column_becomes_null(self):
        self.ok("INSERT orders (id, amount) VALUES (1, 5)")
        self.ok("ALTER TABLE orders DROP COLUMN amount")
        self.ok("INSERT orders (id) VALUES (2)")
        self.capture()
        self.assertEqual(self.changes(cols="id, amount"), [(1, 5), (2, None)])


class PermissionTest(CdcBase):
    def setUp(self):
        super().setUp()
        self.ok("CREATE ROLE cdc_reader")
        self.ok("ALTER ROLE db_owner ADD MEMBER owner")
        self.ok("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', "
                "@role_name = N'cdc_gate', @capture_instance = N'gated'")
        self.ok("GRANT SELECT ON dbo.orders TO reader; ALTER ROLE cdc_gate ADD MEMBER reader")
        self.ok("INSERT orders (id) VALUES (1)")
        self.capture()

    def test_reader_owner_nobody(self):
        owner, reader, nobody = self.session("owner"), self.session("reader"), self.session("nobody")
        mn, mx = self.lsn_window("gated")
        q = "SELECT id FROM cdc.fn_cdc_get_all_changes_gated(0x%s, 0x%s, N'all')" % (mn.hex(), mx.hex())
        self.assertEqual(self.rows(q, owner), [(1,)])
        self.assertEqual(self.rows(q, reader), [(1,)])
        err, _ = self.error(q, 229, nobody)
        self.assertEqual((err.severity, err.state), (14, 5))
        self.assertEqual(err.message, "The SELECT permission was denied on the object 'fn_cdc_get_all_changes_gated', "
                         "database 'cdcdb', schema 'cdc'.")
        self.assertEqual(self.scalar("SELECT sys.fn_cdc_get_min_lsn(N'gated')", nobody), ZERO)
        self.assertEqual(self.scalar("SELECT sys.fn_cdc_get_min_lsn(N'gated')", reader), mn)
        self.assertIsNotNone(self.scalar("SELECT sys.fn_cdc_get_max_lsn()", nobody))       # public
        self.assertEqual(self.rows("EXEC sys.sp_cdc_help_change_data_capture", nobody), [])
        self.assertEqual([r[2] for r in self.rows("EXEC sys.sp_cdc_help_change_data_capture", reader)], ["dbo_orders", "gated"])
        self.assertEqual(len(self.rows("EXEC sys.sp_cdc_help_change_data_capture", owner)), 2)
        self.error("SELECT * FROM dbo.orders", 229, nobody)
        self.assertEqual(self.scalar("SELECT IS_ROLEMEMBER('db_owner')", owner), 1)
        self.assertEqual(self.scalar("SELECT IS_ROLEMEMBER('db_owner')", reader), 0)
        self.error("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', "
                   "@role_name = NULL, @capture_instance = N'x'", 22904, reader)
        self.error("EXEC sys.sp_cdc_enable_db", 22902, owner)

    def test_reader_without_role_membership(self):
        self.ok("CREATE LOGIN r2 WITH PASSWORD = 'pw'; CREATE USER r2 FOR LOGIN r2; GRANT SELECT ON dbo.orders TO r2")
        r2 = self.engine.login("r2", "pw", "cdcdb")
        self.assertEqual(self.scalar("SELECT sys.fn_cdc_get_min_lsn(N'gated')", r2), ZERO)
        self.assertNotEqual(self.scalar("SELECT sys.fn_cdc_get_min_lsn(N'dbo_orders')", r2), ZERO)


class AlterColumnTest(CdcBase):
    def test_type_change_propagates_to_change_table(self):
        self.ok("INSERT orders (id, amount) VALUES (1, 5)")
        self.ok("ALTER TABLE orders ALTER COLUMN amount decimal(20,4) NULL")
        self.ok("INSERT orders (id, amount) VALUES (2, 1.2345)")
        self.capture()
        self.assertEqual(self.changes(cols="id, amount")[-1][1], __import__("decimal").Decimal("1.2345"))
        self.assertEqual(self.rows("SELECT required_column_update FROM cdc.ddl_history"), [(True,)])
        self.assertEqual(self.scalar("SELECT NUMERIC_SCALE FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'orders' "
                                     "AND COLUMN_NAME = 'amount'"), 4)
        self.error("ALTER TABLE orders ALTER COLUMN id bigint NOT NULL", 5074)
        self.ok("CREATE TABLE s (id int PRIMARY KEY, v nvarchar(10))")
        self.ok("INSERT s VALUES (1, N'0123456789')")
        self.error("ALTER TABLE s ALTER COLUMN v nvarchar(5)", 2628)
        self.assertEqual(self.scalar("SELECT v FROM s"), "0123456789")


class MaterializeCleanupShapeTest(CdcBase):
    def test_cleanup_with_output_flag(self):
        self.capture()
        self.ok("INSERT orders (id) VALUES (1)")
        self.capture()
        mark = self.scalar("SELECT MAX(start_lsn) FROM cdc.lsn_time_mapping WHERE start_lsn <= sys.fn_cdc_get_max_lsn()")
        rows = self.rows("DECLARE @b bit = 1; EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_orders', "
                         "@low_water_mark = 0x%s, @threshold = 100, @fCleanupFailed = @b OUTPUT; SELECT @b" % mark.hex())
        self.assertEqual(rows, [(False,)])
