"""UNIQUE constraints and unique indexes (engine/unique.py): every way to
declare one, SQL Server's duplicate-key errors 2627/2601/1505/1913 with their
texts, NULL and collation equality, statement-level checking (a key shift or
a swap inside one UPDATE succeeds), and the catalog views."""

from .support import EngineTest


class UniqueTest(EngineTest):
    def test_constraint_forms_and_2627(self):
        self.ok("CREATE TABLE a (id int PRIMARY KEY, ref varchar(10) UNIQUE, "
                "code int NOT NULL CONSTRAINT uq_a_code UNIQUE, x int, y int, CONSTRAINT uq_a_xy UNIQUE (x, y))")
        self.ok("INSERT a VALUES (1, 'r1', 10, 1, 1)")
        err, _ = self.error("INSERT a VALUES (2, 'r2', 10, 2, 2)", 2627)
        self.assertEqual(err.message, "Violation of UNIQUE KEY constraint 'uq_a_code'. Cannot insert duplicate key "
                                      "in object 'dbo.a'. The duplicate key value is (10).")
        self.assertEqual((err.severity, err.state), (14, 1))
        err, _ = self.error("INSERT a VALUES (3, 'r3', 30, 1, 1)", 2627)
        self.assertEqual(err.message, "Violation of UNIQUE KEY constraint 'uq_a_xy'. Cannot insert duplicate key in "
                                      "object 'dbo.a'. The duplicate key value is (1, 1).")
        err, _ = self.error("INSERT a VALUES (4, 'R1', 40, 4, 4)", 2627)     # case-insensitive collation
        self.assertRegex(err.message, r"^Violation of UNIQUE KEY constraint 'UQ__a__[0-9A-F]{16}'\. .* is \(R1\)\.$")
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM a"), 1)

    def test_alter_table_add_constraint_and_1505(self):
        self.ok("CREATE TABLE b (id int PRIMARY KEY, v int)")
        self.ok("INSERT b VALUES (1, 5), (2, 5)")
        err, _ = self.error("ALTER TABLE b ADD CONSTRAINT uq_b UNIQUE (v)", 1505)
        self.assertEqual(err.message, "The CREATE UNIQUE INDEX statement terminated because a duplicate key was found "
                                      "for the object name 'dbo.b' and the index name 'uq_b'. The duplicate key value "
                                      "is (5).")
        self.ok("UPDATE b SET v = 6 WHERE id = 2")
        self.ok("ALTER TABLE b ADD CONSTRAINT uq_b UNIQUE (v)")
        self.error("INSERT b VALUES (3, 6)", 2627)
        self.error("ALTER TABLE b ADD CONSTRAINT uq_b UNIQUE (id)", 2714)

    def test_unique_index_2601_and_1913(self):
        self.ok("CREATE TABLE c (id int PRIMARY KEY, ref nvarchar(20))")
        self.ok("CREATE UNIQUE NONCLUSTERED INDEX ux_c_ref ON dbo.c (ref)")
        self.ok("INSERT c VALUES (1, N'a'), (2, NULL)")
        err, _ = self.error("INSERT c VALUES (3, N'a')", 2601)
        self.assertEqual(err.message, "Cannot insert duplicate key row in object 'dbo.c' with unique index 'ux_c_ref'. "
                                      "The duplicate key value is (a).")
        err, _ = self.error("INSERT c VALUES (4, NULL)", 2601)               # NULL equals NULL here
        self.assertTrue(err.message.endswith("The duplicate key value is (<NULL>)."))
        err, _ = self.error("CREATE UNIQUE INDEX ux_c_ref ON c (id)", 1913)
        self.assertEqual(err.message, "The operation failed because an index or statistics with name 'ux_c_ref' "
                                      "already exists on table 'dbo.c'.")
        self.error("CREATE UNIQUE CLUSTERED INDEX ux2 ON c (ref)", 1902)
        self.error("CREATE UNIQUE INDEX ux3 ON c (nope)", 1911)
        self.ok("CREATE INDEX plain ON c (ref)")                               # non-unique: no effect
        self.ok("INSERT c VALUES (5, N'b')")

    def test_statement_level_check(self):
        self.ok("CREATE TABLE d (id int PRIMARY KEY, ref varchar(5) NOT NULL UNIQUE)")
        self.ok("INSERT d VALUES (1, 'A'), (2, 'B'), (3, 'C')")
        # a swap and a shift are duplicates only halfway through the statement
        self.ok("UPDATE d SET ref = CASE ref WHEN 'A' THEN 'B' WHEN 'B' THEN 'A' ELSE ref END")
        self.ok("UPDATE d SET id = id + 1")
        self.assertEqual(self.rows("SELECT id, ref FROM d ORDER BY id"), [(2, "B"), (3, "A"), (4, "C")])
        # a duplicate at the end rolls the whole statement back
        self.error("UPDATE d SET ref = 'Z' WHERE id >= 3", 2627)
        self.error("INSERT d VALUES (10, 'X'), (11, 'X')", 2627)
        self.assertEqual(self.rows("SELECT id, ref FROM d ORDER BY id"), [(2, "B"), (3, "A"), (4, "C")])
        # a key freed earlier in the same transaction can be taken again
        self.ok("BEGIN TRAN; DELETE FROM d WHERE id = 2; INSERT d VALUES (9, 'B'); COMMIT")
        self.assertEqual(self.scalar("SELECT id FROM d WHERE ref = 'B'"), 9)

    def test_dependent_columns_and_catalog(self):
        self.ok("CREATE TABLE e (id int PRIMARY KEY, u int CONSTRAINT uq_e UNIQUE, w int)")
        self.ok("CREATE UNIQUE INDEX ux_e_w ON e (w)")
        self.error("ALTER TABLE e DROP COLUMN u", 5074)
        self.error("ALTER TABLE e ALTER COLUMN w bigint", 5074)
        rows = self.rows("SELECT i.name, i.index_id, i.is_unique, i.is_primary_key, i.is_unique_constraint "
                         "FROM sys.indexes i WHERE i.object_id = OBJECT_ID('dbo.e') ORDER BY i.index_id")
        self.assertEqual([r[1:] for r in rows], [(1, True, True, False), (2, True, False, True),
                                                 (3, True, False, False)])
        self.assertEqual([r[0] for r in rows[1:]], ["uq_e", "ux_e_w"])
        self.assertEqual(self.rows("SELECT name, type FROM sys.key_constraints WHERE parent_object_id = "
                                   "OBJECT_ID('dbo.e') ORDER BY unique_index_id")[1:], [("uq_e", "UQ")])
        cols = self.rows("SELECT ic.index_id, c.name FROM sys.index_columns ic JOIN sys.columns c "
                         "ON c.object_id = ic.object_id AND c.column_id = ic.column_id "
                         "WHERE ic.object_id = OBJECT_ID('dbo.e') ORDER BY ic.index_id")
        self.assertEqual(cols, [(1, "id"), (2, "u"), (3, "w")])
