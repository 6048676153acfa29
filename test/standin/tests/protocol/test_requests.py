"""SQL_BATCH, RPC (sp_executesql by ProcID and by name, NTEXT params, OUTPUT
params, several calls per message), TRANSACTION MANAGER, DONE rules."""

import json
import os
import struct
import subprocess
import unittest

import harness
from harness import RawClient, StandinTestCase, parse_tokens
from standin.sqltypes import DEFAULT_COLLATION, MAX, SqlType
from standin.tds import packets as P
from standin.tds import tokens as T

ALL_HEADERS = struct.pack("<IIH", 22, 18, 2) + b"\x00" * 8 + struct.pack("<I", 1)


def nvarchar_param(name, text, status=0):
    raw = text.encode("utf-16-le")
    return (bytes([len(name)]) + name.encode("utf-16-le") + bytes([status]) + b"\xe7"
            + struct.pack("<H", 8000) + DEFAULT_COLLATION + struct.pack("<H", len(raw)) + raw)


def ntext_param(text):
    """ct-lib shape: unnamed NTEXT with LONG lengths, no table name."""
    raw = text.encode("utf-16-le")
    return (b"\x00\x00\x63" + struct.pack("<I", 0x7FFFFFFE) + DEFAULT_COLLATION
            + struct.pack("<I", len(raw)) + raw)


def int_param(name, value, output=False):
    return (bytes([len(name)]) + name.encode("utf-16-le") + bytes([1 if output else 0])
            + b"\x26\x04\x04" + struct.pack("<i", value))


def rpc_by_id(proc_id, *params):
    return struct.pack("<HHH", 0xFFFF, proc_id, 0) + b"".join(params)


def rpc_by_name(name, *params):
    return struct.pack("<H", len(name)) + name.encode("utf-16-le") + b"\x00\x00" + b"".join(params)


class Batches(StandinTestCase):
    def setUp(self):
        self.c = RawClient(self.standin.port)
        self.c.login()

    def tearDown(self):
        self.c.close()
        super().tearDown()

    def run_batch(self, sql):
        self.c.batch(sql)
        return parse_tokens(self.c.read_message()[1])

    def test_done_more_and_count(self):
        toks = self.run_batch("multi")
        dones = [t for t in toks if t[0] == "DONE"]
        self.assertEqual(dones, [("DONE", T.DONE_MORE | T.DONE_COUNT, 2),
                                 ("DONE", T.DONE_MORE | T.DONE_COUNT, 3),
                                 ("DONE", T.DONE_COUNT, 1)])
        self.assertEqual(toks[-1][0], "DONE")

    def test_statement_error_tokens(self):
        toks = self.run_batch("error")
        self.assertEqual(toks[0], ("ERROR", 208, 1, 16, "Invalid object name 'nope'.", "STANDIN", "", 1))
        self.assertEqual(toks[1], ("DONE", T.DONE_ERROR, 0))
        self.assertEqual(len(toks), 2)

    def test_fatal_error_closes_the_session_after_the_response(self):
        toks = self.run_batch("fatal")
        self.assertEqual(toks[0][:4], ("ERROR", 21, 1, 20))
        self.assertEqual(toks[-1], ("DONE", T.DONE_ERROR, 0))
        self.c.sock.settimeout(5)
        self.assertEqual(self.c.sock.recv(10), b"")

    def test_info_message(self):
        toks = self.run_batch("print")
        self.assertEqual(toks[0][:5], ("INFO", 0, 1, 0, "hello from print"))

    def test_unaliased_column_has_empty_name(self):
        toks = self.run_batch("unaliased")
        self.assertEqual(toks[0][0], "COLMETADATA")
        self.assertEqual(toks[0][1][0][0], "")
        self.assertEqual(toks[0][1][0][2] & 1, 0)   # NOT NULL

    def test_inxact_while_transaction_open(self):
        toks = self.run_batch("BEGIN TRAN")
        self.assertEqual(toks[0][:2], ("ENVCHANGE", 8))
        descriptor = toks[0][2]
        self.assertEqual(len(descriptor), 8)
        self.assertTrue(toks[-1][1] & T.DONE_INXACT)
        toks = self.run_batch("rows 1")
        self.assertTrue(toks[-1][1] & T.DONE_INXACT)
        toks = self.run_batch("COMMIT")
        self.assertEqual(toks[0], ("ENVCHANGE", 9, b"", descriptor))
        self.assertFalse(toks[-1][1] & T.DONE_INXACT)
        toks = self.run_batch("rows 1")
        self.assertFalse(toks[-1][1] & T.DONE_INXACT)

    def test_nbcrow_only_when_it_saves_space(self):
        self.standin.engine.matrix = [
            ("wide", SqlType("nvarchar", length=MAX, collation=DEFAULT_COLLATION),
             [(None, "NULL"), ("x", "'x'")]),
            ("narrow", SqlType("int"), [(None, "NULL"), (1, "1")]),
        ]
        toks = self.run_batch("matrix")
        kinds = [t[0] for t in toks if t[0] in ("ROW", "NBCROW")]
        # NULL nvarchar(max) costs 8 bytes as ROW -> NBCROW; NULL int costs 1 -> ROW
        self.assertEqual(kinds, ["NBCROW", "ROW", "ROW", "ROW"])
        values = [t[1] for t in toks if t[0] in ("ROW", "NBCROW")]
        self.assertEqual(values, [[None], ["x"], [None], [1]])

    def test_response_spans_packets_for_large_values(self):
        self.standin.engine.matrix = [("big", SqlType("varbinary", length=MAX),
                                       [(bytes(range(256)) * 800, None)])]
        self.c.batch("matrix")
        packets, payload = self.c.read_message()
        self.assertGreater(len(packets), 40)
        toks = parse_tokens(payload)
        self.assertEqual(toks[1][1][0], bytes(range(256)) * 800)

    def test_ignore_bit_gets_lone_done(self):
        self.c.send(P.PT_SQL_BATCH, ALL_HEADERS + "rows 5".encode("utf-16-le"), status=P.ST_IGNORE)
        toks = parse_tokens(self.c.read_message()[1])
        self.assertEqual(toks, [("DONE", 0, 0)])

    def test_textsize_truncates_lobs_only(self):
        self.standin.engine.matrix = [
            ("nmax", SqlType("nvarchar", length=MAX, collation=DEFAULT_COLLATION), [("abc\U0001F600def", None)]),
            ("bmax", SqlType("varbinary", length=MAX), [(b"0123456789", None)]),
            ("img", SqlType("image"), [(b"0123456789", None)]),
            ("short", SqlType("nvarchar", length=20, collation=DEFAULT_COLLATION), [("abcdefghij", None)]),
        ]
        self.run_batch("SET TEXTSIZE 8")
        toks = self.run_batch("matrix")
        values = [t[1][0] for t in toks if t[0] in ("ROW", "NBCROW")]
        # 8 bytes = 4 UTF-16 units: "abc" + half a surrogate pair -> "abc"
        self.assertEqual(values, ["abc", b"01234567", b"01234567", "abcdefghij"])
        self.run_batch("SET TEXTSIZE 2147483647")
        values = [t[1][0] for t in self.run_batch("matrix") if t[0] in ("ROW", "NBCROW")]
        self.assertEqual(values[0], "abc\U0001F600def")

    def test_default_textsize_until_the_session_sets_one(self):
        s = harness.Standin(default_textsize=4)
        try:
            s.engine.matrix = [("nmax", SqlType("nvarchar", length=MAX, collation=DEFAULT_COLLATION),
                                [("abcdef", None)])]
            rc, out, _ = harness.run_dblib(s, "matrix", "SET TEXTSIZE 2147483647", "matrix")
            self.assertEqual(rc, 0, out)
            res = harness.parse_dump(out)
            self.assertEqual((res[0]["rows"], res[-1]["rows"]),
                             ([["s:" + b"ab".hex()]], [["s:" + b"abcdef".hex()]]))
        finally:
            s.stop()

    def test_reset_connection_acks_and_rolls_back(self):
        self.run_batch("BEGIN TRAN")
        engine = self.standin.engine
        # the session of this connection: the newest one (connections of
        # earlier tests may still be closing, so counters would race)
        old = engine.sessions[-1]
        self.assertIsNotNone(old.tran)
        self.c.batch("rows 1", status=P.ST_RESETCONNECTION)
        toks = parse_tokens(self.c.read_message()[1])
        self.assertEqual(toks[0], ("ENVCHANGE", 18, b"", b""))
        self.assertIn(old, engine.closed_sessions)                   # old session closed
        self.assertIsNone(old.tran)                                  # and its transaction gone
        self.assertEqual(toks[-1], ("DONE", T.DONE_COUNT, 1))      # no INXACT any more

    def test_statement_log_has_batch_text(self):
        self.run_batch("rows 2")
        entries = self.standin.ctl("log")["entries"]
        self.assertTrue(any(e["event"] == "batch" and e["sql"] == "rows 2" for e in entries))


class Rpc(StandinTestCase):
    def setUp(self):
        self.c = RawClient(self.standin.port)
        self.c.login()

    def tearDown(self):
        self.c.close()
        super().tearDown()

    def call(self, body):
        self.c.send(P.PT_RPC, ALL_HEADERS + body)
        return parse_tokens(self.c.read_message()[1])

    def check_shape(self, toks, expect_values, output=None):
        self.assertEqual(toks[0][0], "COLMETADATA")
        self.assertEqual(toks[1], ("ROW", expect_values))
        self.assertEqual(toks[2], ("DONEINPROC", T.DONE_MORE | T.DONE_COUNT, 1))
        self.assertEqual(toks[3], ("RETURNSTATUS", 0))
        rest = toks[4:]
        if output is not None:
            self.assertEqual(rest[0][:3], ("RETURNVALUE",) + output[:2])
            self.assertEqual(rest[0][4], output[2])
            rest = rest[1:]
        self.assertEqual(rest, [("DONEPROC", 0, 0)])

    def test_sp_executesql_by_procid(self):
        toks = self.call(rpc_by_id(10, nvarchar_param("@stmt", "echo"),
                                   nvarchar_param("@params", "@a int, @o int OUTPUT"),
                                   int_param("@a", 5), int_param("@o", 41, output=True)))
        self.check_shape(toks, [5, 41], output=(3, "@o", 42))

    def test_sp_executesql_by_name_positional(self):
        toks = self.call(rpc_by_name("sp_executesql", nvarchar_param("", "echo"),
                                     nvarchar_param("", "@P1 int"), int_param("", 7)))
        self.check_shape(toks, [7])

    def test_ntext_params_as_ctlib_sends_them(self):
        toks = self.call(rpc_by_id(10, ntext_param("echo"), ntext_param("@P1 nvarchar(10)"),
                                   nvarchar_param("", "héllo😀")))
        self.check_shape(toks, ["héllo😀"])
        rpc = [e for e in self.standin.ctl("log")["entries"] if e["event"] == "rpc"][-1]
        self.assertEqual(rpc["proc"], "sp_executesql")
        self.assertEqual(rpc["params"][0]["value"], "echo")

    def test_two_calls_in_one_message(self):
        one = rpc_by_id(10, nvarchar_param("", "echo"), nvarchar_param("", "@P1 int"), int_param("", 1))
        two = rpc_by_id(10, nvarchar_param("", "echo"), nvarchar_param("", "@P1 int"), int_param("", 2))
        toks = self.call(one + b"\xff" + two)
        procs = [t for t in toks if t[0] == "DONEPROC"]
        self.assertEqual(procs, [("DONEPROC", T.DONE_MORE, 0), ("DONEPROC", 0, 0)])
        self.assertEqual([t[1] for t in toks if t[0] == "ROW"], [[1], [2]])

    def test_unknown_procedure_error(self):
        toks = self.call(rpc_by_name("no_such_proc"))
        self.assertEqual(toks[0][:4], ("ERROR", 2812, 62, 16))
        self.assertEqual(toks[-1], ("DONEPROC", T.DONE_ERROR, 0))

    def test_malformed_rpc_is_an_error_not_a_crash(self):
        toks = self.call(struct.pack("<HHH", 0xFFFF, 10, 0) + b"\x00\x00\x99\x01")
        self.assertEqual(toks[0][:2], ("ERROR", 8009))
        self.c.batch("rows 1")
        self.assertEqual(parse_tokens(self.c.read_message()[1])[-1], ("DONE", T.DONE_COUNT, 1))


class DblibRpc(StandinTestCase):
    def test_dbrpcparam_shapes_decode(self):
        """db-lib's real RPC bytes: named params, widened types, OUTPUT."""
        rc, out, _ = harness.run_dblib(
            self.standin, "rpc:sp_executesql|@stmt:varchar:echo|@params:varchar:x"
            "|@lsn:varbinary:0000002a000001f00003|@n:int:-7|@big:bigint:9007199254740993"
            "|@s:varchar:abc|@nul:null-int:|@o:int:41:out", "rows 1")
        self.assertEqual(rc, 0, out)
        res = harness.parse_dump(out)
        self.assertEqual(res[0]["cols"], ["lsn", "n", "big", "s", "nul", "o"])
        self.assertEqual(res[0]["rows"], [["b:0000002a000001f00003", "i:-7", "i:9007199254740993",
                                           "s:616263", "NULL", "i:41"]])
        self.assertIn("RETURNSTATUS 0", out)
        self.assertIn("RETURNVALUE @o i:42", out)
        self.assertEqual(len(res[1]["rows"]), 1)      # connection fine afterwards
        rpc = [e for e in self.standin.ctl("log")["entries"] if e["event"] == "rpc"][-1]
        self.assertEqual([(p["name"], p["type"], p["output"]) for p in rpc["params"]][2:5],
                         [("@lsn", "varbinary(10)", False), ("@n", "int", False), ("@big", "bigint", False)])


class CtlibParams(StandinTestCase):
    def test_language_command_with_params_is_sp_executesql_with_ntext(self):
        exe = harness.client_binary("ctlib_params", "ct")
        env = dict(os.environ, FREETDSCONF=harness.freetds_conf(), TDSVER="7.4")
        p = subprocess.run([exe, "127.0.0.1", str(self.standin.port), "sa", "Passw0rd!",
                            "echo ?, ?", "42", "h\u00e9llo"], capture_output=True, env=env, timeout=30)
        out = p.stdout.decode("utf-8", "replace")
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("ROW 42|h\u00e9llo", out)
        rpc = [e for e in self.standin.ctl("log")["entries"] if e["event"] == "rpc"][-1]
        self.assertEqual((rpc["proc"], rpc["proc_id"]), ("sp_executesql", 10))
        self.assertEqual([(q["name"], q["type"]) for q in rpc["params"][:2]], [("", "ntext"), ("", "ntext")])
        self.assertEqual(rpc["params"][0]["value"], "echo @P1, @P2")


@unittest.skipUnless(harness.tedious_available(), "tedious not installed")
class TediousRequests(StandinTestCase):
    def test_exec_sql_parameters_and_output(self):
        spec = {"sql": "echo", "params": [
            {"name": "i", "type": "Int", "value": 5},
            {"name": "b", "type": "BigInt", "value": "9007199254740993"},
            {"name": "s", "type": "NVarChar", "value": "héllo😀"},
            {"name": "v", "type": "VarChar", "value": "abc"},
            {"name": "bin", "type": "VarBinary", "value": "0000002a000001f00003"},
            {"name": "big", "type": "NVarChar", "value": "z" * 5000},
            {"name": "d", "type": "Decimal", "value": 12.5, "precision": 18, "scale": 4},
            {"name": "n", "type": "Int", "value": None},
            {"name": "o", "type": "Int", "value": 41, "output": True}]}
        rc, out, err = harness.run_tedious(self.standin, "rpc:" + json.dumps(spec))
        self.assertEqual(rc, 0, out + err)
        row = harness.parse_dump(out)[0]["rows"][0]
        self.assertEqual(row[:5], ["i:5", "i:9007199254740993", "s:" + "héllo😀".encode().hex(),
                                   "s:616263", "b:0000002a000001f00003"])
        self.assertEqual(row[5], "s:" + ("z" * 5000).encode().hex())
        self.assertEqual(row[6:8], ["n:12.5", "NULL"])
        self.assertIn("RETURNVALUE o i:42", out)

    def test_prepare_execute_unprepare(self):
        spec = {"sql": "echo", "params": [{"name": "a", "type": "Int", "value": 9}]}
        rc, out, err = harness.run_tedious(self.standin, "prep:" + json.dumps(spec))
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(harness.parse_dump(out)[0]["rows"], [["i:9"]])
        procs = [e["proc"] for e in self.standin.ctl("log")["entries"] if e["event"] == "rpc"]
        self.assertIn("sp_prepare", procs)
        self.assertIn("sp_execute", procs)
        self.assertIn("sp_unprepare", procs)

    def test_transaction_manager_requests(self):
        rc, out, err = harness.run_tedious(self.standin, "tm:begin", "rows 1", "tm:commit",
                                           "tm:begin", "tm:rollback")
        self.assertEqual(rc, 0, out + err)
        self.assertNotIn("ERROR", out)
        tms = [e["sql"] for e in self.standin.ctl("log")["entries"] if e["event"] == "tm"]
        self.assertTrue(tms[-4].endswith("BEGIN TRANSACTION"), tms)
        self.assertEqual(tms[-3], "COMMIT TRANSACTION")
        self.assertEqual(tms[-1], "ROLLBACK TRANSACTION")

    def test_connection_reset(self):
        rc, out, err = harness.run_tedious(self.standin, "BEGIN TRAN", "reset", "rows 1")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(len(harness.parse_dump(out)[-1]["rows"]), 1)
        events = [e["event"] for e in self.standin.ctl("log")["entries"]]
        self.assertIn("reset_connection", events)

    def test_setup_batch_and_multiple_results(self):
        rc, out, err = harness.run_tedious(self.standin, "multi", "error", "rows 2")
        self.assertEqual(rc, 1)   # the error step fails the request, connection lives on
        self.assertIn("ERROR EREQUEST \"Invalid object name 'nope'.\"", out)
        self.assertNotIn("DEAD", out)
        self.assertEqual(len(harness.parse_dump(out)[-1]["rows"]), 2)


if __name__ == "__main__":
    unittest.main()
