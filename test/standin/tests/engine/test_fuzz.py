"""Mutated statements (tokens dropped, duplicated, replaced, swapped) must end
in SQL Server errors or results, never in an engine exception: an exception
reaches a client as a 'stand-in internal error' and hides what was tested."""

import random

from .support import EngineTest, SqlError, materialize
from standin.engine.lexer import tokenize

CORPUS = [
    "SELECT id, a * 2 + 1, s + N'y', CAST(d AS date), CONVERT(varchar(30), b, 1) FROM t WHERE id > 0 "
    "AND s LIKE N'x%' ORDER BY id DESC",
    "SELECT COUNT(*), MAX(a), MIN(s) FROM t GROUP BY id HAVING COUNT(*) > 0",
    "UPDATE t SET a = a + 1, s = UPPER(s) WHERE id IN (1, 2)",
    "DELETE FROM t WHERE id BETWEEN 5 AND 9",
    "INSERT INTO t (id, s) VALUES (3, N'z')",
    "SELECT * FROM cdc.fn_cdc_get_all_changes_dbo_t(sys.fn_cdc_get_min_lsn(N'dbo_t'), sys.fn_cdc_get_max_lsn(), N'all')",
    "DECLARE @x int = 5; SELECT CASE WHEN @x > 1 THEN 'a' ELSE 'b' END, ISNULL(NULL, @x), COALESCE(s, N'q') FROM t",
    "SELECT t.id, x.id FROM t JOIN t AS x ON t.id = x.id LEFT JOIN sys.tables st ON st.object_id = t.id",
    "WITH c AS (SELECT id, ROW_NUMBER() OVER (ORDER BY id) AS rn FROM t) SELECT * FROM c WHERE rn = 1",
    "BEGIN TRAN; UPDATE t SET h = '/2/' WHERE id = 1; SELECT [h].ToString() FROM t; ROLLBACK",
    "SELECT TOP (1) * FROM (SELECT id FROM t) AS q ORDER BY 1",
    "EXEC sys.sp_cdc_help_change_data_capture @source_schema = N'dbo', @source_name = N't'",
    "SELECT DATEPART(TZOFFSET, SYSDATETIMEOFFSET()), SUBSTRING(s, 1, 2), LEN(s), DATALENGTH(b) FROM t",
    "SELECT TOP (10) start_lsn FROM cdc.lsn_time_mapping WHERE start_lsn > 0x00 AND tran_id <> 0x00 ORDER BY start_lsn",
]
REPLACEMENTS = ["NULL", "0", "'x'", "N'y'", "0x00", "1.5", "(", ")", ",", "*", "@v", "id", "''", "-", "AND"]


class FuzzTest(EngineTest):
    def test_mutations_never_raise(self):
        for q in ["CREATE TABLE t (id int PRIMARY KEY, a decimal(10,2), s nvarchar(20), d datetime2, "
                  "g uniqueidentifier, b varbinary(10), h hierarchyid)",
                  "INSERT t VALUES (1, 1.5, N'x', '2024-01-01', NEWID(), 0x01, '/1/'), (2, NULL, NULL, NULL, NULL, NULL, NULL)",
                  "EXEC sys.sp_cdc_enable_db",
                  "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL"]:
            self.ok(q)
        self.capture()
        rng = random.Random(20261129)
        failures = []
        for _ in range(4000):
            toks = [t.text for t in tokenize(rng.choice(CORPUS))[:-1]]
            for _ in range(rng.randint(1, 3)):
                i = rng.randrange(len(toks))
                r = rng.random()
                if r < 0.3 and len(toks) > 1:
                    del toks[i]
                elif r < 0.6:
                    toks.insert(i, rng.choice(toks))
                elif r < 0.8:
                    toks[i] = rng.choice(REPLACEMENTS)
                else:
                    j = rng.randrange(len(toks))
                    toks[i], toks[j] = toks[j], toks[i]
            sql = " ".join(toks)
            try:
                materialize(self.engine.execute_batch(self.s, sql))
            except SqlError:
                pass
            except Exception as exc:             # an engine bug
                failures.append((sql, repr(exc)))
            if self.s.txn is not None:
                self.run_sql("ROLLBACK")
        self.assertEqual(failures[:5], [])
