"""The run-standin entry point: flags, ready line and file, statement log,
clean stop on SIGTERM and on the control command shutdown.  Uses the fake
engine (--engine) so it does not depend on the SQL engine."""

import os
import signal
import subprocess
import sys
import time
import unittest

import harness
from standin.control import call

RUN = os.path.join(harness.STANDIN_DIR, "run-standin")


class _Address:
    def __init__(self, port):
        self.address = "127.0.0.1:%d" % port


def start(*extra):
    env = dict(os.environ, PYTHONPATH=harness.HERE)
    p = subprocess.Popen([RUN, "--port", "0", "--control-port", "0",
                          "--engine", "fake_engine:FakeEngine"] + list(extra),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = p.stdout.readline().strip()
    return p, line


class RunStandin(unittest.TestCase):
    def test_ready_line_file_log_and_sigterm(self):
        ready = os.path.join(harness.work_dir(), "ready")
        log = os.path.join(harness.work_dir(), "run.log")
        p, line = start("--ready-file", ready, "--tds-log", log, "--login", "u1:pw1",
                        "--database", "db1", "--database", "db2")
        try:
            self.assertRegex(line, r"^standin ready port=\d+ control=\d+$")
            fields = dict(kv.split("=") for kv in line.split()[2:])
            with open(ready) as f:
                self.assertEqual(f.read().strip(), "%s pid=%d" % (line, p.pid))
            addr = _Address(int(fields["port"]))
            rc, out, _ = harness.run_dblib(addr, "rows 2", user="u1", password="pw1",
                                           options=["-d", "db2"])
            self.assertEqual(rc, 0, out)
            rc, out, _ = harness.run_dblib(addr, "rows 2")      # sa is not a login here
            self.assertIn("MSG 18456", out)
            self.assertTrue(call(int(fields["control"]), "ping")["ok"])
        finally:
            p.send_signal(signal.SIGTERM)
            rc = p.wait(timeout=10)
        self.assertEqual(rc, 0)
        self.assertIn("standin stopped", p.stdout.read())
        with open(log) as f:
            self.assertIn('"sql": "rows 2"', f.read())

    def test_exit_with_parent(self):
        # a parent that starts run-standin and is killed at once, before it
        # can stop it: the orphan stops by itself; without the flag it stays
        ready = os.path.join(harness.work_dir(), "orphan.ready")
        env = dict(os.environ, PYTHONPATH=harness.HERE)
        for flag, stays in (["--exit-with-parent"], False), ([], True):
            if os.path.exists(ready):
                os.unlink(ready)
            parent = subprocess.Popen(
                ["/bin/sh", "-c", '"$0" "$@" >/dev/null & wait', RUN, "--port", "0", "--control-port", "0",
                 "--engine", "fake_engine:FakeEngine", "--ready-file", ready] + flag, env=env)
            deadline = time.time() + 10
            while not os.path.exists(ready) and time.time() < deadline:
                time.sleep(0.05)
            pid = int(open(ready).read().split("pid=")[1])
            parent.kill()
            parent.wait()
            deadline = time.time() + 5
            while time.time() < deadline and os.path.exists("/proc/%d" % pid) and \
                    open("/proc/%d/stat" % pid).read().split()[2] != "Z":
                time.sleep(0.05)
            alive = os.path.exists("/proc/%d" % pid) and open("/proc/%d/stat" % pid).read().split()[2] != "Z"
            if alive:
                os.kill(pid, signal.SIGTERM)
            self.assertEqual(alive, stays, flag)

    def test_control_shutdown(self):
        p, line = start()
        fields = dict(kv.split("=") for kv in line.split()[2:])
        self.assertTrue(call(int(fields["control"]), "shutdown")["ok"])
        self.assertEqual(p.wait(timeout=10), 0)
        p.stdout.close()
        p.stderr.close()

    def test_tls_flags(self):
        from test_tls import cert_pair, ca_file, dblib
        cert, key = cert_pair("server")
        p, line = start("--tls-cert", cert, "--tls-key", key, "--tls-offer", "on")
        try:
            fields = dict(kv.split("=") for kv in line.split()[2:])
            addr = _Address(int(fields["port"]))
            rc, out, err = dblib(addr, "rows 1", encryption="require", ca=ca_file())
            self.assertEqual(rc, 0, out + err)
            rc, out, _ = dblib(addr, "rows 1", encryption="off")     # Force Encryption
            self.assertIn("ERR 20002", out)
            self.assertEqual(call(int(fields["control"]), "tls")["tls"]["offer"], "on")
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=10)
            p.stdout.close()
            p.stderr.close()
        p = subprocess.run([RUN, "--tls-offer", "on", "--engine", "fake_engine:FakeEngine"],
                           capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=harness.HERE))
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("needs a certificate", p.stderr)

    def test_rejects_non_loopback_host(self):
        p = subprocess.run([RUN, "--host", "0.0.0.0", "--engine", "fake_engine:FakeEngine"],
                           capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=harness.HERE))
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("loopback", p.stderr)


if __name__ == "__main__":
    unittest.main()
