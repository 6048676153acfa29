"""Byte-exact value encodings (tds-server.md §5, §7) and encode/decode
round trips for every type of the matrix."""

import datetime
import decimal
import os
import struct
import sys
import unittest
import uuid

import harness   # noqa: F401  (sys.path)
sys.path.insert(0, os.path.join(harness.HERE, ".."))

from standin.results import CachedRow
from standin.sqltypes import (Column, MAX, SqlDateTime, SqlDateTimeOffset, SqlType,
                              DEFAULT_COLLATION, t_lsn)
from standin.tds import encode as E
from standin.tds.decode import Reader, decode_rpc, read_type_info, read_value
from type_matrix_cases import CASES

D = decimal.Decimal


def value_bytes(t, v):
    return E.encode_value(t, v)


class ValueEncodings(unittest.TestCase):
    def test_decimal_sign_and_magnitude(self):
        t = SqlType("decimal", precision=18, scale=4)
        self.assertEqual(E.wire_type(t).type_info, bytes([0x6A, 0x09, 0x12, 0x04]))
        self.assertEqual(value_bytes(t, D("-12345.6789")),
                         bytes([9, 0]) + (123456789).to_bytes(8, "little"))
        t38 = SqlType("decimal", precision=38, scale=0)
        self.assertEqual(value_bytes(t38, D("9" * 38)), bytes([17, 1]) + (10 ** 38 - 1).to_bytes(16, "little"))
        self.assertEqual(E.wire_type(SqlType("numeric", precision=5, scale=2)).type_info,
                         bytes([0x6C, 5, 5, 2]))

    def test_guid_mixed_endian(self):
        g = uuid.UUID("6F9619FF-8B86-D011-B42D-00C04FC964FF")
        self.assertEqual(value_bytes(SqlType("uniqueidentifier"), g),
                         bytes.fromhex("10FF19966F868B11D0B42D00C04FC964FF"))

    def test_date_and_datetime(self):
        self.assertEqual(value_bytes(SqlType("date"), datetime.date(2024, 5, 6)), bytes.fromhex("03C3460B"))
        self.assertEqual(value_bytes(SqlType("datetime"), SqlDateTime(45416, 7706800)),
                         b"\x08" + struct.pack("<iI", 45416, 7706800))

    def test_money_high_then_low(self):
        t = SqlType("money")
        self.assertEqual(value_bytes(t, D("1.0000")), b"\x08" + struct.pack("<iI", 0, 10000))
        self.assertEqual(value_bytes(t, D("-0.0001")), b"\x08" + struct.pack("<iI", -1, 0xFFFFFFFF))
        self.assertEqual(value_bytes(SqlType("smallmoney"), D("-1.0000")), b"\x04" + struct.pack("<i", -10000))

    def test_lsn_binary10(self):
        self.assertEqual(E.wire_type(t_lsn()).type_info, bytes([0xAD, 0x0A, 0x00]))
        lsn = bytes.fromhex("0000002A000001F00003")
        self.assertEqual(value_bytes(t_lsn(), lsn), b"\x0a\x00" + lsn)

    def test_datetimeoffset_is_sent_in_utc(self):
        t = SqlType("datetimeoffset", scale=7)
        v = SqlDateTimeOffset(datetime.date(2024, 1, 1), 0, 60)   # 00:00 +01:00 = 23:00 UTC the day before
        raw = value_bytes(t, v)
        self.assertEqual(raw[0], 10)
        ticks = int.from_bytes(raw[1:6], "little")
        days = int.from_bytes(raw[6:9], "little")
        self.assertEqual(ticks, 23 * 3600 * 10 ** 7)
        self.assertEqual(datetime.date.fromordinal(days + 1), datetime.date(2023, 12, 31))
        self.assertEqual(struct.unpack("<h", raw[9:])[0], 60)

    def test_plp(self):
        t = SqlType("varbinary", length=MAX)
        self.assertEqual(value_bytes(t, b""), b"\x00" * 12)
        self.assertEqual(value_bytes(t, None), b"\xff" * 8)
        raw = value_bytes(t, b"a" * 20000)
        self.assertEqual(struct.unpack_from("<Q", raw)[0], 20000)
        self.assertEqual(raw[-4:], b"\x00" * 4)
        self.assertEqual(len(raw), 8 + 3 * 4 + 20000 + 4)   # 8000 + 8000 + 4000 chunks

    def test_string_type_infos(self):
        self.assertEqual(E.wire_type(SqlType("nvarchar", length=20, collation=DEFAULT_COLLATION)).type_info,
                         b"\xe7\x28\x00" + DEFAULT_COLLATION)
        self.assertEqual(E.wire_type(SqlType("varchar", length=MAX, collation=DEFAULT_COLLATION)).type_info,
                         b"\xa7\xff\xff" + DEFAULT_COLLATION)
        self.assertEqual(value_bytes(SqlType("varchar", length=5, collation=DEFAULT_COLLATION), "\u20ac"),
                         b"\x01\x00\x80")      # cp1252 euro sign
        self.assertEqual(value_bytes(SqlType("nvarchar", length=5), None), b"\xff\xff")

    def test_colmetadata_flags_and_text_table_name(self):
        cols = [Column("id", SqlType("int"), nullable=False, identity=True),
                Column("c", SqlType("int"), computed=True),
                Column("t", SqlType("text", collation=DEFAULT_COLLATION), table_name="dbo.tab")]
        r = Reader(E.colmetadata(cols))
        self.assertEqual(r.u8(), 0x81)
        self.assertEqual(r.u16(), 3)
        _ut, flags = r.unpack("<IH")
        self.assertEqual(flags, 0x0010)
        read_type_info(r)
        self.assertEqual(r.b_varchar(), "id")
        _ut, flags = r.unpack("<IH")
        self.assertEqual(flags, 0x0021)
        read_type_info(r)
        r.b_varchar()
        r.unpack("<IH")
        self.assertEqual(r.u8(), 0x23)
        r.take(4 + 5)
        self.assertEqual(r.u8(), 2)
        self.assertEqual((r.us_varchar(), r.us_varchar()), ("dbo", "tab"))
        self.assertEqual(r.b_varchar(), "t")

    def test_every_matrix_value_round_trips(self):
        for name, t, cases in CASES:
            enc = E.row_encoder([Column(name, t)])
            r = Reader(enc.metadata)
            r.take(3 + 6)
            ti = read_type_info(r, text_in_row=True)
            for v, _lit in cases:
                row = enc.encode((v,))
                rr = Reader(row)
                tok = rr.u8()
                if tok == 0xD2:
                    self.assertEqual(rr.u8(), 1)
                    got = None
                else:
                    got = read_value(rr, ti, text_in_row=True)
                self.assertEqual(rr.remaining(), 0, name)
                if t.name == "char" and v is not None:
                    self.assertEqual(got, v)
                self.assertEqual(got, v, "%s: %r" % (name, v))


class RowEncoding(unittest.TestCase):
    cols = [Column("a", SqlType("int")), Column("b", SqlType("bigint")),
            Column("c", SqlType("nvarchar", length=20, collation=DEFAULT_COLLATION))]

    def test_generated_fast_path_equals_generic_path(self):
        enc = E.row_encoder(self.cols)
        row = (1, -2, "x\U0001F600")
        self.assertEqual(enc.encode_tuple(row),
                         b"\xd1" + b"".join(w.encode(v) for w, v in zip(enc.wire, row)))

    def test_nbcrow_decision(self):
        enc = E.row_encoder(self.cols)
        # one NULL int costs 1 byte in a ROW; the bitmap costs 1 -> ROW
        self.assertEqual(enc.encode((None, 1, "a"))[0], 0xD1)
        # NULL int + NULL nvarchar cost 3 bytes -> NBCROW with bitmap 0b101
        self.assertEqual(enc.encode((None, 1, None))[:2], b"\xd2\x05")

    def test_cached_row_is_encoded_once(self):
        enc = E.row_encoder(self.cols)
        slot = {}
        first = enc.encode(CachedRow((1, 2, "z"), slot, "k"))
        self.assertEqual(len(slot), 1)
        slot[next(iter(slot))] = b"SENTINEL"
        self.assertEqual(enc.encode(CachedRow((1, 2, "z"), slot, "k")), b"SENTINEL")
        self.assertEqual(first, enc.encode((1, 2, "z")))


class RpcDecoding(unittest.TestCase):
    def test_legacy_and_widened_types(self):
        params = (
            b"\x02" + "@a".encode("utf-16-le") + b"\x00\x26\x04\x04" + struct.pack("<i", 7)
            + b"\x02" + "@b".encode("utf-16-le") + b"\x00\x27\x10" + DEFAULT_COLLATION + b"\x03abc"
            + b"\x02" + "@c".encode("utf-16-le") + b"\x00\xa5\x0a\x00\x0a\x00" + bytes(range(10))
            + b"\x02" + "@d".encode("utf-16-le") + b"\x01\x6f\x08\x08" + struct.pack("<iI", 1, 2)
            + b"\x02" + "@e".encode("utf-16-le") + b"\x00\x6e\x08\x00")
        body = struct.pack("<H", 4) + "proc".encode("utf-16-le") + b"\x00\x00" + params
        call = decode_rpc(body)[0]
        self.assertEqual(call.name, "proc")
        got = [(p.name, p.type.name, p.value, p.output) for p in call.params]
        self.assertEqual(got, [("@a", "int", 7, False), ("@b", "varchar", "abc", False),
                               ("@c", "varbinary", bytes(range(10)), False),
                               ("@d", "datetime", SqlDateTime(1, 2), True),
                               ("@e", "money", None, False)])


if __name__ == "__main__":
    unittest.main()
