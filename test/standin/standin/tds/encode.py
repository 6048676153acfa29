"""Values -> TDS bytes: TYPE_INFO, COLMETADATA and ROW/NBCROW ([MS-TDS] 2.2.5.5,
2.2.7.4, 2.2.7.15, 2.2.7.20).

Speed matters here (the stand-in must serve 300k narrow rows/s), so each
column set gets a RowEncoder whose per-row function is generated Python
source: one tuple unpack, fixed-width columns packed together by one
precompiled struct, no per-value dispatch.  Rows with NULLs take a slower
generic path that also decides between ROW and NBCROW like SQL Server
(NBCROW when the null bitmap costs less than the NULL markers it saves).

Only the BIG*/N* forms SQL Server 2005+ sends are produced (INTN, BITN,
FLTN, MONEYN, DATETIMN, DECIMALN/NUMERICN, BIGVARCHR/BIGCHAR, NVARCHAR/NCHAR,
BIGVARBIN/BIGBINARY, PLP for (max), XML, TEXT/NTEXT/IMAGE, SSVARIANT)."""

from __future__ import annotations

import decimal
import itertools
import struct
import threading
from typing import Callable, List, Sequence

from ..results import CachedRow
from ..sqltypes import (Column, DEFAULT_COLLATION, MAX, SqlType, SqlVariant,
                        TICKS_PER_DAY, TICKS_PER_SECOND)
from .collation import codec_for

TOKEN_COLMETADATA = 0x81
TOKEN_ROW = 0xD1
TOKEN_NBCROW = 0xD2

# TDS type bytes.
INTN, BITN, FLTN, MONEYN, DATETIMN = 0x26, 0x68, 0x6D, 0x6E, 0x6F
DECIMALN, NUMERICN, GUIDTYPE = 0x6A, 0x6C, 0x24
DATEN, TIMEN, DATETIME2N, DATETIMEOFFSETN = 0x28, 0x29, 0x2A, 0x2B
BIGVARBIN, BIGVARCHR, BIGBINARY, BIGCHAR = 0xA5, 0xA7, 0xAD, 0xAF
NVARCHAR, NCHAR, XMLTYPE = 0xE7, 0xEF, 0xF1
TEXT, NTEXT, IMAGE, SSVARIANT = 0x23, 0x63, 0x22, 0x62
# Fixed-length forms (only inside sql_variant values).
INT1, BIT, INT2, INT4, DATETIM4, FLT4, MONEY, DATETIME, FLT8, MONEY4, INT8 = (
    0x30, 0x32, 0x34, 0x38, 0x3A, 0x3B, 0x3C, 0x3D, 0x3E, 0x7A, 0x7F)

USERTYPE_TIMESTAMP = 0x50

PLP_NULL = b"\xff" * 8
PLP_CHUNK = 8000          # SQL Server sends PLP data in chunks; so do we
TEXTPTR = b"\x10" + b"\x54" * 16 + b"\x00" * 8   # len 16, dummy pointer, timestamp

# Big enough for 38 digits plus scale without rounding.
_CTX = decimal.Context(prec=100, Emax=999, Emin=-999)

_B = struct.Struct("<B").pack
_H = struct.Struct("<H").pack
_I = struct.Struct("<I").pack
_Q = struct.Struct("<Q").pack
_h = struct.Struct("<h").pack

def decimal_bytes(precision: int) -> int:
    """Magnitude size of decimal(p,s) on the wire (without the sign byte)."""
    if precision <= 9:
        return 4
    if precision <= 19:
        return 8
    if precision <= 28:
        return 12
    return 16


def time_bytes(scale: int) -> int:
    if scale <= 2:
        return 3
    if scale <= 4:
        return 4
    return 5


def scaled_int(value: decimal.Decimal, scale: int) -> int:
    """Exact integer value * 10**scale of an already-quantized Decimal."""
    return int(value.scaleb(scale, _CTX))


def time_units(ticks: int, scale: int) -> int:
    """100 ns ticks -> units of 10**-scale s (value is already at scale)."""
    return ticks // (10 ** (7 - scale))


def _utc_parts(value) -> tuple:
    """datetimeoffset: (utc days since 0001-01-01, utc ticks since midnight)."""
    total = (value.date.toordinal() * TICKS_PER_DAY + value.ticks
             - value.offset_minutes * 60 * TICKS_PER_SECOND)
    days, ticks = divmod(total, TICKS_PER_DAY)
    return days - 1, ticks


def plp(data: bytes) -> bytes:
    """PLP body for a non-NULL (max) value: total length, chunks, terminator."""
    n = len(data)
    if n <= PLP_CHUNK:
        if n == 0:
            return b"\x00" * 8 + b"\x00" * 4
        return _Q(n) + _I(n) + data + b"\x00\x00\x00\x00"
    parts = [_Q(n)]
    for off in range(0, n, PLP_CHUNK):
        chunk = data[off:off + PLP_CHUNK]
        parts.append(_I(len(chunk)))
        parts.append(chunk)
    parts.append(b"\x00\x00\x00\x00")
    return b"".join(parts)


class WireType:
    """How one SqlType goes on the wire.

    type_info  TYPE_INFO bytes for COLMETADATA / RETURNVALUE
    null       the bytes of a NULL value in a ROW
    encode     non-NULL value -> bytes (length prefix included)
    user_type  COLMETADATA UserType
    is_text    TEXT/NTEXT/IMAGE (COLMETADATA carries a TableName)
    struct_fmt / struct_args
               when the value is a fixed struct: format chars (no '<') and
               argument expressions over '{v}' for generated row code
    expr       otherwise an inline expression over '{v}' for generated code
               (names it uses are in `names`), or None to call `encode`
    """

    def __init__(self, type_info: bytes, null: bytes, encode: Callable,
                 user_type: int = 0, is_text: bool = False,
                 struct_fmt: str = None, struct_args: Sequence[str] = (),
                 expr: str = None, names: dict = None):
        self.type_info = type_info
        self.null = null
        self.encode = encode
        self.user_type = user_type
        self.is_text = is_text
        self.struct_fmt = struct_fmt
        self.struct_args = tuple(struct_args)
        self.expr = expr
        self.names = names or {}


def _fixed(type_byte: int, size: int, fmt: str, args=("{v}",), convert=None):
    """An N-type with a fixed-size value: TYPE_INFO `type size`."""
    packer = struct.Struct("<B" + fmt).pack
    if convert is None:
        def enc(v):
            return packer(size, v)
    else:
        def enc(v):
            return packer(size, *convert(v))
    return WireType(bytes([type_byte, size]), b"\x00", enc,
                    struct_fmt="B" + fmt,
                    struct_args=(str(size),) + tuple(args))


def _wire_bit():
    def enc(v):
        return b"\x01\x01" if v else b"\x01\x00"
    return WireType(bytes([BITN, 1]), b"\x00", enc,
                    expr="(b'\\x01\\x01' if {v} else b'\\x01\\x00')")


def _wire_decimal(t: SqlType):
    prec = t.precision or 18
    scale = t.scale or 0
    nbytes = decimal_bytes(prec)
    type_byte = NUMERICN if t.name == "numeric" else DECIMALN
    length = nbytes + 1
    if nbytes == 8:
        pk = struct.Struct("<BBQ").pack

        def enc(v):
            n = int(v.scaleb(scale, _CTX))
            return pk(9, 1, n) if n >= 0 else pk(9, 0, -n)
    else:
        def enc(v):
            n = int(v.scaleb(scale, _CTX))
            if n >= 0:
                return bytes((length, 1)) + n.to_bytes(nbytes, "little")
            return bytes((length, 0)) + (-n).to_bytes(nbytes, "little")
    return WireType(bytes([type_byte, length, prec, scale]), b"\x00", enc)


def _wire_money(size: int):
    if size == 8:
        pk = struct.Struct("<BiI").pack

        def enc(v):
            n = int(v.scaleb(4, _CTX))
            return pk(8, n >> 32, n & 0xFFFFFFFF)
    else:
        pk = struct.Struct("<Bi").pack

        def enc(v):
            return pk(4, int(v.scaleb(4, _CTX)))
    return WireType(bytes([MONEYN, size]), b"\x00", enc)


def _wire_date():
    def enc(v):
        return b"\x03" + (v.toordinal() - 1).to_bytes(3, "little")
    return WireType(bytes([DATEN]), b"\x00", enc)


def _wire_time(scale: int):
    tl = time_bytes(scale)
    div = 10 ** (7 - scale)
    prefix = bytes([tl])

    def enc(v):
        return prefix + (v.ticks // div).to_bytes(tl, "little")
    return WireType(bytes([TIMEN, scale]), b"\x00", enc)


def _wire_datetime2(scale: int):
    tl = time_bytes(scale)
    div = 10 ** (7 - scale)
    shift = 8 * tl
    length = tl + 3
    if length == 8:
        pk = struct.Struct("<BQ").pack

        def enc(v):
            return pk(8, v.ticks // div | (v.date.toordinal() - 1) << 40)
        wt = WireType(bytes([DATETIME2N, scale]), b"\x00", enc,
                      struct_fmt="BQ",
                      struct_args=("8", "{v}.ticks // %d | ({v}.date.toordinal() - 1) << 40" % div))
        return wt
    prefix = bytes([length])

    def enc(v):
        return prefix + (v.ticks // div | (v.date.toordinal() - 1) << shift).to_bytes(length, "little")
    return WireType(bytes([DATETIME2N, scale]), b"\x00", enc)


def _wire_datetimeoffset(scale: int):
    tl = time_bytes(scale)
    div = 10 ** (7 - scale)
    shift = 8 * tl
    prefix = bytes([tl + 5])

    def enc(v):
        days, ticks = _utc_parts(v)
        return (prefix + (ticks // div | days << shift).to_bytes(tl + 3, "little")
                + _h(v.offset_minutes))
    return WireType(bytes([DATETIMEOFFSETN, scale]), b"\x00", enc)


def _wire_guid():
    def enc(v):
        return b"\x10" + v.bytes_le
    return WireType(bytes([GUIDTYPE, 16]), b"\x00", enc,
                    expr="(b'\\x10' + {v}.bytes_le)")


def _char_codec_encoder(t: SqlType):
    name = t.name
    if name in ("nchar", "nvarchar", "ntext", "xml", "sysname"):
        return lambda s: s.encode("utf-16-le")
    codec = codec_for(t.collation or DEFAULT_COLLATION)
    return lambda s: s.encode(codec, errors="replace")


def _wire_short_string(t: SqlType):
    """BIGCHAR/BIGVARCHR/NCHAR/NVARCHAR/BIGBINARY/BIGVARBIN with USHORT length."""
    name = t.name
    coll = t.collation or DEFAULT_COLLATION
    if name in ("nchar", "nvarchar", "sysname"):
        n = t.length if t.length is not None else (128 if name == "sysname" else 1)
        ti = bytes([NCHAR if name == "nchar" else NVARCHAR]) + _H(2 * n) + coll

        def enc(v):
            b = v.encode("utf-16-le")
            return _H(len(b)) + b
        return WireType(ti, b"\xff\xff", enc,
                        expr="(_H(len(_b{i} := {v}.encode('utf-16-le'))) + _b{i})",
                        names={"_H": _H})
    if name in ("char", "varchar"):
        codec = codec_for(coll)
        n = t.length if t.length is not None else 1
        ti = bytes([BIGCHAR if name == "char" else BIGVARCHR]) + _H(n) + coll

        def enc(v):
            b = v.encode(codec, errors="replace")
            return _H(len(b)) + b
        return WireType(ti, b"\xff\xff", enc)
    # binary / varbinary / rowversion
    n = t.length if t.length is not None else 1
    ti = bytes([BIGBINARY if name == "binary" else BIGVARBIN]) + _H(n)

    def enc(v):
        return _H(len(v)) + bytes(v)
    return WireType(ti, b"\xff\xff", enc,
                    expr="(_H(len({v})) + {v})", names={"_H": _H})


def _wire_max(t: SqlType):
    name = t.name
    if name in ("nvarchar", "varchar"):
        ti = bytes([NVARCHAR if name == "nvarchar" else BIGVARCHR]) + b"\xff\xff" + (
            t.collation or DEFAULT_COLLATION)
    else:
        ti = bytes([BIGVARBIN]) + b"\xff\xff"
    to_bytes = _char_codec_encoder(t) if name in ("nvarchar", "varchar") else bytes

    def enc(v):
        return plp(to_bytes(v))
    return WireType(ti, PLP_NULL, enc)


def _wire_xml():
    def enc(v):
        return plp(v.encode("utf-16-le"))
    return WireType(bytes([XMLTYPE, 0]), PLP_NULL, enc)


def _wire_text(t: SqlType):
    name = t.name
    if name == "image":
        ti = bytes([IMAGE]) + _I(0x7FFFFFFF)
        to_bytes = bytes
    elif name == "ntext":
        ti = bytes([NTEXT]) + _I(0x7FFFFFFE) + (t.collation or DEFAULT_COLLATION)
        to_bytes = _char_codec_encoder(t)
    else:
        ti = bytes([TEXT]) + _I(0x7FFFFFFF) + (t.collation or DEFAULT_COLLATION)
        to_bytes = _char_codec_encoder(t)

    def enc(v):
        b = to_bytes(v)
        return TEXTPTR + _I(len(b)) + b
    return WireType(ti, b"\x00", enc, is_text=True)


# sql_variant: base type byte and property bytes for each base SqlType.
def _variant_header(t: SqlType) -> bytes:
    name = t.name
    fixed = {"tinyint": INT1, "smallint": INT2, "int": INT4, "bigint": INT8,
             "bit": BIT, "real": FLT4, "money": MONEY, "smallmoney": MONEY4,
             "datetime": DATETIME, "smalldatetime": DATETIM4,
             "uniqueidentifier": GUIDTYPE, "date": DATEN}
    if name == "float":
        return bytes([FLT4 if (t.precision or 53) <= 24 else FLT8, 0])
    if name in fixed:
        return bytes([fixed[name], 0])
    if name in ("time", "datetime2", "datetimeoffset"):
        code = {"time": TIMEN, "datetime2": DATETIME2N, "datetimeoffset": DATETIMEOFFSETN}[name]
        return bytes([code, 1, t.scale if t.scale is not None else 7])
    if name in ("decimal", "numeric"):
        return bytes([NUMERICN if name == "numeric" else DECIMALN, 2,
                      t.precision or 18, t.scale or 0])
    if name in ("char", "varchar", "nchar", "nvarchar"):
        code = {"char": BIGCHAR, "varchar": BIGVARCHR, "nchar": NCHAR, "nvarchar": NVARCHAR}[name]
        n = t.length if t.length not in (None, MAX) else 8000
        maxlen = 2 * n if name in ("nchar", "nvarchar") else n
        return bytes([code, 7]) + (t.collation or DEFAULT_COLLATION) + _H(min(maxlen, 8000))
    if name in ("binary", "varbinary"):
        n = t.length if t.length not in (None, MAX) else 8000
        return bytes([BIGBINARY if name == "binary" else BIGVARBIN, 2]) + _H(n)
    raise ValueError("type %s cannot be stored in sql_variant" % t.sql())


def _variant_value_bytes(t: SqlType, value) -> bytes:
    """The base value without its ROW length prefix."""
    wire = wire_type(t)
    raw = wire.encode(value)
    if t.name in ("char", "varchar", "nchar", "nvarchar", "binary", "varbinary"):
        return raw[2:]
    return raw[1:]


def _wire_variant():
    def enc(v):
        if not isinstance(v, SqlVariant):
            raise TypeError("sql_variant value must be SqlVariant, got %r" % (v,))
        if v.value is None:
            return b"\x00\x00\x00\x00"
        body = _variant_header(v.base_type) + _variant_value_bytes(v.base_type, v.value)
        return _I(len(body)) + body
    return WireType(bytes([SSVARIANT]) + _I(8009), b"\x00\x00\x00\x00", enc)


_INT_FORMATS = {"tinyint": (1, "B"), "smallint": (2, "h"), "int": (4, "i"), "bigint": (8, "q")}

_wire_cache = {}
_wire_lock = threading.Lock()


def wire_type(t: SqlType) -> WireType:
    """WireType for a SqlType (cached: SqlType is immutable)."""
    wt = _wire_cache.get(t)
    if wt is None:
        wt = _build_wire_type(t)
        with _wire_lock:
            _wire_cache[t] = wt
    return wt


def _build_wire_type(t: SqlType) -> WireType:
    name = t.name
    if name in _INT_FORMATS:
        size, fmt = _INT_FORMATS[name]
        return _fixed(INTN, size, fmt)
    if name == "bit":
        return _wire_bit()
    if name == "real" or (name == "float" and (t.precision or 53) <= 24):
        return _fixed(FLTN, 4, "f")
    if name == "float":
        return _fixed(FLTN, 8, "d")
    if name == "money":
        return _wire_money(8)
    if name == "smallmoney":
        return _wire_money(4)
    if name == "datetime":
        return _fixed(DATETIMN, 8, "iI", args=("{v}.days", "{v}.ticks300"),
                      convert=lambda v: (v.days, v.ticks300))
    if name == "smalldatetime":
        return _fixed(DATETIMN, 4, "HH", args=("{v}.days", "{v}.minutes"),
                      convert=lambda v: (v.days, v.minutes))
    if name == "date":
        return _wire_date()
    if name == "time":
        return _wire_time(7 if t.scale is None else t.scale)
    if name == "datetime2":
        return _wire_datetime2(7 if t.scale is None else t.scale)
    if name == "datetimeoffset":
        return _wire_datetimeoffset(7 if t.scale is None else t.scale)
    if name == "uniqueidentifier":
        return _wire_guid()
    if name in ("decimal", "numeric"):
        return _wire_decimal(t)
    if name in ("char", "varchar", "nchar", "nvarchar", "binary", "varbinary"):
        if t.length == MAX:
            return _wire_max(t)
        return _wire_short_string(t)
    if name == "sysname":
        return _wire_short_string(SqlType("nvarchar", length=128,
                                          collation=t.collation or DEFAULT_COLLATION))
    if name in ("rowversion", "timestamp"):
        wt = _wire_short_string(SqlType("binary", length=8))
        wt.user_type = USERTYPE_TIMESTAMP
        return wt
    if name == "xml":
        return _wire_xml()
    if name in ("text", "ntext", "image"):
        return _wire_text(t)
    if name == "sql_variant":
        return _wire_variant()
    if name in ("hierarchyid", "geometry", "geography"):
        # Sent as varbinary(max) rather than as a CLR UDT (documented difference).
        return _wire_max(SqlType("varbinary", length=MAX))
    raise ValueError("no TDS encoding for type %r" % (name,))


def b_varchar(text: str) -> bytes:
    raw = text.encode("utf-16-le")
    return bytes([len(raw) // 2]) + raw


def us_varchar(text: str) -> bytes:
    raw = text.encode("utf-16-le")
    return _H(len(raw) // 2) + raw


def _column_flags(col: Column) -> int:
    flags = 0x0001 if col.nullable else 0
    if col.identity:
        flags |= 0x0010
    if col.computed:
        flags |= 0x0020
    if not col.identity and not col.computed:
        flags |= 0x0008      # updateable = read/write, as for a base-table column
    return flags


def _table_name(col: Column) -> bytes:
    parts = [p for p in (col.table_name or "").split(".") if p]
    return bytes([len(parts)]) + b"".join(us_varchar(p) for p in parts)


def colmetadata(columns: Sequence[Column]) -> bytes:
    out = bytearray([TOKEN_COLMETADATA])
    out += _H(len(columns))
    for col in columns:
        wt = wire_type(col.type)
        out += _I(wt.user_type) + _H(_column_flags(col)) + wt.type_info
        if wt.is_text:
            out += _table_name(col)
        out += b_varchar(col.name or "")
    return bytes(out)


class RowEncoder:
    """Encodes rows of one column set.  encode(row) accepts a tuple or a
    CachedRow; encode_tuple(row) is the fast path for plain tuples."""

    _ids = itertools.count(1)

    def __init__(self, columns: Sequence[Column]):
        self.columns = tuple(columns)
        self.wire = [wire_type(c.type) for c in self.columns]
        self.ncols = len(self.columns)
        self.bitmap_len = (self.ncols + 7) // 8
        self.nulls = [w.null for w in self.wire]
        self.encoders = [w.encode for w in self.wire]
        self.metadata = colmetadata(self.columns)
        self.cache_id = next(self._ids)
        self.encode_tuple = self._compile()

    def _compile(self) -> Callable:
        """Generate `def row(r)` specialised for this column set."""
        names = {"_slow": self._encode_with_nulls, "_join": b"".join}
        parts: List[str] = []
        group_fmt, group_args = "", []

        def close_group():
            nonlocal group_fmt, group_args
            if group_fmt:
                sname = "_S%d" % len(names)
                names[sname] = struct.Struct("<" + group_fmt).pack
                parts.append("%s(%s)" % (sname, ", ".join(group_args)))
                group_fmt, group_args = "", []

        for i, w in enumerate(self.wire):
            v = "v%d" % i
            if w.struct_fmt:
                group_fmt += w.struct_fmt
                group_args.extend(a.format(v=v) for a in w.struct_args)
                continue
            close_group()
            if w.expr:
                names.update(w.names)
                parts.append(w.expr.format(v=v, i=i))
            else:
                ename = "_E%d" % i
                names[ename] = w.encode
                parts.append("%s(%s)" % (ename, v))
        close_group()
        unpack = ", ".join("v%d" % i for i in range(self.ncols))
        if self.ncols == 1:
            unpack += ","
        # Identity tests, not `None in r`: that compares with ==, and
        # Decimal.__eq__(None) goes through a slow abc isinstance check.
        null_test = " or ".join("v%d is None" % i for i in range(self.ncols))
        src = ("def row(r):\n"
               "    %s = r\n"
               "    if %s:\n"
               "        return _slow(r)\n"
               "    return _join((b'\\xd1', %s))\n" % (unpack, null_test, ", ".join(parts)))
        exec(compile(src, "<row encoder %d>" % self.cache_id, "exec"), names)
        return names["row"]

    def _encode_with_nulls(self, row) -> bytes:
        nulls = self.nulls
        encs = self.encoders
        null_cost = 0
        for i, v in enumerate(row):
            if v is None:
                null_cost += len(nulls[i])
        if null_cost > self.bitmap_len:
            bitmap = bytearray(self.bitmap_len)
            parts = [b"\xd2", None]
            for i, v in enumerate(row):
                if v is None:
                    bitmap[i >> 3] |= 1 << (i & 7)
                else:
                    parts.append(encs[i](v))
            parts[1] = bytes(bitmap)
            return b"".join(parts)
        parts = [b"\xd1"]
        for i, v in enumerate(row):
            parts.append(nulls[i] if v is None else encs[i](v))
        return b"".join(parts)

    def _slot(self, key) -> int:
        """Small int standing for (this encoder, the engine's projection
        key) in CachedRow.cache.  Hashing the engine's key (a tuple of
        SqlTypes) for every row would cost more than encoding the row, so
        it is hashed once per result set chunk."""
        full = (self.cache_id, key)
        slot = _slots.get(full)
        if slot is None:
            with _encoder_lock:
                slot = _slots.setdefault(full, len(_slots) + 1)
        return slot

    def encode(self, row) -> bytes:
        if row.__class__ is CachedRow:
            return self.encode_rows((row,))
        if row.__class__ is not tuple:
            row = tuple(row)
        return self.encode_tuple(row)

    def encode_rows(self, rows) -> bytes:
        """Many rows (tuples and/or CachedRow) -> the bytes of their ROW tokens."""
        fast = self.encode_tuple
        out = []
        append = out.append
        last_key = _NO_KEY
        slot = None
        for row in rows:
            if row.__class__ is CachedRow:
                key = row.key
                if key is not last_key:
                    last_key = key
                    slot = self._slot(key)
                cache = row.cache
                data = cache.get(slot)
                if data is None:
                    values = row.values
                    data = fast(values if values.__class__ is tuple else tuple(values))
                    cache[slot] = data
                append(data)
            else:
                append(fast(row if row.__class__ is tuple else tuple(row)))
        return b"".join(out)


_NO_KEY = object()
_slots = {}
_encoder_cache = {}
_encoder_lock = threading.Lock()


def row_encoder(columns: Sequence[Column]) -> RowEncoder:
    key = tuple(columns)
    enc = _encoder_cache.get(key)
    if enc is None:
        enc = RowEncoder(key)
        with _encoder_lock:
            if len(_encoder_cache) > 1000:
                _encoder_cache.clear()
            _encoder_cache[key] = enc
    return enc


def encode_value(t: SqlType, value) -> bytes:
    """One value as in a ROW (NULL included) — for RETURNVALUE."""
    wt = wire_type(t)
    return wt.null if value is None else wt.encode(value)
