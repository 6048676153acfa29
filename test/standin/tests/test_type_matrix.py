"""Client fidelity: FreeTDS db-lib and Node tedious decode every type and edge
value of the matrix (tests/type_matrix_cases.py) identically, and equal to
the expected values.

Known client limits (not stand-in bugs), asserted explicitly:
  * tedious returns decimal/numeric/money as a JS double, so those are
    compared as the nearest double (db-lib is compared exactly);
  * tedious drops the datetimeoffset offset (it returns the UTC instant);
  * db-lib has no conversion for sql_variant: it hands out the base value's
    bytes, which we compare with the expected bytes.

Two sources of the same matrix: the fake engine (protocol layer only) and,
when standin.engine is importable, the real engine through CREATE TABLE +
INSERT + SELECT."""

from __future__ import annotations

import os
import struct
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "protocol"))
sys.path.insert(0, HERE)

import harness                                              # noqa: E402
from type_matrix_cases import CASES, canonical, literal_for  # noqa: E402


def dblib_expected(t, v) -> str:
    if v is not None and t.name == "sql_variant":
        inner = v.value
        if isinstance(inner, int):
            return "vraw:" + struct.pack("<i", inner).hex()
        return "vraw:" + inner.encode("utf-8").hex()
    return canonical(t, v)


def tedious_expected(t, v) -> str:
    c = canonical(t, v)
    if v is not None and t.name == "datetimeoffset":
        return c.split("|")[0]
    return c


def same_number(expected: str, got: str) -> bool:
    """tedious decimals: equal as doubles (relative 1e-15)."""
    if not (expected.startswith("n:") and got.startswith("n:")):
        return expected == got
    e, g = float(expected[2:]), float(got[2:])
    return e == g or abs(e - g) <= 1e-15 * max(abs(e), abs(g))


class MatrixChecks:
    """Mixin: subclasses provide setUpClass (self.standin) and the SQL."""

    matrix_sql = "matrix"

    def _dump(self, runner):
        rc, out, err = runner(self.standin, *self.matrix_sql_list())
        self.assertEqual(rc, 0, "client failed:\n%s\n%s" % (out[-2000:], err[-2000:]))
        results = harness.parse_dump(out)
        self.assertEqual(len(results), len(CASES), out[-2000:])
        return results

    def matrix_sql_list(self):
        return [self.matrix_sql]

    def check(self, results, expect, compare=lambda e, g: e == g):
        failures = []
        checked = 0
        for (name, t, cases), res in zip(CASES, results):
            got = [row[0] for row in res["rows"]]
            want = [expect(t, v) for v, _lit in cases]
            if len(got) != len(want):
                failures.append("%s: %d rows, want %d" % (name, len(got), len(want)))
                continue
            for i, (w, g) in enumerate(zip(want, got)):
                checked += 1
                if not compare(w, g):
                    failures.append("%s[%d] (%s): want %s got %s" % (name, i, t.sql(), w[:80], g[:80]))
        self.assertFalse(failures, "\n".join(failures))
        return checked

    def test_dblib_decodes_matrix(self):
        n = self.check(self._dump(harness.run_dblib), dblib_expected)
        self.assertGreater(n, 100)

    @unittest.skipUnless(harness.tedious_available(), "tedious not installed (npm ci)")
    def test_tedious_decodes_matrix(self):
        n = self.check(self._dump(harness.run_tedious), tedious_expected, same_number)
        self.assertGreater(n, 100)

    @unittest.skipUnless(harness.tedious_available(), "tedious not installed (npm ci)")
    def test_clients_agree(self):
        dbl = self._dump(harness.run_dblib)
        ted = self._dump(harness.run_tedious)
        diffs = []
        for (name, t, _cases), a, b in zip(CASES, dbl, ted):
            for i, (ra, rb) in enumerate(zip(a["rows"], b["rows"])):
                va, vb = ra[0], rb[0]
                if t.name == "datetimeoffset":
                    va = va.split("|")[0]
                if t.name == "sql_variant":
                    continue     # compared against expected values in the tests above
                if not same_number(va, vb):
                    diffs.append("%s[%d]: db-lib %s tedious %s" % (name, i, va[:60], vb[:60]))
            self.assertEqual(a["cols"], b["cols"], name)
        self.assertFalse(diffs, "\n".join(diffs))


class TypeMatrixFakeEngine(MatrixChecks, unittest.TestCase):
    """The protocol layer alone: values handed over as Python objects."""

    @classmethod
    def setUpClass(cls):
        engine = harness.FakeEngine()
        engine.matrix = CASES
        cls.standin = harness.Standin(engine)

    @classmethod
    def tearDownClass(cls):
        cls.standin.stop()

    def test_other_packet_sizes(self):
        """Values straddle packets differently at 512 and 32767 bytes."""
        runs = [(harness.run_dblib, ["-P", "32767"], dblib_expected, lambda e, g: e == g)]
        if harness.tedious_available():
            runs += [(harness.run_tedious, ["--packet-size", size], tedious_expected, same_number)
                     for size in ("512", "32767")]
        for runner, options, expect, compare in runs:
            with self.subTest(options=options):
                rc, out, err = runner(self.standin, "matrix", options=options)
                self.assertEqual(rc, 0, out[-1000:] + err[-1000:])
                self.check(harness.parse_dump(out), expect, compare)


def _real_engine_class():
    try:
        from standin.engine import Engine   # noqa: F401
        return Engine
    except Exception:
        return None


@unittest.skipUnless(_real_engine_class() is not None and os.environ.get("STANDIN_MATRIX_REAL", "1") == "1",
                     "standin.engine not importable yet")
class TypeMatrixRealEngine(MatrixChecks, unittest.TestCase):
    """Same matrix through the real engine: CREATE TABLE, INSERT, SELECT."""

    @classmethod
    def setUpClass(cls):
        from standin.results import EngineConfig
        engine = _real_engine_class()(EngineConfig())
        cls.standin = harness.Standin(engine)
        setup = []
        for i, (name, t, cases) in enumerate(CASES):
            setup.append("CREATE TABLE dbo.m%d (k int NOT NULL PRIMARY KEY, %s %s NULL)"
                         % (i, name, t.sql()))
            for k, (v, lit) in enumerate(cases):
                setup.append("INSERT INTO dbo.m%d (k, %s) VALUES (%d, %s)"
                             % (i, name, k, literal_for(v, lit)))
        path = os.path.join(harness.work_dir(), "matrix_setup.sql")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(setup))
        rc, out, err = harness.run_dblib(cls.standin, "@" + path)
        if rc != 0:
            cls.standin.stop()
            raise unittest.SkipTest("real engine cannot build the matrix yet:\n" + out[-1500:])

    @classmethod
    def tearDownClass(cls):
        cls.standin.stop()

    def matrix_sql_list(self):
        return ["\n".join("SELECT %s FROM dbo.m%d ORDER BY k" % (name, i)
                          for i, (name, _t, _c) in enumerate(CASES))]


if __name__ == "__main__":
    unittest.main()
