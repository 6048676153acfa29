"""End-to-end CDC scenarios through FreeTDS db-lib (TDS 7.4) against a real
`run-standin` process: the worker's exact query shapes, capture latency,
errors 313/208/229/3952 as a client sees them, cleanup via the control port.

With MSSQL_CDC_TEST_SERVER='host=…;port=…;user=…;password=…;database=…'
(a sysadmin login and a fresh scratch database) the same scenarios run
against that SQL Server instead; the one that needs the stand-in's control
port is skipped there."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
STANDIN_DIR = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, STANDIN_DIR)
sys.path.insert(0, os.path.join(STANDIN_DIR, "tests", "protocol"))

import harness                                   # noqa: E402  (db-lib dump client, freetds.conf)
from standin.control import call                 # noqa: E402


class _Address:
    def __init__(self, host, port):
        self.address = "%s:%d" % (host, port)


def _real_server():
    """MSSQL_CDC_TEST_SERVER parsed into a dict, or None (use the stand-in)."""
    spec = os.environ.get("MSSQL_CDC_TEST_SERVER")
    if not spec:
        return None
    conf = dict(part.split("=", 1) for part in spec.split(";") if part)
    missing = {"host", "port", "user", "password", "database"} - set(conf)
    if missing:
        raise RuntimeError("MSSQL_CDC_TEST_SERVER lacks " + ", ".join(sorted(missing)))
    return conf


REAL = _real_server()
NOBODY_PASSWORD = "N0body-Pw!"   # a login without rights, for 229


class FreeTdsCdcTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.proc = None
        if REAL:
            cls.addr = _Address(REAL["host"], int(REAL["port"]))
            cls.db, cls.user, cls.password = REAL["database"], REAL["user"], REAL["password"]
        else:
            cls.proc = subprocess.Popen(
                [sys.executable, os.path.join(STANDIN_DIR, "run-standin"), "--port", "0",
                 "--capture-interval", "0.05", "--login", "sa:Passw0rd!"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            line = cls.proc.stdout.readline()
            m = re.match(r"standin ready port=(\d+) control=(\d+)", line)
            if not m:
                cls.proc.kill()
                raise RuntimeError("stand-in did not start: %r %s" % (line, cls.proc.stderr.read()))
            cls.port, cls.control = int(m.group(1)), int(m.group(2))
            cls.addr = _Address("127.0.0.1", cls.port)
            cls.db, cls.user, cls.password = "cdcdb", "sa", "Passw0rd!"
        # the same T-SQL sets up both: a login without rights, then the CDC table
        cls.sql("CREATE LOGIN mssql_cdc_nobody WITH PASSWORD = '%s'" % NOBODY_PASSWORD)
        cls.sql("CREATE USER mssql_cdc_nobody FOR LOGIN mssql_cdc_nobody")
        cls.sql("CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, amount decimal(18,4) NOT NULL, "
                "note nvarchar(max) NULL)")
        cls.sql("EXEC sys.sp_cdc_enable_db")
        cls.sql("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL")

    @classmethod
    def tearDownClass(cls):
        if cls.proc is None:
            return
        try:
            call(cls.control, "shutdown")
        except OSError:
            pass
        try:
            cls.proc.wait(10)
        except subprocess.TimeoutExpired:
            cls.proc.kill()
        cls.proc.stdout.close()
        cls.proc.stderr.close()

    @classmethod
    def sql(cls, *batches, user=None, password=None):
        rc, out, err = harness.run_dblib(cls.addr, *batches, user=user or cls.user,
                                         password=password or cls.password, options=("-d", cls.db))
        return rc, out, err

    def results(self, *batches, **kw):
        rc, out, err = self.sql(*batches, **kw)
        self.assertNotIn("MSG 102", out)
        return harness.parse_dump(out), out

    def wait_max_lsn_past(self, lsn_hex, transactional=False):
        """Poll until the capture job published past lsn_hex (with
        transactional=True: a real transaction, not an idle dummy row)."""
        query = ("SELECT MAX(start_lsn) FROM cdc.lsn_time_mapping WHERE tran_id <> 0x00" if transactional
                 else "SELECT sys.fn_cdc_get_max_lsn()")
        deadline = time.time() + 10
        while time.time() < deadline:
            res, _ = self.results(query)
            v = res[0]["rows"][0][0]
            if v != "NULL" and v > "b:" + lsn_hex:
                return v[2:]
            time.sleep(0.05)
        self.fail("max LSN did not move")

    def test_worker_query_shapes(self):
        res, out = self.results("SELECT is_cdc_enabled, snapshot_isolation_state FROM sys.databases "
                                "WHERE database_id = DB_ID()")
        self.assertEqual(res[0]["rows"], [["i:1", "i:0"]])
        res, _ = self.results("EXEC sys.sp_cdc_help_change_data_capture @source_schema = N'dbo', @source_name = N'orders'")
        self.assertEqual(res[0]["rows"][0][2], "s:" + "dbo_orders".encode().hex())
        res, _ = self.results("SELECT COLUMN_NAME, DATA_TYPE, CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, NUMERIC_SCALE, "
                              "DATETIME_PRECISION, IS_NULLABLE FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA = N'dbo' "
                              "AND TABLE_NAME = N'orders' ORDER BY ORDINAL_POSITION")
        self.assertEqual([r[0] for r in res[0]["rows"]], ["s:" + n.encode().hex() for n in ("id", "amount", "note")])
        self.assertEqual(res[0]["rows"][2][2], "i:-1")
        res, _ = self.results("EXEC sp_pkeys @table_name = N'orders', @table_owner = N'dbo'")
        self.assertEqual(res[0]["rows"][0][3], "s:" + b"id".hex())

    def test_changes_flow_through_capture(self):
        res, _ = self.results("SELECT sys.fn_cdc_get_max_lsn()")
        before = res[0]["rows"][0][0]
        base = "00" * 10 if before == "NULL" else before[2:]
        self.sql("BEGIN TRANSACTION; INSERT INTO dbo.orders VALUES (1, 10.5, N'x'); "
                 "UPDATE dbo.orders SET amount = 11 WHERE id = 1; COMMIT TRANSACTION")
        to = self.wait_max_lsn_past(base, transactional=True)
        res, _ = self.results("SELECT sys.fn_cdc_get_min_lsn(N'dbo_orders')")
        frm = res[0]["rows"][0][0][2:]
        res, out = self.results(
            "SELECT __$start_lsn, __$seqval, __$operation, __$update_mask, [id], [amount], "
            "sys.fn_cdc_map_lsn_to_time(__$start_lsn) FROM cdc.[fn_cdc_get_all_changes_dbo_orders]"
            "(0x%s, 0x%s, N'all update old') ORDER BY __$start_lsn, __$seqval, __$operation" % (frm, to))
        rows = [r for r in res[0]["rows"] if r[4] == "i:1"]
        self.assertEqual([r[2] for r in rows], ["i:2", "i:3", "i:4"])
        self.assertEqual(rows[2][5], "n:11.0000")
        self.assertTrue(rows[0][6].startswith("dtm:"))
        res, _ = self.results("SELECT TOP (500) start_lsn, tran_end_time FROM cdc.lsn_time_mapping WHERE start_lsn > 0x%s "
                              "AND start_lsn <= 0x%s AND tran_id <> 0x00 ORDER BY start_lsn" % (base, to))
        self.assertEqual(len(res[0]["rows"]), 1)

    def test_errors_seen_by_client(self):
        _, out, _ = self.sql("SELECT * FROM cdc.fn_cdc_get_all_changes_dbo_orders(NULL, NULL, N'all')")
        self.assertIn("MSG 313 16 3", out)
        _, out, _ = self.sql("SELECT * FROM cdc.fn_cdc_get_all_changes_nope(0x00, 0x00, N'all')")
        self.assertIn("MSG 208 16 1", out)
        _, out, _ = self.sql("SET TRANSACTION ISOLATION LEVEL SNAPSHOT; BEGIN TRANSACTION; "
                             "SELECT TOP (10) [id] FROM [dbo].[orders] ORDER BY [id]; COMMIT TRANSACTION")
        self.assertIn("MSG 3952 16 1", out)
        _, out, _ = self.sql("SELECT * FROM cdc.fn_cdc_get_all_changes_dbo_orders(0x00, 0x00, N'all')",
                             user="mssql_cdc_nobody", password=NOBODY_PASSWORD)
        self.assertIn("MSG 229 14 5", out)
        _, out, _ = self.sql("TRUNCATE TABLE dbo.orders")
        self.assertIn("MSG 4711 16 1", out)

    @unittest.skipIf(REAL, "uses the stand-in's control port")
    def test_snapshot_select_and_cleanup_control(self):
        self.sql("ALTER DATABASE [%s] SET ALLOW_SNAPSHOT_ISOLATION ON" % self.db)
        self.sql("INSERT INTO dbo.orders VALUES (100, 1, NULL), (101, 2, NULL)")
        res, _ = self.results("SET TRANSACTION ISOLATION LEVEL SNAPSHOT; BEGIN TRANSACTION; SELECT sys.fn_cdc_get_max_lsn(); "
                              "SELECT TOP (10000) [id], [amount] FROM [dbo].[orders] WHERE [id] > 99 ORDER BY [id]; "
                              "COMMIT TRANSACTION;")
        self.assertEqual([r[0] for r in res[1]["rows"]], ["i:100", "i:101"])
        self.sql("ALTER DATABASE [%s] SET ALLOW_SNAPSHOT_ISOLATION OFF" % self.db)
        res, _ = self.results("SELECT sys.fn_cdc_get_max_lsn()")
        self.wait_max_lsn_past(res[0]["rows"][0][0][2:])
        reply = call(self.control, "cleanup", capture_instance="dbo_orders")
        self.assertTrue(reply.get("ok", True), reply)
        res, _ = self.results("SELECT sys.fn_cdc_get_min_lsn(N'dbo_orders')")
        self.assertNotEqual(res[0]["rows"][0][0], "b:" + "00" * 10)


if __name__ == "__main__":
    unittest.main()
