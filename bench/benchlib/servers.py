"""The two servers every contender shares: the SQL Server stand-in and a
private PostgreSQL cluster, both on loopback, both owned by this run.

Every external command runs with a timeout: a benchmark that hangs is
worse than one that fails."""

import os
import socket
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STANDIN_DIR = os.path.join(REPO, "test", "standin")
sys.path.insert(0, STANDIN_DIR)

from standin.control import call   # noqa: E402

SA_PASSWORD = "Passw0rd!"
SOURCE_DB = "cdcdb"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run(cmd, timeout, **kw):
    """subprocess.run that fails loudly with the command's output."""
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if p.returncode != 0:
        raise RuntimeError("%s failed (exit %d):\n%s%s" % (cmd[0], p.returncode, p.stdout[-3000:],
                                                           p.stderr[-3000:]))
    return p.stdout


class StandIn:
    """test/standin/run-standin in its own process."""

    def __init__(self, workdir, capture_interval, tds_log=False, gc="freeze"):
        self.workdir = workdir
        ready = os.path.join(workdir, "standin.ready")
        self.log = open(os.path.join(workdir, "standin.out"), "w")
        # a certificate of a test CA, offered only in the TLS phase (offer_tls):
        # until then every contender talks to a server without TLS, as before
        certs = os.path.join(workdir, "certs")
        run([os.path.join(STANDIN_DIR, "make-test-certs"), certs], 60)
        self.ca_file = os.path.join(certs, "ca.pem")
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", os.path.join(STANDIN_DIR, "run-standin"), "--port", "0",
             "--control-port", "0", "--capture-interval", str(capture_interval),
             "--tls-cert", os.path.join(certs, "server.pem"), "--tls-key", os.path.join(certs, "server.key"),
             "--tls-offer", "not-supported", "--gc", gc,
             "--ready-file", ready, "--exit-with-parent"] + (["--tds-log", os.path.join(workdir, "tds.log")] if tds_log else []),
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while not os.path.exists(ready):
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError("the stand-in did not start (see %s/standin.out)" % workdir)
            time.sleep(0.05)
        fields = dict(kv.split("=") for kv in open(ready).read().split()[2:])
        self.port, self.control, self.pid = int(fields["port"]), int(fields["control"]), int(fields["pid"])
        # one freetds.conf for tsql, freebcp and tds_fdw: same TDS version and packet size
        self.freetds_conf = os.path.join(workdir, "freetds.conf")
        with open(self.freetds_conf, "w") as f:
            f.write("[global]\n\ttds version = 7.4\n\tencryption = off\n\tclient charset = UTF-8\n"
                    "[standin]\n\thost = 127.0.0.1\n\tport = %d\n" % self.port)
        self.env = dict(os.environ, FREETDSCONF=self.freetds_conf)

    def tsql(self, sql, timeout=600):
        """Run one batch with FreeTDS tsql; raise on any server message of severity > 10."""
        out = run(["tsql", "-S", "standin", "-U", "sa", "-P", SA_PASSWORD, "-D", SOURCE_DB, "-o", "q"],
                  timeout, input=sql + "\ngo\n", env=self.env)
        if "Msg " in out:
            raise RuntimeError("T-SQL failed: %s\n%s" % (sql[:500], out[-2000:]))
        return out

    def ctl(self, cmd, timeout=600, **args):
        reply = call(self.control, cmd, timeout=timeout, **args)
        if not reply.get("ok"):
            raise RuntimeError("stand-in control %s failed: %s" % (cmd, reply))
        return reply

    def offer_tls(self, on):
        """SQL Server with a certificate, encryption not forced (on), or none."""
        self.ctl("tls", offer="off" if on else "not-supported")

    def max_lsn(self):
        return self.ctl("stats")["databases"][SOURCE_DB].get("max_lsn")

    def stop(self):
        if self.proc.poll() is None:
            try:
                call(self.control, "shutdown", timeout=10)
                self.proc.wait(timeout=30)
            except Exception:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def pg_bindir():
    """The first PATH directory with initdb, pg_ctl and psql together (a
    private tree in TAP runs; Debian's /usr/bin has wrappers, not initdb),
    else Debian's PostgreSQL 15."""
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if all(os.access(os.path.join(d, exe), os.X_OK) for exe in ("initdb", "pg_ctl", "psql")):
            return d
    return "/usr/lib/postgresql/15/bin"


class Postgres:
    """A private cluster in workdir/pgdata with the settings every contender shares."""

    def __init__(self, workdir, settings):
        self.bindir = pg_bindir()
        self.datadir = os.path.join(workdir, "pgdata")
        self.sockdir = workdir
        self.port = free_port()
        self.logfile = os.path.join(workdir, "postgres.log")
        run([os.path.join(self.bindir, "initdb"), "-D", self.datadir, "-A", "trust", "-U", "postgres"], 120)
        with open(os.path.join(self.datadir, "postgresql.conf"), "a") as f:
            f.write("listen_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = '%s'\n"
                    % (self.port, self.sockdir))
            for k, v in settings.items():
                f.write("%s = %s\n" % (k, v))
        run([os.path.join(self.bindir, "pg_ctl"), "-D", self.datadir, "-l", self.logfile, "-w", "start"], 120)

    def psql(self, sql, timeout=3600, db="postgres"):
        """Run SQL with psql; returns unaligned, tuples-only output."""
        return run([os.path.join(self.bindir, "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
                    "-h", self.sockdir, "-p", str(self.port), "-U", "postgres", "-d", db, "-c", sql],
                   timeout).strip()

    def psql_cmd(self, db="postgres"):
        return [os.path.join(self.bindir, "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
                "-h", self.sockdir, "-p", str(self.port), "-U", "postgres", "-d", db]

    def stop(self):
        subprocess.run([os.path.join(self.bindir, "pg_ctl"), "-D", self.datadir, "-m", "fast", "stop"],
                       capture_output=True, timeout=120)
