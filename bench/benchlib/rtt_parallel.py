"""(5b) The initial copy of four tables at each simulated round trip
(issue 16 point 4): parallel (server option snapshot_connections 4: each
table reads on a session of its own, doc/snapshot.md "Parallel copy") next
to one table at a time (snapshot_connections 1), and the worker's requests
per chunk (mssql_cdc.worker_state(): requests_sent / snapshot_chunks, its
start and polls included)."""

import time

from . import contenders as C
from . import phases as P
from . import tables as TB
from .rtt import counts, create_server, label, per

TABLES = ["par%d" % i for i in range(1, 5)]
MODES = (("parallel", 4), ("one at a time", 1))


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


def copy_at(si, pg, ms, connections):
    """The four tables added at once to a new foreign server; timed until
    all four stream (every chunk committed, each hand-over done)."""
    server = "rtt_par%d_%s" % (connections, label(ms))
    create_server(pg, si, server)
    pg.psql("ALTER SERVER %s OPTIONS (ADD snapshot_connections '%d')" % (server, connections))
    si.ctl("requests", reset=True)
    t0 = time.time()
    for t in TABLES:
        add_initial(pg, server, t)
    for t in TABLES:
        C.wait_until(pg, t, lambda state, applied, snap: state == "streaming", 7200, server=server)
    seconds = time.time() - t0
    r = counts(si, pg, server)
    P.pause(pg, server)
    r["rows"] = sum(C.copied_rows(pg, t, server, "snapshot") for t in TABLES)
    r["seconds"] = seconds
    r["requests_per_chunk"] = per(r, "chunks")
    return r


def parallel_copy(si, pg, delays, rows):
    """{"<ms>": {"parallel": {...}, "one at a time": {...}}}; the delay is
    back at 0 afterwards."""
    create_tables(si, rows)
    results = {}
    try:
        for ms in delays:
            si.ctl("rtt", ms=ms)
            results[str(ms)] = {}
            for name, connections in MODES:
                t0 = time.time()
                results[str(ms)][name] = copy_at(si, pg, ms, connections)
                print("   RTT %s ms: 4-table copy %s: %.1f s" % (ms, name, time.time() - t0), flush=True)
    finally:
        si.ctl("rtt", ms=0)
    return results


def speedup(res):
    par, one = res["parallel"], res["one at a time"]
    return one["seconds"] / par["seconds"] if par["seconds"] else None


def table(results, rows):
    """Markdown lines for the report."""
    lines = ["### Initial copy of four tables at a simulated round trip: parallel vs one at a time", "",
             "Four narrow tables of %d rows each added at once; parallel: `snapshot_connections` 4 (each table "
             "on a session of its own, chunks read ahead), one at a time: `snapshot_connections` 1. Requests: "
             "the worker's own counters over the whole copy (its start and polls included)." % rows, "",
             "| RTT | copy | rows | seconds | rows/s | × one at a time | requests | chunks | requests per chunk |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for ms, res in results.items():
        for name, _ in MODES:
            r = res[name]
            v = speedup(res) if name == "parallel" else None
            lines.append("| %s ms | %s | %d | %.2f | %.0f | %s | %d | %d | %s |" % (
                ms, name, r["rows"], r["seconds"], r["rows"] / r["seconds"] if r["seconds"] else 0,
                "–" if v is None else "%.2f" % v, r["requests"], r["chunks"],
                "–" if r.get("requests_per_chunk") is None else "%.2f" % r["requests_per_chunk"]))
    return lines + [""]


def target_rows(results):
    """(label, value, met) for the targets table: ≥ 2.5× at 10 ms and more."""
    out = []
    for ms, res in results.items():
        if float(ms) < 10:
            continue
        v = speedup(res)
        out.append(("4-table initial copy at %s ms RTT, parallel ≥ 2.5× one at a time" % ms, v,
                    v is not None and v >= 2.5))
    return out
