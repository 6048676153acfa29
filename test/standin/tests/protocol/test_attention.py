"""ATTENTION: the two-message acknowledgement (tds-server.md §6), also
mid-result, with raw packets, db-lib dbcancel/timeouts and tedious
cancel()/requestTimeout."""

import time
import unittest

import harness
from harness import RawClient, StandinTestCase, parse_tokens
from standin.tds import packets as P
from standin.tds import tokens as T

ATTENTION = bytes([0x06, 0x01, 0x00, 0x08, 0x00, 0x00, 0x01, 0x00])


class RawAttention(StandinTestCase):
    def setUp(self):
        self.c = RawClient(self.standin.port)
        self.c.login()

    def tearDown(self):
        self.c.close()
        super().tearDown()

    def test_mid_result_two_messages(self):
        t0 = time.time()
        self.c.batch("slow 500 10")        # 5 s of rows if not cancelled
        time.sleep(0.3)
        self.c.send_raw(ATTENTION)
        _p1, first = self.c.read_message()
        _p2, second = self.c.read_message()
        self.assertLess(time.time() - t0, 2.0)
        toks1 = parse_tokens(first)
        self.assertEqual(toks1[-1][0], "DONE")
        self.assertFalse(toks1[-1][1] & (T.DONE_ATTN | T.DONE_MORE))
        self.assertEqual(parse_tokens(second), [("DONE", T.DONE_ATTN, 0)])
        # the connection is usable afterwards
        self.c.batch("rows 3")
        toks = parse_tokens(self.c.read_message()[1])
        self.assertEqual(toks[-1], ("DONE", T.DONE_COUNT, 3))

    def test_attention_after_complete_response_only_ack(self):
        self.c.batch("rows 2")
        self.c.read_message()
        self.c.send_raw(ATTENTION)
        _p, payload = self.c.read_message()
        self.assertEqual(parse_tokens(payload), [("DONE", T.DONE_ATTN, 0)])
        self.c.batch("rows 1")
        self.assertEqual(parse_tokens(self.c.read_message()[1])[-1], ("DONE", T.DONE_COUNT, 1))

    def test_back_to_back_cancels_keep_response_ack_order(self):
        """request, cancel, request, cancel sent at once: every response is
        followed by its own acknowledgement, never an early one."""
        allh = b"\x16\x00\x00\x00\x12\x00\x00\x00\x02\x00" + b"\x00" * 8 + b"\x01\x00\x00\x00"
        one = P.split_message(P.PT_SQL_BATCH, allh + "slow 100 10".encode("utf-16-le"), 4096)
        two = P.split_message(P.PT_SQL_BATCH, allh + "rows 2".encode("utf-16-le"), 4096)
        self.c.send_raw(one + ATTENTION + two + ATTENTION)
        shapes = []
        for _ in range(4):
            toks = parse_tokens(self.c.read_message()[1])
            shapes.append("ACK" if toks == [("DONE", T.DONE_ATTN, 0)] else "RESPONSE")
        self.assertEqual(shapes, ["RESPONSE", "ACK", "RESPONSE", "ACK"])
        self.c.batch("rows 1")
        self.assertEqual(parse_tokens(self.c.read_message()[1])[-1], ("DONE", T.DONE_COUNT, 1))

    def test_attention_during_stall_before_any_output(self):
        self.standin.ctl("stall", seconds=5)
        t0 = time.time()
        self.c.batch("rows 1")
        time.sleep(0.2)
        self.c.send_raw(ATTENTION)
        first = parse_tokens(self.c.read_message()[1])
        second = parse_tokens(self.c.read_message()[1])
        self.assertLess(time.time() - t0, 2.0)
        self.assertEqual(second, [("DONE", T.DONE_ATTN, 0)])
        self.assertEqual(first[-1][0], "DONE")


class ClientCancel(StandinTestCase):
    def test_dblib_dbcancel_mid_result(self):
        rc, out, _ = harness.run_dblib(self.standin, "rows 200000", "rows 2", options=["-x", "5"])
        self.assertEqual(rc, 0, out[-2000:])
        self.assertIn("CANCELLED after 5", out)
        last = harness.parse_dump(out)[-1]
        self.assertEqual(len(last["rows"]), 2)
        self.assertNotIn("DEAD", out)
        self.assertTrue(any(e["event"] == "attention_ack" for e in self.standin.log.recent()))

    def test_dblib_timeout_sends_attention(self):
        self.standin.ctl("stall", seconds=4, match="rows 1")
        t0 = time.time()
        rc, out, _ = harness.run_dblib(self.standin, "rows 1", "rows 2", options=["-t", "1"])
        self.assertIn("ERR 20003", out)
        self.assertLess(time.time() - t0, 3.5)
        self.assertEqual(len(harness.parse_dump(out)[-1]["rows"]), 2, out)
        self.assertNotIn("DEAD", out)

    @unittest.skipUnless(harness.tedious_available(), "tedious not installed")
    def test_tedious_cancel_mid_result(self):
        rc, out, err = harness.run_tedious(self.standin, "rows 200000", "rows 2",
                                           options=["--cancel-after", "5"])
        self.assertIn("CANCELLED after 5", out)
        self.assertIn("ERROR ECANCEL", out)
        self.assertNotIn("DEAD", out)
        self.assertNotIn("Failed to cancel", out)
        self.assertEqual(len(harness.parse_dump(out)[-1]["rows"]), 2, out + err)
        self.assertEqual(rc, 0, out + err)

    @unittest.skipUnless(harness.tedious_available(), "tedious not installed")
    def test_tedious_request_timeout(self):
        # match: tedious' own setup batch right after login must not stall
        self.standin.ctl("stall", seconds=4, match="rows 1")
        t0 = time.time()
        rc, out, err = harness.run_tedious(self.standin, "rows 1", "rows 2", options=["--timeout", "500"])
        self.assertIn("ERROR ETIMEOUT", out)
        self.assertLess(time.time() - t0, 3.5)
        self.assertEqual(len(harness.parse_dump(out)[-1]["rows"]), 2, out + err)
        self.assertNotIn("DEAD", out)


if __name__ == "__main__":
    unittest.main()
