"""Every kind of the `corrupt` fault (standin/tds/corrupt.py): the bytes on
the wire are what the kind promises (checked with the raw client), and
FreeTDS db-lib survives them: it fails the call or, for well-formed TDS with
wrong content, delivers what was sent; it never crashes and never hangs
beyond its query timeout.  The next connection is served normally."""

import signal
import socket
import struct
import time
import unittest

import harness
from harness import RawClient, StandinTestCase, parse_tokens
from standin.tds import corrupt as C
from standin.tds import packets as P
from standin.tds import tokens as T


def raw_response(standin, kind, sql="rows 3", timeout=5.0, limit=1 << 20):
    """Log in, arm the fault, send `sql`; return the raw bytes that arrived
    (headers included) until the server closed, went quiet or `limit`."""
    c = RawClient(standin.port, timeout=timeout)
    c.login()
    standin.ctl("corrupt", kind=kind)
    c.batch(sql)
    data = b""
    c.sock.settimeout(1.0)
    try:
        while len(data) < limit:
            chunk = c.sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pass
    c.close()
    return data


def packets_of(data):
    """Split raw bytes into (header tuple, payload) while headers are sane."""
    out = []
    off = 0
    while off + 8 <= len(data):
        h = P.HEADER.unpack(data[off:off + 8])
        if h[2] < 8:
            out.append((h, data[off + 8:]))
            break
        out.append((h, data[off + 8:off + h[2]]))
        off += h[2]
    return out


def payload_of(data):
    return b"".join(p for _h, p in packets_of(data))


class WireShape(StandinTestCase):
    """What each kind actually sends."""

    def test_huge_length_claims_2_to_62_and_2_gb(self):
        payload = payload_of(raw_response(self.standin, "huge_length"))
        # rows 3: id int, big bigint, name nvarchar(20) ... -> name is the
        # first string column; it becomes nvarchar(max) (0xE7, length 0xFFFF)
        self.assertIn(b"\xe7\xff\xff", payload)
        claim = payload.index(struct.pack("<QI", 1 << 62, 0x7FFFFFFF))
        self.assertLess(len(payload) - claim, 200)     # the data never comes
        # id and big of the first row come before it, as usual
        row = payload.index(b"\xd1")
        self.assertEqual(claim - row - 1, 1 + 4 + 1 + 8)

    def test_huge_text_length_claims_2_gb(self):
        payload = payload_of(raw_response(self.standin, "huge_text_length"))
        self.assertIn(struct.pack("<i", 0x7FFFFFFF), payload)
        self.assertLess(len(payload), 1000)

    def test_value_too_long_exceeds_the_declared_length(self):
        toks_payload = payload_of(raw_response(self.standin, "value_too_long"))
        # COLMETADATA: varbinary(10) first (type 0xA5, max length 10) ...
        self.assertIn(b"\xa5\x0a\x00", toks_payload)
        # ... and the row's first value is 4000 bytes long
        self.assertIn(b"\xd1" + struct.pack("<H", 4000) + b"\xee" * 10, toks_payload)

    def test_wrong_column_types(self):
        toks = parse_tokens(payload_of(raw_response(self.standin, "wrong_column_types")))
        meta = [t for t in toks if t[0] == "COLMETADATA"][0][1]
        # rows 3 has int, bigint, nvarchar, datetime2, decimal: ints become
        # nvarchar, the others int
        self.assertEqual([ti.sqltype.name for _n, ti, _f, _u in meta],
                         ["nvarchar", "nvarchar", "int", "int", "int"])
        self.assertEqual(len([t for t in toks if t[0] in ("ROW", "NBCROW")]), 3)
        self.assertEqual(toks[-1][0], "DONE")

    def test_fewer_and_more_columns(self):
        for kind, ncols in (("fewer_columns", 4), ("more_columns", 6)):
            with self.subTest(kind=kind):
                toks = parse_tokens(payload_of(raw_response(self.standin, kind)))
                meta = [t for t in toks if t[0] == "COLMETADATA"][0][1]
                self.assertEqual(len(meta), ncols)
                rows = [t for t in toks if t[0] in ("ROW", "NBCROW")]
                self.assertEqual([len(r[1]) for r in rows], [ncols] * 3)

    def test_row_before_metadata(self):
        payload = payload_of(raw_response(self.standin, "row_before_metadata"))
        self.assertEqual(payload[0], 0xD1)
        self.assertNotIn(b"\x81\x05\x00", payload)

    def test_huge_message_is_32000_characters_with_control_bytes(self):
        toks = parse_tokens(payload_of(raw_response(self.standin, "huge_message")))
        err = [t for t in toks if t[0] == "ERROR"][0]
        self.assertEqual(len(err[4]), 32000)
        self.assertIn("\x1b", err[4])
        self.assertIn("\x00", err[4])

    def test_truncated_message_claims_more_than_it_sends(self):
        payload = payload_of(raw_response(self.standin, "truncated_message"))
        self.assertEqual(payload[0], T.TOKEN_ERROR)
        self.assertEqual(struct.unpack("<H", payload[1:3])[0], 60000)
        self.assertLess(len(payload), 100)

    def test_bad_utf16_has_lone_surrogates(self):
        payload = payload_of(raw_response(self.standin, "bad_utf16"))
        self.assertIn(b"\x00\xd8A\x00\x00\xdc", payload)
        with self.assertRaises(UnicodeDecodeError):
            b"\x00\xd8A\x00".decode("utf-16-le")

    def test_lying_done_counts_a_million(self):
        toks = parse_tokens(payload_of(raw_response(self.standin, "lying_done")))
        self.assertEqual(len([t for t in toks if t[0] in ("ROW", "NBCROW")]), 3)
        self.assertEqual(toks[-1], ("DONE", T.DONE_COUNT, 1000000))

    def test_packet_length_fields(self):
        for kind, length in (("packet_len_zero", 0), ("packet_len_short", 5)):
            with self.subTest(kind=kind):
                data = raw_response(self.standin, kind)
                self.assertEqual(P.HEADER.unpack(data[:8])[2], length)

    def test_oversize_packet_carries_the_whole_result(self):
        data = raw_response(self.standin, "packet_len_oversize")
        packets = packets_of(data)
        big = [h for h, _p in packets if h[2] > 4096]
        self.assertEqual(len(big), 1)
        self.assertGreater(big[0][2], 2 * 4096)
        toks = parse_tokens(b"".join(p for _h, p in packets))
        self.assertEqual(len([t for t in toks if t[0] in ("ROW", "NBCROW")]), 3)
        self.assertEqual(toks[-1], ("DONE", T.DONE_COUNT, 3))

    def test_forever_kinds_keep_sending_and_stop_when_the_client_goes(self):
        for kind, at_least in (("rows_forever", 200000), ("huge_values_forever", 3 << 20)):
            with self.subTest(kind=kind):
                closed_before = self.standin.engine.closed
                data = raw_response(self.standin, kind, limit=at_least)
                self.assertGreaterEqual(len(data), at_least)
                toks_start = payload_of(data[:4096])
                self.assertEqual(toks_start[0], 0x81)       # COLMETADATA first
                self.assertNotIn(b"\xfd\x00\x00", payload_of(data)[-64:])
                # the sender notices the closed socket and ends the session
                self.assertTrue(_wait(lambda: self.standin.engine.closed > closed_before, 10))

    def test_login_kinds_replace_the_login_ack(self):
        for kind in C.LOGIN_KINDS:
            with self.subTest(kind=kind):
                self.standin.ctl("corrupt", kind=kind)
                c = RawClient(self.standin.port)
                c.prelogin()
                from standin.tds.login7 import build_login7
                c.send(P.PT_LOGIN7, build_login7("sa", "Passw0rd!", ""))
                _packets, payload = c.read_message()
                self.assertNotIn(bytes([T.TOKEN_LOGINACK]) + b"\x21\x00\x01", payload[:40])
                with self.assertRaises(Exception):
                    parse_tokens(payload)
                c.close()

    def test_phases(self):
        reply = self.standin.ctl("corrupt", kind="garbage_login")
        self.assertEqual(reply["fault"]["params"]["phase"], "login")
        reply = self.standin.ctl("corrupt", kind="bad_token", match="SELECT TOP")
        self.assertEqual(reply["fault"]["params"],
                         {"kind": "bad_token", "phase": "result", "match": "SELECT TOP"})


def _wait(predicate, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


# What db-lib does with each kind (dblib_dump with a 3 s query timeout).
# "fail": the call fails (an ERR line and/or FAIL); "ok": well-formed TDS
# whose content is wrong, delivered as sent; the caller must judge it.
DBLIB_OUTCOME = {
    "bad_token": "fail", "bad_type": "fail", "truncated_token": "fail",
    "wrong_length": "fail", "huge_length": "fail", "huge_text_length": "fail",
    "value_too_long": "ok", "wrong_column_types": "ok", "fewer_columns": "ok",
    "more_columns": "ok", "row_before_metadata": "fail", "huge_message": "ok",
    "truncated_message": "fail", "bad_utf16": "fail", "lying_done": "ok",
    "packet_len_zero": "fail", "packet_len_short": "fail", "packet_len_oversize": "ok",
}


class DbLibSurvives(StandinTestCase):
    def test_every_result_kind(self):
        self.assertEqual(set(DBLIB_OUTCOME) | {"rows_forever", "huge_values_forever"},
                         set(C.RESULT_KINDS))
        for kind, outcome in DBLIB_OUTCOME.items():
            with self.subTest(kind=kind):
                self.standin.ctl("corrupt", kind=kind)
                t0 = time.time()
                rc, out, err = harness.run_dblib(self.standin, "rows 3", options=["-t", "3"],
                                                 timeout=30)
                self.assertGreaterEqual(rc, 0, "db-lib client killed by a signal: " + err)
                self.assertLess(time.time() - t0, 10)
                if outcome == "fail":
                    self.assertNotEqual(rc, 0, out)
                    self.assertRegex(out, r"ERR \d+|FAIL (exec|results|nextrow)")
                else:
                    self.assertEqual(rc, 0, out)
                    self.assertIn("BATCHDONE", out)
                rc, out, _ = harness.run_dblib(self.standin, "rows 3")
                self.assertEqual(rc, 0, out)

    def test_engine_rows_with_cached_encodings(self):
        # the real engine sends CachedRow objects; every kind must take them
        for kind in DBLIB_OUTCOME:
            with self.subTest(kind=kind):
                self.standin.ctl("corrupt", kind=kind)
                rc, out, err = harness.run_dblib(self.standin, "rows 3 cached",
                                                 options=["-t", "3"], timeout=30)
                self.assertGreaterEqual(rc, 0, err)
                self.assertNotIn("stand-in internal error", out)

    def test_login_kinds_fail_the_login(self):
        for kind in C.LOGIN_KINDS:
            with self.subTest(kind=kind):
                self.standin.ctl("corrupt", kind=kind)
                rc, out, _ = harness.run_dblib(self.standin, "rows 1", options=["-l", "3"],
                                               timeout=30)
                self.assertNotEqual(rc, 0, out)
                self.assertIn("FAIL login", out)
                self.assertRegex(out, r"ERR 200(17|20)")
                rc, out, _ = harness.run_dblib(self.standin, "rows 1")
                self.assertEqual(rc, 0, out)

    def test_forever_kind_until_the_client_stops(self):
        # db-lib reads rows as long as they come; the client decides to stop
        self.standin.ctl("corrupt", kind="rows_forever")
        import os
        import subprocess
        env = dict(os.environ, FREETDSCONF=harness.freetds_conf("off"), TDSVER="7.4")
        p = subprocess.Popen([harness.dblib_binary(), "-c", self.standin.address, "sa",
                              "Passw0rd!", "rows 3"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env)
        time.sleep(2.0)
        self.assertIsNone(p.poll(), "the client stopped on its own")
        p.send_signal(signal.SIGKILL)
        p.wait()
        rc, out, _ = harness.run_dblib(self.standin, "rows 3")
        self.assertEqual(rc, 0, out)


class DbLibMemory(StandinTestCase):
    def test_endless_huge_values_keep_db_lib_memory_flat(self):
        # db-lib reuses its row buffer: 1 MB values without end must not
        # make the client grow (measured on the client's resident memory)
        import os
        import subprocess
        self.standin.ctl("corrupt", kind="huge_values_forever")
        env = dict(os.environ, FREETDSCONF=harness.freetds_conf("off"), TDSVER="7.4")
        p = subprocess.Popen([harness.dblib_binary(), "-c", self.standin.address, "sa",
                              "Passw0rd!", "rows 3"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=env)
        try:
            time.sleep(1.5)
            early = _rss_kb(p.pid)
            received_early = self.standin.server.connections and max(
                c.writer.bytes_sent for c in list(self.standin.server.connections.values()))
            time.sleep(2.5)
            late = _rss_kb(p.pid)
            received_late = max(c.writer.bytes_sent
                                for c in list(self.standin.server.connections.values()))
            self.assertIsNone(p.poll())
            self.assertGreater(received_late - received_early, 20 << 20,
                               "the client kept reading (more than 20 MB in 2.5 s)")
            self.assertLess(late - early, 16 * 1024, "client memory grew: %d -> %d kB" % (early, late))
        finally:
            p.kill()
            p.wait()


def _rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class UnknownKind(StandinTestCase):
    def test_rejected_with_the_list(self):
        with self.assertRaises(Exception) as cm:
            self.standin.ctl("corrupt", kind="nonsense")
        self.assertIn("huge_length", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
