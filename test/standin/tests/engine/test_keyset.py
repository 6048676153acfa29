"""Keyset paging (the worker's snapshot shape) on composite, uuid, date and string keys,
that it reads every row exactly once while other sessions write, that every
row-independent bound shape gives exact results, and that such a bound
positions the scan instead of reading the table from its start."""

import random
import uuid
from unittest import mock

from .support import EngineTest


class KeysetTest(EngineTest):
    def page_all(self, table, keycols, where_fn, page=7):
        seen, last = [], None
        while True:
            where = "" if last is None else "WHERE " + where_fn(last)
            rows = self.rows("SELECT TOP (%d) %s FROM %s %s ORDER BY %s"
                             % (page, ", ".join(keycols), table, where, ", ".join(keycols)))
            if not rows:
                return seen
            seen.extend(rows)
            last = rows[-1]

    def test_composite_key(self):
        self.ok("CREATE TABLE c (a int NOT NULL, b nvarchar(10) NOT NULL, v int, PRIMARY KEY (a, b))")
        vals = [(a, b) for a in range(5) for b in ("x", "Y", "z", "a")]
        self.ok("INSERT c (a, b) VALUES " + ", ".join("(%d, N'%s')" % v for v in vals))
        got = self.page_all("c", ["a", "b"], lambda l: "(a > %d) OR (a = %d AND b > N'%s')" % (l[0], l[0], l[1]))
        self.assertEqual(len(got), len(vals))
        self.assertEqual(got, sorted(got, key=lambda r: (r[0], r[1].lower())))
        self.assertEqual(got[:4], [(0, "a"), (0, "x"), (0, "Y"), (0, "z")])     # case-insensitive order

    def test_uuid_key(self):
        self.ok("CREATE TABLE g (id uniqueidentifier PRIMARY KEY)")
        rng = random.Random(5)
        ids = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(40)]
        self.ok("INSERT g VALUES " + ", ".join("('%s')" % u for u in ids))
        got = self.page_all("g", ["id"], lambda l: "id > '%s'" % l[0])
        self.assertEqual(sorted(r[0] for r in got), sorted(ids))
        b = [u.bytes_le for u in (r[0] for r in got)]
        keys = [x[10:16] + x[8:10] + x[6:8] + x[4:6] + x[0:4] for x in b]
        self.assertEqual(keys, sorted(keys))

    def test_date_and_string_keys(self):
        self.ok("CREATE TABLE d (day date NOT NULL, name varchar(10) NOT NULL, CONSTRAINT pk_d PRIMARY KEY (day, name))")
        self.ok("INSERT d VALUES ('2024-01-02', 'b'), ('2024-01-01', 'b'), ('2024-01-01', 'a'), ('2023-12-31', 'z')")
        got = self.page_all("d", ["day", "name"],
                            lambda l: "(day > '%s') OR (day = '%s' AND name > '%s')" % (l[0], l[0], l[1]), page=1)
        self.assertEqual([str(r[0]) + r[1] for r in got], ["2023-12-31z", "2024-01-01a", "2024-01-01b", "2024-01-02b"])

    def test_snapshot_paging_with_concurrent_writes(self):
        self.ok("ALTER DATABASE cdcdb SET ALLOW_SNAPSHOT_ISOLATION ON")
        self.ok("CREATE TABLE t (id int PRIMARY KEY, v int)")
        self.engine.control("fill_table", {"table": "t", "rows": 1000})
        reader = self.session()
        writer = self.session()
        self.ok("SET TRANSACTION ISOLATION LEVEL SNAPSHOT; BEGIN TRANSACTION; SELECT sys.fn_cdc_get_max_lsn()", reader)
        seen, last, i = [], 0, 0
        while True:
            rows = self.rows("SELECT TOP (100) [id], [v] FROM [dbo].[t] WHERE [id] > %d ORDER BY [id]" % last, reader)
            if not rows:
                break
            seen.extend(r[0] for r in rows)
            last = rows[-1][0]
            i += 1
            self.ok("DELETE FROM t WHERE id = %d; INSERT t VALUES (%d, 0); UPDATE t SET id = id + 5000 WHERE id = %d"
                    % (last + 1, 100000 + i, last + 2), writer)
        self.ok("COMMIT TRANSACTION", reader)
        self.assertEqual(seen, list(range(1, 1001)))


class RangePruningTest(EngineTest):
    """Key-range pruning must never change a result: compare each predicate with
    an equivalent one the planner cannot use (the column wrapped in an expression)."""

    def test_random_ranges_match_unpruned(self):
        rng = random.Random(11)
        self.ok("CREATE TABLE r (k nvarchar(10) NOT NULL, n int NOT NULL, v int, PRIMARY KEY (k, n))")
        words = ["a", "B", "c ", "Ab", "ab", "b", "C", "zz", "Z"]
        rows = {}
        for w in words:
            for _ in range(3):
                n = rng.randint(0, 5)
                rows[(w.rstrip().lower(), n)] = (w, n)        # the PK is case-insensitive
        rows = set(rows.values())
        self.ok("INSERT r (k, n) VALUES " + ", ".join("(N'%s', %d)" % r for r in sorted(rows)))
        self.ok("CREATE TABLE i (id int PRIMARY KEY, v int)")
        self.ok("INSERT i (id) VALUES " + ", ".join("(%d)" % x for x in range(-20, 20)))
        for _ in range(60):
            w = rng.choice(words + ["", "b ", "BB"])
            x = rng.randint(-25, 25)
            y = rng.randint(-25, 25)
            for pred, wrapped in [
                ("k > N'%s'" % w, "k + N'' > N'%s'" % w),
                ("k <= N'%s' AND n > %d" % (w, x % 6), "k + N'' <= N'%s' AND n > %d" % (w, x % 6)),
                ("k = N'%s' OR k > N'%s'" % (w, w.upper()), "k + N'' = N'%s' OR k + N'' > N'%s'" % (w, w.upper())),
            ]:
                self.assertEqual(self.rows("SELECT k, n FROM r WHERE %s ORDER BY k, n" % pred),
                                 self.rows("SELECT k, n FROM r WHERE %s ORDER BY k, n" % wrapped), pred)
            for pred, wrapped in [
                ("id > %d AND id <= %d" % (x, y), "id + 0 > %d AND id + 0 <= %d" % (x, y)),
                ("id BETWEEN %d AND %d" % (x, y), "id + 0 BETWEEN %d AND %d" % (x, y)),
                ("id = %d OR id < %d" % (x, y), "id + 0 = %d OR id + 0 < %d" % (x, y)),
                ("(id > %d) OR (id = %d AND v IS NULL)" % (x, y), "(id + 0 > %d) OR (id + 0 = %d AND v IS NULL)" % (x, y)),
            ]:
                self.assertEqual(self.rows("SELECT id FROM i WHERE %s ORDER BY id" % pred),
                                 self.rows("SELECT id FROM i WHERE %s ORDER BY id" % wrapped), pred)
                self.ok("BEGIN TRAN; UPDATE i SET v = 1 WHERE %s" % pred)
                n1 = self.scalar("SELECT COUNT(*) FROM i WHERE v = 1")
                self.ok("ROLLBACK; BEGIN TRAN; UPDATE i SET v = 1 WHERE %s" % wrapped)
                n2 = self.scalar("SELECT COUNT(*) FROM i WHERE v = 1")
                self.ok("ROLLBACK")
                self.assertEqual(n1, n2, pred)


class KeysetSeekResultsTest(EngineTest):
    """Any row-independent bound (literal, CAST, arithmetic, variable) may
    position the scan; the result must stay exactly what the predicate says,
    whatever the bound's shape, type or position."""

    def setUp(self):
        super().setUp()
        self.ok("CREATE TABLE t (id int PRIMARY KEY, v int NULL)")
        self.engine.control("fill_table", {"table": "t", "rows": 1000})
        self.ok("UPDATE t SET v = NULL WHERE id % 3 = 0")          # a NULL-able non-key column
        self.ids = list(range(1, 1001))

    def ids_of(self, sql, session=None):
        return [r[0] for r in self.rows(sql, session)]

    def assert_page(self, bound, expected_first, n=5):
        """id > bound starts at expected_first, and so does id >= bound + 1 (computed on our side)."""
        got = self.ids_of("SELECT TOP (%d) id FROM t WHERE id > %s ORDER BY id" % (n, bound))
        self.assertEqual(got, list(range(expected_first, expected_first + n)), bound)
        got = self.ids_of("SELECT TOP (%d) id FROM t WHERE id >= %s ORDER BY id" % (n, bound))
        first = max(expected_first - 1, 1)
        self.assertEqual(got, list(range(first, first + n)), ">= " + bound)

    def test_bare_literal(self):
        self.assert_page("300", 301)
        self.assert_page("-5", 1)
        self.assert_page("0", 1)

    def test_cast_bound_as_snapshot_sends_it(self):
        self.assert_page("CAST(N'300' AS int)", 301)
        self.assert_page("CAST(N'-2147483648' AS int)", 1)
        self.assertEqual(self.ids_of("SELECT TOP (3) [id] FROM [dbo].[t] WHERE ([id] > CAST(N'998' AS int)) ORDER BY [id]"),
                         [999, 1000])

    def test_arithmetic_bound(self):
        self.assert_page("299 + 1", 301)
        self.assert_page("30 * 10", 301)
        self.assert_page("-(-300)", 301)
        self.assert_page("CAST(N'150' AS int) * 2", 301)
        self.assert_page("1000 / 3", 334)            # integer division: 333

    def test_variable_bound(self):
        got = self.ids_of("DECLARE @k int = 300; SELECT TOP (5) id FROM t WHERE id > @k ORDER BY id")
        self.assertEqual(got, [301, 302, 303, 304, 305])
        got = self.ids_of("DECLARE @k bigint = 30; SELECT TOP (3) id FROM t WHERE id >= @k * 10 + 1 ORDER BY id")
        self.assertEqual(got, [301, 302, 303])
        got = self.ids_of("DECLARE @k nvarchar(10) = N'300'; "
                          "SELECT TOP (2) id FROM t WHERE id > CAST(@k AS int) ORDER BY id")
        self.assertEqual(got, [301, 302])

    def test_null_bound_matches_nothing(self):
        self.assertEqual(self.ids_of("DECLARE @k int; SELECT TOP (5) id FROM t WHERE id > @k ORDER BY id"), [])
        self.assertEqual(self.ids_of("SELECT id FROM t WHERE id > CAST(NULL AS int)"), [])
        self.assertEqual(self.ids_of("DECLARE @k int; SELECT id FROM t WHERE (id > @k) OR (id = @k AND v > 1)"), [])

    def test_nullable_non_key_column_with_a_bound(self):
        got = self.ids_of("SELECT TOP (4) id FROM t WHERE id > CAST(N'900' AS int) AND v IS NULL ORDER BY id")
        self.assertEqual(got, [903, 906, 909, 912])
        got = self.ids_of("SELECT id FROM t WHERE (id > 990 AND v IS NOT NULL) OR id = 3 ORDER BY id")
        self.assertEqual(got, [3] + [i for i in range(991, 1001) if i % 3])

    def test_bound_beyond_the_last_key(self):
        self.assertEqual(self.ids_of("SELECT TOP (5) id FROM t WHERE id > 1000 ORDER BY id"), [])
        self.assertEqual(self.ids_of("SELECT TOP (5) id FROM t WHERE id > CAST(N'2147483647' AS int) ORDER BY id"), [])
        self.assertEqual(self.ids_of("SELECT TOP (5) id FROM t WHERE id >= 1000 ORDER BY id"), [1000])
        # a bound outside the key's type is compared, not converted: no error, no rows
        self.assertEqual(self.ids_of("SELECT id FROM t WHERE id > CAST(N'99999999999' AS bigint)"), [])
        self.ok("CREATE TABLE small (k tinyint PRIMARY KEY)")
        self.ok("INSERT small VALUES (1), (200), (255)")
        self.assertEqual(self.ids_of("SELECT k FROM small WHERE k > 300"), [])
        self.assertEqual(self.ids_of("SELECT k FROM small WHERE k > -1 ORDER BY k"), [1, 200, 255])
        self.assertEqual(self.ids_of("SELECT k FROM small WHERE k > 199.5 ORDER BY k"), [200, 255])

    def test_descending_and_ascending(self):
        self.assertEqual(self.ids_of("SELECT TOP (3) id FROM t WHERE id > CAST(N'990' AS int) ORDER BY id DESC"),
                         [1000, 999, 998])
        self.assertEqual(self.ids_of("SELECT TOP (3) id FROM t WHERE id < CAST(N'500' AS int) ORDER BY id DESC"),
                         [499, 498, 497])
        self.assertEqual(self.ids_of("SELECT TOP (3) id FROM t WHERE id < 500 + 0 ORDER BY id ASC"), [1, 2, 3])
        self.assertEqual(self.ids_of("SELECT id FROM t WHERE id BETWEEN 10 * 2 AND 24 ORDER BY id DESC"),
                         [24, 23, 22, 21, 20])
        # paging backwards, as a DESC keyset reader would
        seen, last = [], 2000
        while True:
            page = self.ids_of("SELECT TOP (64) id FROM t WHERE id < CAST(N'%d' AS int) ORDER BY id DESC" % last)
            if not page:
                break
            seen.extend(page)
            last = page[-1]
        self.assertEqual(seen, self.ids[::-1])

    def test_paging_with_every_bound_shape_reads_each_row_once(self):
        shapes = ["%d", "CAST(N'%d' AS int)", "%d + 0", "CAST(N'%d' AS bigint) * 1"]
        for shape in shapes:
            seen, last = [], None
            while True:
                where = "" if last is None else " WHERE [id] > " + shape % last
                page = self.ids_of("SELECT TOP (37) [id] FROM [dbo].[t]%s ORDER BY [id]" % where)
                if not page:
                    break
                seen.extend(page)
                last = page[-1]
            self.assertEqual(seen, self.ids, shape)


class CompositeKeysetTest(EngineTest):
    """The snapshot's predicate, exactly as src/snapshot.c builds it:
    (k1 > v1) OR (k1 = v1 AND k2 > v2) OR (k1 = v1 AND k2 = v2 AND k3 > v3),
    each value a literal of the key's kind (CAST(N'..' AS type), 'x', N'x', 0x.., 0/1)."""

    LITERALS = {
        "int": lambda v: "CAST(N'%d' AS int)" % v,
        "nvarchar": lambda v: "N'%s'" % v.replace("'", "''"),
        "varchar": lambda v: "'%s'" % v.replace("'", "''"),
        "datetime2": lambda v: "CAST(N'%s' AS datetime2(7))" % v,
        "binary": lambda v: "0x" + v.hex().upper(),
        "bit": lambda v: "1" if v else "0",
        "decimal": lambda v: "CAST(N'%s' AS decimal(9, 2))" % v,
    }

    def snapshot_where(self, keys, kinds, last):
        ors = []
        for i in range(len(keys)):
            eq = "".join("[%s] = %s AND " % (keys[j], self.LITERALS[kinds[j]](last[j])) for j in range(i))
            ors.append("(%s[%s] > %s)" % (eq, keys[i], self.LITERALS[kinds[i]](last[i])))
        return " WHERE " + " OR ".join(ors)

    def snapshot_all(self, table, cols, keys, kinds, page):
        """Page the whole table the way the extension does; keys are the last columns."""
        self.ok("ALTER DATABASE cdcdb SET ALLOW_SNAPSHOT_ISOLATION ON")
        seen, last = [], None
        select = ", ".join(["[%s]" % c for c in cols] + ["[%s]" % k for k in keys])
        while True:
            where = "" if last is None else self.snapshot_where(keys, kinds, last)
            sql = ("SET TRANSACTION ISOLATION LEVEL SNAPSHOT; BEGIN TRANSACTION; SELECT TOP (%d) %s FROM [dbo].[%s]%s "
                   "ORDER BY %s; COMMIT TRANSACTION; SET TRANSACTION ISOLATION LEVEL READ COMMITTED;"
                   % (page, select, table, where, ", ".join("[%s]" % k for k in keys)))
            rows = self.rows(sql)
            self.assertLessEqual(len(rows), page)
            if not rows:
                return seen
            seen.extend(rows)
            last = rows[-1][len(cols):]

    def test_three_column_key_with_ties(self):
        # few distinct leading values: most page boundaries fall inside a run of ties
        self.ok("CREATE TABLE c3 (a int NOT NULL, b nvarchar(10) NOT NULL, c datetime2(7) NOT NULL, "
                "v int NULL, PRIMARY KEY (a, b, c))")
        vals = []
        for a in (-1, 0, 7):
            for b in ("a", "B", "c'd", "zz"):
                for c in ("2024-01-01 00:00:00.0000000", "2024-01-01 00:00:00.0000001", "2024-02-29 23:59:59.9999999"):
                    vals.append((a, b, c))
        self.ok("INSERT c3 (a, b, c, v) VALUES " + ", ".join(
            "(%d, N'%s', '%s', %s)" % (a, b.replace("'", "''"), c, "NULL" if i % 4 == 0 else str(i))
            for i, (a, b, c) in enumerate(vals)))
        expected = self.rows("SELECT v, a, b, c FROM c3 ORDER BY a, b, c")
        self.assertEqual(len(expected), 36)
        for page in (1, 2, 5, 12, 13, 100):
            got = self.snapshot_all("c3", ["v"], ["a", "b", "c"], ["int", "nvarchar", "datetime2"], page)
            self.assertEqual(got, expected, "page %d" % page)
        # a leading-column bound alone keeps every tie of that value
        self.assertEqual(len(self.rows("SELECT a FROM c3 WHERE a >= CAST(N'0' AS int)")), 24)
        self.assertEqual(len(self.rows("SELECT a FROM c3 WHERE a > 0 - 1 AND a < 7")), 12)

    def test_binary_bit_varchar_and_decimal_keys(self):
        self.ok("CREATE TABLE cb (f bit NOT NULL, b varbinary(4) NOT NULL, s varchar(5) NOT NULL, "
                "d decimal(9, 2) NOT NULL, PRIMARY KEY (f, b, s, d))")
        vals = [(f, b, s, d) for f in (0, 1) for b in (b"", b"\x00", b"\x01\x00", b"\xff")
                for s in ("", "A", "a b") for d in ("-1.50", "0.00", "2.25")]
        rows = {}
        for f, b, s, d in vals:   # binary compares pad with 0x00 and varchar ignores case/trailing blanks
            rows[(f, b.rstrip(b"\0"), s.rstrip().lower(), d)] = (f, b, s, d)
        self.ok("INSERT cb VALUES " + ", ".join("(%d, 0x%s, '%s', %s)" % (f, b.hex(), s, d)
                                               for f, b, s, d in rows.values()))
        expected = self.rows("SELECT f, b, s, d FROM cb ORDER BY f, b, s, d")
        self.assertEqual(len(expected), len(rows))
        for page in (1, 4, 7):
            got = self.snapshot_all("cb", [], ["f", "b", "s", "d"], ["bit", "binary", "varchar", "decimal"], page)
            self.assertEqual(got, expected, "page %d" % page)

    def test_heap_with_nullable_column(self):
        # no clustered key: nothing to seek on, and NULLs never pass a comparison
        self.ok("CREATE TABLE h (k int NULL, v int)")
        self.ok("INSERT h VALUES (NULL, 1), (5, 2), (NULL, 3), (2, 4), (9, 5), (5, 6)")
        self.assertEqual(self.rows("SELECT TOP (2) k, v FROM h WHERE k > CAST(N'2' AS int) ORDER BY k, v"),
                         [(5, 2), (5, 6)])
        self.assertEqual(self.rows("SELECT k FROM h WHERE k >= 2 * 1 ORDER BY k DESC"), [(9,), (5,), (5,), (2,)])
        self.assertEqual(self.rows("SELECT v FROM h WHERE k IS NULL OR k > 8 ORDER BY k, v"), [(1,), (3,), (5,)])


class KeysetSeekCostTest(EngineTest):
    """A chunk positioned by a row-independent bound reads about one chunk of
    rows, not everything before it: count the row versions scan_table looks
    at (storage.visible is called once per key visited)."""

    ROWS = 100_000

    def setUp(self):
        super().setUp()
        self.ok("CREATE TABLE big (id int PRIMARY KEY, v int)")
        self.engine.control("fill_table", {"table": "big", "rows": self.ROWS})
        self.ok("CREATE TABLE big2 (a int NOT NULL, b int NOT NULL, PRIMARY KEY (a, b))")
        self.ok("INSERT big2 SELECT id / 100, id % 100 FROM big")

    def examined(self, sql):
        """(rows, number of stored rows the statement visited)."""
        from standin.engine import query
        seen = [0]
        real = query.visible

        def counting(rv, snap, txn):
            seen[0] += 1
            return real(rv, snap, txn)
        with mock.patch.object(query, "visible", counting):
            rows = self.rows(sql)
        return rows, seen[0]

    def test_each_bound_shape_seeks(self):
        from standin.engine.query import CHUNK
        for bound in ("90000", "CAST(N'90000' AS int)", "89999 + 1", "@k", "CAST(@s AS int)", "@k * 1"):
            sql = ("DECLARE @k int = 90000, @s nvarchar(10) = N'90000'; "
                   "SELECT TOP (10) id FROM big WHERE id > %s ORDER BY id" % bound)
            rows, n = self.examined(sql)
            self.assertEqual([r[0] for r in rows], list(range(90001, 90011)), bound)
            self.assertLessEqual(n, CHUNK, "%s visited %d rows" % (bound, n))
        rows, n = self.examined("EXEC sp_executesql N'SELECT TOP (10) id FROM big WHERE id > @p ORDER BY id', "
                                "N'@p int', @p = 90000")
        self.assertEqual([r[0] for r in rows], list(range(90001, 90011)))
        self.assertLessEqual(n, CHUNK, "sp_executesql parameter visited %d rows" % n)
        # the counter does see a scan that cannot seek (the column is inside an expression)
        rows, n = self.examined("SELECT TOP (10) id FROM big WHERE id + 0 > 90000 ORDER BY id")
        self.assertEqual([r[0] for r in rows], list(range(90001, 90011)))
        self.assertGreaterEqual(n, 90000)

    def test_descending_top_seeks_from_the_upper_bound(self):
        """ORDER BY key DESC reads the clustered index backwards from its
        upper bound (SQL Server's backward range scan): TOP (1) below a bound
        deep in the table, as the worker's window fingerprint asks
        cdc.lsn_time_mapping, visits about one chunk, not every key below it."""
        from standin.engine.query import CHUNK
        for sql, want in (("SELECT TOP (1) id FROM big WHERE id <= 90000 ORDER BY id DESC", [90000]),
                          ("SELECT TOP (3) id FROM big WHERE id < CAST(N'90000' AS int) ORDER BY id DESC",
                           [89999, 89998, 89997]),
                          ("SELECT TOP (2) id FROM big WHERE id <= 90000 AND v IS NOT NULL OR id = 5 "
                           "ORDER BY id DESC", [90000, 89999])):
            rows, n = self.examined(sql)
            self.assertEqual([r[0] for r in rows], want, sql)
            self.assertLessEqual(n, CHUNK, "%s visited %d rows" % (sql, n))
        # both bounds: the scan ends at the lower one, results exact
        rows, n = self.examined("SELECT id FROM big WHERE id > 89990 AND id <= 90000 ORDER BY id DESC")
        self.assertEqual([r[0] for r in rows], list(range(90000, 89990, -1)))
        self.assertLessEqual(n, CHUNK)
        # a key with several columns still sorts (results checked in CompositeKeysetTest)
        rows, n = self.examined("SELECT TOP (1) a FROM big2 WHERE a <= 900 ORDER BY a DESC")
        self.assertEqual(rows, [(900,)])

    def test_composite_bound_seeks(self):
        from standin.engine.query import CHUNK
        rows, n = self.examined("SELECT TOP (5) a, b FROM big2 WHERE ([a] > CAST(N'900' AS int)) OR "
                                "([a] = CAST(N'900' AS int) AND [b] > CAST(N'97' AS int)) ORDER BY a, b")
        self.assertEqual(rows, [(900, 98), (900, 99), (901, 0), (901, 1), (901, 2)])
        self.assertLessEqual(n, CHUNK)

    def test_200_chunks_visit_each_row_about_once(self):
        from standin.engine.query import CHUNK
        total, last, chunks, seen = 0, 0, 0, 0
        while True:
            rows, n = self.examined("SELECT TOP (500) [id], [v] FROM [dbo].[big] WHERE ([id] > CAST(N'%d' AS int)) "
                                    "ORDER BY [id]" % last)
            total += n
            if not rows:
                break
            chunks += 1
            seen += len(rows)
            self.assertEqual(rows[0][0], last + 1)
            last = rows[-1][0]
        self.assertEqual((chunks, seen, last), (200, self.ROWS, self.ROWS))
        # each chunk reads ahead at most one storage chunk; a rescan would visit ~10^7 rows
        self.assertLessEqual(total, chunks * CHUNK + CHUNK)

    def test_descending_top_with_an_upper_bound_seeks_backwards(self):
        """SQL Server reads an index backwards for ORDER BY <key> DESC (a
        backward range scan of the clustered index): TOP (1) ... WHERE key <=
        x ORDER BY key DESC costs a seek, not a pass over every key below x.
        The worker's window fingerprint is this shape over cdc.lsn_time_mapping."""
        from standin.engine.query import CHUNK
        for sql, want in [
            ("SELECT TOP (1) id FROM big WHERE id <= 90000 ORDER BY id DESC", [90000]),
            ("SELECT TOP (3) id FROM big WHERE id < CAST(N'90000' AS int) AND v IS NULL ORDER BY id DESC", None),
            ("SELECT TOP (2) id FROM big WHERE id <= 50000 AND id > 10 ORDER BY id DESC", [50000, 49999]),
            ("SELECT TOP (4) id FROM big ORDER BY id DESC", [100000, 99999, 99998, 99997]),
        ]:
            rows, n = self.examined(sql)
            if want is not None:
                self.assertEqual([r[0] for r in rows], want, sql)
            else:
                self.assertEqual(rows, [])        # fill_table sets every v: no row matches
                continue
            self.assertLessEqual(n, CHUNK, "%s visited %d rows" % (sql, n))
        rows, n = self.examined("SELECT TOP (3) a, b FROM big2 WHERE a <= 900 ORDER BY a DESC, b DESC")
        self.assertEqual(rows, [(900, 99), (900, 98), (900, 97)])
        self.assertLessEqual(n, CHUNK)
        # a lower bound ends the backward scan; the results equal an unpruned read
        self.assertEqual(self.rows("SELECT id FROM big WHERE id <= 20 AND id >= 15 ORDER BY id DESC"),
                         self.rows("SELECT id FROM big WHERE id + 0 <= 20 AND id + 0 >= 15 ORDER BY id DESC"))
        self.assertEqual(self.rows("SELECT TOP (5) a, b FROM big2 WHERE a < 3 ORDER BY a DESC, b DESC"),
                         [(2, 99), (2, 98), (2, 97), (2, 96), (2, 95)])
