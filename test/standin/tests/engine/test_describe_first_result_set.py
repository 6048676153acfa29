"""sys.sp_describe_first_result_set: the first result set's columns by static
analysis (parse + bind), no row processed; a batch that does not parse or
bind is an error (docs/relational-databases/system-stored-procedures/
sp-describe-first-result-set-transact-sql.md)."""

from .support import EngineTest, ResultSet


class DescribeFirstResultSetTest(EngineTest):
    def setUp(self):
        super().setUp()
        self.ok("CREATE TABLE t (id int PRIMARY KEY, name nvarchar(20) NULL, amount decimal(9, 2))")
        self.ok("INSERT t VALUES (1, N'one', 1.50), (2, NULL, 0)")

    def describe(self, tsql):
        sets = [i for i in self.ok("EXEC sys.sp_describe_first_result_set @tsql = N'%s'"
                                   % tsql.replace("'", "''")) if isinstance(i, ResultSet)]
        self.assertEqual(len(sets), 1)
        self.assertEqual([c.name for c in sets[0].columns][:9],
                         ["is_hidden", "column_ordinal", "name", "is_nullable", "system_type_id",
                          "system_type_name", "max_length", "precision", "scale"])
        return list(sets[0].rows)

    def test_columns_of_the_first_select(self):
        self.assertEqual(self.describe("SELECT id, name AS n, amount FROM t WHERE id / 0 = 1"),
                         [(False, 1, "id", False, 56, "int", 4, 10, 0),
                          (False, 2, "n", True, 231, "nvarchar(20)", 40, 0, 0),
                          (False, 3, "amount", True, 106, "decimal(9,2)", 5, 9, 2)])

    def test_batch_without_result_is_empty(self):
        self.assertEqual(self.describe("UPDATE t SET name = N'x'"), [])
        # nothing ran
        self.assertEqual(self.rows("SELECT COUNT(*) FROM t WHERE name = N'x'"), [(0,)])

    def test_bind_and_syntax_errors(self):
        self.error("EXEC sys.sp_describe_first_result_set @tsql = N'SELECT nosuch FROM t'", 207)
        self.error("EXEC sys.sp_describe_first_result_set @tsql = N'SELECT id FROM nosuch'", 208)
        self.error("EXEC sys.sp_describe_first_result_set @tsql = N'SELECT id FROM t WHERE (id = 1'", 102)
        self.error("EXEC sys.sp_describe_first_result_set", 201)

    def test_positional_argument_and_no_rows_read(self):
        sets = [i for i in self.ok("EXEC sp_describe_first_result_set N'SELECT TOP (0) 1 AS x FROM t WHERE (amount > 1)'")
                if isinstance(i, ResultSet)]
        self.assertEqual([r[2] for r in sets[0].rows], ["x"])
        self.assertEqual(self.rows("SELECT COUNT(*) FROM t"), [(2,)])
