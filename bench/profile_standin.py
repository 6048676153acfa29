#!/usr/bin/python3
"""Where the stand-in's CPU goes for the query shapes mssql_cdc sends:
the engine and the TDS row encoder run in this process (no sockets), under
cProfile, so the figures are the stand-in's own cost per row.

  bench/profile_standin.py [--rows N] [--top 15]

Shapes: the snapshot's keyset chunk (SELECT TOP (n) ... WHERE (id > last)
ORDER BY id, src/snapshot.c) and the change query over a window of 1,000
source transactions of 10 rows (src/cdc_window.c) with the window's
fingerprint (src/source_identity.c)."""

import argparse
import cProfile
import io
import itertools
import os
import pstats
import sys
import time

STANDIN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "test", "standin")
sys.path.insert(0, STANDIN)

from standin.engine import Engine                                 # noqa: E402
from standin.results import EngineConfig, ResultSet, SqlError    # noqa: E402
from standin.tds.encode import row_encoder                        # noqa: E402

COLS = "id, big, name, ts, amount"
ROW_CHUNK = 256          # rows per encode_rows call, as tds/response.py sends them


def serve(engine, session, sql):
    """Run a batch and encode every row as the protocol layer would; returns rows."""
    n = 0
    for item in engine.execute_batch(session, sql):
        if isinstance(item, SqlError):
            raise RuntimeError("%s: %s" % (sql[:200], item))
        if isinstance(item, ResultSet):
            enc = row_encoder(item.columns)
            it = iter(item.rows)
            while True:
                chunk = list(itertools.islice(it, ROW_CHUNK))
                if not chunk:
                    break
                enc.encode_rows(chunk)
                n += len(chunk)
    return n


def measure(label, fn, top):
    prof = cProfile.Profile()
    t0 = time.time()
    prof.enable()
    rows = fn()
    prof.disable()
    secs = time.time() - t0
    print("== %s: %d rows in %.2f s under cProfile (%.0f rows/s)" % (label, rows, secs, rows / secs))
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:6000])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    eng = Engine(EngineConfig(databases=["cdcdb"], logins={"sa": "Passw0rd!"}, capture_interval=3600,
                              maxtrans=10 ** 7))
    s = eng.login("sa", "Passw0rd!", "cdcdb", "profile", "localhost")
    for t in ("narrow", "changes"):
        serve(eng, s, "CREATE TABLE dbo.%s (id int NOT NULL PRIMARY KEY, big bigint, name nvarchar(20), "
                      "ts datetime2, amount decimal(18,4))" % t)
    eng.control("fill_table", {"table": "dbo.narrow", "rows": a.rows})
    serve(eng, s, "EXEC sys.sp_cdc_enable_db")
    serve(eng, s, "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'changes', "
                  "@role_name = NULL")
    eng.control("capture_now", {})

    def chunks():
        last, total = 0, 0
        while True:
            n = serve(eng, s, "BEGIN TRANSACTION; SELECT TOP (10000) %s, id FROM dbo.narrow%s ORDER BY id; "
                              "COMMIT TRANSACTION;" % (COLS, "" if last == 0 else " WHERE (id > %d)" % last))
            total += n
            last += n
            if n < 10000:
                return total
    measure("keyset chunks of 10,000 (snapshot)", chunks, a.top)

    t0 = time.time()
    serve(eng, s, """DECLARE @i int = 0
WHILE @i < %d
BEGIN
  BEGIN TRANSACTION
  INSERT INTO dbo.changes (%s) SELECT %s FROM dbo.narrow WHERE id > @i * 10 AND id <= (@i + 1) * 10
  COMMIT TRANSACTION
  SET @i = @i + 1
END""" % (a.rows // 10, COLS, COLS))
    print("== backlog: %d transactions of 10 rows written in %.1f s" % (a.rows // 10, time.time() - t0))
    eng.control("capture_now", {})
    lsns = [r for r in eng.execute_batch(s, "SELECT start_lsn FROM cdc.lsn_time_mapping WHERE tran_id <> 0x00 "
                                            "ORDER BY start_lsn") if isinstance(r, ResultSet)][0]
    bounds = [row[0] if isinstance(row, tuple) else row.values[0] for row in lsns.rows]

    def windows():
        total = 0
        for i in range(0, len(bounds), 1000):
            lo, hi = bounds[i], bounds[min(i + 999, len(bounds) - 1)]
            # the window end, chosen as cdc_choose_window_end does
            serve(eng, s, "SELECT TOP (1000) start_lsn, tran_end_time FROM cdc.lsn_time_mapping "
                          "WHERE start_lsn > 0x%s AND start_lsn <= 0x%s AND tran_id <> 0x00 ORDER BY start_lsn"
                          % (bounds[max(i - 1, 0)].hex(), bounds[-1].hex()))
            total += serve(eng, s, "SELECT __$start_lsn, __$seqval, __$operation, __$update_mask, "
                                   "sys.fn_cdc_map_lsn_to_time(__$start_lsn), %s "
                                   "FROM cdc.fn_cdc_get_all_changes_dbo_changes(0x%s, 0x%s, N'all update old') "
                                   "ORDER BY __$start_lsn, __$seqval, __$operation"
                                   % (COLS, lo.hex(), hi.hex()))
            # the window's fingerprint, the change batch's last statement (src/source_identity.c)
            serve(eng, s, "SELECT TOP (1) start_lsn, tran_id, tran_end_time FROM cdc.lsn_time_mapping "
                          "WHERE start_lsn <= 0x%s AND tran_id <> 0x00 ORDER BY start_lsn DESC" % hi.hex())
        return total
    measure("change query, windows of 1,000 transactions (streaming)", windows, a.top)
    eng.shutdown()


if __name__ == "__main__":
    main()
