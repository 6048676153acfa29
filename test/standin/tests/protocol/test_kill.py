"""T-SQL KILL (ENGINE.md, "KILL"): its errors, an idle victim's connection
closed at once, and a running victim's response ended with each of the
kill notices (none, done_error, error_596) before its connection closes."""

import time
import unittest

import harness
from harness import RawClient, parse_tokens
from standin.results import EngineConfig
from standin.tds import tokens as T

try:
    from standin.engine import Engine
except Exception:      # the engine is built in parallel; skip until it imports
    Engine = None


def wait_for(predicate, timeout=5.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


@unittest.skipIf(Engine is None, "standin.engine not importable")
class Kill(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        config = EngineConfig(logins={"sa": "Passw0rd!", "reader": "R3ader!"})
        cls.standin = harness.Standin(Engine(config))
        cls.killer = RawClient(cls.standin.port)
        cls.killer.login(database="cdcdb")
        cls.killer.batch("CREATE TABLE dbo.k (id int NOT NULL PRIMARY KEY)")
        cls.killer.read_message()
        reply = cls.standin.ctl("fill_table", table="dbo.k", rows=100, database="cdcdb")
        assert "error" not in reply, reply

    @classmethod
    def tearDownClass(cls):
        cls.killer.close()
        cls.standin.stop()

    def tearDown(self):
        self.standin.ctl("clear")
        self.standin.ctl("kill_notice", notice="done_error")

    def spids(self):
        return [c["spid"] for c in self.standin.ctl("connections")["connections"]]

    def victim(self):
        before = set(self.spids())
        c = RawClient(self.standin.port)
        c.login(database="cdcdb")
        (spid,) = set(self.spids()) - before
        return c, spid

    def run_sql(self, client, sql):
        client.batch(sql)
        return parse_tokens(client.read_message()[1])

    @staticmethod
    def read_until_closed(client):
        """Every packet until the server closes: (payload, ended with EOM)."""
        data, eom = b"", False
        while True:
            try:
                _ptype, status, payload, _header = client._read_packet()
            except Exception:
                return data, eom
            data += payload
            eom = bool(status & 0x01)

    def test_errors(self):
        toks = self.run_sql(self.killer, "KILL 32000")
        self.assertEqual(toks[0][:5], ("ERROR", 6106, 2, 16, "Process ID 32000 is not an active process ID."))
        self.assertTrue(toks[-1][1] & T.DONE_ERROR)
        own = self.run_sql(self.killer, "SELECT @@SPID")
        spid = [t for t in own if t[0] == "ROW"][0][1][0]
        toks = self.run_sql(self.killer, "KILL %d" % spid)
        self.assertEqual(toks[0][:5], ("ERROR", 6104, 1, 16, "Cannot use KILL to kill your own process."))
        toks = self.run_sql(self.killer, "BEGIN TRANSACTION; KILL 32000; ROLLBACK")
        self.assertEqual(toks[1][:2], ("ERROR", 6115))
        reader = RawClient(self.standin.port)
        reader.login(user="reader", password="R3ader!", database="cdcdb")
        toks = self.run_sql(reader, "KILL %d" % spid)
        self.assertEqual(toks[0][:5], ("ERROR", 6102, 1, 14,
                                       "User does not have permission to use the KILL statement."))
        reader.close()
        toks = self.run_sql(self.killer, "KILL 'D5499C66-E398-45CA-BF7E-DC9C194B48CF'")
        self.assertEqual(toks[0][:2], ("ERROR", 102))      # UOW: not supported

    def test_idle_victim_is_closed_at_once(self):
        for notice in ("none", "done_error", "error_596"):
            self.standin.ctl("kill_notice", notice=notice)
            c, spid = self.victim()
            toks = self.run_sql(self.killer, "KILL %d" % spid)
            self.assertFalse([t for t in toks if t[0] == "ERROR"], toks)
            self.assertEqual(self.read_until_closed(c), (b"", False), notice)
            self.assertTrue(wait_for(lambda: spid not in self.spids()), notice)
            c.close()

    def killed_mid_result(self, notice):
        self.standin.ctl("kill_notice", notice=notice)
        c, spid = self.victim()
        self.standin.ctl("stall", seconds=20, after_rows=5, spid=spid)
        c.batch("BEGIN TRANSACTION; SELECT id FROM dbo.k ORDER BY id")
        self.assertTrue(wait_for(lambda: not self.standin.ctl("faults")["faults"]))
        started = time.time()
        self.run_sql(self.killer, "KILL %d" % spid)
        data, eom = self.read_until_closed(c)
        self.assertLess(time.time() - started, 5, "the stall was not cut short")
        self.assertTrue(wait_for(lambda: spid not in self.spids()))
        c.close()
        return data, eom

    def test_running_victim_without_notice(self):
        data, eom = self.killed_mid_result("none")
        self.assertFalse(eom)
        toks = parse_tokens(data)
        self.assertEqual([t[0] for t in toks].count("ROW"), 5)
        self.assertEqual(toks[-1][0], "ROW")          # cut off: no DONE

    def test_running_victim_done_error(self):
        data, eom = self.killed_mid_result("done_error")
        self.assertTrue(eom)
        toks = parse_tokens(data)
        self.assertEqual([t[0] for t in toks].count("ROW"), 5)
        self.assertEqual(toks[-1], ("DONE", T.DONE_ERROR | T.DONE_INXACT, 0))
        self.assertFalse([t for t in toks if t[0] == "ERROR"])

    def test_running_victim_error_596(self):
        data, eom = self.killed_mid_result("error_596")
        self.assertTrue(eom)
        toks = parse_tokens(data)
        self.assertEqual([t[0] for t in toks].count("ROW"), 5)
        self.assertEqual(toks[-2][:5], ("ERROR", 596, 1, 21, "Cannot continue the execution because the "
                                        "session is in the kill state."))
        self.assertEqual(toks[-1], ("DONE", T.DONE_ERROR | T.DONE_INXACT, 0))

    def test_killed_transaction_rolls_back(self):
        c, spid = self.victim()
        self.run_sql(c, "BEGIN TRANSACTION; INSERT INTO dbo.k VALUES (1000)")
        self.run_sql(self.killer, "KILL %d" % spid)
        self.read_until_closed(c)
        c.close()
        self.assertTrue(wait_for(lambda: spid not in self.spids()))
        toks = self.run_sql(self.killer, "SELECT COUNT(*) FROM dbo.k WHERE id = 1000")
        self.assertEqual([t for t in toks if t[0] == "ROW"][0][1], [0])


if __name__ == "__main__":
    unittest.main()
