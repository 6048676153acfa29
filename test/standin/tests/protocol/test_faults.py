"""Fault injection through the control port: drop_after_rows, stall (before
the response and mid-result), refuse_logins, restart, corrupt, scoping by
SPID / existing / new connections, and the statement log."""

import json
import os
import subprocess
import sys
import time
import unittest

import harness
from harness import RawClient, StandinTestCase, parse_tokens
from standin.control import call
from standin.tds import packets as P
from standin.tds import tokens as T


def wait_for(predicate, timeout=5.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


class DropAfterRows(StandinTestCase):
    def test_dblib_sees_eof_after_n_rows(self):
        closed_before = self.standin.engine.closed
        self.standin.ctl("drop_after_rows", rows=10)
        rc, out, _ = harness.run_dblib(self.standin, "rows 1000")
        self.assertNotEqual(rc, 0)
        self.assertEqual(len(harness.parse_dump(out)[0]["rows"]), 10)
        self.assertIn("ERR 20017", out)           # Unexpected EOF from the server
        self.assertTrue(wait_for(lambda: self.standin.engine.closed > closed_before))
        # one-shot: the next connection is fine
        rc, out, _ = harness.run_dblib(self.standin, "rows 100", options=["-c"])
        self.assertEqual(rc, 0, out)

    @unittest.skipUnless(harness.tedious_available(), "tedious not installed")
    def test_tedious_sees_connection_loss(self):
        self.standin.ctl("drop_after_rows", rows=3, match="rows 50")
        rc, out, _ = harness.run_tedious(self.standin, "rows 50")
        self.assertNotEqual(rc, 0)
        self.assertIn("ESOCKET", out)

    def test_only_the_targeted_spid(self):
        a, b = RawClient(self.standin.port), RawClient(self.standin.port)
        a.login()
        b.login()
        spids = sorted(c["spid"] for c in self.standin.ctl("connections")["connections"])
        self.standin.ctl("drop_after_rows", rows=1, spid=spids[-1])
        a.batch("rows 5")                       # a is the older connection
        self.assertEqual(parse_tokens(a.read_message()[1])[-1], ("DONE", T.DONE_COUNT, 5))
        b.batch("rows 5")
        with self.assertRaises(Exception):
            b.read_message()
        a.close()
        b.close()

    def test_scope_new_spares_existing_connections(self):
        old = RawClient(self.standin.port)
        old.login()
        self.standin.ctl("drop_after_rows", rows=1, scope="new", times=-1)
        old.batch("rows 3")
        self.assertEqual(parse_tokens(old.read_message()[1])[-1], ("DONE", T.DONE_COUNT, 3))
        new = RawClient(self.standin.port)
        new.login()
        new.batch("rows 3")
        with self.assertRaises(Exception):
            new.read_message()
        old.close()
        new.close()

    def test_scope_existing_spares_new_connections(self):
        old = RawClient(self.standin.port)
        old.login()
        self.standin.ctl("drop_after_rows", rows=0, scope="existing", times=-1)
        new = RawClient(self.standin.port)
        new.login()
        new.batch("rows 2")
        self.assertEqual(parse_tokens(new.read_message()[1])[-1], ("DONE", T.DONE_COUNT, 2))
        old.batch("rows 2")
        with self.assertRaises(Exception):
            old.read_message()
        old.close()
        new.close()


class Stall(StandinTestCase):
    def test_stall_before_response(self):
        self.standin.ctl("stall", seconds=1.0)
        c = RawClient(self.standin.port)
        c.login()
        t0 = time.time()
        c.batch("rows 2")
        toks = parse_tokens(c.read_message()[1])
        self.assertGreaterEqual(time.time() - t0, 0.95)
        self.assertEqual(toks[-1], ("DONE", T.DONE_COUNT, 2))
        c.close()

    def test_stall_mid_result_delivers_rows_first(self):
        self.standin.ctl("stall", seconds=1.5, after_rows=5)
        c = RawClient(self.standin.port)
        c.login()
        t0 = time.time()
        c.batch("rows 20")
        # the first packet (with the first rows) arrives before the stall ends
        _ptype, status, payload, _h = c._read_packet()
        first_packet_at = time.time() - t0
        self.assertLess(first_packet_at, 1.0)
        self.assertEqual(status & 1, 0)
        rest = payload
        while not status & 1:
            _ptype, status, payload, _h = c._read_packet()
            rest += payload
        self.assertGreaterEqual(time.time() - t0, 1.4)
        toks = parse_tokens(rest)
        self.assertEqual(len([t for t in toks if t[0] == "ROW"]), 20)
        self.assertEqual(toks[-1], ("DONE", T.DONE_COUNT, 20))
        c.close()

    def test_stall_held_until_released(self):
        reply = self.standin.ctl("stall", after_rows=5, hold=True)
        self.assertEqual(reply["fault"]["params"], {"seconds": 300.0, "after_rows": 5, "hold": True})
        c = RawClient(self.standin.port)
        c.login()
        # a shorter result does not use the fault
        c.batch("rows 3")
        toks = parse_tokens(c.read_message()[1])
        self.assertEqual(len([t for t in toks if t[0] == "ROW"]), 3)
        self.assertEqual(len(self.standin.ctl("faults")["faults"]), 1)
        c.batch("rows 20")
        _ptype, status, payload, _h = c._read_packet()
        self.assertEqual(status & 1, 0)
        self.assertTrue(wait_for(lambda: self.standin.ctl("faults")["held"]))
        held = self.standin.ctl("faults")["held"]
        self.assertEqual([(h["rows_sent"], h["hold"]) for h in held], [(5, held[0]["hold"])])
        time.sleep(0.5)
        # still held: nothing more arrives until the release
        self.assertEqual(len(self.standin.ctl("faults")["held"]), 1)
        self.assertEqual(self.standin.ctl("release")["released"], 1)
        rest = payload
        while not status & 1:
            _ptype, status, payload, _h = c._read_packet()
            rest += payload
        toks = parse_tokens(rest)
        self.assertEqual(len([t for t in toks if t[0] == "ROW"]), 20)
        self.assertEqual(toks[-1], ("DONE", T.DONE_COUNT, 20))
        self.assertEqual(self.standin.ctl("faults")["held"], [])
        self.assertEqual(self.standin.ctl("release")["released"], 0)
        c.close()

    def test_hold_needs_after_rows(self):
        with self.assertRaises(Exception):
            self.standin.ctl("stall", hold=True)

    def test_stall_at_login_trips_the_login_timeout(self):
        # a stall well beyond the 1 s login timeout, so that even a loaded
        # CI machine tells "timed out" from "waited for the stall to end"
        self.standin.ctl("stall", seconds=6, phase="login")
        t0 = time.time()
        rc, out, _ = harness.run_dblib(self.standin, "rows 1", options=["-l", "1"])
        self.assertNotEqual(rc, 0)
        self.assertIn("ERR 20003", out)          # SYBETIME during login
        self.assertLess(time.time() - t0, 5.0)
        rc, out, _ = harness.run_dblib(self.standin, "rows 1")
        self.assertEqual(rc, 0, out)

    def test_socket_stays_open_during_stall(self):
        self.standin.ctl("stall", seconds=1.0)
        c = RawClient(self.standin.port, timeout=0.3)
        c.login()
        c.batch("rows 1")
        with self.assertRaises(P.ConnectionClosed):     # our read timed out
            c.read_message()
        c.sock.settimeout(5)
        self.assertEqual(parse_tokens(c.read_message()[1])[-1], ("DONE", T.DONE_COUNT, 1))
        c.close()


class RestartAndKill(StandinTestCase):
    def test_restart_closes_everything_and_clients_reconnect(self):
        c = RawClient(self.standin.port)
        c.login()
        reply = self.standin.ctl("restart")
        self.assertGreaterEqual(reply["closed_connections"], 1)
        c.sock.settimeout(5)
        self.assertEqual(c.sock.recv(100), b"")
        rc, out, _ = harness.run_dblib(self.standin, "rows 2")
        self.assertEqual(rc, 0, out)

    def test_restart_with_downtime_refuses_then_recovers(self):
        self.standin.ctl("restart", down_seconds=1.0)
        rc, out, _ = harness.run_dblib(self.standin, "rows 1")
        self.assertNotEqual(rc, 0)
        time.sleep(1.1)
        rc, out, _ = harness.run_dblib(self.standin, "rows 1")
        self.assertEqual(rc, 0, out)

    def test_kill_one_spid(self):
        a = RawClient(self.standin.port)
        a.login()
        spid = max(c["spid"] for c in self.standin.ctl("connections")["connections"])
        self.standin.ctl("kill", spid=spid)
        a.sock.settimeout(5)
        self.assertEqual(a.sock.recv(10), b"")
        self.assertTrue(wait_for(lambda: spid not in [
            c["spid"] for c in self.standin.ctl("connections")["connections"]]))


class Corrupt(StandinTestCase):
    def test_every_kind_gives_a_client_error_not_a_hang(self):
        for kind in ("bad_token", "truncated_token", "wrong_length", "bad_type"):
            with self.subTest(kind=kind):
                self.standin.ctl("corrupt", kind=kind)
                t0 = time.time()
                rc, out, _ = harness.run_dblib(self.standin, "rows 3", timeout=30)
                self.assertNotEqual(rc, 0, out)
                # FreeTDS reports 20004/20017/20020, or just fails the call
                # (unknown column type); either way it does not hang
                self.assertRegex(out, r"ERR 200(04|17|20)|FAIL (exec|results|nextrow)")
                self.assertLess(time.time() - t0, 10)
                rc, out, _ = harness.run_dblib(self.standin, "rows 3")
                self.assertEqual(rc, 0, out)

    def test_unknown_kind_rejected(self):
        with self.assertRaises(Exception):
            self.standin.ctl("corrupt", kind="nonsense")


class ControlPort(StandinTestCase):
    def test_json_protocol_over_tcp(self):
        port = self.standin.control.port
        self.assertEqual(call(port, "ping")["ok"], True)
        reply = call(port, "no_such_command")
        self.assertEqual(reply["ok"], False)
        self.assertIn("no_such_command", reply["error"])
        self.assertEqual(call(port, "stats")["ok"], True)     # passed through to the engine
        bad = call(port, "drop_after_rows", rows=-1)
        self.assertEqual(bad, {"ok": False, "error": "rows must be >= 0"})
        faults = call(port, "stall", seconds=2, spid=77)
        self.assertEqual(faults["fault"]["spid"], 77)
        self.assertEqual(len(call(port, "faults")["faults"]), 1)
        self.assertEqual(call(port, "clear")["removed"], 1)

    def test_standin_ctl_cli(self):
        ctl = os.path.join(harness.STANDIN_DIR, "standin-ctl")
        p = subprocess.run([ctl, "--port", str(self.standin.control.port), "stall", "seconds=0.5",
                            "match=foo"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        reply = json.loads(p.stdout)
        self.assertEqual(reply["fault"]["params"], {"seconds": 0.5, "match": "foo"})
        p = subprocess.run([ctl, "--port", str(self.standin.control.port), "bogus"],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 1)

    def test_statement_log_file(self):
        path = os.path.join(harness.work_dir(), "stmt.log")
        s = harness.Standin(log_path=path)
        try:
            rc, out, _ = harness.run_dblib(s, "rows 1", "multi")
            self.assertEqual(rc, 0, out)
        finally:
            s.stop()
        with open(path) as f:
            entries = [json.loads(line) for line in f]
        events = [e["event"] for e in entries]
        for ev in ("connect", "prelogin", "login", "batch", "disconnect"):
            self.assertIn(ev, events)
        self.assertEqual([e["sql"] for e in entries if e["event"] == "batch"], ["rows 1", "multi"])
        login = [e for e in entries if e["event"] == "login"][0]
        self.assertEqual((login["user"], login["app"]), ("sa", "dblib_dump"))


if __name__ == "__main__":
    unittest.main()
