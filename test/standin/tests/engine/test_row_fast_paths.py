"""The shortcuts the worker's window batches take (bench/README.md,
"The stand-in's cost per window"): the lexer reads runs of characters with
regular expressions, a comparison with a literal makes the
literal's sort key once, AT TIME ZONE in a zone without rules skips them,
CAST between date/time types skips convert()'s dispatch, and rows read
inside a statement (derived tables, EXISTS) get no encoder cache.  Each
must return exactly what the general path returns: the tests force the
general path and compare every row."""

from __future__ import annotations

import contextlib
import datetime
import unittest
from unittest import mock

from .support import EngineTest, SqlError

from standin.engine import clock, expressions, lexer
from standin.engine import values as V
from standin.sqltypes import SqlType


@contextlib.contextmanager
def general_path():
    """Compile comparisons and AT TIME ZONE as before the shortcuts."""
    with mock.patch.object(expressions, "_compare_with_constant", lambda *a: None), \
            mock.patch.dict(clock._CONSTANT_OFFSETS, clear=True), \
            mock.patch.dict(clock._NAMED, clear=True):
        yield
    clock._NAMED.clear()          # zones made while the rules were forced


class LexerRunsTest(unittest.TestCase):
    def test_the_runs_match_the_per_character_tests(self):
        """Every code point: whitespace, identifier and hex-digit runs are
        the sets the lexer tested character by character before."""
        hexdigits = set("0123456789abcdefABCDEF")
        for c in map(chr, range(0x110000)):
            self.assertEqual(bool(lexer._SPACES.fullmatch(c)), c != "\n" and c.isspace(), hex(ord(c)))
            self.assertEqual(bool(lexer._IDENT_RUN.fullmatch(c)), lexer._ident_char(c), hex(ord(c)))
            self.assertEqual(bool(lexer._HEX_RUN.fullmatch(c)), c in hexdigits, hex(ord(c)))

    def test_tokens_of_a_window_batch(self):
        toks = lexer.tokenize("SELECT\t CASE WHEN EXISTS (SELECT 1 FROM cdc.[dbo_t_CT] WHERE [__$start_lsn] > "
                              "0x0000002500000A01000 AND @v#1$ = N'x''y') THEN 1 END\r\n  ;é_2 0xg")
        self.assertEqual([(t.kind, t.text) for t in toks][:3], [(lexer.IDENT, "SELECT"), (lexer.IDENT, "CASE"),
                                                              (lexer.IDENT, "WHEN")])
        hexes = [t for t in toks if t.kind == lexer.BINARY]
        self.assertEqual([h.value for h in hexes], [bytes.fromhex("00000002500000A01000"), b""])
        self.assertIn((lexer.VAR, "@v#1$"), [(t.kind, t.text) for t in toks])
        self.assertIn((lexer.IDENT, "é_2"), [(t.kind, t.text) for t in toks])
        self.assertEqual([t.line for t in toks if t.text == "é_2"], [2])


class ComparisonWithLiteralTest(EngineTest):
    def setUp(self):
        super().setUp()
        self.ok("CREATE TABLE t (id int PRIMARY KEY, b varbinary(10) NULL, f binary(4) NULL, "
                "s nvarchar(10) NULL, n int NULL, d decimal(9,2) NULL)")
        self.ok("INSERT t VALUES (1, 0x00, 0x00, N'abc', 5, 1.50), (2, 0x0100, 0x01, N'ABC  ', -3, 2), "
                "(3, NULL, NULL, NULL, NULL, NULL), (4, 0x, 0x0000, N'', 0, 0.00), "
                "(5, 0x01, 0x0100, N'abd', 7, -1.5), (6, 0xFF00, 0xFF, N'b', 2147483647, 99.99)")

    PREDICATES = [
        "b <> 0x00", "b = 0x01", "0x01 = b", "b > 0x00", "b <= 0x0100", "0x0100 >= b", "f = 0x01",
        "f < 0x0100", "0x00 <> f", "s = N'abc'", "N'abc' = s", "s > N'ABC'", "s <> 'abd'", "n > 2",
        "3 < n", "n <= -3", "n = 2147483647", "n <> 0", "d = 1.5", "d > 1", "2 >= d", "n > NULL",
        "NULL = s", "n > -(-2)", "d < 2.001", "n = 5 AND b <> 0x00", "(n > 0) OR (s = N'b')",
        # CAST/CONVERT of a literal: the snapshot chunk's `[id] > CAST(N'3' AS int)` (src/keyset.c)
        "id > CAST(N'3' AS int)", "CAST(N'3' AS int) < id", "n >= CAST('5' AS bigint)",
        "s = CAST(N'abc' AS nvarchar(10))", "d > CONVERT(decimal(9,2), N'1.5')", "n > CAST(NULL AS int)",
        "b = CAST(0x01 AS varbinary(10))", "id > CONVERT(int, -(-2))", "n = CAST(CAST(N'5' AS bigint) AS int)",
    ]

    def test_every_predicate_returns_the_general_paths_rows(self):
        fast = {p: self.rows("SELECT id FROM t WHERE %s ORDER BY id" % p) for p in self.PREDICATES}
        with general_path():
            slow = {p: self.rows("SELECT id FROM t WHERE %s ORDER BY id" % p) for p in self.PREDICATES}
        self.assertEqual(fast, slow)
        # and they are not all empty or all rows: the comparisons decide
        self.assertEqual(fast["b <> 0x00"], [(2,), (5,), (6,)])
        self.assertEqual(fast["s = N'abc'"], [(1,), (2,)])

    def test_errors_stay_per_row(self):
        """A literal that cannot be converted fails as before: the error
        comes from the general path, when a row is compared."""
        for p in ("n > N'x'", "N'x' < n"):
            with general_path():
                want = self.error("SELECT id FROM t WHERE %s" % p, 245)[0].number
            self.assertEqual(self.error("SELECT id FROM t WHERE %s" % p, 245)[0].number, want)
        self.assertEqual(self.rows("SELECT id FROM t WHERE id > 99 AND n > N'x'"), [])
        # a CAST that fails fails when a row is compared, as before (an empty range: no error)
        for p in ("n > CAST(N'x' AS int)", "CAST(N'x' AS int) < n"):
            with general_path():
                want = self.error("SELECT id FROM t WHERE %s" % p, 245)[0].number
            self.assertEqual(self.error("SELECT id FROM t WHERE %s" % p, 245)[0].number, want)
        self.assertEqual(self.rows("SELECT id FROM t WHERE id > 99 AND n > CAST(N'x' AS int)"), [])

    def test_a_cast_literal_is_converted_once(self):
        """The snapshot chunk's `[id] > CAST(N'…' AS int)` over N rows converts
        the literal once per statement, not once per row (SQL Server folds
        CAST of a constant, ENGINE.md)."""
        self.ok("CREATE TABLE big (id int PRIMARY KEY, v int)")
        self.ok("INSERT big SELECT a.id * 10 + b.id, a.id FROM t AS a CROSS JOIN t AS b")
        calls = [0]
        real = V.convert

        def counting(*a, **k):
            calls[0] += 1
            return real(*a, **k)
        with mock.patch.object(V, "convert", counting):
            rows = self.rows("SELECT TOP (100) [id], [v] FROM [dbo].[big] WHERE [id] > CAST(N'12' AS int) "
                             "AND [v] >= CONVERT(int, N'1') ORDER BY [id]")
        self.assertEqual(len(rows), 36 - 2)
        self.assertLessEqual(calls[0], 4)

    def test_the_literals_key_is_made_once(self):
        """tran_id <> 0x00 over N rows: N sort keys (the rows'), not 2N."""
        calls = [0]
        real = expressions._binary_key

        def counting(v):
            calls[0] += 1
            return real(v)
        self.ok("CREATE TABLE big (id int PRIMARY KEY, v varbinary(10))")
        self.ok("INSERT big SELECT id, CAST(id AS varbinary(10)) FROM t")
        with mock.patch.object(expressions, "_binary_key", counting):
            rows = self.rows("SELECT COUNT(*) FROM big WHERE v <> 0x00")
        self.assertEqual(rows, [(6,)])
        self.assertLessEqual(calls[0], 6 + 1)


class AtTimeZoneTest(EngineTest):
    INPUTS = ["CAST('2024-03-31 01:30:00.123' AS datetime)", "CAST('2024-10-27 02:30:00.1234567' AS datetime2(7))",
              "CAST('2024-06-01 12:00:00 +05:30' AS datetimeoffset(7))",
              "CAST('2024-06-01 12:00:00.5 -08:00' AS datetimeoffset(1))",
              "CAST('2024-01-01 00:00:00' AS smalldatetime)", "CAST(NULL AS datetime2)"]
    ZONES = ["N'UTC'", "N'utc'", "N'W. Europe Standard Time'", "N'Pacific Standard Time'"]
    # the start of the range, in UTC only (a zone's rules fail there)
    EDGES = ["CAST('0001-01-01 00:00:00' AS datetime2(0))", "CAST('0001-01-01 00:00:00 +00:00' AS datetimeoffset(7))"]

    def test_utc_and_rule_zones_equal_the_rules(self):
        sql = "SELECT %s" % ", ".join(["%s AT TIME ZONE %s" % (i, z) for i in self.INPUTS for z in self.ZONES] +
                                      ["%s AT TIME ZONE N'UTC'" % i for i in self.EDGES])
        fast = self.rows(sql)
        with general_path():
            slow = self.rows(sql)
        self.assertEqual(fast, slow)
        self.assertEqual(str(fast[0][0]), "2024-03-31 01:30:00.1230000 +00:00")

    def test_the_last_instant_in_utc(self):
        """The rules could not convert the last tick of 9999 (Python's
        timestamp rounds it into year 10000); UTC needs no rules."""
        self.assertEqual(str(self.scalar("SELECT CAST('9999-12-31 23:59:59.9999999' AS datetime2(7)) "
                                         "AT TIME ZONE N'UTC'")), "9999-12-31 23:59:59.9999999 +00:00")

    def test_an_unknown_zone_still_fails_per_row(self):
        self.error("SELECT CAST('2024-01-01' AS datetime2) AT TIME ZONE N'Nowhere'", 9820)
        self.assertEqual(self.rows("SELECT CAST(NULL AS datetime2) AT TIME ZONE N'Nowhere'"), [(None,)])

    def test_the_worker_change_query_equals_the_general_path(self):
        """The direct change query and the window-end batch as the worker
        sends them (src/change_query.c, src/cdc_window.c), fast against forced
        general path, over every row of a small backlog."""
        self.ok("CREATE TABLE orders (id int PRIMARY KEY, v nvarchar(10), ts datetime2)")
        self.enable_cdc()
        self.capture()
        for i in range(30):
            self.ok("INSERT orders VALUES (%d, N'v%d', '2024-01-01'); UPDATE orders SET v = N'w' WHERE id = %d"
                    % (i, i, i // 2))
        self.capture()
        mn, mx = self.lsn_window()
        batch = ("SELECT TOP (10) start_lsn, (CAST(tran_end_time AS datetime2(7)) AT TIME ZONE N'UTC') "
                 "FROM cdc.lsn_time_mapping WHERE start_lsn > 0x{mn} AND start_lsn <= 0x{mx} AND tran_id <> 0x00 "
                 "ORDER BY start_lsn; "
                 "SELECT CASE WHEN EXISTS (SELECT 1 FROM cdc.[dbo_orders_CT] WHERE [__$start_lsn] > 0x{mn} "
                 "AND [__$start_lsn] <= 0x{mx}) THEN 1 ELSE 0 END; "
                 "SELECT CAST(COUNT_BIG(*) AS varchar(20)) FROM (SELECT TOP (1000000) start_lsn FROM "
                 "cdc.lsn_time_mapping WHERE start_lsn > 0x{mn} AND start_lsn <= 0x{mx} AND tran_id <> 0x00) AS backlog; "
                 "SELECT c.[__$start_lsn], ISNULL(c.[__$command_id], 0), c.[__$seqval], c.[__$operation], "
                 "c.[__$update_mask], (CAST(m.tran_end_time AS datetime2(7)) AT TIME ZONE N'UTC'), c.[id], c.[v], "
                 "c.[ts] FROM cdc.[dbo_orders_CT] AS c WITH (NOLOCK) LEFT OUTER JOIN cdc.lsn_time_mapping AS m "
                 "ON m.start_lsn = c.[__$start_lsn] WHERE c.[__$start_lsn] >= 0x{mn} AND c.[__$start_lsn] <= 0x{mx} "
                 "ORDER BY c.[__$start_lsn], c.[__$command_id], c.[__$seqval], c.[__$operation]"
                 ).format(mn=mn.hex(), mx=mx.hex())

        def sets():
            return [r.rows for r in self.ok(batch) if hasattr(r, "rows")]
        fast = sets()
        with general_path():
            slow = sets()
        self.assertEqual(fast, slow)
        self.assertEqual(len(fast[0]), 10)
        self.assertEqual(fast[2], [("60",)])
        self.assertEqual(len(fast[3]), 30 + 2 * 30)


class TemporalCastTest(unittest.TestCase):
    """CAST between date/time types calls convert_temporal directly: the
    same values and errors as convert()."""

    TYPES = [SqlType("date"), SqlType("time", scale=3), SqlType("time", scale=7), SqlType("datetime"),
             SqlType("smalldatetime"), SqlType("datetime2", scale=0), SqlType("datetime2", scale=7),
             SqlType("datetimeoffset", scale=2), SqlType("datetimeoffset", scale=7)]

    def values(self):
        out = []
        for txt in ("2024-02-29 23:59:59.9999999", "1900-01-01 00:00:00", "2079-06-06 23:59:00"):
            out.append((V.parse_temporal(txt, SqlType("datetime2", scale=7), None, "varchar"),
                        SqlType("datetime2", scale=7)))
        out.append((V.parse_temporal("2024-06-01 12:00:00.5 -08:00", SqlType("datetimeoffset", scale=7), None,
                                     "varchar"), SqlType("datetimeoffset", scale=7)))
        out.append((datetime.date(2024, 2, 29), SqlType("date")))
        return out

    def test_equals_convert(self):
        checked = 0
        for v, src in self.values():
            for mid in self.TYPES:
                try:
                    base = V.convert(v, src, mid, None, True)
                except SqlError:
                    continue
                for dst in self.TYPES:
                    try:
                        want = ("ok", V.convert(base, mid, dst, None, True))
                    except SqlError as e:
                        want = ("error", e.number)
                    try:
                        got = ("ok", V.convert_temporal(base, mid, dst))
                    except SqlError as e:
                        got = ("error", e.number)
                    self.assertEqual(got, want, (v, mid, dst))
                    checked += 1
        self.assertGreater(checked, 100)


class CastSqlTest(EngineTest):
    def test_cast_in_sql_equals_convert(self):
        """CAST in a statement (the fast path) against convert() of the same
        stored values, every pair of date/time types."""
        types = {"datetime2(7)": SqlType("datetime2", scale=7), "datetime": SqlType("datetime"),
                 "datetimeoffset(7)": SqlType("datetimeoffset", scale=7), "date": SqlType("date"),
                 "smalldatetime": SqlType("smalldatetime"), "time(7)": SqlType("time", scale=7),
                 "datetime2(3)": SqlType("datetime2", scale=3)}
        self.ok("CREATE TABLE d (id int PRIMARY KEY, %s)"
                % ", ".join("c%d %s NULL" % (i, n) for i, n in enumerate(types)))
        self.ok("INSERT d VALUES (1, %s), (2, %s)"
                % (", ".join("'2024-02-29 23:59:59.997'" for _ in types), ", ".join("NULL" for _ in types)))
        stored = self.rows("SELECT %s FROM d ORDER BY id" % ", ".join("c%d" % i for i in range(len(types))))
        names = list(types)
        for i, src in enumerate(names):
            for dst in names:
                sql = "SELECT CAST(c%d AS %s) FROM d ORDER BY id" % (i, dst)
                items = self.run_sql(sql)
                errs = [x for x in items if isinstance(x, SqlError)]
                try:
                    want = [(V.convert(r[i], types[src], types[dst], None, True),) for r in stored]
                except SqlError as e:
                    self.assertEqual([x.number for x in errs][:1], [e.number], sql)
                    continue
                self.assertFalse(errs, sql)
                self.assertEqual(self.rows(sql), want, sql)
        self.error("SELECT CAST(CAST('2024-01-01' AS date) AS time)", 529)


class DerivedRowsTest(EngineTest):
    def test_rows_read_inside_a_statement_get_no_encoder_cache(self):
        """The worker's lag count reads the backlog's mapping rows through a
        derived table: they are counted, not sent, so nothing is cached on
        them (a dict per row version before)."""
        self.ok("CREATE TABLE big (id int PRIMARY KEY, v int)")
        self.engine.control("fill_table", {"table": "big", "rows": 2000})
        self.assertEqual(self.rows("SELECT CAST(COUNT_BIG(*) AS varchar(20)) FROM (SELECT TOP (1000000) id FROM big "
                                   "WHERE id > 10 AND id <= 1500 AND v <> 0) AS backlog"), [("1490",)])
        self.assertEqual(self.rows("SELECT CASE WHEN EXISTS (SELECT 1 FROM big WHERE id > 1990) THEN 1 ELSE 0 END"),
                         [(1,)])
        table = self.engine.databases["cdcdb"].find_table("dbo", "big")
        self.assertEqual(len([k for k, rv in table.rows.items() if rv.cache is not None]), 0)
        # a result sent to the client still carries it
        self.assertEqual(len(self.rows("SELECT id, v FROM big WHERE id <= 3")), 3)
        self.assertEqual(len([k for k, rv in table.rows.items() if rv.cache is not None]), 3)


if __name__ == "__main__":
    unittest.main()
