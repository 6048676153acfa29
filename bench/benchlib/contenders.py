"""One function per contender.  Each copies the rows a SELECT returns from
the stand-in into PostgreSQL (or, for the raw serve rate, into nothing)
and returns {"rows", "seconds", ...}; the caller checks the row counts."""

import os
import subprocess
import sys
import time

from .servers import SA_PASSWORD, SOURCE_DB, STANDIN_DIR, run

sys.path.insert(0, STANDIN_DIR)
from bench_serve import build_client   # noqa: E402  (the stand-in's own db-lib counting client)


class RawServe:
    """The stand-in's serve rate: a db-lib dbnextrow loop that keeps nothing
    (tests/clients/dblib_dump.c in count mode)."""

    def __init__(self, workdir):
        self.exe = build_client(workdir)

    def run(self, standin, sqls, timeout=3600):
        """Run one or more queries on one connection; rows and seconds are summed."""
        if isinstance(sqls, str):
            sqls = [sqls]
        since = log_seq(standin)
        out = run([self.exe, "-c", "-d", SOURCE_DB, "127.0.0.1:%d" % standin.port, "sa", SA_PASSWORD] + sqls,
                  timeout, env=dict(standin.env, TDSVER="7.4"))
        rows, seconds, seen = 0, 0.0, 0
        for line in out.splitlines():
            if line.startswith("FAIL"):
                raise RuntimeError("dblib_dump: %s" % out[-2000:])
            if line.startswith("ROWS "):
                f = line.split()
                rows += int(f[1])
                seconds += float(f[3])
                seen += 1
        if seen != len(sqls):
            raise RuntimeError("dblib_dump printed %d ROWS lines for %d queries:\n%s" % (seen, len(sqls), out[-2000:]))
        return {"rows": rows, "seconds": seconds, "wire_bytes": wire_bytes_since(standin, since)}


def log_seq(standin):
    entries = standin.ctl("log", limit=1)["entries"]
    return entries[-1]["seq"] if entries else 0


def wire_bytes_since(standin, since):
    """Bytes the stand-in sent on the first connection closed after log entry
    `since` (its statement log records them at disconnect)."""
    deadline = time.time() + 5
    while time.time() < deadline:
        for e in standin.ctl("log", since=since, limit=1000)["entries"]:
            if e["event"] == "disconnect":
                return e.get("bytes_sent", 0)
        time.sleep(0.05)
    return 0


def freebcp_copy(standin, pg, sql, target, workdir, timeout=3600):
    """The bulk-path ceiling: freebcp queryout (character mode, tab separated)
    into a named pipe that psql's COPY FROM STDIN reads.  Both run at once."""
    fifo = os.path.join(workdir, "pipe.%s" % target)
    if os.path.exists(fifo):
        os.unlink(fifo)
    os.mkfifo(fifo)
    bcp_log = open(os.path.join(workdir, "freebcp.%s.log" % target), "w")
    copy_cmd = " ".join("'%s'" % a for a in pg.psql_cmd()) + \
        " -c 'COPY %s FROM STDIN' < '%s'" % (target, fifo)
    t0 = time.time()
    bcp = subprocess.Popen(["freebcp", sql, "queryout", fifo, "-S", "standin", "-U", "sa", "-P", SA_PASSWORD,
                            "-D", SOURCE_DB, "-c", "-t", "\\t", "-b", "100000"],
                           stdout=bcp_log, stderr=subprocess.STDOUT, env=standin.env)
    copy = subprocess.Popen(["sh", "-c", copy_cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        copy_out, copy_err = copy.communicate(timeout=timeout)
        bcp_rc = bcp.wait(timeout=60)
    finally:
        for p in (bcp, copy):
            if p.poll() is None:
                p.kill()
                p.wait()
        bcp_log.close()
        os.unlink(fifo)
    seconds = time.time() - t0
    if bcp_rc != 0 or copy.returncode != 0:
        raise RuntimeError("freebcp | COPY into %s failed: freebcp exit %d (see freebcp.%s.log), psql exit %d %s"
                           % (target, bcp_rc, target, copy.returncode, copy_err))
    return {"rows": int(pg.psql("SELECT count(*) FROM %s" % target)), "seconds": seconds}


def tds_fdw_insert(pg, foreign_table, target, timeout=3600):
    """tds_fdw: INSERT INTO target SELECT * FROM a foreign table."""
    t0 = time.time()
    pg.psql("INSERT INTO %s SELECT * FROM %s" % (target, foreign_table), timeout=timeout)
    seconds = time.time() - t0
    return {"rows": int(pg.psql("SELECT count(*) FROM %s" % target)), "seconds": seconds}


def worker_pid(pg, timeout=60, server="src"):
    """The worker's pid: the worker of foreign server `server` (default src; None: any worker)
    (its application_name is "mssql_cdc worker <server>")."""
    deadline = time.time() + timeout
    only = "" if server is None else " AND application_name = 'mssql_cdc worker %s'" % server
    while time.time() < deadline:
        pid = pg.psql("SELECT pid FROM pg_stat_activity WHERE backend_type = 'mssql_cdc worker'%s LIMIT 1" % only)
        if pid.isdigit():
            return int(pid)
        time.sleep(0.1)
    raise RuntimeError("no mssql_cdc worker is running (see %s)" % pg.logfile)


def status(pg, source_table, server="src"):
    row = pg.psql("SELECT state, rows_applied, snapshot_rows, coalesce(last_error, '') FROM mssql_cdc.status "
                  "WHERE source_table = 'dbo.%s' AND server = '%s'" % (source_table, server))
    state, applied, snap, err = row.split("|", 3)
    return state, int(applied), int(snap), err


def wait_until(pg, source_table, done, timeout, poll=0.05, server="src"):
    """Poll mssql_cdc.status until done(state, rows_applied, snapshot_rows);
    an 'error' state that persists is a failure, not a slow run."""
    deadline = time.time() + timeout
    errors_since = None
    while True:
        st = status(pg, source_table, server)
        if done(*st[:3]):
            return st
        if st[0] == "error":
            errors_since = errors_since or time.time()
            if time.time() - errors_since > 30:
                raise RuntimeError("dbo.%s is in error: %s" % (source_table, st[3]))
        else:
            errors_since = None
        if time.time() > deadline:
            raise RuntimeError("dbo.%s did not finish in %d s: %s" % (source_table, timeout, st))
        time.sleep(poll)


def mirror_table(pg, source_table, server="src"):
    """The mirror table of a table (doc/mirror.md), or None."""
    name = pg.psql("SELECT format('%%I.%%I', mirror_schema, mirror_table) FROM mssql_cdc.tables "
                   "WHERE server_name = '%s' AND source_table = '%s' AND mirror_table IS NOT NULL"
                   % (server, source_table))
    return name or None


def copied_rows(pg, source_table, server, op):
    """Rows a table holds after a run: its mirror's rows if it has one (a
    mirror-only table stages nothing), else its staging rows of _cdc_op op."""
    mirror = mirror_table(pg, source_table, server)
    if mirror:
        return int(pg.psql("SELECT count(*) FROM %s" % mirror))
    staging = pg.psql("SELECT staging_table FROM mssql_cdc.status WHERE source_table = 'dbo.%s' AND server = '%s'"
                      % (source_table, server))
    return int(pg.psql("SELECT count(*) FROM %s WHERE _cdc_op = '%s'" % (staging, op)))


def mssql_cdc_snapshot(pg, source_table, rows, standin_pid, timeout=7200, server="src", staging_table=None,
                       on_done=None, options=""):
    """mssql_cdc's initial snapshot: add_table (with `options`, e.g.
    ", mirror => true"), then the time until the table streams (every chunk
    committed and the handoff done); on_done's result, called right then, is
    merged into the result.  rows: the staging table's snapshot rows, or the
    mirror's rows when the table has a mirror."""
    t0 = time.time()
    pg.psql("SELECT mssql_cdc.add_table('%s', 'dbo.%s', snapshot_mode => 'initial'%s%s)"
            % (server, source_table, "" if staging_table is None else ", staging_table => '%s'" % staging_table,
               options))
    pid = worker_pid(pg, server=server)
    from .procstat import Sampler
    sampler = Sampler(pid)
    source = Sampler(standin_pid)
    wait_until(pg, source_table, lambda state, applied, snap: state == "streaming", timeout, server=server)
    seconds = time.time() - t0
    done = on_done() if on_done is not None else {}
    usage = sampler.stop()
    usage["standin_cpu_s"] = source.stop()["cpu_s"]
    usage.update(done)
    staging = pg.psql("SELECT staging_table FROM mssql_cdc.status WHERE source_table = 'dbo.%s' AND server = '%s'"
                      % (source_table, server))
    copied = copied_rows(pg, source_table, server, "snapshot")
    return dict({"rows": copied, "seconds": seconds, "staging": staging}, **usage)
