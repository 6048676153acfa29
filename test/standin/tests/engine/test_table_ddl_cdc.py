"""What DDL on a tracked source table does to its capture instances, and the
small pieces t/110_table_conditions.pl drives the worker with: DROP TABLE
(the table's CDC metadata goes with it), ALTER TABLE ... DROP CONSTRAINT
(22979 for the key a capture instance uses), REVOKE SELECT, CHAR/NCHAR."""

from __future__ import annotations

from .support import EngineTest

ZERO = bytes(10)


class DropTrackedTableTest(EngineTest):
    def setUp(self):
        super().setUp()
        self.ok("CREATE TABLE dbo.gone (id int NOT NULL PRIMARY KEY, v int)")
        self.ok("CREATE TABLE dbo.kept (id int NOT NULL PRIMARY KEY, v int)")
        self.enable_cdc("gone")
        self.enable_cdc("kept")
        self.ok("INSERT INTO dbo.gone VALUES (1, 10); INSERT INTO dbo.kept VALUES (1, 10)")
        self.capture()

    def test_drop_removes_the_capture_instance(self):
        """"If a change data capture-enabled table is dropped, change data
        capture metadata that is associated with the table is automatically
        removed" (page "Enable and disable change data capture")."""
        self.ok("DROP TABLE dbo.gone")
        self.assertEqual(self.rows("SELECT capture_instance FROM cdc.change_tables ORDER BY capture_instance"),
                         [("dbo_kept",)])
        self.error("SELECT * FROM cdc.dbo_gone_CT", 208)
        self.assertEqual(self.scalar("SELECT sys.fn_cdc_get_min_lsn(N'dbo_gone')"), ZERO)
        self.error("EXEC sys.sp_cdc_help_change_data_capture @source_schema = N'dbo', @source_name = N'gone'",
                   22981)
        self.assertIsNone(self.scalar("SELECT OBJECT_ID(N'dbo.gone')"))
        # the other table's instance and its changes stay
        self.assertEqual(self.rows("SELECT id FROM cdc.dbo_kept_CT"), [(1,)])
        self.assertNotEqual(self.scalar("SELECT sys.fn_cdc_get_max_lsn()"), None)

    def test_recreated_table_needs_a_new_capture_instance(self):
        self.ok("DROP TABLE dbo.gone")
        self.ok("CREATE TABLE dbo.gone (id int NOT NULL PRIMARY KEY, v int)")
        self.assertEqual(self.scalar("SELECT is_tracked_by_cdc FROM sys.tables WHERE name = N'gone'"), False)
        self.error("EXEC sys.sp_cdc_help_change_data_capture @source_schema = N'dbo', @source_name = N'gone'",
                   22985)
        self.enable_cdc("gone")
        self.ok("INSERT INTO dbo.gone VALUES (2, 20)")
        self.capture()
        self.assertEqual(self.rows("SELECT id FROM cdc.dbo_gone_CT"), [(2,)])


class DropConstraintTest(EngineTest):
    def setUp(self):
        super().setUp()
        self.ok("CREATE TABLE dbo.keyed (id int NOT NULL CONSTRAINT pk_keyed PRIMARY KEY, v int)")
        self.ok("CREATE TABLE dbo.later (id int NOT NULL, v int)")
        self.ok("INSERT INTO dbo.later VALUES (2, 20), (1, 10)")
        self.enable_cdc("keyed")
        self.enable_cdc("later")

    def test_the_instances_key_cannot_be_dropped(self):
        err, _ = self.error("ALTER TABLE dbo.keyed DROP CONSTRAINT pk_keyed", 22979)
        self.assertEqual(err.message, "The unique index 'pk_keyed' on table 'dbo.keyed' is used by Change Data "
                         "Capture. The constraint using this index cannot be dropped or disabled.")
        self.assertEqual(self.rows("EXEC sp_pkeys @table_name = N'keyed'")[0][3], "id")

    def test_a_key_added_after_the_enable_can_be_dropped(self):
        self.ok("ALTER TABLE dbo.later ADD CONSTRAINT pk_later PRIMARY KEY (id)")
        self.assertEqual([r[3] for r in self.rows("EXEC sp_pkeys @table_name = N'later'")], ["id"])
        self.ok("ALTER TABLE dbo.later DROP CONSTRAINT pk_later")
        self.assertEqual(self.rows("EXEC sp_pkeys @table_name = N'later'"), [])
        self.assertEqual(self.rows("SELECT COUNT(*) FROM sys.key_constraints WHERE name = N'pk_later'"), [(0,)])
        # a heap now: the rows stay, duplicates are allowed, changes are captured
        self.assertEqual(self.rows("SELECT id, v FROM dbo.later ORDER BY id"), [(1, 10), (2, 20)])
        self.ok("INSERT INTO dbo.later VALUES (1, 11)")
        self.ok("UPDATE dbo.later SET v = 0 WHERE id = 2")
        self.assertEqual(self.rows("SELECT id, v FROM dbo.later ORDER BY id, v"), [(1, 10), (1, 11), (2, 0)])
        self.capture()
        self.assertEqual(self.rows("SELECT __$operation, id, v FROM cdc.dbo_later_CT ORDER BY __$start_lsn, "
                                   "__$seqval, __$operation"),
                         [(2, 1, 11), (3, 2, 20), (4, 2, 0)])
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM cdc.ddl_history WHERE ddl_command LIKE "
                                     "N'%DROP CONSTRAINT pk_later'"), 1)
        # and it can get a key again
        self.ok("DELETE FROM dbo.later WHERE v = 11")
        self.ok("ALTER TABLE dbo.later ADD CONSTRAINT pk_later PRIMARY KEY (id)")
        self.error("INSERT INTO dbo.later VALUES (1, 12)", 2627)

    def test_unknown_constraint(self):
        err, _ = self.error("ALTER TABLE dbo.later DROP CONSTRAINT nope", 3728)
        self.assertEqual(err.message, "'nope' is not a constraint.")
        self.ok("ALTER TABLE dbo.later DROP CONSTRAINT IF EXISTS nope")


class RevokeSelectTest(EngineTest):
    def setUp(self):
        super().setUp()
        self.ok("CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY)")
        self.ok("INSERT INTO dbo.t VALUES (1)")
        self.reader = self.session("reader")

    def test_revoke_takes_the_grant_back(self):
        self.ok("GRANT SELECT ON dbo.t TO reader")
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM dbo.t", self.reader), 1)
        self.ok("REVOKE SELECT ON dbo.t FROM reader")
        self.error("SELECT COUNT(*) FROM dbo.t", 229, self.reader)
        # metadata visibility: without a permission the table is not there for the login
        self.assertIsNone(self.scalar("SELECT OBJECT_ID(N'dbo.t')", self.reader))
        self.ok("GRANT SELECT ON SCHEMA::dbo TO reader")
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM dbo.t", self.reader), 1)
        self.ok("REVOKE SELECT ON SCHEMA::dbo TO reader")
        self.error("SELECT COUNT(*) FROM dbo.t", 229, self.reader)
        # revoking what was never granted is no error; only a db_owner may revoke
        self.ok("REVOKE SELECT ON OBJECT::dbo.t FROM reader")
        self.error("REVOKE SELECT ON dbo.t FROM reader", 15247, self.reader)


class CharFunctionsTest(EngineTest):
    def test_char_and_nchar(self):
        self.assertEqual(self.rows("SELECT CHAR(65), CHAR(0), CHAR(256), CHAR(-1), NCHAR(0x263A), NCHAR(0), "
                                   "NCHAR(65536)"),
                         [("A", "\0", None, None, "\u263a", "\0", None)])

    def test_a_nul_character_is_stored(self):
        self.ok("CREATE TABLE dbo.s (id int NOT NULL PRIMARY KEY, a varchar(10), n nvarchar(10))")
        self.ok("INSERT INTO dbo.s VALUES (1, 'x' + CHAR(0) + 'y', N'x' + NCHAR(0))")
        self.assertEqual(self.rows("SELECT a, n, LEN(a), DATALENGTH(n) FROM dbo.s"), [("x\0y", "x\0", 3, 4)])
