#!/usr/bin/python3
"""What the stand-in pays for the statements of one streaming window with N
captured tables (issue 16 point 5): the engine runs in this process (no
sockets, no TDS encoding), each statement ten times, and prints the mean.

  bench/profile_window_batches.py [--tables 200]

Statements as the worker sends them: the poll (src/capture_instance_switch.c),
the window end's three parts (src/cdc_window.c: the cdc.lsn_time_mapping
read, one EXISTS probe per table, one sys.fn_cdc_get_min_lsn per table), and
the change batch's fingerprint (src/source_identity.c)."""

import argparse
import os
import sys
import time

STANDIN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "test", "standin")
sys.path.insert(0, STANDIN)

from standin.engine import Engine                                 # noqa: E402
from standin.results import EngineConfig, ResultSet, SqlError    # noqa: E402

LO, HI = "0x00000000000000000000", "0xFFFFFFFFFFFFFFFFFFFF"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=int, default=200)
    a = ap.parse_args()
    eng = Engine(EngineConfig(databases=["cdcdb"], logins={"sa": "Passw0rd!"}, capture_interval=3600,
                              maxtrans=10 ** 7))
    s = eng.login("sa", "Passw0rd!", "cdcdb", "profile", "localhost")

    def run(sql):
        for item in eng.execute_batch(s, sql):
            if isinstance(item, SqlError):
                raise RuntimeError("%s: %s" % (sql[:200], item))
            if isinstance(item, ResultSet):
                list(item.rows)

    run("EXEC sys.sp_cdc_enable_db")
    cis = []
    for i in range(a.tables):
        run("CREATE TABLE dbo.t%03d (id int NOT NULL PRIMARY KEY, v int)" % i)
        run("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't%03d', @role_name = NULL" % i)
        cis.append("dbo_t%03d" % i)
    eng.control("capture_now", {})
    for i in range(min(5, a.tables)):
        run("INSERT INTO dbo.t%03d VALUES (1, 1)" % i)
    eng.control("capture_now", {})
    statements = (
        ("poll", "SELECT name, is_cdc_enabled FROM sys.databases WHERE database_id = DB_ID(); IF EXISTS "
                 "(SELECT 1 FROM sys.databases WHERE database_id = DB_ID() AND is_cdc_enabled = 1) "
                 "EXEC sys.sp_cdc_help_change_data_capture; SELECT sys.fn_cdc_get_max_lsn()"),
        ("window end: lsn_time_mapping", "SELECT TOP (1000) start_lsn, tran_end_time FROM cdc.lsn_time_mapping "
                                         "WHERE start_lsn > %s AND start_lsn <= %s AND tran_id <> 0x00 "
                                         "ORDER BY start_lsn" % (LO, HI)),
        ("window end: EXISTS probes", "SELECT " + ", ".join(
            "CASE WHEN EXISTS (SELECT 1 FROM cdc.[%s_CT] WHERE [__$start_lsn] > %s AND [__$start_lsn] <= %s) "
            "THEN 1 ELSE 0 END" % (c, LO, HI) for c in cis)),
        ("low watermarks", "SELECT " + ", ".join("sys.fn_cdc_get_min_lsn(N'%s')" % c for c in cis)),
        ("fingerprint", "SELECT TOP (1) start_lsn, tran_id, tran_end_time FROM cdc.lsn_time_mapping "
                        "WHERE start_lsn <= %s AND tran_id <> 0x00 ORDER BY start_lsn DESC" % HI),
    )
    print("%d captured tables" % a.tables)
    for label, sql in statements:
        run(sql)
        t0 = time.time()
        for _ in range(10):
            run(sql)
        print("%-30s %8.2f ms  (%d characters)" % (label, (time.time() - t0) * 100, len(sql)))
    eng.shutdown()


if __name__ == "__main__":
    main()
