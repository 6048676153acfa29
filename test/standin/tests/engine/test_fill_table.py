"""fill_table (the benchmark's bulk loader) must only generate values inside
each column's type: a value out of range is stored silently and only fails
when a SELECT encodes it (smallmoney above 214,748.3647 used to end in
"stand-in internal error: 'i' format requires ...").  Every type fill_table
knows is filled here, read back with SELECT, checked against its type's
range and encoded as the server would send it."""

import datetime
import decimal
import struct
import uuid

from standin.sqltypes import (MAX, SqlDateTime, SqlDateTime2, SqlDateTimeOffset, SqlSmallDateTime,
                              SqlTime, SqlVariant, TICKS_PER_DAY)
from standin.tds.encode import row_encoder

from .support import EngineTest

D = decimal.Decimal

# every column type fill_table generates, with the parameters that bound it
EVERY_TYPE = [
    "tinyint", "smallint", "int", "bigint", "bit",
    "decimal(5, 2)", "decimal(38, 10)", "numeric(4, 4)", "numeric(9, 0)", "decimal(3, 3)",
    "money", "smallmoney", "float", "real",
    "char(3)", "varchar(5)", "nchar(4)", "nvarchar(6)", "varchar(max)", "nvarchar(max)",
    "char(1)", "varchar(1)", "text", "ntext", "xml", "sysname",
    "binary(3)", "varbinary(5)", "varbinary(max)", "image", "rowversion",
    "uniqueidentifier", "date", "time(0)", "time(3)", "time(7)", "datetime", "smalldatetime",
    "datetime2(0)", "datetime2(7)", "datetimeoffset(2)", "sql_variant",
    "hierarchyid", "geometry", "geography",
]

# key-capable types with the most rows fill_table can key by them
KEY_CAPACITY = [
    ("tinyint", 255), ("smallint", 32767), ("decimal(3, 1)", 99), ("numeric(2, 0)", 99),
    ("smallmoney", 214748), ("bit", 2), ("char(3)", 100), ("nvarchar(2)", 10), ("varchar(1)", 10),
    ("binary(1)", 256), ("time(0)", 86400), ("smalldatetime", None), ("real", None),
]

INT_RANGES = {"tinyint": (0, 255), "smallint": (-2 ** 15, 2 ** 15 - 1), "int": (-2 ** 31, 2 ** 31 - 1),
              "bigint": (-2 ** 63, 2 ** 63 - 1)}
SMALLDATETIME_LAST_DAY = (datetime.date(2079, 6, 6) - datetime.date(1900, 1, 1)).days
DATETIME_FIRST_DAY = (datetime.date(1753, 1, 1) - datetime.date(1900, 1, 1)).days
DATETIME_LAST_DAY = (datetime.date(9999, 12, 31) - datetime.date(1900, 1, 1)).days


def check_in_range(test, t, v, where):
    """Fail unless v is a value a column of SqlType t can hold."""
    n = t.name
    msg = "%s: %r out of range for %s" % (where, v, n)
    if n in INT_RANGES:
        lo, hi = INT_RANGES[n]
        test.assertTrue(type(v) is int and lo <= v <= hi, msg)
    elif n == "bit":
        test.assertIsInstance(v, bool, msg)
    elif n in ("decimal", "numeric"):
        p, s = t.precision, t.scale
        test.assertIsInstance(v, D, msg)
        test.assertEqual(v, v.quantize(D(1).scaleb(-s)), msg)
        test.assertLess(abs(v), D(10) ** (p - s), msg)
    elif n in ("money", "smallmoney"):
        lim = D("922337203685477.5807") if n == "money" else D("214748.3647")
        test.assertTrue(-lim - D("0.0001") <= v <= lim, msg)
        test.assertEqual(v, v.quantize(D("0.0001")), msg)
    elif n == "real":
        test.assertEqual(v, struct.unpack("<f", struct.pack("<f", v))[0], msg + " (not a float32)")
    elif n == "float":
        test.assertTrue(isinstance(v, float) and abs(v) < 1.8e308, msg)
    elif n in ("char", "nchar", "varchar", "nvarchar", "sysname", "text", "ntext", "xml"):
        test.assertIsInstance(v, str, msg)
        if t.length not in (None, MAX) and n not in ("text", "ntext", "xml"):
            if n in ("char", "nchar"):
                test.assertEqual(len(v), t.length, msg)
            else:
                test.assertLessEqual(len(v), t.length, msg)
    elif n in ("binary", "varbinary", "image", "timestamp", "hierarchyid", "geometry", "geography"):
        test.assertIsInstance(v, bytes, msg)
        if n == "binary":
            test.assertEqual(len(v), t.length, msg)
        elif n == "timestamp":
            test.assertEqual(len(v), 8, msg)
        elif t.length not in (None, MAX):
            test.assertLessEqual(len(v), t.length, msg)
    elif n == "uniqueidentifier":
        test.assertIsInstance(v, uuid.UUID, msg)
    elif n == "date":
        test.assertIsInstance(v, datetime.date, msg)
    elif n == "time":
        test.assertIsInstance(v, SqlTime, msg)
        test.assertTrue(0 <= v.ticks < TICKS_PER_DAY and v.ticks % 10 ** (7 - t.scale) == 0, msg)
    elif n == "datetime":
        test.assertIsInstance(v, SqlDateTime, msg)
        test.assertTrue(DATETIME_FIRST_DAY <= v.days <= DATETIME_LAST_DAY and 0 <= v.ticks300 < 300 * 86400, msg)
    elif n == "smalldatetime":
        test.assertIsInstance(v, SqlSmallDateTime, msg)
        test.assertTrue(0 <= v.days <= SMALLDATETIME_LAST_DAY and 0 <= v.minutes < 1440, msg)
    elif n in ("datetime2", "datetimeoffset"):
        test.assertIsInstance(v, SqlDateTime2 if n == "datetime2" else SqlDateTimeOffset, msg)
        test.assertTrue(0 <= v.ticks < TICKS_PER_DAY and v.ticks % 10 ** (7 - t.scale) == 0, msg)
        if n == "datetimeoffset":
            test.assertTrue(-840 <= v.offset_minutes <= 840, msg)
    elif n == "sql_variant":
        test.assertIsInstance(v, SqlVariant, msg)
    else:
        test.fail("%s: no range check for type %s" % (where, n))


class FillTableRangesTest(EngineTest):
    def select_all(self, sql):
        sets = [i for i in self.ok(sql) if i.__class__.__name__ == "ResultSet"]
        return sets[0].columns, sets[0].rows

    def check_result(self, columns, rows):
        enc = row_encoder(columns)
        for r in rows:
            for c, v in zip(columns, r):
                if v is not None:
                    check_in_range(self, c.type, v, c.name)
            enc.encode(tuple(r))         # what the TDS layer does; raises on an unencodable value

    def test_every_type_stays_in_range(self):
        cols = ", ".join("c%d %s" % (i, t) for i, t in enumerate(EVERY_TYPE))
        self.ok("CREATE TABLE wide (id int PRIMARY KEY, %s)" % cols)
        for seed in (1, 2, 3):
            self.engine.control("fill_table", {"table": "wide", "rows": 700, "seed": seed})
        columns, rows = self.select_all("SELECT * FROM wide ORDER BY id")
        self.assertEqual(len(rows), 2100)
        self.assertEqual([c.type.name for c in columns[1:]],
                         [{"rowversion": "timestamp", "sysname": "nvarchar"}.get(t, t.split("(")[0]) for t in EVERY_TYPE])
        for i, c in enumerate(columns[1:]):
            self.assertTrue(any(r[i + 1] is not None for r in rows), "fill_table left %s empty" % EVERY_TYPE[i])
        self.check_result(columns, rows)
        # the values are usable by the engine too, not only by the encoder
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM wide WHERE c11 <= CAST(214748.3647 AS smallmoney)"), 2100)
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM wide WHERE CAST(c13 AS real) = c13"), 2100)

    def test_every_key_type_up_to_its_capacity(self):
        for i, (t, cap) in enumerate(KEY_CAPACITY):
            n = min(cap or 3000, 3000)
            self.ok("CREATE TABLE k%d (k %s NOT NULL PRIMARY KEY, v int)" % (i, t))
            self.engine.control("fill_table", {"table": "k%d" % i, "rows": n})
            columns, rows = self.select_all("SELECT k, v FROM k%d ORDER BY k" % i)
            self.assertEqual(len(rows), n, t)
            self.check_result(columns, rows)
            self.assertEqual(self.scalar("SELECT COUNT(DISTINCT k) FROM k%d" % i), n, t)

    def test_key_overflow_is_refused_before_writing(self):
        for i, (t, cap) in enumerate(KEY_CAPACITY):
            if cap is None:
                continue
            self.ok("CREATE TABLE o%d (k %s NOT NULL PRIMARY KEY)" % (i, t))
            with self.assertRaises(ValueError, msg=t) as cm:
                self.engine.control("fill_table", {"table": "o%d" % i, "rows": cap + 1})
            self.assertIn("at most %d" % cap, str(cm.exception))
            self.assertEqual(self.scalar("SELECT COUNT(*) FROM o%d" % i), 0, t)

    def test_composite_key_of_mixed_types(self):
        self.ok("CREATE TABLE m (a date NOT NULL, b nchar(5) NOT NULL, c datetimeoffset(0) NOT NULL, "
                "d uniqueidentifier NOT NULL, v smallmoney, PRIMARY KEY (a, b, c, d))")
        self.engine.control("fill_table", {"table": "m", "rows": 500})
        columns, rows = self.select_all("SELECT a, b, c, d, v FROM m ORDER BY a, b, c, d")
        self.assertEqual(len(rows), 500)
        self.check_result(columns, rows)
