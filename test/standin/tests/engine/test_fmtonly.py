"""SET FMTONLY ON: every SELECT answers with its column metadata and no rows
(freebcp's queryout asks for the result format this way), and no statement
processes rows; SET FMTONLY OFF brings the rows back.  Session-scoped."""

from .support import EngineTest, ResultSet, RowCount, SqlError


class FmtOnlyTest(EngineTest):
    def setUp(self):
        super().setUp()
        self.ok("CREATE TABLE t (id int PRIMARY KEY, name nvarchar(20) NULL, amount decimal(9, 2))")
        self.ok("INSERT t VALUES (1, N'one', 1.50), (2, NULL, 2.00), (3, N'three', 0)")

    def result_sets(self, sql, session=None):
        return [i for i in self.ok(sql, session) if isinstance(i, ResultSet)]

    @staticmethod
    def shape(rs):
        return [(c.name, c.type, c.nullable) for c in rs.columns]

    def test_select_returns_metadata_without_rows(self):
        full = self.result_sets("SELECT id, name AS n, amount * 2 AS twice FROM t ORDER BY id")[0]
        self.assertEqual(len(full.rows), 3)
        sets = self.result_sets("SET FMTONLY ON; SELECT id, name AS n, amount * 2 AS twice FROM t ORDER BY id; "
                                "SELECT * FROM t WHERE id > 1; SET FMTONLY OFF")
        self.assertEqual(len(sets), 2)
        self.assertEqual(self.shape(sets[0]), self.shape(full))
        self.assertEqual([c.name for c in sets[1].columns], ["id", "name", "amount"])
        self.assertEqual([list(s.rows) for s in sets], [[], []])

    def test_rows_are_not_evaluated(self):
        # a row-level error cannot happen when no row is processed
        sets = self.result_sets("SET FMTONLY ON; SELECT id / 0 AS boom FROM t; SELECT 1 / 0 AS x")
        self.assertEqual([[c.name for c in s.columns] for s in sets], [["boom"], ["x"]])
        self.assertEqual([list(s.rows) for s in sets], [[], []])

    def test_compile_errors_still_reported(self):
        self.ok("SET FMTONLY ON")
        self.error("SELECT nosuch FROM t", 207)
        self.error("SELECT id FROM nosuch", 208)

    def test_off_brings_rows_back_in_the_same_batch(self):
        # the shape freebcp sends: metadata query, then the real one
        sets = self.result_sets("SET FMTONLY ON; SELECT id FROM t; SET FMTONLY OFF; SELECT id FROM t ORDER BY id")
        self.assertEqual([list(s.rows) for s in sets], [[], [(1,), (2,), (3,)]])
        self.assertEqual(self.rows("SELECT COUNT(*) FROM t"), [(3,)])

    def test_option_lasts_for_the_session_only(self):
        other = self.session()
        self.ok("SET FMTONLY ON")
        self.assertEqual(list(self.result_sets("SELECT id FROM t")[0].rows), [])
        self.assertEqual(self.rows("SELECT id FROM t ORDER BY id", other), [(1,), (2,), (3,)])
        self.assertEqual(list(self.result_sets("EXEC sp_executesql N'SELECT id FROM t WHERE id > @p', "
                                               "N'@p int', @p = 0")[0].rows), [])
        self.ok("SET FMTONLY OFF")
        self.assertEqual(self.rows("SELECT id FROM t ORDER BY id"), [(1,), (2,), (3,)])

    def test_dml_changes_nothing(self):
        items = self.ok("SET FMTONLY ON; INSERT t VALUES (4, N'four', 4); UPDATE t SET name = N'x'; "
                        "DELETE FROM t WHERE id = 1; SET FMTONLY OFF")
        self.assertFalse([i for i in items if isinstance(i, (RowCount, SqlError))], items)
        self.assertEqual(self.rows("SELECT id, name FROM t ORDER BY id"), [(1, "one"), (2, None), (3, "three")])
