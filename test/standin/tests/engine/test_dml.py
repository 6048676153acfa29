"""DML semantics and statement-level errors (2627, 515, 544, 2628, 208, 207, 2812 ...)."""

import datetime
import decimal
import uuid

from .support import EngineTest, RowCount, SqlError
from standin.sqltypes import SqlTime

D = decimal.Decimal


class DmlTest(EngineTest):
    def setUp(self):
        super().setUp()
        self.ok("CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, amount decimal(18,2) NOT NULL DEFAULT 0, "
                "note nvarchar(10) NULL)")

    def test_insert_select_update_delete(self):
        items = self.ok("INSERT INTO dbo.orders (id, amount, note) VALUES (1, 10.5, N'a'), (2, 20, NULL), (3, 1, 'c')")
        self.assertEqual(items, [RowCount(3)])
        self.assertEqual(self.rows("SELECT id, amount FROM orders ORDER BY id DESC"),
                         [(3, D("1.00")), (2, D("20.00")), (1, D("10.50"))])
        self.ok("UPDATE orders SET amount = amount * 2, note = note + N'!' WHERE id = 1")
        self.assertEqual(self.rows("SELECT amount, note FROM orders WHERE id = 1"), [(D("21.00"), "a!")])
        self.assertEqual(self.ok("DELETE FROM orders WHERE id >= 2"), [RowCount(2)])
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM orders"), 1)
        self.assertEqual(self.scalar("SELECT @@ROWCOUNT"), 1)

    def test_default_and_nocount(self):
        self.ok("SET NOCOUNT ON")
        items = self.ok("INSERT orders (id) VALUES (7)")
        self.assertNotIsInstance(items[0], RowCount)
        self.assertEqual(self.scalar("SELECT amount FROM orders"), D("0.00"))

    def test_2627_pk_violation(self):
        self.ok("INSERT INTO orders (id) VALUES (1)")
        err, _ = self.error("INSERT INTO orders (id) VALUES (1)", 2627)
        self.assertRegex(err.message, r"^Violation of PRIMARY KEY constraint 'PK__orders__[0-9A-F]{16}'\. Cannot "
                         r"insert duplicate key in object 'dbo\.orders'\. The duplicate key value is \(1\)\.$")
        self.assertEqual((err.severity, err.state), (14, 1))

    def test_statement_error_is_atomic_and_batch_continues(self):
        items = self.run_sql("INSERT INTO orders (id) VALUES (1), (2), (1);\nSELECT COUNT(*) FROM orders")
        self.assertIsInstance(items[0], SqlError)
        self.assertEqual(items[0].line, 1)
        self.assertEqual(items[1].rows, [(0,)])

    def test_515_not_null(self):
        err, _ = self.error("INSERT INTO orders (id, amount) VALUES (1, NULL)", 515)
        self.assertEqual(err.message, "Cannot insert the value NULL into column 'amount', table 'cdcdb.dbo.orders'; "
                         "column does not allow nulls. INSERT fails.")
        self.ok("INSERT INTO orders (id) VALUES (1)")
        err, _ = self.error("UPDATE orders SET amount = NULL", 515)
        self.assertTrue(err.message.endswith("UPDATE fails."))

    def test_2628_truncation(self):
        err, _ = self.error("INSERT INTO orders (id, note) VALUES (1, N'01234567890')", 2628)
        self.assertEqual(err.message, "String or binary data would be truncated in table 'cdcdb.dbo.orders', column "
                         "'note'. Truncated value: '0123456789'.")
        # trailing blanks are trimmed silently
        self.ok("INSERT INTO orders (id, note) VALUES (1, N'0123456789   ')")

    def test_identity_and_544(self):
        self.ok("CREATE TABLE t (id int IDENTITY(10, 5) PRIMARY KEY, v int)")
        self.ok("INSERT t (v) VALUES (1), (2)")
        self.assertEqual(self.rows("SELECT id, v FROM t"), [(10, 1), (15, 2)])
        self.assertEqual(self.scalar("SELECT SCOPE_IDENTITY()"), 15)
        err, _ = self.error("INSERT t (id, v) VALUES (100, 3)", 544)
        self.assertEqual(err.message, "Cannot insert explicit value for identity column in table 't' when "
                         "IDENTITY_INSERT is set to OFF.")
        self.ok("SET IDENTITY_INSERT t ON; INSERT t (id, v) VALUES (100, 3); SET IDENTITY_INSERT t OFF")
        self.ok("INSERT t (v) VALUES (4)")
        self.assertEqual(self.scalar("SELECT MAX(id) FROM t"), 105)
        self.error("UPDATE t SET id = 1", 8102)

    def test_208_207_2812_and_unknown_function(self):
        err, _ = self.error("SELECT * FROM dbo.nope", 208)
        self.assertEqual(err.message, "Invalid object name 'dbo.nope'.")
        err, _ = self.error("SELECT nope FROM orders", 207)
        self.assertEqual(err.message, "Invalid column name 'nope'.")
        err, _ = self.error("EXEC dbo.sp_nope 1", 2812)
        self.assertEqual(err.message, "Could not find stored procedure 'dbo.sp_nope'.")
        self.error("SELECT nofunc(1)", 195)
        self.error("INSERT orders (id, nope) VALUES (1, 2)", 207)

    def test_208_does_not_abort_batch(self):
        items = self.run_sql("SELECT * FROM nope; SELECT 2")
        self.assertEqual(items[0].number, 208)
        self.assertEqual(items[1].rows, [(2,)])

    def test_conversion_error_aborts_batch(self):
        items = self.run_sql("INSERT orders (id) VALUES ('abc'); SELECT 1")
        self.assertEqual(len(items), 1)
        self.assertEqual(items[0].number, 245)
        self.assertEqual(items[0].message, "Conversion failed when converting the varchar value 'abc' to data type int.")

    def test_insert_count_mismatch(self):
        self.error("INSERT orders VALUES (1)", 213)
        self.error("INSERT orders (id, amount) VALUES (1)", 109)
        self.error("INSERT orders (id) VALUES (1, 2)", 110)

    def test_pk_changing_update(self):
        self.ok("INSERT orders (id) VALUES (1), (2), (3)")
        self.ok("UPDATE orders SET id = id + 1")     # transient duplicates are fine, like SQL Server
        self.assertEqual(self.rows("SELECT id FROM orders"), [(2,), (3,), (4,)])
        self.error("UPDATE orders SET id = 2 WHERE id = 4", 2627)

    def test_computed_and_rowversion(self):
        self.ok("CREATE TABLE c (id int PRIMARY KEY, a int, b AS (a * 2), rv rowversion)")
        self.ok("INSERT c (id, a) VALUES (1, 5)")
        r1 = self.rows("SELECT b, rv FROM c")[0]
        self.assertEqual(r1[0], 10)
        self.ok("UPDATE c SET a = 6")
        r2 = self.rows("SELECT b, rv FROM c")[0]
        self.assertEqual(r2[0], 12)
        self.assertGreater(r2[1], r1[1])
        self.error("INSERT c (id, b) VALUES (2, 1)", 271)
        self.error("INSERT c (id, rv) VALUES (2, 0x01)", 273)

    def test_insert_select_and_derived(self):
        self.ok("INSERT orders (id, amount) VALUES (1, 5), (2, 6)")
        self.ok("CREATE TABLE o2 (id int PRIMARY KEY, amount decimal(18,2))")
        self.ok("INSERT INTO o2 SELECT id + 10, amount FROM orders WHERE id > 1")
        self.assertEqual(self.rows("SELECT * FROM o2"), [(12, D("6.00"))])
        self.assertEqual(self.scalar("SELECT MAX(x) FROM (SELECT TOP (1) id AS x FROM orders ORDER BY id) AS d"), 1)

    def test_variables(self):
        self.ok("INSERT orders (id) VALUES (1), (2)")
        self.assertEqual(self.rows("DECLARE @x int = 1; SET @x += 1; SELECT id FROM orders WHERE id = @x"), [(2,)])
        self.error("SELECT @undeclared", 137)
        self.error("DECLARE @a int; DECLARE @a int", 134)

    def test_truncate_and_drop(self):
        self.ok("INSERT orders (id) VALUES (1)")
        self.ok("TRUNCATE TABLE orders")
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM orders"), 0)
        self.ok("DROP TABLE orders")
        self.error("DROP TABLE orders", 3701)
        self.ok("DROP TABLE IF EXISTS orders")

    def test_alter_table(self):
        self.ok("INSERT orders (id) VALUES (1)")
        self.ok("ALTER TABLE orders ADD extra int NULL, flag bit NOT NULL DEFAULT 1")
        self.assertEqual(self.rows("SELECT extra, flag FROM orders"), [(None, True)])
        self.error("ALTER TABLE orders ADD bad int NOT NULL", 4901)
        self.ok("ALTER TABLE orders DROP COLUMN extra")
        self.error("ALTER TABLE orders DROP COLUMN extra", 4924)
        self.error("ALTER TABLE orders DROP COLUMN id", 5074)
        self.ok("CREATE TABLE heap (a int NOT NULL, b int)")
        self.ok("ALTER TABLE heap ADD CONSTRAINT pk_heap PRIMARY KEY (a)")
        self.assertEqual(self.rows("EXEC sp_pkeys @table_name = N'heap'", index=0),
                         [("cdcdb", "dbo", "heap", "a", 1, "pk_heap")])


class ValuesTest(EngineTest):
    def test_implicit_conversions_on_insert(self):
        self.ok("CREATE TABLE v (id int PRIMARY KEY, d date, t time(3), dt datetime, sdt smalldatetime, "
                "d2 datetime2(3), dto datetimeoffset(0), u uniqueidentifier, n numeric(5,2), m money, b varbinary(4), "
                "c char(3), vc varchar(5))")
        self.ok("INSERT v VALUES (1, '2024-02-29', '13:14:15.1234', '2024-01-01 10:00:00.002', '2024-01-01 10:00:29.999', "
                "'2024-01-01T10:00:00.12345', '2024-01-01 10:00:00 +05:30', '6F9619FF-8B86-D011-B42D-00C04FC964FF', "
                "'123.456', 1.23456, 0x0102, 'a', N'€uro')")
        r = self.rows("SELECT d, t, dt, sdt, d2, dto, u, n, m, b, c, vc FROM v")[0]
        self.assertEqual(r[0], datetime.date(2024, 2, 29))
        self.assertEqual(r[1], SqlTime((13 * 3600 + 14 * 60 + 15) * 10 ** 7 + 1230000))
        self.assertEqual(r[2].ticks300 % 300, 1)                       # .002 rounds to .003 (1/300 s)
        self.assertEqual(r[3].minutes, 10 * 60 + 1)                    # 29.999 s rounds up
        self.assertEqual(r[4].ticks % 10 ** 7, 1230000)                # datetime2(3) rounds .12345 -> .123
        self.assertEqual(r[5].offset_minutes, 330)
        self.assertEqual(r[6], uuid.UUID("6F9619FF-8B86-D011-B42D-00C04FC964FF"))
        self.assertEqual(r[7], D("123.46"))
        self.assertEqual(r[8], D("1.2346"))
        self.assertEqual(r[9], b"\x01\x02")
        self.assertEqual(r[10], "a  ")
        self.assertEqual(r[11], "€uro")                               # in CP1252

    def test_cp1252_replacement(self):
        self.ok("CREATE TABLE s (id int PRIMARY KEY, v varchar(10), n nvarchar(10))")
        self.ok("INSERT s VALUES (1, N'日本', N'日本')")
        self.assertEqual(self.rows("SELECT v, n, DATALENGTH(v), DATALENGTH(n), LEN(n) FROM s"), [("??", "日本", 2, 4, 2)])

    def test_nvarchar_length_in_utf16_units(self):
        self.ok("CREATE TABLE s (id int PRIMARY KEY, n nvarchar(2))")
        self.error("INSERT s VALUES (1, N'😀x')", 2628)        # surrogate pair = 2 units
        self.ok("INSERT s VALUES (1, N'😀')")

    def test_string_comparison_ci_and_trailing_spaces(self):
        self.ok("CREATE TABLE s (k varchar(10) PRIMARY KEY)")
        self.ok("INSERT s VALUES ('abc')")
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM s WHERE k = 'ABC  '"), 1)
        self.error("INSERT s VALUES ('ABC ')", 2627)
        self.ok("CREATE TABLE cs (k varchar(10) COLLATE Latin1_General_BIN2 PRIMARY KEY)")
        self.ok("INSERT cs VALUES ('abc'), ('ABC')")

    def test_uniqueidentifier_order(self):
        self.ok("CREATE TABLE g (id uniqueidentifier PRIMARY KEY)")
        a = "00000000-0000-0000-0000-000000000001"   # byte 15 nonzero: sorts last
        b = "01000000-0000-0000-0000-000000000000"   # bytes 0-3 sort least significant
        c = "00000000-0000-0000-0100-000000000000"   # byte 8
        self.ok("INSERT g VALUES ('%s'), ('%s'), ('%s')" % (a, b, c))
        got = [str(r[0]) for r in self.rows("SELECT id FROM g ORDER BY id")]
        self.assertEqual(got, [b, c, a])
        self.assertEqual([str(r[0]) for r in self.rows("SELECT id FROM g WHERE id > '%s'" % b)], [c, a])

    def test_binary_compare_and_convert_style(self):
        self.assertEqual(self.scalar("SELECT CASE WHEN 0x00 = 0x0000 THEN 1 ELSE 0 END"), 1)
        self.assertEqual(self.scalar("SELECT CONVERT(varchar(22), 0x0000002A000001F00003, 1)"), "0x0000002A000001F00003")
        self.assertEqual(self.scalar("SELECT CONVERT(binary(2), '0x0A0B', 1)"), b"\x0a\x0b")

    def test_three_valued_logic(self):
        self.ok("CREATE TABLE n (id int PRIMARY KEY, v int NULL)")
        self.ok("INSERT n VALUES (1, NULL), (2, 2)")
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM n WHERE v <> 2"), 0)
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM n WHERE NOT (v = 2)"), 0)
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM n WHERE v IS NULL OR v = 2"), 2)
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM n WHERE v IN (1, NULL)"), 0)
        self.assertEqual(self.scalar("SELECT COUNT(v) FROM n"), 1)

    def test_expressions_and_functions(self):
        r = self.rows("SELECT 7 / 2, 7 % 3, 1.5 * 2, 'a' + 'b', ISNULL(NULL, 3), COALESCE(NULL, NULL, N'x'), "
                      "LEN('ab  '), DATALENGTH(N'ab'), SUBSTRING('hello', 2, 3), UPPER('a'), LTRIM('  a'), "
                      "RTRIM('a  '), CASE WHEN 1 = 1 THEN 'y' ELSE 'n' END, CAST('12' AS int) + 1, "
                      "CAST(1 AS bit), DB_NAME(), CONVERT(nvarchar(10), 42)")[0]
        self.assertEqual(r, (3, 1, D("3.0"), "ab", 3, "x", 2, 4, "ell", "A", "a", "a", "y", 13, True, "cdcdb", "42"))
        self.error("SELECT 1 / 0", 8134)
        self.error("SELECT CAST(300 AS tinyint)", 8115)

    def test_between_like_in(self):
        self.ok("CREATE TABLE w (id int PRIMARY KEY, s nvarchar(10))")
        self.ok("INSERT w VALUES (1, N'apple'), (2, N'banana'), (3, N'cherry')")
        self.assertEqual(self.rows("SELECT id FROM w WHERE id BETWEEN 2 AND 3 AND s LIKE N'%an%'"), [(2,)])
        self.assertEqual(self.rows("SELECT id FROM w WHERE s NOT IN (N'apple', N'cherry')"), [(2,)])
        self.assertEqual(self.rows("SELECT id FROM w WHERE s LIKE 'A_ple'"), [(1,)])

    def test_aggregates_group_by(self):
        self.ok("CREATE TABLE a (id int PRIMARY KEY, g int, v decimal(5,1))")
        self.ok("INSERT a VALUES (1, 1, 1.5), (2, 1, 2.5), (3, 2, NULL)")
        self.assertEqual(self.rows("SELECT COUNT(*), COUNT(v), SUM(v), MIN(v), MAX(id) FROM a"),
                         [(3, 2, D("4.0"), D("1.5"), 3)])
        self.assertEqual(self.rows("SELECT g, COUNT(*) AS n FROM a GROUP BY g ORDER BY g"), [(1, 2), (2, 1)])
        self.assertEqual(self.rows("SELECT MAX(id) FROM a WHERE id > 10"), [(None,)])
        self.error("SELECT id, COUNT(*) FROM a", 8120)

    def test_top_offset_distinct_union(self):
        self.ok("CREATE TABLE a (id int PRIMARY KEY, g int)")
        self.ok("INSERT a VALUES (1, 1), (2, 1), (3, 2), (4, 2)")
        self.assertEqual(self.rows("SELECT TOP 2 id FROM a ORDER BY id DESC"), [(4,), (3,)])
        self.assertEqual(self.rows("SELECT id FROM a ORDER BY id OFFSET 1 ROWS FETCH NEXT 2 ROWS ONLY"), [(2,), (3,)])
        self.assertEqual(self.rows("SELECT DISTINCT g FROM a ORDER BY g"), [(1,), (2,)])
        self.assertEqual(self.rows("SELECT 1 AS x UNION ALL SELECT 2 ORDER BY x DESC"), [(2,), (1,)])
