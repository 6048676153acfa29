"""(5b) The initial copy of four tables at each simulated round trip
(issue 16 point 4): parallel (server option snapshot_connections 4: each
table reads on a session of its own, doc/snapshot.md "Parallel copy") next
to one table at a time (snapshot_connections 1), and the worker's requests
per chunk (mssql_cdc.worker_state(): requests_sent / snapshot_chunks, its
start and polls included).

Twice: with the run's snapshot_chunk_rows (10,000 by default), where a
table copied alone already reads its next chunk while it writes the
current one, so the copy is bound by CPU, not by round trips; and with
SMALL_CHUNK_ROWS, where each chunk's round trip is long next to its
writing, the case parallel sessions are for (a SQL Server far away, or
small chunks to keep streaming lag low)."""

import time

from . import contenders as C
from .procstat import cpu_seconds
from . import phases as P
from . import tables as TB
from .rtt import counts, create_server, label, per

TABLES = ["par%d" % i for i in range(1, 5)]
MODES = (("parallel", 4), ("one at a time", 1))
SMALL_CHUNK_ROWS = 1000


def create_tables(si, rows):
    si.tsql("\n".join(TB.create_sql((t, TB.NARROW[1])) for t in TABLES))
    for t in TABLES:
        si.ctl("fill_table", table="dbo." + t, rows=rows, database="cdcdb", timeout=3600)
    si.tsql("\n".join(TB.enable_cdc_sql((t, None)) for t in TABLES))


def add_initial(pg, server, table, timeout=60):
    """add_table once the capture job has started the table's capture
    instance (until then add_table refuses it)."""
    deadline = time.time() + timeout
    while True:
        try:
            pg.psql("SELECT mssql_cdc.add_table('%s', 'dbo.%s', snapshot_mode => 'initial', "
                    "staging_table => '%s_%s')" % (server, table, server, table))
            return
        except RuntimeError as exc:
            if "has not been started by the capture job" not in str(exc) or time.time() > deadline:
                raise
            time.sleep(0.2)


def set_chunk_rows(pg, chunk_rows):
    """mssql_cdc.snapshot_chunk_rows for the workers started from now on
    (None: the run's own setting back); a reload, seen by a new session
    once the postmaster has it."""
    if chunk_rows is None:
        pg.psql("ALTER SYSTEM RESET mssql_cdc.snapshot_chunk_rows")
    else:
        pg.psql("ALTER SYSTEM SET mssql_cdc.snapshot_chunk_rows = %d" % chunk_rows)
    pg.psql("SELECT pg_reload_conf()")
    want = None if chunk_rows is None else str(chunk_rows)
    deadline = time.time() + 30
    while want is not None and pg.psql("SHOW mssql_cdc.snapshot_chunk_rows") != want:
        if time.time() > deadline:
            raise RuntimeError("mssql_cdc.snapshot_chunk_rows did not become %s" % want)
        time.sleep(0.1)


def copy_at(si, pg, ms, connections, chunks):
    """The four tables added at once to a new foreign server; timed until
    all four stream (every chunk committed, each hand-over done)."""
    server = "rtt_par%d_%s_%s" % (connections, label(ms), chunks)
    create_server(pg, si, server)
    pg.psql("ALTER SERVER %s OPTIONS (ADD snapshot_connections '%d')" % (server, connections))
    si.ctl("requests", reset=True)
    standin_cpu = cpu_seconds(si.pid)
    t0 = time.time()
    for t in TABLES:
        add_initial(pg, server, t)
    for t in TABLES:
        C.wait_until(pg, t, lambda state, applied, snap: state == "streaming", 7200, server=server)
    seconds = time.time() - t0
    # the server's worker started with this copy: its CPU so far is the copy's
    usage = {"worker_cpu_s": cpu_seconds(C.worker_pid(pg, server=server)),
             "standin_cpu_s": cpu_seconds(si.pid) - standin_cpu}
    r = counts(si, pg, server)
    r.update(usage)
    P.pause(pg, server)
    r["rows"] = sum(C.copied_rows(pg, t, server, "snapshot") for t in TABLES)
    r["seconds"] = seconds
    r["requests_per_chunk"] = per(r, "chunks")
    return r


def parallel_copy(si, pg, delays, rows, chunk_rows):
    """{"<chunk rows>": {"<ms>": {"parallel": {...}, "one at a time": {...}}}}
    for the run's chunk_rows and SMALL_CHUNK_ROWS; the delay is back at 0
    and the chunk size at the run's afterwards."""
    create_tables(si, rows)
    results = {}
    try:
        for chunks in sorted({chunk_rows, SMALL_CHUNK_ROWS}, reverse=True):
            set_chunk_rows(pg, chunks)
            results[str(chunks)] = {}
            for ms in delays:
                si.ctl("rtt", ms=ms)
                results[str(chunks)][str(ms)] = {}
                for name, connections in MODES:
                    t0 = time.time()
                    results[str(chunks)][str(ms)][name] = copy_at(si, pg, ms, connections, chunks)
                    print("   RTT %s ms, chunks of %d rows: 4-table copy %s: %.1f s"
                          % (ms, chunks, name, time.time() - t0), flush=True)
    finally:
        si.ctl("rtt", ms=0)
        set_chunk_rows(pg, None)
    return results


def speedup(res):
    par, one = res["parallel"], res["one at a time"]
    return one["seconds"] / par["seconds"] if par["seconds"] else None


def table(results, rows):
    """Markdown lines for the report."""
    lines = ["### Initial copy of four tables at a simulated round trip: parallel vs one at a time", "",
             "Four narrow tables of %d rows each added at once; parallel: `snapshot_connections` 4 (each table "
             "on a session of its own, chunks read ahead), one at a time: `snapshot_connections` 1; each at the "
             "run's `snapshot_chunk_rows` and at %d rows per chunk. With large chunks a table copied alone "
             "already reads its next chunk while it writes the current one (the copy is bound by CPU: one "
             "worker process writes every table's chunks); with small ones each chunk's round trip is long "
             "next to its writing, which parallel sessions overlap. Requests: the worker's own counters over "
             "the whole copy (its start and polls included). CPU: seconds of the worker (from its start) and "
             "of the stand-in over the copy; the stand-in's share is what a real SQL Server would not cost "
             "this machine." % (rows, SMALL_CHUNK_ROWS), "",
             "| chunk rows | RTT | copy | rows | seconds | rows/s | × one at a time | requests | chunks | "
             "requests per chunk | worker CPU s | stand-in CPU s |",
             "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for chunks, by_ms in by_chunk_rows(results):
        for ms, res in by_ms.items():
            for name, _ in MODES:
                r = res[name]
                v = speedup(res) if name == "parallel" else None
                lines.append("| %s | %s ms | %s | %d | %.2f | %.0f | %s | %d | %d | %s | %s | %s |" % (
                    chunks, ms, name, r["rows"], r["seconds"], r["rows"] / r["seconds"] if r["seconds"] else 0,
                    "–" if v is None else "%.2f" % v, r["requests"], r["chunks"],
                    "–" if r.get("requests_per_chunk") is None else "%.2f" % r["requests_per_chunk"],
                    cpu(r.get("worker_cpu_s")), cpu(r.get("standin_cpu_s"))))
    return lines + [""]


def cpu(seconds):
    return "–" if seconds is None else "%.2f" % seconds


def by_chunk_rows(results):
    """[(chunk rows, {"<ms>": ...})], largest chunks first; a report of
    before the two chunk sizes ({"<ms>": ...}) as the run's own size."""
    if results and all("parallel" in v for v in results.values()):
        return [("run's", results)]
    return sorted(results.items(), key=lambda kv: -int(kv[0]))


def target_rows(results):
    """(label, value, met) for the targets table: ≥ 2.5× at 10 ms and more."""
    out = []
    for chunks, by_ms in by_chunk_rows(results):
        for ms, res in by_ms.items():
            if float(ms) < 10:
                continue
            v = speedup(res)
            out.append(("4-table initial copy at %s ms RTT, chunks of %s rows, parallel ≥ 2.5× one at a time"
                        % (ms, chunks), v, v is not None and v >= 2.5))
    return out
