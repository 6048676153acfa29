"""(5) What a SQL Server some milliseconds away costs (issue 16 point 1).

The stand-in holds every response for a simulated network round trip
(run-standin --rtt-ms, control `rtt`; test/standin/ENGINE.md "Network
model").  At each delay: mssql_cdc's snapshot of the narrow table and its
catch-up of a backlog of small transactions, each next to freebcp→COPY of
the same rows at the same delay, and the requests the worker sent (the
worker's counters in mssql_cdc.worker_state(): requests_sent, windows,
snapshot_chunks; and, as a cross-check, the stand-in's control `requests`,
the worker's session told by its application_name) per snapshot chunk and
per window.  And streaming flat in the number of tables (issue 16 point 5):
the same backlog in 5 busy tables, once on a server that captures only
them and once on one that also captures --rtt-tables - 5 quiet tables
(default 200 in all), its requests per window and rows/s side by side."""

import os
import subprocess
import time

from . import contenders as C
from . import phases as P
from . import tables as TB
from .procstat import Sampler
from .servers import SA_PASSWORD

# what starts a snapshot chunk (src/snapshot.c) and a window (the poll's
# batch, src/capture_instance_switch.c ci_read_source_state, which also
# reads the max LSN) in the stand-in's by_prefix counts
CHUNK_PREFIX = "BEGIN TRANSACTION; SELECT TOP ("
WINDOW_PREFIX = "SELECT name, is_cdc_enabled FROM sys.databases WHERE database_id = DB_ID(); IF"


def parse_list(text):
    out = []
    for part in text.split(","):
        v = float(part)
        if not 0 <= v <= 1000:
            raise ValueError("an RTT must be within 0..1000 ms, not %s" % part)
        out.append(int(v) if v == int(v) else v)
    return out


def label(ms):
    return ("%s" % ms).replace(".", "_")


def create_server(pg, si, name):
    pg.psql("CREATE SERVER %s FOREIGN DATA WRAPPER mssql_cdc OPTIONS (host '127.0.0.1', port '%d', "
            "database 'cdcdb', query_timeout '600', encryption 'off', application_name 'bench %s');"
            "CREATE USER MAPPING FOR postgres SERVER %s OPTIONS (username 'sa', password '%s');"
            % (name, si.port, name, name, SA_PASSWORD))


def worker_requests(si, server):
    """The requests of the worker of `server` since the last reset: total,
    and how many began with CHUNK_PREFIX and WINDOW_PREFIX."""
    reply = si.ctl("requests")
    total = chunks = windows = 0
    for s in reply["sessions"] + reply["closed_sessions"]:
        if s.get("app") != "bench %s" % server:
            continue
        total += s["requests"]
        for prefix, n in s["by_prefix"].items():
            if CHUNK_PREFIX in prefix:      # after SET TRANSACTION ISOLATION LEVEL SNAPSHOT;
                chunks += n
            elif prefix.startswith(WINDOW_PREFIX):
                windows += n
    return {"standin_requests": total, "standin_chunks": chunks, "standin_windows": windows}


def worker_counts(pg, server):
    """The worker's own round-trip counters (mssql_cdc.worker_state())."""
    row = pg.psql("SELECT requests_sent, windows, snapshot_chunks, polls_ahead FROM mssql_cdc.worker_state() "
                  "WHERE server_name = '%s'" % server)
    requests, windows, chunks, ahead = (int(v) for v in row.split("|"))
    return {"requests": requests, "windows": windows, "chunks": chunks, "polls_ahead": ahead}


def counts(si, pg, server, since=None):
    """Both views of the worker's requests; with `since` (an earlier
    worker_counts) the worker's counters as the difference."""
    out = worker_counts(pg, server)
    if since is not None:
        out = {k: out[k] - since[k] for k in out}
    out.update(worker_requests(si, server))
    return out


def per(r, key):
    return r["requests"] / r[key] if r.get(key) else None


def snapshot_at(si, pg, ms, rows, workdir):
    server = "rtt_snap_%s" % label(ms)
    create_server(pg, si, server)
    cols = P.staged_columns(pg, TB.NARROW)
    target = "pipe_rtt_%s_narrow" % label(ms)
    pg.psql("CREATE TABLE %s (%s, PRIMARY KEY (id))" % (target, ", ".join('"%s" %s' % (c, t) for c, t, _ in cols)))
    select = "SELECT %s FROM dbo.narrow" % TB.column_list(TB.NARROW)
    bcp = C.freebcp_copy(si, pg, select, target, workdir)
    si.ctl("requests", reset=True)
    r = C.mssql_cdc_snapshot(pg, TB.NARROW[0], rows, si.pid, server=server,
                             staging_table="%s_narrow" % server,
                             on_done=lambda: counts(si, pg, server))
    r["requests_per_chunk"] = per(r, "chunks")
    P.pause(pg, server)
    return {"freebcp→COPY": bcp, "mssql_cdc": r}


def add_when_started(pg, server, name, timeout=60):
    """add_table once the capture job has started the table's capture
    instance (created by rtt_cost; until then add_table refuses it)."""
    deadline = time.time() + timeout
    while True:
        try:
            pg.psql("SELECT mssql_cdc.add_table('%s', 'dbo.%s', snapshot_mode => 'never')" % (server, name))
            return
        except RuntimeError as exc:
            if "has not been started by the capture job" not in str(exc) or time.time() > deadline:
                raise
            time.sleep(0.2)


def streaming_at(si, pg, ms, rows, txn_rows, workdir):
    server = "rtt_stream_%s" % label(ms)
    name = "rtt_stream_%s" % label(ms)
    create_server(pg, si, server)
    add_when_started(pg, server, name)
    C.wait_until(pg, name, lambda state, applied, snap: state == "streaming", 120, server=server)
    before = {}

    def start():
        si.ctl("requests", reset=True)
        before.update(worker_counts(pg, server))
    r = P.catch_up(si, pg, name, rows, txn_rows, server, on_start=start,
                   on_done=lambda: counts(si, pg, server, before))
    r["requests_per_window"] = per(r, "windows")
    P.pause(pg, server)
    changes = ("SELECT %s, %s FROM cdc.fn_cdc_get_all_changes_dbo_%s(sys.fn_cdc_get_min_lsn(N'dbo_%s'), "
               "sys.fn_cdc_get_max_lsn(), N'all update old') ORDER BY __$start_lsn, __$seqval, __$operation"
               % (P.CHANGE_COLUMNS, TB.column_list(TB.NARROW), name, name))
    target = "pipe_changes_%s" % name
    pg.psql("CREATE TABLE %s (start_lsn bytea, seqval bytea, operation int, update_mask bytea, id int, big bigint, "
            "name text, ts timestamp, amount numeric(18,4), PRIMARY KEY (start_lsn, seqval, operation))" % target)
    bcp = C.freebcp_copy(si, pg, changes, target, workdir)
    return {"freebcp→COPY": bcp, "mssql_cdc": r}


BUSY_TABLES = 5


def quiet_name(j):
    return "rtt_quiet_%03d" % j


def busy_name(ntables, ms, i):
    return "rtt_busy_%d_%s_%d" % (ntables, label(ms), i)


def create_tables(si, names):
    """Source tables shaped like dbo.narrow with CDC, in batches of 50."""
    for k in range(0, len(names), 50):
        part = names[k:k + 50]
        si.tsql("\n".join(TB.create_sql((n, TB.NARROW[1])) for n in part) + "\n" +
                "\n".join(TB.enable_cdc_sql((n, None)) for n in part))


def start_perf(pid, path):
    """perf record -g of the worker while it is timed (--rtt-perf): where
    its CPU goes with many tables.  None when perf is not there."""
    try:
        return subprocess.Popen(["perf", "record", "-q", "-g", "-p", str(pid), "-o", path],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        return None


def tables_at(si, pg, ms, rows, txn_rows, ntables, perf_dir=None):
    """The backlog of `rows` changes in 5 busy tables (rows / 5 each, txn_rows
    per transaction) applied by a worker that captures ntables tables: the 5
    and ntables - 5 quiet ones that never change.  Tables are added without
    the delay (setup, not timed), the backlog is applied with it.  The
    worker's and the stand-in's CPU time and the worker's PostgreSQL
    statements (pg_stat_statements) are taken over the timed span."""
    server = "rtt_tab%d_%s" % (ntables, label(ms))
    busy = [busy_name(ntables, ms, i) for i in range(1, BUSY_TABLES + 1)]
    si.ctl("rtt", ms=0)
    create_server(pg, si, server)
    for name in busy + [quiet_name(j) for j in range(1, ntables - BUSY_TABLES + 1)]:
        add_when_started(pg, server, name)
    # streaming, and at one checkpoint: tables added one after the other
    # start at different ones and first catch up in windows of their own
    # (src/worker_catch_up.c), which is setup, not the window measured here
    deadline = time.time() + 600
    while pg.psql("SELECT count(*) FILTER (WHERE state = 'streaming') = %d AND "
                  "count(DISTINCT checkpoint_lsn::text) = 1 FROM mssql_cdc.status WHERE server = '%s'"
                  % (ntables, server)) != "t":
        if time.time() > deadline:
            raise RuntimeError("the %d tables of %s did not all stream from one checkpoint" % (ntables, server))
        time.sleep(0.2)
    si.ctl("rtt", ms=ms)
    per_table = rows // BUSY_TABLES // txn_rows * txn_rows
    si.ctl("capture_freeze")
    for name in busy:
        P.generate_backlog(si, name, per_table, txn_rows)
    applied = ("SELECT coalesce(sum(rows_applied), 0) FROM mssql_cdc.status WHERE server = '%s' AND source_table IN (%s)"
               % (server, ", ".join("'dbo.%s'" % n for n in busy)))
    base = int(pg.psql(applied))
    before = worker_counts(pg, server)
    pid = C.worker_pid(pg, server=server)
    si.ctl("requests", reset=True)
    P.apply_profile(pg)
    perf = start_perf(pid, os.path.join(perf_dir, "perf-%s.data" % server)) if perf_dir else None
    if perf is not None:
        time.sleep(0.5)             # perf attaches before the backlog is published
    worker, source = Sampler(pid), Sampler(si.pid)
    si.ctl("capture_now")
    t0 = time.time()
    while int(pg.psql(applied)) - base < per_table * BUSY_TABLES:
        if time.time() - t0 > 7200:
            raise RuntimeError("%s did not apply its backlog" % server)
        time.sleep(0.05)
    seconds = time.time() - t0
    usage = worker.stop()
    usage["standin_cpu_s"] = source.stop()["cpu_s"]
    if perf is not None:
        perf.send_signal(2)         # SIGINT: perf writes its data and exits
        perf.wait()
    r = counts(si, pg, server, before)
    r.update(usage)
    r["profile"] = P.apply_profile(pg, top=10)
    si.ctl("capture_resume")
    P.pause(pg, server)
    r.update({"rows": per_table * BUSY_TABLES, "seconds": seconds, "tables": ntables,
              "busy_tables": BUSY_TABLES})
    r["requests_per_window"] = per(r, "windows")
    return r


def create_sources(si, delays, ntables):
    """The streaming phase's source table per delay (each backlog is new
    rows), the quiet tables every "many tables" server captures, and the
    busy ones."""
    si.tsql("\n".join(TB.create_sql(("rtt_stream_%s" % label(ms), TB.NARROW[1])) + "\n" +
                      TB.enable_cdc_sql(("rtt_stream_%s" % label(ms), None)) for ms in delays))
    # the quiet tables every "many tables" server captures, and the busy ones
    create_tables(si, [quiet_name(j) for j in range(1, ntables - BUSY_TABLES + 1)] +
                  [busy_name(n, ms, i) for ms in delays for n in (BUSY_TABLES, ntables)
                   for i in range(1, BUSY_TABLES + 1)])


def rtt_cost(si, pg, delays, rows, txn_rows, workdir, ntables=200, many_rows=None, tables_only=False,
             perf_dir=None, snapshot_only=False):
    """{"<ms>": {"snapshot": {...}, "streaming": {...}, "tables": {...}}} at
    each delay (tables_only: just "tables", the many-tables comparison;
    snapshot_only: just "snapshot"); the other phases' workers are paused
    first (their polls would share the stand-in), the delay is back at 0
    afterwards."""
    for server in ("src", "plain", "tls"):
        try:
            P.pause(pg, server)
        except RuntimeError:
            pass                    # no tables there: no worker to stop
    if not snapshot_only:
        create_sources(si, delays, ntables)
    results = {}
    n = rows // txn_rows * txn_rows
    # the many-tables backlog may be smaller (--rtt-rows): 200 tables' polls make it slow
    n_many = (many_rows or rows) // txn_rows * txn_rows
    try:
        for ms in delays:
            si.ctl("rtt", ms=ms)
            t0 = time.time()
            results[str(ms)] = {}
            if snapshot_only:
                print("   RTT %s ms: snapshot" % ms, flush=True)
                results[str(ms)] = {"snapshot": snapshot_at(si, pg, ms, rows, workdir)}
                continue
            if not tables_only:
                print("   RTT %s ms: snapshot, then streaming" % ms, flush=True)
                results[str(ms)] = {"snapshot": snapshot_at(si, pg, ms, rows, workdir),
                                    "streaming": streaming_at(si, pg, ms, n, txn_rows, workdir)}
            print("   RTT %s ms: streaming with %d and with %d tables (%d busy)"
                  % (ms, BUSY_TABLES, ntables, BUSY_TABLES), flush=True)
            results[str(ms)]["tables"] = {str(k): tables_at(si, pg, ms, n_many, txn_rows, k, perf_dir)
                                          for k in (BUSY_TABLES, ntables)}
            print("   RTT %s ms: %.1f s" % (ms, time.time() - t0), flush=True)
    finally:
        si.ctl("rtt", ms=0)
    return results
