"""Catalog views and the connector query shapes (Debezium / Estuary / Redpanda), RPC, controls."""

import time

from .support import EngineTest, ResultSet, ReturnStatus, ReturnValue, RpcParam, materialize, CachedRow
from standin.sqltypes import SqlType


class CatalogTest(EngineTest):
    def setUp(self):
        super().setUp()
        self.ok("CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, amount decimal(18,4), note nvarchar(max))")
        self.ok("EXEC sys.sp_cdc_enable_db")
        self.ok("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL")
        self.capture()
        self.ok("INSERT orders VALUES (1, 1, N'a')")
        self.capture()

    def test_change_tables_column_order_and_captured_columns(self):
        rs = self.ok("SELECT * FROM cdc.change_tables")[0]
        self.assertEqual([c.name for c in rs.columns],
                         ["object_id", "version", "source_object_id", "capture_instance", "start_lsn", "end_lsn",
                          "supports_net_changes", "has_drop_pending", "role_name", "index_name", "filegroup_name",
                          "create_date", "partition_switch"])
        ct_id = rs.rows[0][0]
        self.assertEqual(self.rows("SELECT column_name, column_ordinal, column_type, is_computed FROM cdc.captured_columns "
                                   "WHERE object_id = %d ORDER BY column_ordinal" % ct_id),
                         [("id", 1, "int", False), ("amount", 2, "decimal", False), ("note", 3, "nvarchar", False)])
        self.assertEqual(self.rows("SELECT column_name, index_ordinal FROM cdc.index_columns"), [("id", 1)])
        self.assertEqual(self.rows("SELECT capture_instance FROM cdc.change_tables WHERE source_object_id = "
                                   "OBJECT_ID(N'[dbo].[orders]')"), [("dbo_orders",)])

    def test_estuary_join_listing(self):
        rows = self.rows("SELECT ct.capture_instance, sch.name, tbl.name, ct.start_lsn, ct.create_date, ct.role_name "
                         "FROM cdc.change_tables AS ct JOIN sys.tables AS tbl ON ct.source_object_id = tbl.object_id "
                         "JOIN sys.schemas AS sch ON tbl.schema_id = sch.schema_id")
        self.assertEqual([r[:3] for r in rows], [("dbo_orders", "dbo", "orders")])

    def test_redpanda_table_listing_and_direct_ct(self):
        rows = self.rows("SELECT s.name AS SchemaName, t.name AS TableName FROM sys.tables t INNER JOIN sys.schemas s "
                         "ON t.schema_id = s.schema_id WHERE s.name != 'cdc' ORDER BY s.name, t.name;")
        self.assertEqual(rows, [("dbo", "orders")])
        rows = self.rows("SELECT * FROM cdc.dbo_orders_CT WITH (NOLOCK) WHERE (NULL IS NULL OR [__$start_lsn] > 0x00) "
                         "ORDER BY [__$start_lsn] ASC, [__$command_id] ASC, [__$operation] ASC")
        self.assertEqual(len(rows), 1)

    def test_debezium_shapes(self):
        self.assertIsNotNone(self.scalar("SELECT MAX(start_lsn) FROM cdcdb.cdc.lsn_time_mapping WHERE tran_id <> 0x00"))
        self.assertIsNotNone(self.scalar(
            "SELECT MAX(start_lsn) FROM (SELECT TOP (1 + 1) start_lsn FROM [cdcdb].cdc.lsn_time_mapping WHERE "
            "start_lsn >= 0x00 AND tran_id <> 0x00 ORDER BY start_lsn) as next_lsns"))
        self.assertEqual(self.scalar("select min(start_lsn) from [cdcdb].cdc.change_tables"),
                         self.scalar("SELECT sys.fn_cdc_get_min_lsn(N'dbo_orders')"))
        mn = self.scalar("SELECT sys.fn_cdc_get_min_lsn(N'dbo_orders')").hex()
        mx = self.scalar("SELECT sys.fn_cdc_get_max_lsn()").hex()
        rows = self.rows(
            "SELECT [__$start_lsn], [__$seqval], [__$operation], [__$update_mask], [id], [amount], "
            "TODATETIMEOFFSET([cdcdb].sys.fn_cdc_map_lsn_to_time([__$start_lsn]), DATEPART(TZOFFSET, SYSDATETIMEOFFSET())) "
            "FROM [cdcdb].cdc.[fn_cdc_get_all_changes_dbo_orders](0x{0}, 0x{1}, N'all update old') "
            "WHERE (([__$start_lsn] = 0x{0} AND [__$seqval] = 0x{0} AND [__$operation] > 0) OR "
            "([__$start_lsn] = 0x{0} AND [__$seqval] > 0x{0}) OR ([__$start_lsn] > 0x{0})) AND [__$start_lsn] <= 0x{1} "
            "ORDER BY [__$start_lsn] ASC, [__$seqval] ASC, [__$operation] ASC".format(mn, mx))
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0][6].offset_minutes, 0)
        jobs = self.rows("EXEC sys.sp_cdc_help_jobs")
        self.assertEqual([r[1] for r in jobs], ["capture", "cleanup"])
        self.assertEqual(jobs[0][6], 5)
        self.assertEqual(self.rows("SELECT CASE WHEN dss.[status]=4 THEN 1 ELSE 0 END AS isRunning FROM "
                                   "[cdcdb].sys.dm_server_services dss WHERE dss.[servicename] LIKE "
                                   "N'SQL Server Agent (%';"), [(1,)])
        self.assertEqual(self.scalar("SELECT TOP 1 tran_count FROM sys.dm_cdc_log_scan_sessions ORDER BY session_id DESC"), 1)

    def test_information_schema_and_sys_columns(self):
        rows = self.rows("SELECT COLUMN_NAME, DATA_TYPE, CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, NUMERIC_SCALE, "
                         "DATETIME_PRECISION, IS_NULLABLE, COLLATION_NAME FROM INFORMATION_SCHEMA.COLUMNS WHERE "
                         "TABLE_SCHEMA = N'dbo' AND TABLE_NAME = N'orders' ORDER BY ORDINAL_POSITION")
        self.assertEqual(rows, [("id", "int", None, 10, 0, None, "NO", None),
                                ("amount", "decimal", None, 18, 4, None, "YES", None),
                                ("note", "nvarchar", -1, None, None, None, "YES", "SQL_Latin1_General_CP1_CI_AS")])
        self.assertEqual(self.rows("SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'dbo'"),
                         [("orders",)])
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM sys.types WHERE name = 'nvarchar'"), 1)
        self.assertEqual(self.rows("SELECT c.name FROM sys.indexes i JOIN sys.index_columns ic ON i.object_id = "
                                   "ic.object_id AND i.index_id = ic.index_id JOIN sys.columns c ON ic.object_id = "
                                   "c.object_id AND ic.column_id = c.column_id JOIN sys.tables t ON t.object_id = "
                                   "i.object_id JOIN sys.schemas s ON s.schema_id = t.schema_id WHERE "
                                   "i.is_primary_key = 1 AND t.name = 'orders' AND s.name = 'dbo' ORDER BY ic.key_ordinal"),
                         [("id",)])

    def test_scalar_builtins(self):
        r = self.rows("SELECT @@SPID, @@SERVERNAME, DB_ID(), DB_NAME(DB_ID()), OBJECT_NAME(OBJECT_ID('dbo.orders')), "
                      "OBJECT_SCHEMA_NAME(OBJECT_ID('dbo.orders')), SCHEMA_NAME(1), IS_ROLEMEMBER('db_owner'), "
                      "CONVERT(varchar(30), sys.fn_cdc_get_max_lsn(), 1)")[0]
        self.assertEqual(r[1:8], ("STANDIN", 5, "cdcdb", "orders", "dbo", "dbo", 1))
        self.assertRegex(r[8], r"^0x[0-9A-F]{20}$")
        now = self.rows("SELECT GETDATE(), SYSDATETIME(), SYSUTCDATETIME(), SYSDATETIMEOFFSET()")[0]
        self.assertEqual(len(now), 4)

    def test_rpc_sp_executesql_streams_and_outputs(self):
        mx = self.scalar("SELECT sys.fn_cdc_get_max_lsn()")
        items = materialize(self.engine.execute_rpc(self.s, "sp_executesql", [
            RpcParam("", SqlType("nvarchar", length=-1), "SELECT id FROM dbo.orders WHERE id >= @P0; SET @out = @P0 + 1"),
            RpcParam("", SqlType("nvarchar", length=-1), "@P0 int, @out int OUTPUT"),
            RpcParam("@P0", SqlType("int"), 1),
            RpcParam("@out", SqlType("int"), None, output=True)]))
        sets = [i for i in items if isinstance(i, ResultSet)]
        self.assertEqual(sets[0].rows, [(1,)])
        self.assertIsInstance([i for i in items if isinstance(i, ReturnStatus)][0], ReturnStatus)
        self.assertEqual([i.value for i in items if isinstance(i, ReturnValue)], [2])
        items = materialize(self.engine.execute_rpc(self.s, "sp_executesql", [
            RpcParam("", SqlType("nvarchar", length=-1),
                     "SELECT * FROM cdc.fn_cdc_get_all_changes_dbo_orders(@P0, @P1, N'all')"),
            RpcParam("", SqlType("nvarchar", length=-1), "@P0 varbinary(8000), @P1 varbinary(8000)"),
            RpcParam("@P0", SqlType("varbinary", length=8000), self.scalar("SELECT sys.fn_cdc_get_min_lsn('dbo_orders')")),
            RpcParam("@P1", SqlType("varbinary", length=8000), mx)]))
        self.assertEqual(len([i for i in items if isinstance(i, ResultSet)][0].rows), 1)

    def test_rpc_named_procedure_and_2812(self):
        items = materialize(self.engine.execute_rpc(self.s, "sys.sp_cdc_help_change_data_capture", []))
        self.assertEqual(len(items[0].rows), 1)
        items = materialize(self.engine.execute_rpc(self.s, "dbo.nope", []))
        self.assertEqual(items[0].number, 2812)

    def test_cached_rows_for_plain_projection(self):
        rs = next(iter(self.engine.execute_batch(self.s, "SELECT id, amount FROM orders")))
        row = next(iter(rs.rows))
        self.assertIsInstance(row, CachedRow)
        row.cache[row.key] = b"x"
        rs = next(iter(self.engine.execute_batch(self.s, "SELECT id, amount FROM orders")))
        again = next(iter(rs.rows))
        self.assertEqual(again.cache.get(again.key), b"x")
        self.ok("UPDATE orders SET amount = 2")
        rs = next(iter(self.engine.execute_batch(self.s, "SELECT id, amount FROM orders")))
        self.assertIsNone(next(iter(rs.rows)).cache.get(again.key))   # new row version, new cache

    def test_cancel_stops_stream(self):
        self.ok("CREATE TABLE big (id int PRIMARY KEY)")
        self.engine.control("fill_table", {"table": "big", "rows": 10000})
        rs = next(iter(self.engine.execute_batch(self.s, "SELECT id FROM big")))
        it = iter(rs.rows)
        next(it)
        self.s.cancelled = True
        self.assertLess(len(list(it)), 10000)


class ControlTest(EngineTest):
    def test_fill_table_speed_and_types(self):
        self.ok("CREATE TABLE narrow (id int PRIMARY KEY, v int)")
        t0 = time.time()
        res = self.engine.control("fill_table", {"table": "dbo.narrow", "rows": 200000, "seed": 7})
        self.assertLess(time.time() - t0, 5)
        self.assertEqual(res["total"], 200000)
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM narrow WHERE id > 199990"), 10)
        self.ok("CREATE TABLE wide (id uniqueidentifier PRIMARY KEY, a bit, b tinyint, c bigint, d decimal(9,3), "
                "e money, f real, g float, h date, i time(3), j datetime, k smalldatetime, l datetime2(2), "
                "m datetimeoffset, n char(4), o varchar(10), p nvarchar(max), q varbinary(8), r binary(2), "
                "s text, t ntext, u image, w xml, x rowversion, y int IDENTITY(1,1))")
        self.engine.control("fill_table", {"table": "wide", "rows": 100, "seed": 1})
        a = self.rows("SELECT * FROM wide ORDER BY id")
        self.engine.control("fill_table", {"table": "wide", "rows": 0})
        self.assertEqual(len(a), 100)
        self.assertEqual(len({r[0] for r in a}), 100)
        self.assertEqual(sorted(r[-1] for r in a), list(range(1, 101)))

    def test_fill_table_deterministic(self):
        for name in ("a", "b"):
            self.ok("CREATE TABLE %s (id int PRIMARY KEY, v nvarchar(20), d decimal(10,2))" % name)
            self.engine.control("fill_table", {"table": name, "rows": 50, "seed": 3})
        self.assertEqual(self.rows("SELECT * FROM a"), self.rows("SELECT * FROM b"))

    def test_stats_and_interval(self):
        st = self.engine.control("stats", {})
        self.assertIn("cdcdb", st["databases"])
        self.assertEqual(self.engine.control("set_capture_interval", {"seconds": 0.5})["capture_interval"], 0.5)


class MiscTest(EngineTest):
    def test_convert_default_length_and_implicit_exec(self):
        self.assertEqual(self.scalar("SELECT CONVERT(varchar, 0x0000002A000001F00003, 1)"), "0x0000002A000001F00003")
        self.assertEqual(self.scalar("SELECT CAST('abcdefghijklmnopqrstuvwxyz0123456789' AS varchar)"),
                         "abcdefghijklmnopqrstuvwxyz0123")
        self.assertEqual(self.scalar("DECLARE @c varchar = 'xyz'; SELECT @c"), "x")
        self.ok("EXEC sys.sp_cdc_enable_db")
        self.assertEqual(self.rows("sp_cdc_help_jobs"), [])
        self.error("SELEC 1", 2812)

    def test_scan_sessions_permission_and_change_job(self):
        self.ok("EXEC sys.sp_cdc_enable_db")
        self.ok("CREATE TABLE t (id int PRIMARY KEY)")
        self.ok("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL")
        nobody = self.session("nobody")
        self.error("SELECT * FROM sys.dm_cdc_log_scan_sessions", 297, nobody)
        self.ok("GRANT VIEW DATABASE STATE TO nobody")
        self.ok("SELECT * FROM sys.dm_cdc_log_scan_sessions", nobody)
        self.ok("EXEC sys.sp_cdc_change_job @job_type = N'capture', @maxtrans = 7, @pollinginterval = 1")
        self.assertEqual(self.rows("SELECT maxtrans, pollinginterval FROM msdb.dbo.cdc_jobs WHERE job_type = N'capture'"),
                         [(7, 1)])

    def test_left_join_and_null_concat(self):
        self.ok("CREATE TABLE a (id int PRIMARY KEY); CREATE TABLE b (id int PRIMARY KEY, v int)")
        self.ok("INSERT a VALUES (1), (2); INSERT b VALUES (1, 10)")
        self.assertEqual(self.rows("SELECT a.id, b.v FROM a LEFT JOIN b ON a.id = b.id ORDER BY a.id"),
                         [(1, 10), (2, None)])
        self.assertEqual(self.scalar("SELECT 'x' + NULL"), None)


class ControlFlowTest(EngineTest):
    def test_if_else_waitfor_raiserror_throw(self):
        self.ok("CREATE TABLE t (id int PRIMARY KEY)")
        self.ok("IF OBJECT_ID(N'dbo.t') IS NOT NULL DROP TABLE dbo.t ELSE SELECT 1")
        self.assertIsNone(self.scalar("SELECT OBJECT_ID(N'dbo.t')"))
        self.assertEqual(self.rows("IF OBJECT_ID(N'dbo.t') IS NULL BEGIN SELECT 1; SELECT 2 END ELSE SELECT 3"), [(1,)])
        import time
        t0 = time.monotonic()
        self.ok("WAITFOR DELAY '00:00:00.200'")
        self.assertGreaterEqual(time.monotonic() - t0, 0.19)
        err, items = self.error("RAISERROR('boom %d', 16, 2); SELECT 1", 50000)
        self.assertEqual((err.severity, err.state), (16, 2))
        self.assertEqual(items[-1].rows, [(1,)])
        err, items = self.error("THROW 50001, N'custom', 3; SELECT 1", 50001)
        self.assertEqual(len(items), 1)


class CteWindowTest(EngineTest):
    def test_debezium_get_change_tables(self):
        self.ok("CREATE TABLE dbo.orders (id int PRIMARY KEY, v int)")
        self.ok("EXEC sys.sp_cdc_enable_db")
        self.ok("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL")
        self.ok("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL, "
                "@capture_instance = N'v2'")
        self.capture()
        rows = self.rows(
            "WITH ordered_change_tables AS (SELECT ROW_NUMBER() OVER (PARTITION BY ct.source_object_id, ct.start_lsn "
            "ORDER BY ct.create_date DESC) AS ct_sequence, ct.* FROM [cdcdb].cdc.change_tables AS ct) "
            "SELECT OBJECT_SCHEMA_NAME(source_object_id, DB_ID(N'cdcdb')), OBJECT_NAME(source_object_id, DB_ID(N'cdcdb')), "
            "capture_instance, object_id, start_lsn FROM ordered_change_tables WHERE ct_sequence = 1")
        self.assertEqual(len(rows), 2)            # different start_lsn values: one row each
        self.assertEqual({r[2] for r in rows}, {"dbo_orders", "v2"})
        self.assertEqual(rows[0][:2], ("dbo", "orders"))

    def test_row_number(self):
        self.ok("CREATE TABLE t (id int PRIMARY KEY, g int)")
        self.ok("INSERT t VALUES (1, 1), (2, 1), (3, 2)")
        self.assertEqual(self.rows("SELECT id, ROW_NUMBER() OVER (PARTITION BY g ORDER BY id DESC) AS rn FROM t ORDER BY id"),
                         [(1, 2), (2, 1), (3, 1)])


class TimeZoneTest(EngineTest):
    def test_server_offset(self):
        from standin.engine import Engine
        from standin.results import EngineConfig
        e = Engine(EngineConfig(capture_interval=3600, utc_offset_minutes=-300))
        try:
            s = e.login("sa", "Passw0rd!", "cdcdb")
            from .support import materialize
            rs = [i for i in materialize(e.execute_batch(
                s, "SELECT DATEPART(TZOFFSET, SYSDATETIMEOFFSET()), DATEPART(HOUR, GETDATE()), "
                   "DATEPART(HOUR, SYSUTCDATETIME())")) if isinstance(i, ResultSet)][0]
            off, local_h, utc_h = rs.rows[0]
            self.assertEqual(off, -300)
            self.assertEqual((utc_h - local_h) % 24, 5)
        finally:
            e.shutdown()

    def test_while_break_continue(self):
        self.ok("CREATE TABLE w (id int PRIMARY KEY)")
        self.ok("DECLARE @i int = 0; WHILE @i < 100 BEGIN SET @i += 1; IF @i % 2 = 0 CONTINUE; "
                "IF @i > 50 BREAK; INSERT w VALUES (@i) END")
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM w"), 25)
        self.error("BREAK", 135)
