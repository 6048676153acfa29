"""What a CDC reader needs, object by object, and what it may see: the
tables of schema cdc need SELECT (on the object or SCHEMA::cdc), the query
functions the CDC security model (SELECT on the source plus the gating
role), sys.dm_cdc_log_scan_sessions VIEW DATABASE STATE; catalog views and
OBJECT_ID() hide objects without any permission; the named
sys.sp_cdc_help_change_data_capture raises 22981 / 22985."""

from __future__ import annotations

from .support import EngineTest

ZERO = bytes(10)


class CdcPermissionBase(EngineTest):
    def setUp(self):
        super().setUp()
        self.ok("CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, amount int)")
        self.ok("CREATE TABLE dbo.plain (id int NOT NULL PRIMARY KEY)")
        self.ok("CREATE TABLE dbo.secret (id int NOT NULL PRIMARY KEY)")
        self.ok("EXEC sys.sp_cdc_enable_db")
        self.ok("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', "
                "@role_name = N'cdc_gate'")
        self.ok("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'secret', "
                "@role_name = NULL")
        # reader: the gating role and SELECT on the source (enough for the functions)
        self.ok("GRANT SELECT ON dbo.orders TO reader; GRANT SELECT ON dbo.plain TO reader; "
                "ALTER ROLE cdc_gate ADD MEMBER reader")
        # owner: the gating role, SELECT on the source and on schema cdc
        self.ok("GRANT SELECT ON dbo.orders TO owner; ALTER ROLE cdc_gate ADD MEMBER owner; "
                "GRANT SELECT ON SCHEMA::cdc TO owner")
        self.ok("INSERT orders (id, amount) VALUES (1, 10)")
        self.capture()
        self.reader, self.owner, self.nobody = self.session("reader"), self.session("owner"), self.session("nobody")

    def window(self):
        mn = self.scalar("SELECT sys.fn_cdc_get_min_lsn(N'dbo_orders')")
        mx = self.scalar("SELECT sys.fn_cdc_get_max_lsn()")
        return mn.hex(), mx.hex()


class SchemaCdcTablesTest(CdcPermissionBase):
    def test_function_needs_gating_role_and_source_select(self):
        mn, mx = self.window()
        q = "SELECT id FROM cdc.fn_cdc_get_all_changes_dbo_orders(0x%s, 0x%s, N'all')" % (mn, mx)
        self.assertEqual(self.rows(q, self.reader), [(1,)])
        self.assertEqual(self.rows(q, self.owner), [(1,)])
        self.error(q, 229, self.nobody)

    def test_change_table_needs_select_on_schema_cdc(self):
        q = "SELECT id FROM cdc.[dbo_orders_CT] ORDER BY __$start_lsn, __$command_id, __$seqval, __$operation"
        err, _ = self.error(q, 229, self.reader)
        self.assertEqual(err.message, "The SELECT permission was denied on the object 'dbo_orders_CT', "
                         "database 'cdcdb', schema 'cdc'.")
        self.assertEqual(self.rows(q, self.owner), [(1,)])
        self.assertEqual(self.rows(q), [(1,)])

    def test_metadata_tables_need_select(self):
        for name in ("lsn_time_mapping", "captured_columns", "change_tables", "index_columns", "ddl_history"):
            q = "SELECT COUNT(*) FROM cdc.%s" % name
            err, _ = self.error(q, 229, self.reader)
            self.assertEqual(err.message, "The SELECT permission was denied on the object '%s', database 'cdcdb', "
                             "schema 'cdc'." % name)
            self.ok(q, self.owner)
        # an object grant covers that object only
        self.ok("GRANT SELECT ON cdc.captured_columns TO reader")
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM cdc.captured_columns", self.reader), 3)
        self.error("SELECT COUNT(*) FROM cdc.index_columns", 229, self.reader)
        self.ok("GRANT SELECT ON cdc.lsn_time_mapping TO reader")
        self.ok("SELECT COUNT(*) FROM cdc.lsn_time_mapping", self.reader)
        # db_datareader reads every table, those of schema cdc too
        self.ok("ALTER ROLE db_datareader ADD MEMBER nobody")
        self.ok("SELECT COUNT(*) FROM cdc.change_tables", self.nobody)
        self.ok("SELECT COUNT(*) FROM cdc.[dbo_orders_CT]", self.nobody)

    def test_scan_sessions_need_view_database_state(self):
        self.error("SELECT COUNT(*) FROM sys.dm_cdc_log_scan_sessions", 297, self.owner)
        self.ok("GRANT VIEW DATABASE STATE TO owner")
        self.ok("SELECT COUNT(*) FROM sys.dm_cdc_log_scan_sessions", self.owner)


class MetadataVisibilityTest(CdcPermissionBase):
    def names(self, sql, session):
        return sorted(r[0] for r in self.rows(sql, session))

    def test_catalog_views_hide_objects_without_permission(self):
        q = "SELECT name FROM sys.tables WHERE schema_id = SCHEMA_ID('dbo')"
        self.assertEqual(self.names(q, None), ["orders", "plain", "secret"])
        self.assertEqual(self.names(q, self.reader), ["orders", "plain"])
        self.assertEqual(self.names(q, self.nobody), [])
        self.assertEqual(self.names("SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES", self.reader),
                         ["orders", "plain"])
        self.assertEqual(self.names("SELECT DISTINCT TABLE_NAME FROM INFORMATION_SCHEMA.COLUMNS", self.nobody), [])
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM sys.columns WHERE object_id = OBJECT_ID(N'dbo.secret')",
                                     self.reader), 0)
        self.assertIsNone(self.scalar("SELECT OBJECT_ID(N'dbo.secret')", self.reader))
        self.assertIsNotNone(self.scalar("SELECT OBJECT_ID(N'dbo.orders')", self.reader))
        oid = self.scalar("SELECT OBJECT_ID(N'dbo.secret')")
        self.assertIsNone(self.scalar("SELECT OBJECT_NAME(%d)" % oid, self.reader))
        self.assertEqual(self.rows("EXEC sp_pkeys @table_name = N'secret', @table_owner = N'dbo'", self.reader), [])
        # the change tables of schema cdc: visible with SELECT on the schema
        self.assertEqual(self.names("SELECT name FROM sys.tables WHERE schema_id = SCHEMA_ID('cdc')", self.reader), [])
        self.assertIn("dbo_orders_CT",
                      self.names("SELECT name FROM sys.tables WHERE schema_id = SCHEMA_ID('cdc')", self.owner))

    def test_query_functions_visible_to_their_readers(self):
        q = "SELECT name FROM sys.objects WHERE type = 'IF'"
        self.assertEqual(self.names(q, None), ["fn_cdc_get_all_changes_dbo_orders",
                                               "fn_cdc_get_all_changes_dbo_secret"])
        self.assertEqual(self.names(q, self.reader), ["fn_cdc_get_all_changes_dbo_orders"])
        self.assertEqual(self.names(q, self.nobody), [])


class HelpNamedTableTest(CdcPermissionBase):
    HELP = "EXEC sys.sp_cdc_help_change_data_capture @source_schema = N'dbo', @source_name = N'%s'"

    def test_missing_table_is_22981(self):
        err, _ = self.error(self.HELP % "nosuch", 22981)
        self.assertEqual((err.severity, err.message), (16, "Object does not exist or access is denied."))

    def test_invisible_table_is_22981(self):
        err, _ = self.error(self.HELP % "secret", 22981, self.reader)
        self.assertEqual(err.message, "Object does not exist or access is denied.")

    def test_table_not_enabled_is_22985(self):
        err, _ = self.error(self.HELP % "plain", 22985, self.reader)
        self.assertEqual(err.message, "Change data capture has not been enabled for source table 'dbo.plain'. "
                         "Specify the name of a table enabled for Change Data Capture. To report on the tables "
                         "enabled for Change Data Capture, query the is_tracked_by_cdc column in the sys.tables "
                         "catalog view.")

    def test_enabled_table_lists_readable_instances(self):
        self.assertEqual([r[2] for r in self.rows(self.HELP % "orders", self.reader)], ["dbo_orders"])
        self.ok("GRANT SELECT ON dbo.orders TO nobody")
        # visible and enabled, but not in the gating role: no row, no error
        self.assertEqual(self.rows(self.HELP % "orders", self.nobody), [])


class NullRoleAccessTest(CdcPermissionBase):
    """@role_name = NULL (dbo.secret): SELECT on the source suffices, or,
    with null_role_access 'dbo_only', db_owner or a grant on the function."""

    def query(self):
        mn = self.scalar("SELECT sys.fn_cdc_get_min_lsn(N'dbo_secret')")
        mx = self.scalar("SELECT sys.fn_cdc_get_max_lsn()")
        return "SELECT COUNT(*) FROM cdc.fn_cdc_get_all_changes_dbo_secret(0x%s, 0x%s, N'all')" % (mn.hex(), mx.hex())

    def test_both_habits(self):
        self.ok("GRANT SELECT ON dbo.secret TO nobody")
        q = self.query()
        self.assertEqual(self.scalar(q, self.nobody), 0)
        self.assertEqual(self.engine.control("security_options", {"null_role_access": "dbo_only"}),
                         {"null_role_access": "dbo_only"})
        self.error(q, 229, self.nobody)
        self.assertEqual(self.scalar("SELECT sys.fn_cdc_get_min_lsn(N'dbo_secret')", self.nobody), ZERO)
        self.assertEqual(self.rows("EXEC sys.sp_cdc_help_change_data_capture", self.nobody), [])
        self.ok("GRANT SELECT ON cdc.fn_cdc_get_all_changes_dbo_secret TO nobody")
        self.assertEqual(self.scalar(q, self.nobody), 0)
        with self.assertRaises(ValueError):
            self.engine.control("security_options", {"null_role_access": "anyone"})
