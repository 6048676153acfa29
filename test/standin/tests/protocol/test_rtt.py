"""The simulated network round trip (--rtt-ms, control `rtt`) and the
request counters (control `requests`): tds/round_trips.py."""

import os
import subprocess
import time
import unittest

import harness
from harness import RawClient, StandinTestCase, parse_tokens
from standin.control import call
from standin.tds import packets as P

RUN = os.path.join(harness.STANDIN_DIR, "run-standin")


class RttDelay(StandinTestCase):
    def tearDown(self):
        self.standin.ctl("rtt", ms=0)
        super().tearDown()

    def timed_batch(self, c, sql):
        t0 = time.monotonic()
        c.batch(sql)
        c.read_message()
        return time.monotonic() - t0

    def test_rtt_each_request_takes_at_least_the_delay(self):
        c = RawClient(self.standin.port)
        try:
            c.login()
            fast = self.timed_batch(c, "rows 1")
            self.assertEqual(self.standin.ctl("rtt", ms=80)["rtt_ms"], 80)
            for _ in range(3):
                self.assertGreaterEqual(self.timed_batch(c, "rows 1"), 0.080)
            self.standin.ctl("rtt", ms=0)
            self.assertLess(self.timed_batch(c, "rows 1"), max(0.07, fast * 5))
        finally:
            c.close()

    def test_rtt_applies_to_prelogin_and_login7(self):
        self.standin.ctl("rtt", ms=60)
        c = RawClient(self.standin.port)
        try:
            t0 = time.monotonic()
            c.prelogin()
            self.assertGreaterEqual(time.monotonic() - t0, 0.060)
            from standin.tds.login7 import build_login7
            t0 = time.monotonic()
            c.send(P.PT_LOGIN7, build_login7("sa", "Passw0rd!", "", packet_size=4096))
            tokens = parse_tokens(c.read_message()[1])
            self.assertGreaterEqual(time.monotonic() - t0, 0.060)
            self.assertIn("LOGINACK", [t[0] for t in tokens])
        finally:
            c.close()

    def test_rtt_bad_values_are_refused_and_change_nothing(self):
        self.standin.ctl("rtt", ms=5)
        for bad in (-1, 60001, "soon"):
            with self.assertRaises(ValueError):
                self.standin.ctl("rtt", ms=bad)
        self.assertEqual(self.standin.ctl("rtt")["rtt_ms"], 5)


class RttCounters(StandinTestCase):
    def session(self, reply, spid):
        return [s for s in reply["sessions"] + reply["closed_sessions"] if s["spid"] == spid][0]

    def test_rtt_requests_counted_per_session_and_in_total(self):
        self.standin.ctl("requests", reset=True)
        c = RawClient(self.standin.port)
        try:
            packets, _tokens = c.login()
            spid = packets[0][0][3]
            for sql in ("rows 1", "rows 2", "multi"):
                c.batch(sql)
                c.read_message()
            c.send_raw(bytes([0x06, 0x01, 0x00, 0x08, 0x00, 0x00, 0x01, 0x00]))
            c.read_message()
            reply = self.standin.ctl("requests")
        finally:
            c.close()
        s = self.session(reply, spid)
        self.assertEqual(s["by_kind"], {"prelogin": 1, "login": 1, "sql_batch": 3, "attention": 1})
        self.assertEqual(s["requests"], 4)
        self.assertEqual(s["by_prefix"], {"rows 1": 1, "rows 2": 1, "multi": 1})
        self.assertGreaterEqual(reply["total"]["sql_batch"], 3)
        self.assertGreaterEqual(reply["total"]["requests"], 4)
        self.assertEqual(reply["rtt_ms"], 0)
        # a closed session stays readable, reset zeroes the counts
        deadline = time.time() + 5
        while time.time() < deadline and not any(x["spid"] == spid for x in
                                                 self.standin.ctl("requests")["closed_sessions"]):
            time.sleep(0.02)
        self.assertEqual(self.session(self.standin.ctl("requests", reset=True), spid)["requests"], 4)
        after = self.standin.ctl("requests")
        self.assertEqual(after["total"].get("requests"), 0)
        self.assertFalse(any(x["spid"] == spid for x in after["closed_sessions"]))


class RttCommandLine(unittest.TestCase):
    def test_rtt_ms_flag(self):
        env = dict(os.environ, PYTHONPATH=harness.HERE)
        p = subprocess.Popen([RUN, "--port", "0", "--control-port", "0", "--rtt-ms", "40",
                              "--engine", "fake_engine:FakeEngine"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            fields = dict(kv.split("=") for kv in p.stdout.readline().split()[2:])
            control = int(fields["control"])
            self.assertEqual(call(control, "rtt")["rtt_ms"], 40)
            c = RawClient(int(fields["port"]))
            t0 = time.monotonic()
            c.login()
            c.batch("rows 1")
            c.read_message()
            self.assertGreaterEqual(time.monotonic() - t0, 0.120)     # prelogin, login7, batch
            c.close()
            self.assertEqual(call(control, "requests")["total"]["sql_batch"], 1)
        finally:
            call(int(fields["control"]), "shutdown")
            p.wait(timeout=10)
        p2 = subprocess.run([RUN, "--rtt-ms", "-3"], capture_output=True, text=True, env=env, timeout=30)
        self.assertNotEqual(p2.returncode, 0)
        self.assertIn("--rtt-ms", p2.stderr)


if __name__ == "__main__":
    unittest.main()
