"""Malformed and hostile server responses for the `corrupt` fault.

Each kind writes what a broken (or malicious) SQL Server could send instead
of a result set, so that clients can prove they reject it cleanly: no crash,
no unbounded memory, no hang past their timeouts.  A kind is a function
(conn, enc, rows) that writes to conn.writer.  Kinds whose bytes are valid
TDS with the wrong content (types, column count, messages, counts) return
the row count for the result's DONE and the response goes on normally;
the others return None and the caller closes the socket after them (see
Connection.send_corrupt).  The "forever" kinds only
return once the client has gone away (or a safety limit passed): they ignore
ATTENTION on purpose, like a server that does not care.

LOGIN_KINDS replace the login response; every other kind replaces the next
result set of a request (narrowed with the fault's `match`)."""

from __future__ import annotations

import struct
import time

from ..sqltypes import Column, DEFAULT_COLLATION, MAX, SqlType
from . import packets as P
from . import tokens as T
from .encode import TOKEN_COLMETADATA, TOKEN_ROW, b_varchar, colmetadata, row_encoder

# How long a "forever" kind keeps sending when the client neither reads nor
# closes (a stand-in process must not be kept busy by a stuck client).
FOREVER_LIMIT_SECONDS = 300.0

_NVARCHAR_MAX = SqlType("nvarchar", length=MAX, collation=DEFAULT_COLLATION)


def _values(row) -> tuple:
    """A result row as a plain tuple (the engine may send CachedRow)."""
    values = getattr(row, "values", None)
    return tuple(values) if values is not None and not callable(values) else tuple(row)


def _first_row(rows):
    for row in rows:
        return _values(row)
    return None


def _plp_header(total: int) -> bytes:
    return struct.pack("<Q", total)


# --- the classic kinds --------------------------------------------------------

def bad_token(conn, enc, rows):
    """COLMETADATA, then bytes that are no token at all."""
    conn.writer.write(enc.metadata + b"\x00\x01\x02\x03")
    conn.writer.end_message()


def bad_type(conn, enc, rows):
    """COLMETADATA whose first column has an unknown TDS type byte."""
    meta = bytearray(enc.metadata)
    meta[9] = 0x99
    conn.writer.write(bytes(meta))
    conn.writer.end_message()


def truncated_token(conn, enc, rows):
    """EOM in the middle of a ROW (or of a DONE for an empty result)."""
    first = _first_row(rows)
    w = conn.writer
    w.write(enc.metadata)
    if first is not None:
        data = enc.encode(first)
        w.write(data[:max(1, len(data) // 2)])
    else:
        w.write(T.done(T.DONE_COUNT, 0)[:5])
    w.end_message()


def wrong_length(conn, enc, rows):
    """Packet header promises 100 bytes more than are ever sent."""
    first = _first_row(rows)
    w = conn.writer
    body = enc.metadata + (enc.encode(first) if first is not None else b"")
    w.send_raw(struct.pack(">BBHHBB", P.PT_TABULAR, P.ST_EOM,
                           min(len(body) + 8 + 100, w.packet_size),
                           conn.spid, 1, 0) + body[:w.packet_size - 108])


# --- lengths that lie -----------------------------------------------------------

_BINARY_NAMES = ("binary", "varbinary", "image")
_STRING_NAMES = ("char", "varchar", "nchar", "nvarchar", "text", "ntext")


def _first_variable_column(columns) -> int:
    """Index of the first binary or string column (0 if there is none), so
    that a lying length sits in a column of the type the client expects
    there and passes its type checks: only the length is wrong."""
    for i, col in enumerate(columns):
        if col.type.name in _BINARY_NAMES + _STRING_NAMES:
            return i
    return 0


def _prefix_values(enc, cols, k, first) -> bytes:
    """The values of columns 0..k-1 of the first row (no ROW token)."""
    if k == 0:
        return b""
    prefix = row_encoder(cols[:k])
    if first is None:
        return b"".join(prefix.nulls)
    return prefix.encode(first[:k])[1:]


def huge_length(conn, enc, rows):
    """A (max) value whose PLP header claims 2^62 bytes and whose first chunk
    claims 2 GB; 64 bytes of it arrive, then nothing.  The column is the
    first binary or string one, declared varbinary(max) / nvarchar(max)."""
    cols = list(enc.columns)
    k = _first_variable_column(cols)
    binary = cols[k].type.name in _BINARY_NAMES
    cols[k] = Column(cols[k].name, SqlType("varbinary", length=MAX) if binary else _NVARCHAR_MAX)
    w = conn.writer
    w.write(colmetadata(cols))
    w.write(bytes([TOKEN_ROW]) + _prefix_values(enc, cols, k, _first_row(rows))
            + _plp_header(1 << 62) + struct.pack("<I", 0x7FFFFFFF) + b"A\x00" * 32)
    w.flush_partial()


def huge_text_length(conn, enc, rows):
    """A text-pointer value (image / ntext) whose 4-byte length claims 2 GB;
    64 bytes arrive.  The column is the first binary or string one."""
    cols = list(enc.columns)
    k = _first_variable_column(cols)
    binary = cols[k].type.name in _BINARY_NAMES
    cols[k] = Column(cols[k].name, SqlType("image") if binary else
                     SqlType("ntext", collation=DEFAULT_COLLATION), table_name="dbo.t")
    w = conn.writer
    w.write(colmetadata(cols))
    textptr = b"\x10" + b"\x54" * 16 + b"\x00" * 8
    w.write(bytes([TOKEN_ROW]) + _prefix_values(enc, cols, k, _first_row(rows)) + textptr
            + struct.pack("<i", 0x7FFFFFFF) + b"\xAB" * 64)
    w.flush_partial()


def value_too_long(conn, enc, rows):
    """A ROW whose first value is longer than its column's declared maximum:
    COLMETADATA says varbinary(10), the row carries 4000 bytes."""
    cols = [Column(enc.columns[0].name, SqlType("varbinary", length=10))] + list(enc.columns[1:])
    w = conn.writer
    w.write(colmetadata(cols))
    first = _first_row(rows)
    rest = b""
    if first is not None and len(cols) > 1:
        # the other values as the real encoder writes them (ROW token cut off)
        rest = row_encoder(cols[1:]).encode(tuple(first)[1:])[1:]
    elif len(cols) > 1:
        rest = b"".join(row_encoder([c]).nulls[0] for c in cols[1:])
    w.write(bytes([TOKEN_ROW]) + struct.pack("<H", 4000) + b"\xEE" * 4000 + rest)
    return 1


# --- a result of the wrong shape --------------------------------------------------

def _wrong_type(col: Column) -> Column:
    """binary -> int, int-like -> nvarchar(40), everything else -> int."""
    name = col.type.name
    if name in ("binary", "varbinary"):
        new = SqlType("int")
    elif name in ("int", "bigint", "smallint", "tinyint", "bit"):
        new = SqlType("nvarchar", length=40, collation=DEFAULT_COLLATION)
    else:
        new = SqlType("int")
    return Column(col.name, new, nullable=True)


def _convert(value, col: Column):
    """A value of the original column as the replacement type would carry it."""
    if value is None:
        return None
    if col.type.name == "int":
        return len(value) if isinstance(value, (bytes, bytearray, str)) else 7
    return str(value)[:40]


def wrong_column_types(conn, enc, rows):
    """Well-formed TDS, but every column has a type the query cannot have
    produced (e.g. __$start_lsn arrives as int, __$operation as nvarchar)."""
    cols = [_wrong_type(c) for c in enc.columns]
    wrong = row_encoder(cols)
    w = conn.writer
    w.write(wrong.metadata)
    sent = 0
    for row in rows:
        w.write(wrong.encode(tuple(_convert(v, c) for v, c in zip(_values(row), cols))))
        sent += 1
    return sent


def fewer_columns(conn, enc, rows):
    """Well-formed result with the last column missing."""
    return _reshaped(conn, enc, rows, list(enc.columns[:-1]) or list(enc.columns),
                     lambda r: r[:-1] or r)


def more_columns(conn, enc, rows):
    """Well-formed result with one extra int column."""
    cols = list(enc.columns) + [Column("extra", SqlType("int"))]
    return _reshaped(conn, enc, rows, cols, lambda r: tuple(r) + (42,))


def _reshaped(conn, enc, rows, cols, fix):
    reshaped = row_encoder(cols)
    w = conn.writer
    w.write(reshaped.metadata)
    sent = 0
    for row in rows:
        w.write(reshaped.encode(tuple(fix(_values(row)))))
        sent += 1
    return sent


def row_before_metadata(conn, enc, rows):
    """A ROW token with no COLMETADATA before it."""
    first = _first_row(rows)
    w = conn.writer
    w.write(enc.encode(first) if first is not None else bytes([TOKEN_ROW]) + b"\x01\x02\x03\x04")
    w.write(T.done(T.DONE_COUNT, 1))
    w.end_message()


# --- messages -----------------------------------------------------------------------

def huge_message(conn, enc, rows):
    """An ERROR token with the longest message a token can carry (32 K UTF-16
    code units), full of control characters and terminal escapes."""
    text = ("\x1b[31mBOOM\x00\x07\r\n" * 4000)[:32000]
    w = conn.writer
    w.write(T.error(50000, 1, 16, text, conn.server_name, "", 1))
    return 0


def truncated_message(conn, enc, rows):
    """An ERROR token whose length field claims 60000 bytes; 40 arrive."""
    w = conn.writer
    body = struct.pack("<iBB", 50000, 1, 16) + struct.pack("<H", 30000) + "cut".encode("utf-16-le")
    w.write(struct.pack("<BH", T.TOKEN_ERROR, 60000) + body + b"\x00" * 20)
    w.end_message()


# --- data that is not what it says ------------------------------------------------------

def bad_utf16(conn, enc, rows):
    """An nvarchar value made of lone surrogates (not valid UTF-16)."""
    cols = [Column(c.name, _NVARCHAR_MAX if i == len(enc.columns) - 1 else c.type,
                   nullable=True) for i, c in enumerate(enc.columns)]
    meta = colmetadata(cols)
    w = conn.writer
    w.write(meta)
    bad = b"\x00\xd8" + b"A\x00" + b"\x00\xdc\x00\xdc" + b"\xff\xdb"     # D800, 'A', DC00, DC00, DBFF
    first = _first_row(rows)
    base = row_encoder(enc.columns)
    for row in ([first] if first is not None else []):
        # the row as the original encoder wrote it, with the last value replaced
        data = base.encode(tuple(row)[:-1] + (None,))
        last_null = base.nulls[-1]
        data = data[:len(data) - len(last_null)]
        w.write(data + _plp_header(len(bad)) + struct.pack("<I", len(bad)) + bad + b"\x00" * 4)
    if first is None:
        w.write(bytes([TOKEN_ROW]))
        for c in cols[:-1]:
            w.write(row_encoder([c]).nulls[0])
        w.write(_plp_header(len(bad)) + struct.pack("<I", len(bad)) + bad + b"\x00" * 4)
    return 1


def lying_done(conn, enc, rows):
    """The real rows, then a DONE whose row count claims a million.  Clients
    must not trust it (the worker does not use DONE counts)."""
    w = conn.writer
    w.write(enc.metadata)
    for row in rows:
        w.write(enc.encode(_values(row)))
    return 1000000


# --- framing ----------------------------------------------------------------------------

def _raw_packet(conn, length: int, body: bytes) -> None:
    conn.writer.send_raw(struct.pack(">BBHHBB", P.PT_TABULAR, P.ST_EOM, length, conn.spid, 1, 0)
                         + body)


def packet_len_zero(conn, enc, rows):
    """A packet header whose length field is 0."""
    _raw_packet(conn, 0, enc.metadata[:64])


def packet_len_short(conn, enc, rows):
    """A packet header whose length (5) is shorter than the header itself."""
    _raw_packet(conn, 5, enc.metadata[:64])


def packet_len_oversize(conn, enc, rows):
    """One packet of up to 65535 bytes, far beyond the negotiated size, that
    carries the complete result (padded in front with INFO messages, which
    clients ignore); the rest of the response follows in normal packets.
    The content is right: only the framing breaks the negotiated limit."""
    w = conn.writer
    w.flush_partial()                   # what the response buffered before us
    limit = 65535 - P.HEADER_SIZE
    body = bytearray()
    pad = T.info(0, 1, 0, "x" * 1000, conn.server_name)
    while len(body) + len(pad) < max(w.packet_size * 2, 20000):
        body += pad
    body += enc.metadata
    sent = 0
    rest = []
    for row in rows:
        data = enc.encode(_values(row))
        if rest or len(body) + len(data) > limit:
            rest.append(data)
        else:
            body += data
        sent += 1
    w.send_raw(struct.pack(">BBHHBB", P.PT_TABULAR, 0, P.HEADER_SIZE + len(body), conn.spid, 1, 0)
               + bytes(body))
    for data in rest:
        w.write(data)
    return sent


# --- endless streams ---------------------------------------------------------------------

def _forever(conn, write_one):
    deadline = time.time() + FOREVER_LIMIT_SECONDS
    w = conn.writer
    while time.time() < deadline and not conn.closed.is_set():
        write_one(w)
        if w.pending() >= 64 * 1024:
            w.flush_full_packets()     # raises ConnectionClosed once the client is gone


def rows_forever(conn, enc, rows):
    """The result's rows again and again, never a DONE."""
    batch = b"".join(enc.encode(_values(r)) for r in rows)
    if not batch:
        batch = enc.encode(tuple(None for _ in enc.columns))
    conn.writer.write(enc.metadata)
    _forever(conn, lambda w: w.write(batch))


def huge_values_forever(conn, enc, rows):
    """Rows whose columns are all nvarchar(max) values of 1 MB, forever."""
    cols = [Column(c.name, _NVARCHAR_MAX) for c in enc.columns]
    value = _plp_header(1 << 20) + (struct.pack("<I", 8000) + b"x\x00" * 4000) * 131 + \
        struct.pack("<I", (1 << 20) - 131 * 8000) + b"x\x00" * (((1 << 20) - 131 * 8000) // 2) + \
        b"\x00" * 4
    row = bytes([TOKEN_ROW]) + value * len(cols)
    conn.writer.write(colmetadata(cols))
    _forever(conn, lambda w: w.write(row))


# --- the login phase -----------------------------------------------------------------------

def garbage_login(conn, login):
    """Random-looking bytes where the LOGINACK response belongs."""
    conn.writer.write(bytes((i * 37 + 11) & 0xFF for i in range(300)))
    conn.writer.end_message()


def login_truncated(conn, login):
    """A LOGINACK token whose length promises more than arrives, then EOM."""
    ack = T.loginack(conn.tds_version)
    conn.writer.write(ack[:3] + ack[3:10])
    conn.writer.end_message()


RESULT_KINDS = {
    "bad_token": bad_token,
    "bad_type": bad_type,
    "truncated_token": truncated_token,
    "wrong_length": wrong_length,
    "huge_length": huge_length,
    "huge_text_length": huge_text_length,
    "value_too_long": value_too_long,
    "wrong_column_types": wrong_column_types,
    "fewer_columns": fewer_columns,
    "more_columns": more_columns,
    "row_before_metadata": row_before_metadata,
    "huge_message": huge_message,
    "truncated_message": truncated_message,
    "bad_utf16": bad_utf16,
    "lying_done": lying_done,
    "packet_len_zero": packet_len_zero,
    "packet_len_short": packet_len_short,
    "packet_len_oversize": packet_len_oversize,
    "rows_forever": rows_forever,
    "huge_values_forever": huge_values_forever,
}

LOGIN_KINDS = {
    "garbage_login": garbage_login,
    "login_truncated": login_truncated,
}

ALL_KINDS = tuple(RESULT_KINDS) + tuple(LOGIN_KINDS)
