#!/usr/bin/python3
"""Huge transactions and huge backlogs under a short query_timeout (issue 14,
point 1; doc/streaming.md "Large transactions"; bench/README.md).

Two scenarios, each through data_query_mode 'function' and then 'direct'
(two foreign servers on the same capture instance, one paused while the
other runs):

  huge     one source transaction of --huge-rows rows
  backlog  --backlog-transactions transactions of --backlog-rows rows each

with query_timeout = --query-timeout (5 s) and the stand-in's blocking Sort
costing --sort-us microseconds a row before its first row (ENGINE.md "Sorts
take time"; 5 us: a 5,000,000-row sort takes 25 s, a 1,000,000-row one 5 s,
so no sorted read of the huge transaction or of the whole backlog fits in
5 s).  Timed from the
capture job's publication (or, for the second mode, the resume of its
server) until every row is staged; the worker (whichever pid it has: it
exits after a timeout and the launcher starts it again) is sampled every
50 ms from /proc for its peak RssAnon and VmHWM.  Also reported: the
timeouts the worker logged, the Postgres transactions the rows were
committed in (distinct xmin), that each source transaction is in exactly one
of them, and the window size the worker learned (servers.window_transactions).

Runs as a non-root user against the extension installed for the PostgreSQL
on PATH (a private build, like t/090_bench_smoke.pl): e.g. as postgres with
PATH=/work/dev/pg-<name>/usr/lib/postgresql/15/bin:$PATH.  Writes
--out (default bench/results/huge-transactions.md) and a .json beside it."""

import argparse
import json
import os
import re
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchlib import contenders as C            # noqa: E402
from benchlib.phases import pause               # noqa: E402
from benchlib.procstat import status_kb         # noqa: E402
from benchlib.servers import SA_PASSWORD, Postgres, StandIn  # noqa: E402

MODES = ("function", "direct")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--huge-rows", type=int, default=5_000_000)
    ap.add_argument("--backlog-transactions", type=int, default=1000)
    ap.add_argument("--backlog-rows", type=int, default=10_000)
    ap.add_argument("--query-timeout", type=int, default=5)
    ap.add_argument("--sort-us", type=float, default=5.0)
    ap.add_argument("--only", choices=("huge", "backlog"), action="append")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   "results", "huge-transactions.md"))
    return ap.parse_args()


class WorkerSampler:
    """Peak RssAnon / VmHWM of the worker of one server, following its pid
    across restarts."""

    def __init__(self, pg, server):
        self.pg, self.server = pg, server
        self.peak_anon_kb = self.peak_hwm_kb = 0
        self.pids = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _pid(self):
        out = self.pg.psql("SELECT pid FROM pg_stat_activity WHERE application_name = 'mssql_cdc worker %s'"
                           % self.server)
        return int(out) if out.isdigit() else None

    def _run(self):
        pid = None
        while not self._stop.is_set():
            if pid is None or status_kb(pid, "RssAnon") is None:
                pid = self._pid()
            if pid is not None:
                self.pids.add(pid)
                anon, hwm = status_kb(pid, "RssAnon"), status_kb(pid, "VmHWM")
                self.peak_anon_kb = max(self.peak_anon_kb, anon or 0)
                self.peak_hwm_kb = max(self.peak_hwm_kb, hwm or 0)
            self._stop.wait(0.05)

    def stop(self):
        self._stop.set()
        self._thread.join()
        return {"peak_rss_anon_mb": round(self.peak_anon_kb / 1024, 1),
                "peak_vm_hwm_mb": round(self.peak_hwm_kb / 1024, 1), "worker_processes": len(self.pids)}


def setup(si, pg, query_timeout):
    si.tsql("EXEC sys.sp_cdc_enable_db")
    si.tsql("CREATE TABLE dbo.seed (id int NOT NULL PRIMARY KEY, v int, note nvarchar(20))")
    pg.psql("CREATE EXTENSION mssql_cdc")
    for mode in MODES:
        server = "src_" + mode
        pg.psql("CREATE SERVER %s FOREIGN DATA WRAPPER mssql_cdc OPTIONS (host '127.0.0.1', port '%d', "
                "database 'cdcdb', query_timeout '%d', encryption 'off', data_query_mode '%s');"
                "CREATE USER MAPPING FOR postgres SERVER %s OPTIONS (username 'sa', password '%s');"
                % (server, si.port, query_timeout, mode, server, SA_PASSWORD))


def add_table(si, pg, name, modes):
    si.tsql("CREATE TABLE dbo.%s (id int NOT NULL PRIMARY KEY, v int, note nvarchar(20))" % name)
    si.tsql("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'%s', @role_name = NULL"
            % name)
    si.ctl("capture_now")
    for mode in modes:
        server = "src_" + mode
        try:
            pg.psql("SELECT mssql_cdc.resume('%s')" % server)   # paused by the scenario before
        except RuntimeError:
            pass                                                # no table yet: nothing to resume
        deadline = time.time() + 120
        while True:
            try:
                pg.psql("SELECT mssql_cdc.add_table('%s', 'dbo.%s', snapshot_mode => 'never')" % (server, name))
                break
            except RuntimeError:
                if time.time() > deadline:
                    raise
                si.ctl("capture_now")
                time.sleep(0.5)
        C.wait_until(pg, name, lambda state, applied, snap: state == "streaming", 120, server=server)
        pause(pg, server)


def timeouts_in_log(pg, offset):
    with open(pg.logfile, errors="replace") as f:
        f.seek(offset)
        return len(re.findall(r"timed out waiting for SQL Server", f.read()))


def run_mode(si, pg, name, mode, rows, transactions):
    """Resume the mode's server and time it until every row is staged."""
    server = "src_" + mode
    staging = "%s_dbo_%s" % (server, name)
    log_offset = os.path.getsize(pg.logfile)
    t0 = time.time()
    pg.psql("SELECT mssql_cdc.resume('%s')" % server)
    sampler = WorkerSampler(pg, server)
    # not C.wait_until: the 'error' state of the timeouts the worker recovers
    # from by itself may last longer than it tolerates
    deadline = time.time() + 7200
    while C.status(pg, name, server)[1] < rows:
        if time.time() > deadline:
            raise RuntimeError("%s/%s did not finish" % (name, mode))
        time.sleep(0.2)
    seconds = time.time() - t0
    usage = sampler.stop()
    pause(pg, server)
    check = pg.psql("SELECT count(*), count(DISTINCT id), count(DISTINCT xmin::text), count(DISTINCT _cdc_lsn),"
                    " (SELECT count(*) FROM (SELECT _cdc_lsn FROM %s GROUP BY 1"
                    "  HAVING count(DISTINCT xmin::text) > 1) s),"
                    " (SELECT max(n) FROM (SELECT count(*) AS n FROM %s GROUP BY xmin::text) w)"
                    " FROM %s" % (staging, staging, staging)).split("|")
    staged, distinct_ids, xacts, lsns, split, biggest = (int(x) for x in check)
    limit = pg.psql("SELECT coalesce(window_transactions::text, 'none') FROM mssql_cdc.servers"
                    " WHERE server_name = '%s'" % server)
    result = {"scenario": name, "mode": mode, "rows": staged, "source_transactions": lsns,
              "seconds": round(seconds, 1), "rows_per_s": int(staged / seconds) if seconds else None,
              "timeouts": timeouts_in_log(pg, log_offset), "pg_transactions": xacts,
              "largest_pg_transaction_rows": biggest, "source_transactions_split": split,
              "every_row_once": staged == distinct_ids == rows, "window_transactions_learned": limit}
    result.update(usage)
    if lsns != transactions or split != 0 or staged != rows:
        raise RuntimeError("%s/%s: wrong result %s" % (name, mode, result))
    print(json.dumps(result), flush=True)
    return result


def scenario(si, pg, name, rows_per_txn, transactions, modes):
    add_table(si, pg, name, modes)
    si.ctl("capture_freeze")
    t0 = time.time()
    if transactions == 1:
        si.tsql("INSERT dbo.%s (id, v, note) SELECT id, v, note FROM dbo.seed WHERE id <= %d"
                % (name, rows_per_txn), timeout=7200)
    else:
        si.tsql("""DECLARE @i int = 0
WHILE @i < %d
BEGIN
  INSERT dbo.%s (id, v, note) SELECT id + @i * %d, v, note FROM dbo.seed WHERE id <= %d
  SET @i = @i + 1
END""" % (transactions, name, rows_per_txn, rows_per_txn), timeout=7200)
    generate_s = time.time() - t0
    t0 = time.time()
    si.ctl("capture_now", timeout=7200)
    capture_s = time.time() - t0
    si.ctl("capture_resume")
    out = []
    for mode in modes:
        r = run_mode(si, pg, name, mode, rows_per_txn * transactions, transactions)
        r["generate_s"], r["capture_s"] = round(generate_s, 1), round(capture_s, 1)
        out.append(r)
    # free the stand-in's memory for the next scenario
    si.tsql("EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'%s', "
            "@capture_instance = N'all'" % name)
    si.tsql("DROP TABLE dbo.%s" % name)
    return out


def report(a, results, path):
    lines = ["# Huge transactions and backlogs under query_timeout = %d s" % a.query_timeout, "",
             "Generated by `bench/huge_transactions.py` (bench/README.md, \"Huge transactions\") on %s."
             % time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
             "The stand-in's blocking Sort costs %g us a row before its first row (ENGINE.md \"Sorts take "
             "time\"): a sorted read of %d rows waits %.1f s. Defaults otherwise (`batch_max_rows = 100000`, "
             "`batch_max_transactions = 1000`, `insert_batch_rows = 1000`), `shared_buffers = 512MB`, "
             "`poll_interval = 100ms`." % (a.sort_us, a.huge_rows, a.huge_rows * a.sort_us / 1e6), "",
             "| scenario | mode | rows | source txns | time (s) | rows/s | timeouts | PG txns | largest PG txn (rows) "
             "| learned window (txns) | worker peak RssAnon (MB) | worker VmHWM (MB) | worker processes |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    for r in results:
        lines.append("| %s | %s | %d | %d | %.1f | %d | %d | %d | %d | %s | %.1f | %.1f | %d |" % (
            r["scenario"], r["mode"], r["rows"], r["source_transactions"], r["seconds"], r["rows_per_s"],
            r["timeouts"], r["pg_transactions"], r["largest_pg_transaction_rows"],
            r["window_transactions_learned"], r["peak_rss_anon_mb"], r["peak_vm_hwm_mb"],
            r["worker_processes"]))
    lines += ["", "Every row was staged exactly once, and no source transaction was split across Postgres "
              "transactions (checked: each `_cdc_lsn` has one `xmin`). Time runs from the resume of the "
              "mode's server (after the capture job published every row) until the last row is staged; "
              "generating and capturing the rows in the stand-in is not in it:", ""]
    for r in results:
        lines.append("- %s/%s: generate %.1f s, capture %.1f s" % (r["scenario"], r["mode"], r["generate_s"],
                                                                    r["capture_s"]))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.splitext(path)[0] + ".json", "w") as f:
        json.dump({"args": vars(a), "results": results}, f, indent=1)


def main():
    a = parse_args()
    modes = [m for m in a.modes.split(",") if m]
    workdir = tempfile.mkdtemp(prefix="bench-huge-")
    si = StandIn(workdir, capture_interval=0.5)
    pg = None
    try:
        si.ctl("sort_cost", us_per_row=a.sort_us)
        pg = Postgres(workdir, {"shared_preload_libraries": "'mssql_cdc'", "mssql_cdc.database": "'postgres'",
                                "mssql_cdc.poll_interval": "'100ms'", "mssql_cdc.retry_max_backoff": "1",
                                "shared_buffers": "'512MB'", "max_wal_size": "'8GB'",
                                "checkpoint_timeout": "'30min'", "log_min_messages": "info"})
        setup(si, pg, a.query_timeout)
        si.ctl("fill_table", table="dbo.seed", rows=max(a.huge_rows, a.backlog_rows), timeout=3600)
        results = []
        if not a.only or "huge" in a.only:
            results += scenario(si, pg, "huge", a.huge_rows, 1, modes)
        if not a.only or "backlog" in a.only:
            results += scenario(si, pg, "backlog", a.backlog_rows, a.backlog_transactions, modes)
        report(a, results, a.out)
        print("wrote %s" % a.out)
    finally:
        if pg is not None:
            pg.stop()
        si.stop()


if __name__ == "__main__":
    main()
