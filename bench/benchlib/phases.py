"""The three measured phases: snapshot, streaming catch-up, latency.
Each returns a list of result rows for the report (see report.py)."""

import statistics
import subprocess
import time

from . import contenders as C
from . import tables as TB
from .procstat import Sampler


# ---------------------------------------------------------------------------
# shared setup of the PostgreSQL side
# ---------------------------------------------------------------------------

def staged_columns(pg, table):
    """(staging column, postgres type, key ordinal) of a source table, as
    mssql_cdc would stage it: the baselines load into the same types."""
    out = []
    for line in pg.psql("SELECT staging_column, postgres_type, coalesce(key_ordinal, 0) "
                        "FROM mssql_cdc.describe_source('src', 'dbo.%s') WHERE staging_column IS NOT NULL"
                        % table[0]).splitlines():
        col, typ, key = line.split("|")
        out.append((col, typ, int(key)))
    return out


def create_baseline_tables(pg, table, fdw_options):
    """pipe_<t> and fdw_<t> (same columns and types as the staging table, and
    the source key as primary key: every contender maintains one index),
    plus ft_<t>, the tds_fdw foreign table."""
    cols = staged_columns(pg, table)
    name = table[0]
    defs = ", ".join('"%s" %s' % (c, t) for c, t, _ in cols)
    keys = ", ".join('"%s"' % c for c, _, k in sorted(cols, key=lambda x: x[2]) if k)
    for prefix in ("pipe", "fdw"):
        pg.psql("CREATE TABLE %s_%s (%s, PRIMARY KEY (%s))" % (prefix, name, defs, keys))
    fdefs = ", ".join('"%s" %s OPTIONS (column_name \'%s\')' % (c, t, src) for (c, t, _), (src, _) in
                      zip(cols, table[1]))
    pg.psql("CREATE FOREIGN TABLE ft_%s (%s) SERVER fdw OPTIONS (%s, query '%s')"
            % (name, fdefs, fdw_options, fdw_query(table)))


TEMPORAL = ("date", "time", "datetime", "smalldatetime", "datetime2", "datetimeoffset")


def fdw_query(table):
    """tds_fdw hands each value to PostgreSQL as db-lib's text form, which
    for temporal types is "Nov 24 2020 10:43:05:6297924PM" (rejected by
    PostgreSQL); its users read those columns as CONVERT(..., 121) text."""
    items = []
    for col, decl in table[1]:
        if decl.split()[0].split("(")[0] in TEMPORAL:
            items.append("CONVERT(varchar(40), %s, 121) AS %s" % (col, col))
        else:
            items.append(col)
    return "SELECT %s FROM dbo.%s" % (", ".join(items), table[0])


# ---------------------------------------------------------------------------
# (1) snapshot
# ---------------------------------------------------------------------------

def keyset_chunks(table, rows, chunk_rows):
    """The queries of mssql_cdc's snapshot of a table (src/snapshot.c)."""
    return ["SELECT TOP (%d) %s, id FROM dbo.%s%s ORDER BY id" % (
        chunk_rows, TB.column_list(table), table[0], "" if k == 0 else " WHERE (id > %d)" % k)
        for k in range(0, rows + 1, chunk_rows)]


# mirror contenders (bench.py --no-mirror leaves them out): (label, foreign
# server, add_table options); the servers are made by bench.py
MIRROR_SNAPSHOTS = (
    ("mssql_cdc mirror snapshot (mirror only)", "mir_only", ", mirror => true, changelog => false"),
    ("mssql_cdc mirror snapshot (mirror + changelog)", "mir_both", ", mirror => true"),
)
MIRROR_STREAM_LABEL = "mssql_cdc mirror streaming (mirror only)"
MIRROR_STREAM_OPTIONS = ", mirror => true, changelog => false"


# the benchmark's own statements (its polls of status, counts, add_table
# calls), left out of the profiles: they are not the worker's work
BENCH_STATEMENTS = (r"^(SELECT (state, rows_applied|count\(\*\)|staging_table|pid|encrypted|format\(|"
                    r"mssql_cdc\.(pause|resume|add_table))|CREATE|SELECT staging_column)|pg_stat_statements")


def apply_profile(pg, top=6):
    """The statements that took the most time since the last call
    (pg_stat_statements, every user: the worker's apply statements), reset
    after reading: where a contender's PostgreSQL time went."""
    if pg.psql("SELECT count(*) FROM pg_extension WHERE extname = 'pg_stat_statements'") != "1":
        return []
    out = []
    for line in pg.psql("SELECT round(total_exec_time::numeric, 1), calls, rows, "
                        "left(regexp_replace(query, '\s+', ' ', 'g'), 160) FROM pg_stat_statements "
                        "WHERE query !~ '%s' "
                        "ORDER BY total_exec_time DESC LIMIT %d" % (BENCH_STATEMENTS, top)).splitlines():
        ms, calls, nrows, query = line.split("|", 3)
        out.append({"ms": float(ms), "calls": int(calls), "rows": int(nrows), "query": query})
    pg.psql("SELECT pg_stat_statements_reset()")
    return out


def snapshot(si, pg, raw, table, rows, workdir, chunk_rows, mirror=False):
    name = table[0]
    select = "SELECT %s FROM dbo.%s" % (TB.column_list(table), name)
    results = {}
    # the stand-in encodes each row once and then reuses the bytes: the
    # first pass is "cold", every later reader (including all contenders)
    # gets "warm" rows, so the cold figure is shown but not compared
    results["stand-in raw serve (cold)"] = raw.run(si, select)
    results["stand-in raw serve"] = raw.run(si, select)
    # the keyset-paged chunk shape mssql_cdc sends, chunk by chunk
    results["stand-in keyset chunks"] = raw.run(si, keyset_chunks(table, rows, chunk_rows))
    results["freebcp→COPY"] = C.freebcp_copy(si, pg, select, "pipe_%s" % name, workdir)
    results["tds_fdw INSERT…SELECT"] = C.tds_fdw_insert(pg, "ft_%s" % name, "fdw_%s" % name)
    apply_profile(pg)
    results["mssql_cdc snapshot"] = C.mssql_cdc_snapshot(pg, name, rows, si.pid)
    if mirror:
        results["mssql_cdc snapshot"]["profile"] = apply_profile(pg)
        # the same chunks into a mirror, on servers of their own (one table
        # per server and source table); each paused once done
        for label, server, options in MIRROR_SNAPSHOTS:
            pause(pg, "src")
            results[label] = C.mssql_cdc_snapshot(pg, name, rows, si.pid, server=server, options=options)
            results[label]["profile"] = apply_profile(pg)
            pause(pg, server)
            pg.psql("SELECT mssql_cdc.resume('src')")
            C.worker_pid(pg)
    wire = results["stand-in raw serve"]["wire_bytes"]
    for r in results.values():
        r["mb"] = wire / 1e6          # the same source bytes for every reader
    return results


# ---------------------------------------------------------------------------
# (2) streaming catch-up of a backlog
# ---------------------------------------------------------------------------

CHANGE_COLUMNS = "__$start_lsn, __$seqval, __$operation, __$update_mask"

# the same tables are captured a second time through server src_fn, whose
# data_query_mode is 'function' (doc/streaming.md): it stays paused except
# while its run is timed, so the two paths read the same backlog one after
# the other
FUNCTION_SERVER = "src_fn"

def add_streaming_table(pg, name, server="src", function_path=False, options="", snapshot_mode="never"):
    """A table streamed by `server` (add_table's `options`, e.g.
    ", mirror => true"); with function_path also through the function-path
    source FUNCTION_SERVER (paused until function_path_run).  A mirror needs
    snapshot_mode 'initial' (doc/mirror.md): the tables are empty when
    added, so that copy is empty and the table streams once it is done."""
    pg.psql("SELECT mssql_cdc.add_table('%s', 'dbo.%s', snapshot_mode => '%s'%s)"
            % (server, name, snapshot_mode, options))
    C.wait_until(pg, name, lambda state, applied, snap: state == "streaming", 120, server=server)
    if not function_path:
        return
    pg.psql("SELECT mssql_cdc.add_table('%s', 'dbo.%s', snapshot_mode => 'never', staging_table => '%s_%s')"
            % (FUNCTION_SERVER, name, FUNCTION_SERVER, name))
    pause(pg, FUNCTION_SERVER)


def pause(pg, server):
    """Pause a source and wait until its worker is gone."""
    pg.psql("SELECT mssql_cdc.pause('%s')" % server)
    deadline = time.time() + 60
    while pg.psql("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'mssql_cdc worker %s'"
                  % server) != "0":
        if time.time() > deadline:
            raise RuntimeError("the worker of %s did not stop" % server)
        time.sleep(0.05)


def function_path_run(si, pg, name, rows):
    """The function path over the backlog the direct path just applied: its
    worker alone, from resume until it applied every row (its start, well
    under a second, is in the figure)."""
    pause(pg, "src")
    base = C.status(pg, name, FUNCTION_SERVER)[1]
    t0 = time.time()
    pg.psql("SELECT mssql_cdc.resume('%s')" % FUNCTION_SERVER)
    pid = C.worker_pid(pg, server=FUNCTION_SERVER)
    sampler = Sampler(pid)
    source = Sampler(si.pid)
    C.wait_until(pg, name, lambda state, applied, snap: applied - base >= rows, 7200, server=FUNCTION_SERVER)
    seconds = time.time() - t0
    usage = sampler.stop()
    usage["standin_cpu_s"] = source.stop()["cpu_s"]
    pause(pg, FUNCTION_SERVER)
    pg.psql("SELECT mssql_cdc.resume('src')")
    C.worker_pid(pg)
    applied = int(pg.psql("SELECT count(*) FROM %s_%s WHERE _cdc_op = 'insert'" % (FUNCTION_SERVER, name)))
    return dict({"rows": applied, "seconds": seconds}, **usage)


def generate_backlog(si, name, rows, txn_rows):
    """rows inserts into dbo.<name>, txn_rows per source transaction, copied
    from dbo.narrow by key range (one T-SQL loop, so no client round trips)."""
    si.tsql("""DECLARE @i int = 0
WHILE @i < %d
BEGIN
  BEGIN TRANSACTION
  INSERT INTO dbo.%s (%s) SELECT %s FROM dbo.narrow WHERE id > @i * %d AND id <= (@i + 1) * %d
  COMMIT TRANSACTION
  SET @i = @i + 1
END""" % (rows // txn_rows, name, TB.column_list(TB.NARROW), TB.column_list(TB.NARROW), txn_rows, txn_rows),
            timeout=7200)


def catch_up(si, pg, name, rows, txn_rows, server="src", on_start=None, on_done=None):
    """Capture frozen, a backlog of `rows` changes is written; the capture
    job then publishes it at once (timed separately: that is the stand-in's
    work), and mssql_cdc is timed from there until it applied every row
    (on_start and on_done, if given, are called just before the capture job
    publishes and as soon as the last row is applied; on_done's result is
    merged into the result)."""
    si.ctl("capture_freeze")
    t0 = time.time()
    generate_backlog(si, name, rows, txn_rows)
    gen_s = time.time() - t0
    pid = C.worker_pid(pg, server=server)
    base = C.status(pg, name, server)[1]
    if on_start is not None:
        on_start()
    t0 = time.time()
    si.ctl("capture_now")
    capture_s = time.time() - t0
    sampler = Sampler(pid)
    source = Sampler(si.pid)
    t0 = time.time()
    C.wait_until(pg, name, lambda state, applied, snap: applied - base >= rows, 7200, server=server)
    seconds = time.time() - t0
    done = on_done() if on_done is not None else {}
    usage = sampler.stop()
    usage["standin_cpu_s"] = source.stop()["cpu_s"]
    usage.update(done)
    si.ctl("capture_resume")
    applied = C.copied_rows(pg, name, server, "insert")
    return dict({"rows": applied, "seconds": seconds, "capture_s": capture_s, "generate_s": gen_s}, **usage)


def streaming(si, pg, raw, name, rows, txn_rows, workdir, mirror=False):
    """mssql_cdc's catch-up of a backlog, and the baselines on the same
    change rows; with mirror also the same backlog (the same rows, in
    dbo.stream_mirror) applied into a mirror-only table."""
    apply_profile(pg)
    caught_up = catch_up(si, pg, name, rows, txn_rows)
    if mirror:
        caught_up["profile"] = apply_profile(pg)
    function = function_path_run(si, pg, name, rows)
    mirrored = None
    if mirror:
        add_streaming_table(pg, TB.STREAM_MIRROR[0], options=MIRROR_STREAM_OPTIONS, snapshot_mode="initial")
        apply_profile(pg)
        mirrored = catch_up(si, pg, TB.STREAM_MIRROR[0], rows, txn_rows)
        mirrored["profile"] = apply_profile(pg)

    changes = ("SELECT %s, %s FROM cdc.fn_cdc_get_all_changes_dbo_%s(sys.fn_cdc_get_min_lsn(N'dbo_%s'), "
               "sys.fn_cdc_get_max_lsn(), N'all update old') ORDER BY __$start_lsn, __$seqval, __$operation"
               % (CHANGE_COLUMNS, TB.column_list(TB.NARROW), name, name))
    # the direct path's query shape (src/change_query.c), over the same rows:
    # window bounds as binary literals, as the worker sends them (a function
    # call in the WHERE clause is no seek bound for the stand-in, which then
    # evaluates it per row); the change table holds only the backlog
    direct = ("SELECT c.[__$start_lsn], c.[__$command_id], c.[__$seqval], c.[__$operation], c.[__$update_mask], "
              "m.tran_end_time, %s FROM cdc.[dbo_%s_CT] AS c WITH (NOLOCK) LEFT OUTER JOIN cdc.lsn_time_mapping "
              "AS m ON m.start_lsn = c.[__$start_lsn] WHERE c.[__$start_lsn] > 0x00000000000000000000 "
              "AND c.[__$start_lsn] <= %s ORDER BY c.[__$start_lsn], c.[__$command_id], "
              "c.[__$seqval], c.[__$operation]"
              % (", ".join("c.[%s]" % col for col, _ in TB.NARROW[1]), name, si.max_lsn()))
    results = {}
    results["stand-in change query"] = raw.run(si, changes)
    results["stand-in change query (direct)"] = raw.run(si, direct)
    target = "pipe_changes_%s" % name
    pg.psql("CREATE TABLE %s (start_lsn bytea, seqval bytea, operation int, update_mask bytea, id int, big bigint, "
            "name text, ts timestamp, amount numeric(18,4), PRIMARY KEY (start_lsn, seqval, operation))" % target)
    results["freebcp→COPY"] = C.freebcp_copy(si, pg, changes, target, workdir)
    results["mssql_cdc streaming"] = caught_up
    results["mssql_cdc streaming (function)"] = function
    if mirrored is not None:
        results[MIRROR_STREAM_LABEL] = mirrored
    wire = results["stand-in change query"]["wire_bytes"]
    for r in results.values():
        r["mb"] = wire / 1e6
    return results


# ---------------------------------------------------------------------------
# (3) the cost of TLS
# ---------------------------------------------------------------------------

def tls_cost(si, pg, raw, rows, txn_rows, chunk_rows):
    """mssql_cdc's snapshot of the narrow table and its catch-up of a
    small-transaction backlog, each twice back to back: through a foreign
    server with encryption 'off' and through one with TLS and the
    certificate validated (the stand-in offers TLS with a test CA's
    certificate; servers plain and tls, see prepare_postgres)."""
    results = {}
    # the stand-in keeps encoded rows per query shape: read the snapshot's
    # chunks once, so that neither snapshot pays for encoding them (the two
    # backlogs are both new rows)
    raw.run(si, keyset_chunks(TB.NARROW, rows, chunk_rows))
    for server, label in (("plain", "plain text"), ("tls", "TLS, certificate validated")):
        r = C.mssql_cdc_snapshot(pg, TB.NARROW[0], rows, si.pid, server=server)
        r["encrypted"] = pg.psql("SELECT encrypted FROM mssql_cdc.status WHERE server = '%s'" % server)
        results["snapshot narrow, " + label] = r
    for server, table, label in (("plain", TB.STREAM_PLAIN[0], "plain text"),
                                 ("tls", TB.STREAM_TLS[0], "TLS, certificate validated")):
        add_streaming_table(pg, table, server)
        r = catch_up(si, pg, table, rows // txn_rows * txn_rows, txn_rows, server)
        r["encrypted"] = pg.psql("SELECT encrypted FROM mssql_cdc.status WHERE server = '%s' LIMIT 1" % server)
        results["streaming %d rows per transaction, %s" % (txn_rows, label)] = r
    return results


# ---------------------------------------------------------------------------
# (4) latency at a steady rate
# ---------------------------------------------------------------------------

POLLER = r"""
CREATE OR REPLACE FUNCTION pg_temp.bench_poll(staging regclass, expected int, timeout_s float8)
RETURNS TABLE(id int, latency_ms float8) LANGUAGE plpgsql AS $f$
DECLARE
	last_id int := 0;
	deadline timestamptz := clock_timestamp() + timeout_s * interval '1 second';
	r record;
BEGIN
	CREATE TEMP TABLE seen (id int, latency_ms float8);
	-- a volatile function takes a new snapshot per statement: each pass sees
	-- what the worker committed since the last one
	WHILE last_id < expected AND clock_timestamp() < deadline LOOP
		FOR r IN EXECUTE format('SELECT id, sent_at FROM %s WHERE id > $1', staging) USING last_id LOOP
			INSERT INTO seen VALUES (r.id,
				extract(epoch FROM (clock_timestamp() AT TIME ZONE 'UTC') - r.sent_at) * 1000);
			last_id := greatest(last_id, r.id);
		END LOOP;
		PERFORM pg_sleep(0.001);
	END LOOP;
	RETURN QUERY SELECT s.id, s.latency_ms FROM seen s ORDER BY s.id;
END
$f$;
"""


def latency(si, pg, seconds, interval_ms):
    """One insert every interval_ms for `seconds` (autocommit, each row
    carries SYSUTCDATETIME() of its insert); a tight poller in PostgreSQL
    notes when each row becomes visible."""
    name = TB.LATENCY[0]
    add_streaming_table(pg, name, function_path=False)
    staging = pg.psql("SELECT staging_table FROM mssql_cdc.status WHERE source_table = 'dbo.%s'" % name)
    n = max(1, int(seconds * 1000 / interval_ms))
    pid = C.worker_pid(pg)
    sampler = Sampler(pid)
    poller = subprocess.Popen(pg.psql_cmd() + ["-c", POLLER + "SELECT * FROM pg_temp.bench_poll('%s', %d, %f)"
                                               % (staging, n, seconds + 60)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    t0 = time.time()
    si.tsql("""DECLARE @i int = 1
WHILE @i <= %d
BEGIN
  INSERT INTO dbo.%s (id, sent_at) VALUES (@i, SYSUTCDATETIME())
  WAITFOR DELAY '00:00:00.%03d'
  SET @i = @i + 1
END""" % (n, name, interval_ms), timeout=seconds * 3 + 120)
    driven_s = time.time() - t0
    out, err = poller.communicate(timeout=seconds + 120)
    usage = sampler.stop()
    if poller.returncode != 0:
        raise RuntimeError("latency poller failed: %s" % err)
    lat = sorted(float(line.split("|")[1]) for line in out.split() if "|" in line)
    if len(lat) != n:
        raise RuntimeError("the poller saw %d of %d rows" % (len(lat), n))

    def pct(p):
        return lat[min(len(lat) - 1, int(round(p / 100.0 * (len(lat) - 1))))]
    return dict({"rows": len(lat), "seconds": driven_s, "rate": n / driven_s, "p50_ms": pct(50),
                 "p99_ms": pct(99), "max_ms": lat[-1], "mean_ms": statistics.mean(lat)}, **usage)
