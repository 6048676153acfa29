#!/usr/bin/python3
"""mssql_cdc side by side with tds_fdw, the freebcp→COPY pipeline and the
stand-in's raw serve rate, on the same rows.  Run through bench/run (which
builds and installs the extension first); run directly as the `postgres`
user against an already installed extension.  See bench/README.md."""

import argparse
import datetime
import os
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchlib import phases as P            # noqa: E402
from benchlib import report as R            # noqa: E402
from benchlib import rtt as RTT             # noqa: E402
from benchlib import rtt_parallel as RTTP    # noqa: E402
from benchlib import tables as TB           # noqa: E402
from benchlib.contenders import RawServe    # noqa: E402
from benchlib.servers import SA_PASSWORD, Postgres, StandIn   # noqa: E402

POLL_MS = 100
CAPTURE_INTERVAL = 0.05     # the stand-in's capture job; SQL Server's default is 5 s
CHUNK_ROWS = 10000

# the same cluster (so the same settings) serves every contender
PG_SETTINGS = {
    "shared_preload_libraries": "'mssql_cdc'",
    "mssql_cdc.poll_interval": "'%dms'" % POLL_MS,
    "mssql_cdc.snapshot_chunk_rows": str(CHUNK_ROWS),
    "shared_buffers": "'512MB'",
    "max_wal_size": "'8GB'",
    "checkpoint_timeout": "'30min'",
    "wal_level": "replica",
    "synchronous_commit": "on",
    "fsync": "on",
}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows per table and changes per backlog")
    ap.add_argument("--only", choices=("snapshot", "streaming", "latency", "tls", "rtt"), action="append",
                    help="run only this phase (repeatable)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, every path exercised, no claims")
    ap.add_argument("--latency-seconds", type=float, default=30, help="length of the steady insert stream")
    ap.add_argument("--large-txn-rows", type=int, default=100_000, help="rows per source transaction, large backlog")
    ap.add_argument("--small-txn-rows", type=int, default=10, help="rows per source transaction, small backlog")
    ap.add_argument("--poll-ms", type=int, default=POLL_MS, help="mssql_cdc.poll_interval (default %d)" % POLL_MS)
    ap.add_argument("--table", choices=("narrow", "wide"), action="append",
                    help="snapshot only this table (repeatable; default both)")
    ap.add_argument("--chunk-rows", type=int, default=CHUNK_ROWS,
                    help="mssql_cdc.snapshot_chunk_rows (default %d, the extension's default)" % CHUNK_ROWS)
    ap.add_argument("--rtt-ms", metavar="LIST", type=RTT.parse_list, default=None,
                    help="simulated network round trips (ms, comma separated) of the rtt phase: snapshot and "
                         "streaming next to freebcp→COPY at each (default 0,1,10; --smoke: 0,10)")
    ap.add_argument("--rtt-tables", type=int, default=None,
                    help="tables of the rtt phase's many-tables server, 5 of them busy (default 200; --smoke: 20)")
    ap.add_argument("--rtt-rows", type=int, default=200_000,
                    help="size of the rtt phase's many-tables backlog (changes over the 5 busy tables) and of each "
                         "table of its 4-table copy (default 200000, at most --rows; the single-table snapshot and "
                         "streaming of the phase use --rows)")
    ap.add_argument("--rtt-tables-only", action="store_true",
                    help="the rtt phase runs only its 5-vs-many-tables streaming (no single-table snapshot and "
                         "streaming, no 4-table copy)")
    ap.add_argument("--rtt-parallel-only", action="store_true",
                    help="the rtt phase runs only its 4-table initial copy, parallel vs one at a time")
    ap.add_argument("--rtt-snapshot-only", action="store_true",
                    help="the rtt phase runs only its single-table snapshot next to freebcp→COPY (no streaming, "
                         "no many-tables streaming, no 4-table copy)")
    ap.add_argument("--rtt-perf", action="store_true",
                    help="perf record -g the worker during each many-tables run (workdir/perf-<server>.data)")
    ap.add_argument("--no-mirror", dest="mirror", action="store_false",
                    help="leave out the mirror contenders (doc/mirror.md) of the snapshot (narrow table) and "
                         "streaming (small transactions) phases")
    ap.add_argument("--tds-log", action="store_true",
                    help="keep the stand-in's statement log (workdir/tds.log): what each contender sent")
    ap.add_argument("--standin-gc", choices=("freeze", "default"), default="freeze",
                    help="the stand-in's garbage collector (run-standin --gc, test/standin/standin/heap.py): "
                         "freeze what survives a full collection (default), or CPython's default, which walks "
                         "everything earlier phases stored at every full collection")
    ap.add_argument("--out", help="report path (.md; a .json is written next to it)")
    ap.add_argument("--workdir", help="scratch directory (default: a new temporary one, removed on success)")
    a = ap.parse_args()
    if a.smoke:
        a.rows = min(a.rows, 2000)
        a.large_txn_rows = min(a.large_txn_rows, 1000)
        a.latency_seconds = min(a.latency_seconds, 3)
    if a.rtt_ms is None:
        a.rtt_ms = [0, 10] if a.smoke else [0, 1, 10]
    a.rtt_rows = min(a.rtt_rows, a.rows)
    if a.rtt_tables is None:
        a.rtt_tables = 20 if a.smoke else 200
    if a.rtt_tables <= RTT.BUSY_TABLES:
        ap.error("--rtt-tables must be more than %d (the busy tables)" % RTT.BUSY_TABLES)
    # tls and rtt last: they add the workers of more foreign servers (rtt
    # pauses the others first)
    a.phases = a.only or ["snapshot", "streaming", "latency", "tls", "rtt"]
    if a.mirror:
        # where each contender's PostgreSQL time goes (track all: the
        # worker's SPI statements are counted whatever their nesting level)
        PG_SETTINGS["shared_preload_libraries"] = "'mssql_cdc,pg_stat_statements'"
        PG_SETTINGS["pg_stat_statements.track"] = "all"
    PG_SETTINGS["mssql_cdc.poll_interval"] = "'%dms'" % a.poll_ms
    PG_SETTINGS["mssql_cdc.snapshot_chunk_rows"] = str(a.chunk_rows)
    return a


def prepare_source(si, a):
    print("== source: tables and %d rows each (fill_table)" % a.rows, flush=True)
    si.tsql("ALTER DATABASE cdcdb SET ALLOW_SNAPSHOT_ISOLATION ON\nEXEC sys.sp_cdc_enable_db\n" +
            "\n".join(TB.create_sql(t) for t in (TB.NARROW, TB.WIDE, TB.STREAM_SMALL, TB.STREAM_LARGE, TB.LATENCY,
                                                 TB.STREAM_PLAIN, TB.STREAM_TLS, TB.STREAM_MIRROR)))
    for t in (TB.NARROW, TB.WIDE):
        if t is TB.WIDE and ("snapshot" not in a.phases or (a.table and "wide" not in a.table)):
            continue                # only the wide snapshot reads it
        t0 = time.time()
        si.ctl("fill_table", table="dbo." + t[0], rows=a.rows, database="cdcdb", timeout=3600)
        print("   dbo.%s: %d rows in %.1f s" % (t[0], a.rows, time.time() - t0), flush=True)
    # one capture_now publishes a whole backlog (the streaming phase times
    # the worker, not the capture job's batching)
    si.tsql("\n".join(TB.enable_cdc_sql(t) for t in (TB.NARROW, TB.WIDE, TB.STREAM_SMALL, TB.STREAM_LARGE,
                                                       TB.LATENCY, TB.STREAM_PLAIN, TB.STREAM_TLS,
                                                       TB.STREAM_MIRROR)) +
            "\nEXEC sys.sp_cdc_change_job @job_type = N'capture', @maxtrans = 10000000, @maxscans = 10")
    deadline = time.time() + 30
    while si.max_lsn() is None:
        if time.time() > deadline:
            raise RuntimeError("the stand-in's capture job never ran")
        time.sleep(0.05)


def prepare_postgres(pg, si, mirror):
    # src: the stand-in offers no TLS outside the TLS phase, so plain text
    # is asked for; plain and tls are the two sides of the TLS phase
    pg.psql("CREATE EXTENSION mssql_cdc; CREATE EXTENSION tds_fdw;" +
            ("CREATE EXTENSION pg_stat_statements;" if mirror else "") +
            "CREATE SERVER fdw FOREIGN DATA WRAPPER tds_fdw OPTIONS (servername '127.0.0.1', port '%d', "
            "database 'cdcdb', tds_version '7.4');"
            "CREATE USER MAPPING FOR postgres SERVER fdw OPTIONS (username 'sa', password '%s');"
            % (si.port, SA_PASSWORD))
    for server, tls in (("src", "encryption 'off'"), ("plain", "encryption 'off'"),
                        ("src_fn", "encryption 'off', data_query_mode 'function'"),
                        ("tls", "ca_file '%s'" % si.ca_file)) + \
            ((("mir_only", "encryption 'off'"), ("mir_both", "encryption 'off'")) if mirror else ()):
        pg.psql("CREATE SERVER %s FOREIGN DATA WRAPPER mssql_cdc OPTIONS (host '127.0.0.1', port '%d', "
                "database 'cdcdb', query_timeout '600', %s);"
                "CREATE USER MAPPING FOR postgres SERVER %s OPTIONS (username 'sa', password '%s');"
                % (server, si.port, tls, server, SA_PASSWORD))


def _terminated(signum, _frame):
    # SIGTERM (a harness's timeout, kill): leave through main's finally, which
    # stops both servers
    raise SystemExit(128 + signum)


def main():
    signal.signal(signal.SIGTERM, _terminated)
    signal.signal(signal.SIGHUP, _terminated)
    a = parse_args()
    own_workdir = a.workdir is None
    workdir = a.workdir or tempfile.mkdtemp(prefix="mssql_cdc-bench-")
    os.makedirs(workdir, exist_ok=True)
    shown = []                      # the options that change results, not where files go
    skip = False
    for arg in sys.argv[1:]:
        if skip:
            skip = False
        elif arg in ("--workdir", "--out"):
            skip = True
        elif not arg.startswith(("--workdir=", "--out=")):
            shown.append(arg)
    report = {"config": {"argv": shown, "smoke": a.smoke, "rows": a.rows, "poll_ms": a.poll_ms,
                         "capture_interval": CAPTURE_INTERVAL, "standin_gc": a.standin_gc, "chunk_rows": a.chunk_rows,
                         "small_txn_rows": a.small_txn_rows, "rtt_ms": a.rtt_ms,
                         "rtt_tables": a.rtt_tables, "rtt_rows": a.rtt_rows, "mirror": a.mirror,
                         "pg_settings": PG_SETTINGS, "phases": a.phases}}
    si = pg = None
    try:
        si = StandIn(workdir, CAPTURE_INTERVAL, tds_log=a.tds_log, gc=a.standin_gc)
        raw = RawServe(workdir)
        prepare_source(si, a)
        pg = Postgres(workdir, PG_SETTINGS)
        prepare_postgres(pg, si, a.mirror)
        if "snapshot" in a.phases:
            report["snapshot"] = {}
            for t in (TB.NARROW, TB.WIDE):
                if a.table and t[0] not in a.table:
                    continue
                print("== snapshot: %s table" % t[0], flush=True)
                P.create_baseline_tables(pg, t, "use_remote_estimate '0'")
                report["snapshot"][t[0]] = P.snapshot(si, pg, raw, t, a.rows, workdir, a.chunk_rows,
                                                      mirror=a.mirror and t is TB.NARROW)
        if "streaming" in a.phases:
            report["streaming"] = {}
            for t, txn in ((TB.STREAM_SMALL, a.small_txn_rows), (TB.STREAM_LARGE, a.large_txn_rows)):
                label = "%d changes, %d rows per transaction" % (a.rows // txn * txn, txn)
                print("== streaming: " + label, flush=True)
                P.add_streaming_table(pg, t[0], function_path=True)
                report["streaming"][label] = P.streaming(si, pg, raw, t[0], a.rows // txn * txn, txn, workdir,
                                                         mirror=a.mirror and t is TB.STREAM_SMALL)
        if "latency" in a.phases:
            print("== latency: %.0f s at a steady rate" % a.latency_seconds, flush=True)
            report["latency"] = P.latency(si, pg, a.latency_seconds, 20)
        if "tls" in a.phases:
            print("== TLS: snapshot and streaming, plain text and TLS back to back", flush=True)
            si.offer_tls(True)
            report["tls"] = P.tls_cost(si, pg, raw, a.rows, a.small_txn_rows, a.chunk_rows)
        if "rtt" in a.phases:
            print("== RTT: snapshot and streaming at %s ms simulated round trip" % a.rtt_ms, flush=True)
            if not a.rtt_parallel_only:
                report["rtt"] = RTT.rtt_cost(si, pg, a.rtt_ms, a.rows, a.small_txn_rows, workdir,
                                             ntables=a.rtt_tables, many_rows=a.rtt_rows,
                                             tables_only=a.rtt_tables_only,
                                             snapshot_only=a.rtt_snapshot_only,
                                             perf_dir=workdir if a.rtt_perf else None)
            if not a.rtt_tables_only and not a.rtt_snapshot_only:
                print("== RTT: 4-table initial copy, parallel vs one at a time, at %s ms" % a.rtt_ms, flush=True)
                report["rtt_parallel"] = RTTP.parallel_copy(si, pg, a.rtt_ms, a.rtt_rows, a.chunk_rows)
        report["finished"] = datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC")
    finally:
        if pg:
            pg.stop()
        if si:
            si.stop()
    out = a.out or os.path.join(workdir, "latest.md")
    R.write(report, out)
    print(R.render(report))
    print("report: %s (and .json)" % out)
    if own_workdir and not a.out:
        print("scratch kept in %s (it holds the report)" % workdir)
    elif own_workdir:
        import shutil
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
