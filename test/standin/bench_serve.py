#!/usr/bin/python3
"""Serve-rate benchmark: how fast the stand-in streams narrow rows to a
FreeTDS db-lib client (tests/clients/dblib_dump.c in count mode: a
dbnextrow loop).  Target: >= 300k rows/s so the stand-in is never the
bottleneck of the project's benchmarks.

Table: (id int, big bigint, name nvarchar(20), ts datetime2, amount decimal(18,4)).
Run 1 is "cold" (rows encoded from values), later runs are "warm" (the
engine hands out CachedRow and the encoded bytes are reused).

  ./bench_serve.py                     real engine, 1,000,000 rows, 3 runs
  ./bench_serve.py --engine fake       protocol layer alone (tests' fake engine)
  ./bench_serve.py --rows 200000 --runs 5 --packet-size 32767
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from standin.control import call   # noqa: E402

CREATE = ("CREATE TABLE dbo.bench (id int NOT NULL PRIMARY KEY, big bigint NULL, "
          "name nvarchar(20) NULL, ts datetime2 NULL, amount decimal(18,4) NULL)")
SELECT = "SELECT id, big, name, ts, amount FROM dbo.bench"


def build_client(workdir):
    exe = os.path.join(workdir, "dblib_dump")
    subprocess.run(["cc", "-O2", "-o", exe, os.path.join(HERE, "tests", "clients", "dblib_dump.c"),
                    "-lsybdb"], check=True)
    return exe


def start_standin(engine, workdir):
    cmd = [os.path.join(HERE, "run-standin"), "--port", "0", "--control-port", "0",
           "--capture-interval", "5"]
    env = dict(os.environ)
    if engine == "fake":
        cmd += ["--engine", "fake_engine:FakeEngine"]
        env["PYTHONPATH"] = os.path.join(HERE, "tests", "protocol")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    line = p.stdout.readline().split()
    fields = dict(kv.split("=") for kv in line[2:])
    return p, int(fields["port"]), int(fields["control"])


def run_client(exe, port, sql, packet_size, workdir):
    conf = os.path.join(workdir, "freetds.conf")
    with open(conf, "w") as f:
        f.write("[global]\n\ttds version = 7.4\n\tencryption = off\n\tclient charset = UTF-8\n")
    env = dict(os.environ, FREETDSCONF=conf, TDSVER="7.4")
    args = [exe, "-c", "-d", "cdcdb"]
    if packet_size:
        args += ["-P", str(packet_size)]
    out = subprocess.run(args + ["127.0.0.1:%d" % port, "sa", "Passw0rd!", sql],
                         capture_output=True, text=True, env=env, check=True).stdout
    for line in out.splitlines():
        if line.startswith("ROWS "):
            f = line.split()
            return int(f[1]), float(f[3]), int(f[5])
    raise RuntimeError("client output without ROWS line:\n" + out)


def wire_bytes(control):
    """Bytes the server sent on the last closed connection (statement log)."""
    entries = call(control, "log", limit=50)["entries"]
    for e in reversed(entries):
        if e["event"] == "disconnect":
            return e.get("bytes_sent", 0)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", choices=("real", "fake"), default="real")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--packet-size", type=int, default=0, help="requested TDS packet size (default 4096)")
    a = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="bench-serve-")
    exe = build_client(workdir)
    proc, port, control = start_standin(a.engine, workdir)
    try:
        if a.engine == "real":
            subprocess.run([exe, "-d", "cdcdb", "127.0.0.1:%d" % port, "sa", "Passw0rd!", CREATE],
                           check=True, capture_output=True, env=dict(os.environ, TDSVER="7.4"))
            t0 = time.time()
            reply = call(control, "fill_table", table="dbo.bench", rows=a.rows, database="cdcdb",
                         timeout=600)
            if not reply.get("ok"):
                raise SystemExit("fill_table failed: %s" % reply)
            print("filled %d rows in %.1f s" % (a.rows, time.time() - t0))
            queries = [SELECT] * a.runs
        else:
            # warm-up run builds the fake table; "cached" makes the engine send CachedRow
            run_client(exe, port, "rows %d" % a.rows, a.packet_size, workdir)
            queries = ["rows %d" % a.rows] + ["rows %d cached" % a.rows] * a.runs
        print("%-6s %-5s %10s %9s %12s %10s %10s" % ("run", "cache", "rows", "seconds", "rows/s",
                                                    "wire MB/s", "data MB/s"))
        for i, sql in enumerate(queries):
            rows, secs, data = run_client(exe, port, sql, a.packet_size, workdir)
            wire = wire_bytes(control)
            if a.engine == "real":
                cache = "cold" if i == 0 else "warm"
            else:
                cache = "none" if i == 0 else ("cold" if i == 1 else "warm")
            print("%-6d %-5s %10d %9.3f %12.0f %10.1f %10.1f" % (
                i + 1, cache, rows, secs, rows / secs, wire / secs / 1e6, data / secs / 1e6))
            if rows != a.rows:
                raise SystemExit("expected %d rows, got %d" % (a.rows, rows))
    finally:
        call(control, "shutdown")
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
