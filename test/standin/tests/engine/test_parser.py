"""Lexer/parser coverage: tokens, names, statements, syntax errors (102/156)."""

import decimal
import logging

from .support import EngineTest, SqlError
from standin.engine.lexer import tokenize, QIDENT, NSTRING, STRING, BINARY, FLOAT, DECIMAL, INT
from standin.engine.parser import parse_batch


class LexerTest(EngineTest):
    def test_token_kinds(self):
        toks = tokenize("[a]]b] \"q\"\"x\" N'it''s' 'x' 0x0A0b 12 1.50 1e3 -- c\n/* a /* nested */ */ x")
        kinds = [(t.kind, t.value) for t in toks[:-1]]
        self.assertEqual(kinds[0], (QIDENT, "a]b"))
        self.assertEqual(kinds[1], (QIDENT, 'q"x'))
        self.assertEqual(kinds[2], (NSTRING, "it's"))
        self.assertEqual(kinds[3], (STRING, "x"))
        self.assertEqual(kinds[4], (BINARY, b"\x0a\x0b"))
        self.assertEqual([k for k, _ in kinds[5:8]], [INT, DECIMAL, FLOAT])
        self.assertEqual(kinds[8][1], "x")

    def test_unclosed_quote(self):
        err, _ = self.error("SELECT 'abc", 105)


class ParserTest(EngineTest):
    def test_worker_shapes_parse(self):
        shapes = [
            "SELECT sys.fn_cdc_get_max_lsn()",
            "SELECT sys.fn_cdc_get_min_lsn(N'dbo_orders')",
            "SELECT is_cdc_enabled, snapshot_isolation_state FROM sys.databases WHERE database_id = DB_ID()",
            "SELECT TOP (500) start_lsn, tran_end_time FROM cdc.lsn_time_mapping WHERE start_lsn > 0x0000002A000001F00003 "
            "AND start_lsn <= 0x0000002A000001F00009 AND tran_id <> 0x00 ORDER BY start_lsn",
            "SET TRANSACTION ISOLATION LEVEL SNAPSHOT; BEGIN TRANSACTION; SELECT sys.fn_cdc_get_max_lsn(); "
            "SELECT TOP (10000) [id], [amount] FROM [dbo].[orders] WHERE [id] > 42 ORDER BY [id]; COMMIT TRANSACTION;",
            "SELECT MAX(start_lsn) FROM (SELECT TOP (5 + 1) start_lsn FROM [db].cdc.lsn_time_mapping "
            "WHERE start_lsn >= 0x00 AND tran_id <> 0x00 ORDER BY start_lsn) as next_lsns",
            "SELECT s.name AS SchemaName, t.name AS TableName FROM sys.tables t INNER JOIN sys.schemas s "
            "ON t.schema_id = s.schema_id WHERE s.name != 'cdc' ORDER BY s.name, t.name;",
        ]
        for sql in shapes:
            self.assertTrue(parse_batch(sql), sql)

    def test_names(self):
        st = parse_batch("SELECT [select], [a b], [x]]y], \"q\" FROM [my db].[dbo].[weird ]] name]")[0]
        self.assertEqual([e.parts for e, _ in st.items], [["select"], ["a b"], ["x]y"], ["q"]])
        self.assertEqual(st.source.parts, ["my db", "dbo", "weird ] name"])

    def test_literals(self):
        st = parse_batch("SELECT 1, 2147483648, 1.50, 1e3, N'ü', 0x00, -5")[0]
        vals = [e.value for e, _ in st.items]
        self.assertEqual(vals[0], 1)
        self.assertEqual(st.items[1][0].type.name, "numeric")
        self.assertEqual(vals[2], decimal.Decimal("1.50"))
        self.assertEqual(vals[3], 1000.0)
        self.assertEqual(vals[4], "ü")
        self.assertEqual(vals[5], b"\x00")
        self.assertEqual(vals[6], -5)

    def test_syntax_errors(self):
        self.error("SELECT * FROM", 102)
        err, _ = self.error("SELECT FROM t", 156)
        self.assertEqual(err.message, "Incorrect syntax near the keyword 'FROM'.")
        err, _ = self.error("SELECT 1\nSELECT * FROM t WHERE", 102)
        self.assertEqual(err.line, 2)
        self.error("GO", 102)
        # a client-side batch separator sent to the server: an error after a
        # statement that cannot take an alias (after SELECT 1 it would be an alias, as in SQL Server)
        self.error("CREATE TABLE g (a int)\nGO\nSELECT 1", 102)

    def test_reserved_statement_words_start_a_statement(self):
        # PRINT, KILL and RAISERROR are reserved keywords: after a SELECT they
        # start the next statement instead of naming a column
        self.assertEqual([type(st).__name__ for st in parse_batch("SELECT 1\nPRINT N'end'")],
                         ["Select", "Print"])
        self.assertEqual([type(st).__name__ for st in parse_batch("SELECT 1 AS a KILL 60")], ["Select", "Kill"])
        self.error("SELECT 1 print", 102)       # a PRINT without its message
        self.assertEqual(parse_batch("SELECT 1 [print]")[0].items[0][1], "print")

    def test_syntax_error_aborts_whole_batch(self):
        self.ok("CREATE TABLE t (id int)")
        items = self.run_sql("INSERT INTO t VALUES (1); SELECT * FROM WHERE")
        self.assertEqual(len(items), 1)
        self.assertIsInstance(items[0], SqlError)
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM t"), 0)

    def test_unsupported_is_logged(self):
        with self.assertLogs("standin.unsupported", level=logging.WARNING):
            self.error("MERGE t USING s ON 1 = 1", 102)

    def test_statements_are_logged(self):
        with self.assertLogs("standin.statements", level=logging.INFO):
            self.ok("SELECT 1")

    def test_create_table_everything(self):
        self.ok("""CREATE TABLE [dbo].[all types] (
            id int IDENTITY(1,1) CONSTRAINT pk_all PRIMARY KEY CLUSTERED,
            a bit NULL, b tinyint, c smallint, d bigint, e decimal(18,4) DEFAULT 0, f numeric(5),
            g money, h smallmoney, i real, j float, k float(24), l date, m time(3), n datetime,
            o smalldatetime, p datetime2(7), q datetimeoffset(2), r char(3), s varchar(10) COLLATE Latin1_General_BIN2,
            t varchar(max), u nchar(2), v nvarchar(40), w nvarchar(max), x text, y ntext, z image,
            aa binary(4), ab varbinary(8), ac varbinary(max), ad uniqueidentifier, ae xml, af sql_variant,
            ag rowversion, ah AS (c + 1), ai AS (b * 2) PERSISTED, aj sysname NULL)""")
        cols = self.rows("SELECT name, system_type_id, max_length, precision, scale, is_nullable, is_identity, "
                         "is_computed FROM sys.columns WHERE object_id = OBJECT_ID(N'dbo.[all types]') "
                         "ORDER BY column_id")
        self.assertEqual(len(cols), 37)
        byname = {c[0]: c for c in cols}
        self.assertEqual(byname["id"][6], True)
        self.assertEqual(byname["ah"][7], True)
        self.assertEqual(byname["v"][2], 80)
        self.assertEqual(byname["t"][2], -1)
        self.assertEqual(byname["e"][3:5], (18, 4))
        self.assertEqual(byname["k"][1], 59)      # float(24) is real

    def test_object_names_128_and_unicode(self):
        name = "ü" * 128
        self.ok("CREATE TABLE [%s] ([select] int PRIMARY KEY, [a ]] b] nvarchar(5))" % name)
        self.ok("INSERT INTO [%s] VALUES (1, N'x')" % name)
        self.assertEqual(self.rows("SELECT [a ]] b] FROM dbo.[%s]" % name), [("x",)])
        self.error("CREATE TABLE [%s] (a int)" % ("x" * 129), 103)

    def test_create_schema_must_be_first(self):
        self.error("SELECT 1; CREATE SCHEMA s", 111)
        self.ok("CREATE SCHEMA sales")
        self.ok("CREATE TABLE sales.t (id int PRIMARY KEY)")
        self.ok("INSERT sales.t (id) VALUES (1)")
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM sales.t"), 1)
