"""Keyset paging (the worker's snapshot shape) on composite, uuid, date and string keys,
and that it reads every row exactly once while other sessions write."""

import random
import uuid

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
