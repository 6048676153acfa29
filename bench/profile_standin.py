#!/usr/bin/python3
"""Where the stand-in's CPU goes for the query shapes mssql_cdc sends:
the engine and the TDS row encoder run in this process (no sockets), under
cProfile, so the figures are the stand-in's own cost per row.

  bench/profile_standin.py [--rows N] [--top 15] [--quiet-tables 195] [--only keyset|direct|mirror]

Shapes: the snapshot's keyset chunk (SELECT TOP (n) ... WHERE (id > last)
ORDER BY id, src/snapshot.c), and the catch-up of a backlog of 10-row
source transactions with the batches the worker sends per window, as the
stand-in's statement log (bench.py --tds-log) shows them: the window-end
batch (TOP (1000) over cdc.lsn_time_mapping, one EXISTS probe per change
table, every table's sys.fn_cdc_get_min_lsn, the lag count; src/cdc_window.c)
and the change batch (the direct change query with its LEFT OUTER JOIN
cdc.lsn_time_mapping and AT TIME ZONE N'UTC', src/change_query.c; the
low-watermark recheck; the window fingerprint, src/source_identity.c).
"direct" reads the backlog of dbo.changes, "mirror" the same backlog
written afterwards into dbo.mirror (the bench's mirror streaming contender:
its windows lie behind the first backlog in the mapping).  --quiet-tables
adds captured tables that never change (the rtt phase's 200-table server):
their probes and low watermarks join every window-end batch.

For each catch-up: CPU milliseconds per window for each statement (run
one at a time, without the profiler), then the whole batches under
cProfile."""

import argparse
import cProfile
import collections
import io
import itertools
import os
import pstats
import sys
import time

STANDIN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "test", "standin")
sys.path.insert(0, STANDIN)

from standin.engine import Engine                                 # noqa: E402
from standin.heap import apply_policy                             # noqa: E402
from standin.engine import lsn as L                               # noqa: E402
from standin.results import EngineConfig, ResultSet, SqlError    # noqa: E402
from standin.tds.encode import row_encoder                        # noqa: E402

COLS = "id, big, name, ts, amount"
ROW_CHUNK = 256          # rows per encode_rows call, as tds/response.py sends them
WINDOW_TXNS = 1000       # cdc_choose_window_end's TOP


def serve(engine, session, sql, keep=False):
    """Run a batch and encode every row as the protocol layer would; returns
    the number of rows (keep: the result sets' rows as lists)."""
    n = 0
    kept = []
    for item in engine.execute_batch(session, sql):
        if isinstance(item, SqlError):
            raise RuntimeError("%s: %s" % (sql[:200], item))
        if isinstance(item, ResultSet):
            enc = row_encoder(item.columns)
            it = iter(item.rows)
            rows = []
            while True:
                chunk = list(itertools.islice(it, ROW_CHUNK))
                if not chunk:
                    break
                enc.encode_rows(chunk)
                n += len(chunk)
                if keep:
                    rows.extend(r if isinstance(r, tuple) else r.values for r in chunk)
            kept.append(rows)
    return kept if keep else n


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


class Worker:
    """The statements of mssql_cdc's catch-up, per window, for one group of
    capture instances (every captured table: they stream from one checkpoint)."""

    def __init__(self, eng, session, group):
        self.eng, self.s, self.group = eng, session, group
        self.cols = ", ".join("c.[%s]" % c.strip() for c in COLS.split(","))

    def window_end(self, ckpt, mx):
        lo, hi = ckpt.hex(), mx.hex()
        return [
            ("window end (TOP over lsn_time_mapping)",
             "SELECT TOP (%d) start_lsn, (CAST(tran_end_time AS datetime2(7)) AT TIME ZONE N'UTC') "
             "FROM cdc.lsn_time_mapping WHERE start_lsn > 0x%s AND start_lsn <= 0x%s AND tran_id <> 0x00 "
             "ORDER BY start_lsn" % (WINDOW_TXNS, lo, hi)),
            ("EXISTS probe per change table",
             "SELECT " + ", ".join("CASE WHEN EXISTS (SELECT 1 FROM cdc.[%s_CT] WHERE [__$start_lsn] > 0x%s AND "
                                   "[__$start_lsn] <= 0x%s) THEN 1 ELSE 0 END" % (ci, lo, hi) for ci in self.group)),
            ("fn_cdc_get_min_lsn per table",
             "SELECT " + ", ".join("sys.fn_cdc_get_min_lsn(N'%s')" % ci for ci in self.group)),
            ("lag count (COUNT_BIG over the backlog)",
             "SELECT CAST(COUNT_BIG(*) AS varchar(20)) FROM (SELECT TOP (1000000) start_lsn FROM cdc.lsn_time_mapping "
             "WHERE start_lsn > 0x%s AND start_lsn <= 0x%s AND tran_id <> 0x00) AS backlog" % (lo, hi)),
        ]

    def change_batch(self, ci, ckpt, end):
        return [
            ("change query (direct, LEFT JOIN lsn_time_mapping)",
             "SELECT c.[__$start_lsn], ISNULL(c.[__$command_id], 0), c.[__$seqval], c.[__$operation], "
             "c.[__$update_mask], (CAST(m.tran_end_time AS datetime2(7)) AT TIME ZONE N'UTC'), %s "
             "FROM cdc.[%s_CT] AS c WITH (NOLOCK) LEFT OUTER JOIN cdc.lsn_time_mapping AS m "
             "ON m.start_lsn = c.[__$start_lsn] WHERE c.[__$start_lsn] >= 0x%s AND c.[__$start_lsn] <= 0x%s "
             "ORDER BY c.[__$start_lsn], c.[__$command_id], c.[__$seqval], c.[__$operation]"
             % (self.cols, ci, L.increment(ckpt).hex(), end.hex())),
            ("fn_cdc_get_min_lsn recheck", "SELECT " + ", ".join("sys.fn_cdc_get_min_lsn(N'%s')" % g
                                                                 for g in self.group)),
            ("window fingerprint (TOP (1) ... DESC)",
             "SELECT TOP (1) start_lsn, tran_id, tran_end_time FROM cdc.lsn_time_mapping WHERE start_lsn <= 0x%s "
             "AND tran_id <> 0x00 ORDER BY start_lsn DESC" % end.hex()),
        ]

    def catch_up(self, ci, ckpt, rows, times=None):
        """Windows from ckpt until `rows` change rows of ci were read; with
        times, each statement alone (CPU time per label), else as batches."""
        mx = self.max_lsn()
        total = windows = 0
        while total < rows:
            stmts = self.window_end(ckpt, mx)
            sets = self.run(stmts, times, keep=True)
            ends = sets[0]
            if not ends:
                break
            end = ends[-1][0]
            windows += 1
            if sets[1][0][self.group.index(ci)] == 1:
                # less the one row each of the recheck and the fingerprint
                total += self.run(self.change_batch(ci, ckpt, end), times) - 2
            ckpt = end
        return total, windows

    def run(self, stmts, times, keep=False):
        if times is None:
            return serve(self.eng, self.s, ";\n".join(sql for _, sql in stmts), keep)
        out = [] if keep else 0
        for label, sql in stmts:
            t0 = time.process_time()
            r = serve(self.eng, self.s, sql, keep)
            times[label] += time.process_time() - t0
            out += r
        return out

    def max_lsn(self):
        return serve(self.eng, self.s, "SELECT sys.fn_cdc_get_max_lsn()", keep=True)[0][0][0]


def write_backlog(eng, s, table, rows):
    serve(eng, s, """DECLARE @i int = 0
WHILE @i < %d
BEGIN
  BEGIN TRANSACTION
  INSERT INTO dbo.%s (%s) SELECT %s FROM dbo.narrow WHERE id > @i * 10 AND id <= (@i + 1) * 10
  COMMIT TRANSACTION
  SET @i = @i + 1
END""" % (rows // 10, table, COLS, COLS))
    eng.control("capture_now", {})
    for _ in range(20):          # idle capture cycles: dummy mapping rows between the backlogs
        eng.control("capture_now", {})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--quiet-tables", type=int, default=0)
    ap.add_argument("--only", action="append", choices=["keyset", "direct", "mirror"])
    a = ap.parse_args()
    only = set(a.only or ["keyset", "direct", "mirror"])
    apply_policy()              # the collector as run-standin sets it
    eng = Engine(EngineConfig(databases=["cdcdb"], logins={"sa": "Passw0rd!"}, capture_interval=3600,
                              maxtrans=10 ** 7))
    s = eng.login("sa", "Passw0rd!", "cdcdb", "profile", "localhost")
    captured = ["changes", "mirror"] + ["quiet%03d" % i for i in range(a.quiet_tables)]
    for t in ["narrow"] + captured:
        serve(eng, s, "CREATE TABLE dbo.%s (id int NOT NULL PRIMARY KEY, big bigint, name nvarchar(20), "
                      "ts datetime2, amount decimal(18,4))" % t)
    eng.control("fill_table", {"table": "dbo.narrow", "rows": a.rows})
    serve(eng, s, "EXEC sys.sp_cdc_enable_db")
    for t in captured:
        serve(eng, s, "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'%s', "
                      "@role_name = NULL" % t)
    eng.control("capture_now", {})

    if "keyset" in only:
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

    worker = Worker(eng, s, ["dbo_" + t for t in captured])
    starts = {}
    for t in ("changes", "mirror"):
        starts[t] = worker.max_lsn()
        t0 = time.time()
        write_backlog(eng, s, t, a.rows)
        print("== backlog of dbo.%s: %d transactions of 10 rows written and captured in %.1f s"
              % (t, a.rows // 10, time.time() - t0))
    for label, t in (("direct", "changes"), ("mirror", "mirror")):
        if label not in only:
            continue
        times = collections.Counter()
        rows, windows = worker.catch_up("dbo_" + t, starts[t], a.rows, times)
        print("== %s catch-up of dbo.%s, %d captured tables: %d rows in %d windows; stand-in CPU ms per window, "
              "statement by statement:" % (label, t, len(captured), rows, windows))
        for name, secs in times.most_common():
            print("   %8.1f  %s" % (secs * 1000 / max(windows, 1), name))
        print("   %8.1f  total" % (sum(times.values()) * 1000 / max(windows, 1)))
        measure("%s catch-up, the worker's batches per window of %d transactions" % (label, WINDOW_TXNS),
                lambda: worker.catch_up("dbo_" + t, starts[t], a.rows)[0], a.top)
    eng.shutdown()


if __name__ == "__main__":
    main()
