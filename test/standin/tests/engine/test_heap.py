"""standin/heap.py: what survives a full collection is frozen, so that a
later full collection does not walk the stored database again, and the
engine reads and writes its rows as before.  Each case runs in a process of
its own: the collector's policy is per process."""

import json
import os
import subprocess
import sys
import textwrap
import unittest

from standin.control import call

from .support import ROOT

ROWS = 30000

# a table of ROWS stored row versions, a full collection, then the engine
# at work on the frozen rows: an update, a delete, a select of every row
SCRIPT = textwrap.dedent("""
    import gc, json, sys
    sys.path.insert(0, %(root)r)
    from standin import heap
    from standin.engine import Engine
    from standin.results import EngineConfig, ResultSet, CachedRow, SqlError
    heap.apply_policy(sys.argv[1])
    eng = Engine(EngineConfig(databases=["cdcdb"], logins={"sa": "Passw0rd!"}, capture_interval=3600))
    s = eng.login("sa", "Passw0rd!", "cdcdb", "heap", "localhost")

    def run(sql):
        out = []
        for item in eng.execute_batch(s, sql):
            if isinstance(item, SqlError):
                raise RuntimeError(str(item))
            if isinstance(item, ResultSet):
                out.append([r.values if isinstance(r, CachedRow) else r for r in item.rows])
        return out

    run("CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, name nvarchar(20) NULL)")
    eng.control("fill_table", {"table": "dbo.t", "rows": %(rows)d})
    gc.collect()
    frozen, old = gc.get_freeze_count(), len(gc.get_objects(2))
    run("UPDATE dbo.t SET name = N'changed' WHERE id = 7; DELETE FROM dbo.t WHERE id = 8")
    gc.collect()
    rows = run("SELECT id, name FROM dbo.t ORDER BY id")[0]
    print(json.dumps({"frozen": frozen, "old": old, "described": heap.describe(),
                      "count": len(rows), "row7": list(rows[6]), "ids": [r[0] for r in rows[5:9]]}))
    """)


def run_policy(policy):
    out = subprocess.run([sys.executable, "-c", SCRIPT % {"root": ROOT, "rows": ROWS}, policy],
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise AssertionError(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


class HeapPolicy(unittest.TestCase):
    def test_freeze_moves_the_stored_rows_out_of_full_collections(self):
        r = run_policy("freeze")
        # one tracked object per stored row version at least, none of them
        # left in the generation a full collection walks
        self.assertGreaterEqual(r["frozen"], ROWS)
        self.assertLess(r["old"], ROWS // 10)
        self.assertEqual(r["described"]["policy"], "freeze")
        # the engine works on frozen rows as on any others
        self.assertEqual(r["count"], ROWS - 1)
        self.assertEqual(r["row7"], [7, "changed"])
        self.assertEqual(r["ids"], [6, 7, 9, 10])

    def test_default_leaves_the_collector_as_cpython_sets_it(self):
        r = run_policy("default")
        self.assertEqual(r["frozen"], 0)
        self.assertGreaterEqual(r["old"], ROWS)
        self.assertEqual(r["described"]["policy"], "default")
        self.assertEqual(r["count"], ROWS - 1)
        self.assertEqual(r["row7"], [7, "changed"])

    def test_unknown_policy_is_refused(self):
        from standin import heap
        with self.assertRaises(ValueError):
            heap.apply_policy("never")


class RunStandinFlag(unittest.TestCase):
    """run-standin freezes by default; --gc default keeps CPython's collector."""

    def policy_of(self, *extra):
        p = subprocess.Popen([os.path.join(ROOT, "run-standin"), "--port", "0", "--control-port", "0",
                              "--capture-interval", "5"] + list(extra),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            fields = dict(kv.split("=") for kv in p.stdout.readline().split()[2:])
            return call(int(fields["control"]), "heap")["heap"]["policy"]
        finally:
            p.terminate()
            p.wait(timeout=30)
            p.stdout.close()
            p.stderr.close()

    def test_default_is_freeze(self):
        self.assertEqual(self.policy_of(), "freeze")

    def test_gc_default(self):
        self.assertEqual(self.policy_of("--gc", "default"), "default")


if __name__ == "__main__":
    unittest.main()
