"""TDS bytes -> values: TYPE_INFO and values of RPC parameters ([MS-TDS]
2.2.6.6, 2.2.5.4-6), ALL_HEADERS, and the request bodies of SQL_BATCH, RPC
and TRANSACTION MANAGER messages.

Parameters are parsed by TYPE_INFO, never by position or name: db-lib sends
named parameters with widened types (INTN, BIGVARCHR…), ct-lib sends NTEXT
for sp_executesql text, tedious sends NVARCHAR/PLP.  Legacy short types are
accepted too.  The same TYPE_INFO/value decoder reads ROW values in the
protocol tests (with text_in_row=True for TEXT/NTEXT/IMAGE)."""

from __future__ import annotations

import datetime
import decimal
import struct
import uuid
from dataclasses import dataclass
from typing import List, Optional

from ..results import RpcParam
from ..sqltypes import (MAX, SqlDateTime, SqlDateTime2, SqlDateTimeOffset,
                        SqlSmallDateTime, SqlTime, SqlType, SqlVariant,
                        TICKS_PER_DAY, TICKS_PER_SECOND)
from .collation import codec_for


class DecodeError(ValueError):
    pass


class Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0):
        self.data = data
        self.pos = pos

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise DecodeError("need %d bytes at offset %d, have %d"
                              % (n, self.pos, len(self.data) - self.pos))
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return bytes(b)

    def unpack(self, fmt: str):
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size))

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        return self.unpack("<H")[0]

    def u32(self) -> int:
        return self.unpack("<I")[0]

    def b_varchar(self) -> str:
        n = self.u8()
        return self.take(2 * n).decode("utf-16-le")

    def us_varchar(self) -> str:
        n = self.u16()
        return self.take(2 * n).decode("utf-16-le")


@dataclass
class TypeInfo:
    """A parsed TYPE_INFO: the TDS type byte plus what follows it."""

    tds_type: int
    sqltype: SqlType
    size: int = 0           # declared max length / fixed size
    collation: Optional[bytes] = None
    plp: bool = False


_FIXED = {   # fixed-length types: (size, SqlType)
    0x30: (1, SqlType("tinyint")), 0x32: (1, SqlType("bit")),
    0x34: (2, SqlType("smallint")), 0x38: (4, SqlType("int")),
    0x7F: (8, SqlType("bigint")), 0x3B: (4, SqlType("real")),
    0x3E: (8, SqlType("float")), 0x3C: (8, SqlType("money")),
    0x7A: (4, SqlType("smallmoney")), 0x3D: (8, SqlType("datetime")),
    0x3A: (4, SqlType("smalldatetime")), 0x1F: (0, SqlType("int")),  # NULLTYPE
}
_INTN = {1: "tinyint", 2: "smallint", 4: "int", 8: "bigint"}


def read_type_info(r: Reader, text_in_row: bool = False) -> TypeInfo:
    """TYPE_INFO.  text_in_row: TEXT/NTEXT/IMAGE carry a TableName (COLMETADATA)."""
    t = r.u8()
    if t in _FIXED:
        size, st = _FIXED[t]
        return TypeInfo(t, st, size)
    if t == 0x26:   # INTN
        n = r.u8()
        return TypeInfo(t, SqlType(_INTN.get(n, "bigint")), n)
    if t == 0x68:   # BITN
        return TypeInfo(t, SqlType("bit"), r.u8())
    if t == 0x6D:   # FLTN
        n = r.u8()
        return TypeInfo(t, SqlType("real") if n == 4 else SqlType("float"), n)
    if t == 0x6E:   # MONEYN
        n = r.u8()
        return TypeInfo(t, SqlType("smallmoney" if n == 4 else "money"), n)
    if t == 0x6F:   # DATETIMN
        n = r.u8()
        return TypeInfo(t, SqlType("smalldatetime" if n == 4 else "datetime"), n)
    if t in (0x6A, 0x6C, 0x37, 0x3F):   # DECIMALN, NUMERICN, legacy DECIMAL/NUMERIC
        n, prec, scale = r.unpack("<BBB")
        name = "numeric" if t in (0x6C, 0x3F) else "decimal"
        return TypeInfo(t, SqlType(name, precision=prec, scale=scale), n)
    if t == 0x24:
        return TypeInfo(t, SqlType("uniqueidentifier"), r.u8())
    if t == 0x28:
        return TypeInfo(t, SqlType("date"), 3)
    if t in (0x29, 0x2A, 0x2B):
        scale = r.u8()
        name = {0x29: "time", 0x2A: "datetime2", 0x2B: "datetimeoffset"}[t]
        return TypeInfo(t, SqlType(name, scale=scale))
    if t in (0xA7, 0xAF, 0xE7, 0xEF):   # BIGVARCHR, BIGCHAR, NVARCHAR, NCHAR
        n = r.u16()
        coll = r.take(5)
        name = {0xA7: "varchar", 0xAF: "char", 0xE7: "nvarchar", 0xEF: "nchar"}[t]
        if n == 0xFFFF:
            return TypeInfo(t, SqlType(name, length=MAX, collation=coll), n, coll, plp=True)
        length = n // 2 if t in (0xE7, 0xEF) else n
        return TypeInfo(t, SqlType(name, length=length, collation=coll), n, coll)
    if t in (0xA5, 0xAD):
        n = r.u16()
        name = "varbinary" if t == 0xA5 else "binary"
        if n == 0xFFFF:
            return TypeInfo(t, SqlType(name, length=MAX), n, plp=True)
        return TypeInfo(t, SqlType(name, length=n), n)
    if t in (0x27, 0x2F, 0x25, 0x2D, 0x67):   # legacy BYTE-length types
        n = r.u8()
        name = {0x27: "varchar", 0x2F: "char", 0x25: "varbinary", 0x2D: "binary",
                0x67: "nvarchar"}[t]
        coll = r.take(5) if t in (0x27, 0x2F, 0x67) else None
        return TypeInfo(t, SqlType(name, length=n, collation=coll), n, coll)
    if t in (0x23, 0x63, 0x22):   # TEXT, NTEXT, IMAGE
        n = r.u32()
        coll = r.take(5) if t != 0x22 else None
        if text_in_row:
            for _ in range(r.u8()):
                r.us_varchar()
        name = {0x23: "text", 0x63: "ntext", 0x22: "image"}[t]
        return TypeInfo(t, SqlType(name, collation=coll), n, coll)
    if t == 0xF1:   # XML
        if r.u8():
            r.b_varchar()
            r.b_varchar()
            r.us_varchar()
        return TypeInfo(t, SqlType("xml"), plp=True)
    if t == 0x62:   # SSVARIANT
        return TypeInfo(t, SqlType("sql_variant"), r.u32())
    if t == 0xF0:   # UDT
        r.u16()
        r.b_varchar()
        r.b_varchar()
        r.b_varchar()
        r.us_varchar()
        return TypeInfo(t, SqlType("varbinary", length=MAX), plp=True)
    raise DecodeError("unsupported TDS type 0x%02X" % t)


def _read_plp(r: Reader) -> Optional[bytes]:
    total = r.unpack("<Q")[0]
    if total == 0xFFFFFFFFFFFFFFFF:
        return None
    parts = []
    while True:
        n = r.u32()
        if n == 0:
            break
        parts.append(r.take(n))
    return b"".join(parts)


_D1900 = datetime.date(1900, 1, 1).toordinal()


_CTX = decimal.Context(prec=100)   # exact for 38 digits (the default 28 would round)


def _decimal_from(sign: int, magnitude: int, scale: int) -> decimal.Decimal:
    d = decimal.Decimal(magnitude).scaleb(-scale, _CTX)
    return d if sign else _CTX.minus(d)


def _time_ticks(raw: bytes, scale: int) -> int:
    return int.from_bytes(raw, "little") * 10 ** (7 - scale)


def _text(ti: TypeInfo, raw: bytes) -> str:
    name = ti.sqltype.name
    if name in ("nvarchar", "nchar", "ntext", "xml"):
        return raw.decode("utf-16-le")
    return raw.decode(codec_for(ti.collation), errors="replace")


def decode_fixed(ti: TypeInfo, raw: bytes):
    """Value from its raw bytes (no length prefix) for a non-string type."""
    name = ti.sqltype.name
    n = len(raw)
    if name in ("tinyint", "smallint", "int", "bigint"):
        return int.from_bytes(raw, "little", signed=(n != 1))
    if name == "bit":
        return raw[0] != 0
    if name in ("real", "float"):
        return struct.unpack("<f" if n == 4 else "<d", raw)[0]
    if name in ("money", "smallmoney"):
        if n == 8:
            hi, lo = struct.unpack("<iI", raw)
            units = (hi << 32) | lo
        else:
            units = struct.unpack("<i", raw)[0]
        return decimal.Decimal(units).scaleb(-4)
    if name in ("datetime", "smalldatetime"):
        if n == 8:
            return SqlDateTime(*struct.unpack("<iI", raw))
        return SqlSmallDateTime(*struct.unpack("<HH", raw))
    if name in ("decimal", "numeric"):
        return _decimal_from(raw[0], int.from_bytes(raw[1:], "little"), ti.sqltype.scale)
    if name == "uniqueidentifier":
        return uuid.UUID(bytes_le=raw)
    if name == "date":
        return datetime.date.fromordinal(int.from_bytes(raw, "little") + 1)
    scale = 7 if ti.sqltype.scale is None else ti.sqltype.scale
    if name == "time":
        return SqlTime(_time_ticks(raw, scale))
    if name == "datetime2":
        tl = n - 3
        return SqlDateTime2(datetime.date.fromordinal(int.from_bytes(raw[tl:], "little") + 1),
                            _time_ticks(raw[:tl], scale))
    if name == "datetimeoffset":
        tl = n - 5
        utc_ticks = _time_ticks(raw[:tl], scale)
        utc_days = int.from_bytes(raw[tl:tl + 3], "little") + 1
        offset = struct.unpack("<h", raw[tl + 3:])[0]
        total = utc_days * TICKS_PER_DAY + utc_ticks + offset * 60 * TICKS_PER_SECOND
        days, ticks = divmod(total, TICKS_PER_DAY)
        return SqlDateTimeOffset(datetime.date.fromordinal(days), ticks, offset)
    raise DecodeError("cannot decode %s" % name)


_VARIANT_BASE = {
    0x30: ("tinyint", 0), 0x32: ("bit", 0), 0x34: ("smallint", 0), 0x38: ("int", 0),
    0x7F: ("bigint", 0), 0x3B: ("real", 0), 0x3E: ("float", 0), 0x3C: ("money", 0),
    0x7A: ("smallmoney", 0), 0x3D: ("datetime", 0), 0x3A: ("smalldatetime", 0),
    0x24: ("uniqueidentifier", 0), 0x28: ("date", 0),
}


def _decode_variant(body: bytes) -> SqlVariant:
    r = Reader(body)
    base = r.u8()
    nprops = r.u8()
    props = r.take(nprops)
    rest = r.take(r.remaining())
    if base in _VARIANT_BASE:
        st = SqlType(_VARIANT_BASE[base][0])
    elif base in (0x29, 0x2A, 0x2B):
        st = SqlType({0x29: "time", 0x2A: "datetime2", 0x2B: "datetimeoffset"}[base],
                     scale=props[0])
    elif base in (0x6A, 0x6C):
        st = SqlType("numeric" if base == 0x6C else "decimal", precision=props[0], scale=props[1])
    elif base in (0xA7, 0xAF, 0xE7, 0xEF):
        coll = props[:5]
        maxlen = struct.unpack("<H", props[5:7])[0]
        name = {0xA7: "varchar", 0xAF: "char", 0xE7: "nvarchar", 0xEF: "nchar"}[base]
        st = SqlType(name, length=maxlen // 2 if base in (0xE7, 0xEF) else maxlen, collation=coll)
        return SqlVariant(st, _text(TypeInfo(base, st, collation=coll), rest))
    elif base in (0xA5, 0xAD):
        maxlen = struct.unpack("<H", props[:2])[0]
        st = SqlType("varbinary" if base == 0xA5 else "binary", length=maxlen)
        return SqlVariant(st, rest)
    else:
        raise DecodeError("unsupported sql_variant base type 0x%02X" % base)
    return SqlVariant(st, decode_fixed(TypeInfo(base, st), rest))


def read_value(r: Reader, ti: TypeInfo, text_in_row: bool = False):
    """A value after its TYPE_INFO (RPC parameter, or ROW value when
    text_in_row).  Returns None for NULL."""
    t = ti.tds_type
    if ti.plp:
        raw = _read_plp(r)
        if raw is None:
            return None
        if ti.sqltype.name in ("varbinary", "binary"):
            return raw
        return _text(ti, raw)
    if t in _FIXED:
        if ti.size == 0:
            return None
        return decode_fixed(ti, r.take(ti.size))
    if t in (0xA7, 0xAF, 0xE7, 0xEF, 0xA5, 0xAD):
        n = r.u16()
        if n == 0xFFFF:
            return None
        raw = r.take(n)
        return raw if t in (0xA5, 0xAD) else _text(ti, raw)
    if t in (0x27, 0x2F, 0x25, 0x2D, 0x67):
        n = r.u8()
        if n == 0:
            return None      # legacy short types: length 0 means NULL
        raw = r.take(n)
        return raw if t in (0x25, 0x2D) else _text(ti, raw)
    if t in (0x23, 0x63, 0x22):
        if text_in_row:
            ptr_len = r.u8()
            if ptr_len == 0:
                return None
            r.take(ptr_len + 8)
            n = r.u32()
        else:
            n = r.u32()
            if n == 0xFFFFFFFF:
                return None
        raw = r.take(n)
        return raw if t == 0x22 else _text(ti, raw)
    if t == 0x62:
        n = r.u32()
        if n == 0:
            return None
        return _decode_variant(r.take(n))
    if t == 0x28:
        n = r.u8()
        return None if n == 0 else decode_fixed(ti, r.take(n))
    # Every remaining N type: BYTE length, 0 = NULL.
    n = r.u8()
    if n == 0:
        return None
    return decode_fixed(ti, r.take(n))


def skip_all_headers(payload: bytes) -> tuple:
    """(transaction descriptor or None, offset after ALL_HEADERS).  Tolerates
    a missing ALL_HEADERS (pre-7.2 clients)."""
    if len(payload) < 4:
        return None, 0
    total = struct.unpack_from("<I", payload, 0)[0]
    if total < 4 or total > len(payload) or total > 1024:
        return None, 0
    pos = 4
    descriptor = None
    while pos + 6 <= total:
        hlen, htype = struct.unpack_from("<IH", payload, pos)
        if hlen < 6:
            break
        if htype == 2 and hlen >= 14:
            descriptor = bytes(payload[pos + 6:pos + 14])
        pos += hlen
    return descriptor, total


def decode_sql_batch(payload: bytes) -> str:
    _desc, off = skip_all_headers(payload)
    return bytes(payload[off:]).decode("utf-16-le", errors="replace")


PROC_IDS = {1: "sp_cursor", 2: "sp_cursoropen", 3: "sp_cursorprepare", 4: "sp_cursorexecute",
            5: "sp_cursorprepexec", 6: "sp_cursorunprepare", 7: "sp_cursorfetch",
            8: "sp_cursoroption", 9: "sp_cursorclose", 10: "sp_executesql",
            11: "sp_prepare", 12: "sp_execute", 13: "sp_prepexec",
            14: "sp_prepexecrpc", 15: "sp_unprepare"}


@dataclass
class RpcCall:
    name: str
    proc_id: Optional[int]
    option_flags: int
    params: List[RpcParam]


def decode_rpc(payload: bytes) -> List[RpcCall]:
    """All calls of an RPC message."""
    _desc, off = skip_all_headers(payload)
    r = Reader(payload, off)
    calls = []
    while r.remaining() > 0:
        n = r.u16()
        if n == 0xFFFF:
            proc_id = r.u16()
            name = PROC_IDS.get(proc_id, "proc_id_%d" % proc_id)
        else:
            proc_id = None
            name = r.take(2 * n).decode("utf-16-le")
        flags = r.u16()
        params = []
        while r.remaining() > 0:
            # 0xFF BatchFlag / 0xFE NoExecFlag (7.2+) end this call; they
            # cannot be name lengths (names have at most 128 characters).
            if r.data[r.pos] in (0xFF, 0xFE):
                r.pos += 1
                break
            pname = r.b_varchar()
            status = r.u8()
            ti = read_type_info(r)
            value = read_value(r, ti)
            params.append(RpcParam(name=pname, type=ti.sqltype, value=value,
                                   output=bool(status & 0x01)))
        calls.append(RpcCall(name=name, proc_id=proc_id, option_flags=flags, params=params))
    return calls


TM_BEGIN_XACT = 5
TM_COMMIT_XACT = 7
TM_ROLLBACK_XACT = 8
TM_SAVE_XACT = 9


@dataclass
class TmRequest:
    request_type: int
    isolation: int = 0
    name: str = ""
    begin_again: bool = False


def decode_transaction_manager(payload: bytes) -> TmRequest:
    _desc, off = skip_all_headers(payload)
    r = Reader(payload, off)
    rtype = r.u16()
    req = TmRequest(rtype)
    if rtype == TM_BEGIN_XACT:
        req.isolation = r.u8()
        if r.remaining():
            req.name = r.b_varchar()
    elif rtype in (TM_COMMIT_XACT, TM_ROLLBACK_XACT):
        if r.remaining():
            req.name = r.b_varchar()
        if r.remaining():
            flags = r.u8()
            req.begin_again = bool(flags & 0x01)
            if req.begin_again and r.remaining():
                req.isolation = r.u8()
    elif rtype == TM_SAVE_XACT:
        if r.remaining():
            req.name = r.b_varchar()
    return req
