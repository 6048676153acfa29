"""PRELOGIN/LOGIN7 and the login response (tds-server.md §2-3)."""

import socket
import struct
import time
import unittest

import harness
from harness import RawClient, StandinTestCase, parse_tokens
from standin.tds import packets as P
from standin.tds.login7 import build_login7, parse_login7, deobfuscate_password
from standin.tds.prelogin import parse_prelogin


class LoginResponse(StandinTestCase):
    def test_prelogin_reply_says_encryption_not_supported(self):
        c = RawClient(self.standin.port)
        packets, payload = c.prelogin(encryption=0x01)
        self.assertEqual(packets[0][0][0], P.PT_TABULAR)
        opts = parse_prelogin(payload)
        self.assertEqual(opts[0x01], b"\x02")
        self.assertEqual(opts[0x00], bytes([16, 0, 0x03, 0xE8, 0, 0]))
        self.assertEqual(opts[0x04], b"\x00")
        c.close()

    def test_login_response_order_and_spid(self):
        c = RawClient(self.standin.port)
        packets, tokens = c.login(database="cdcdb")
        names = [(t[0], t[1] if t[0] in ("ENVCHANGE", "INFO") else None) for t in tokens]
        self.assertEqual(names, [("ENVCHANGE", 1), ("INFO", 5701), ("ENVCHANGE", 7), ("ENVCHANGE", 2),
                                 ("INFO", 5703), ("LOGINACK", None), ("ENVCHANGE", 4), ("DONE", None)])
        self.assertEqual(tokens[0][2:], ("cdcdb", "master"))
        self.assertEqual(tokens[1][4], "Changed database context to 'cdcdb'.")
        self.assertEqual(tokens[2][2], bytes([0x09, 0x04, 0xD0, 0x00, 0x34]))
        self.assertEqual(tokens[5][1:3], (1, 0x74000004))
        self.assertEqual(tokens[7], ("DONE", 0, 0))
        spids = {h[3] for h, _p in packets}
        self.assertEqual(len(spids), 1)
        self.assertGreaterEqual(spids.pop(), 51)
        c.batch("rows 1")
        packets, _ = c.read_message()
        self.assertTrue(all(h[3] >= 51 for h, _p in packets))
        c.close()

    def test_password_deobfuscation_roundtrip(self):
        rec = parse_login7(build_login7("u1", "Pä$$wörd😀", "db", app="app", host="h"))
        self.assertEqual((rec.user_name, rec.password, rec.database, rec.app_name, rec.host_name),
                         ("u1", "Pä$$wörd😀", "db", "app", "h"))
        # 'A' = 41 00: swap nibbles (14 00) then XOR A5 -> B1 A5
        self.assertEqual(deobfuscate_password(bytes([0xB1, 0xA5])), "A")

    def test_bad_password_is_18456_then_close(self):
        c = RawClient(self.standin.port)
        c.prelogin()
        c.send(P.PT_LOGIN7, build_login7("sa", "wrong"))
        _packets, payload = c.read_message()
        tokens = parse_tokens(payload)
        self.assertEqual(tokens[0][:5], ("ERROR", 18456, 1, 14, "Login failed for user 'sa'."))
        self.assertEqual(tokens[0][5], "STANDIN")
        self.assertEqual(tokens[1], ("DONE", 0x0002, 0))
        self.assertEqual(len(tokens), 2)
        c.sock.settimeout(5)
        self.assertEqual(c.sock.recv(10), b"")
        c.close()

    def test_dblib_bad_password(self):
        rc, out, _ = harness.run_dblib(self.standin, "rows 1", password="nope")
        self.assertNotEqual(rc, 0)
        self.assertIn("MSG 18456 14 1 \"Login failed for user 'sa'.\"", out)
        self.assertIn("ERR 20002", out)

    @unittest.skipUnless(harness.tedious_available(), "tedious not installed")
    def test_tedious_bad_password(self):
        rc, out, _ = harness.run_tedious(self.standin, "rows 1", password="nope")
        self.assertNotEqual(rc, 0)
        self.assertIn("FAIL login ELOGIN \"Login failed for user 'sa'.\"", out)

    def test_unknown_database_is_4060(self):
        rc, out, _ = harness.run_dblib(self.standin, "rows 1", options=["-d", "nosuchdb"])
        self.assertNotEqual(rc, 0)
        self.assertIn("MSG 4060 11 1", out)

    def test_freetds_encryption_require_fails_cleanly(self):
        t0 = time.time()
        rc, out, _ = harness.run_dblib(self.standin, "rows 1", encryption="require")
        self.assertNotEqual(rc, 0)
        self.assertIn("FAIL login", out)
        self.assertIn("ERR 20002", out)
        self.assertLess(time.time() - t0, 10)
        events = [e for e in self.standin.log.recent() if e["event"] in ("prelogin", "login")]
        self.assertTrue(any(e["event"] == "prelogin" and e["encryption"] == 1 for e in events))

    @unittest.skipUnless(harness.tedious_available(), "tedious not installed")
    def test_tedious_encrypt_true_continues_in_clear(self):
        rc, out, err = harness.run_tedious(self.standin, "rows 1", options=["--encrypt", "true"])
        self.assertEqual(rc, 0, out + err)
        self.assertIn("ROWCOUNT 1", out)


class PacketSize(StandinTestCase):
    def test_grant_rules(self):
        self.assertEqual(P.grant_packet_size(4096), 4096)
        self.assertEqual(P.grant_packet_size(100000), 32764)
        self.assertEqual(P.grant_packet_size(100), 512)
        self.assertEqual(P.grant_packet_size(1001), 1000)
        self.assertEqual(P.grant_packet_size(0), 4096)

    def _big_response_packets(self, requested):
        c = RawClient(self.standin.port)
        _packets, tokens = c.login(packet_size=requested)
        env = [t for t in tokens if t[0] == "ENVCHANGE" and t[1] == 4][0]
        c.batch("rows 2000")
        packets, payload = c.read_message()
        c.close()
        return int(env[2]), packets, payload

    def test_granted_size_used_from_next_message(self):
        for requested, granted in ((8192, 8192), (1000, 1000), (512, 512)):
            got, packets, payload = self._big_response_packets(requested)
            self.assertEqual(got, granted)
            sizes = [h[2] for h, _p in packets]
            self.assertTrue(all(s == granted for s in sizes[:-1]), sizes[:5])
            self.assertLessEqual(sizes[-1], granted)
            self.assertEqual([h[1] & 1 for h, _p in packets], [0] * (len(packets) - 1) + [1])
            rows = [t for t in parse_tokens(payload) if t[0] == "ROW"]
            self.assertEqual(len(rows), 2000)

    def test_dblib_with_larger_packets(self):
        rc, out, _ = harness.run_dblib(self.standin, "rows 5000", options=["-c", "-P", "16384"])
        self.assertEqual(rc, 0, out)
        self.assertIn("ROWS 5000 ", out)


class RefuseLogins(StandinTestCase):
    def test_refuse_with_error_then_allow(self):
        self.standin.ctl("refuse_logins", on=True)
        rc, out, _ = harness.run_dblib(self.standin, "rows 1")
        self.assertIn("MSG 18456", out)
        self.standin.ctl("refuse_logins", on=False)
        rc, out, _ = harness.run_dblib(self.standin, "rows 1")
        self.assertEqual(rc, 0, out)

    def test_refuse_by_closing(self):
        self.standin.ctl("refuse_logins", on=True, mode="close")
        rc, out, _ = harness.run_dblib(self.standin, "rows 1")
        self.assertNotEqual(rc, 0)
        self.assertNotIn("MSG 18456", out)
        self.assertIn("ERR 200", out)
        self.standin.ctl("clear")
        rc, out, _ = harness.run_dblib(self.standin, "rows 1")
        self.assertEqual(rc, 0, out)


class UserConnections(StandinTestCase):
    """sp_configure 'user connections': a login beyond the limit gets
    17809 (severity 20) and its connection is closed; the sessions that
    are logged in keep working, and one that ends frees its place."""

    def tearDown(self):
        self.standin.ctl("user_connections", max=0)
        super().tearDown()

    def test_login_beyond_the_limit_gets_17809(self):
        first = RawClient(self.standin.port)
        first.login()
        try:
            base = self.standin.ctl("user_connections")["logged_in"]
            self.assertGreaterEqual(base, 1)
            self.standin.ctl("user_connections", max=base)
            rc, out, _ = harness.run_dblib(self.standin, "rows 1")
            self.assertNotEqual(rc, 0)
            self.assertIn("MSG 17809", out)
            self.assertIn("maximum number of '%d' user connections" % base, out)
            first.batch("rows 1")
            self.assertTrue(first.read_message())          # the logged-in session is not affected
            self.standin.ctl("user_connections", max=base + 1)
            rc, out, _ = harness.run_dblib(self.standin, "rows 1")
            self.assertEqual(rc, 0, out)
        finally:
            first.close()
        with self.assertRaises(Exception):
            self.standin.ctl("user_connections", max=-1)


if __name__ == "__main__":
    unittest.main()
