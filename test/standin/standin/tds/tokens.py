"""Response tokens other than COLMETADATA/ROW ([MS-TDS] 2.2.7)."""

from __future__ import annotations

import struct

from ..sqltypes import SqlType
from .encode import b_varchar, encode_value, us_varchar, wire_type

TOKEN_RETURNSTATUS = 0x79
TOKEN_ERROR = 0xAA
TOKEN_INFO = 0xAB
TOKEN_RETURNVALUE = 0xAC
TOKEN_LOGINACK = 0xAD
TOKEN_ENVCHANGE = 0xE3
TOKEN_DONE = 0xFD
TOKEN_DONEPROC = 0xFE
TOKEN_DONEINPROC = 0xFF

DONE_FINAL = 0x0000
DONE_MORE = 0x0001
DONE_ERROR = 0x0002
DONE_INXACT = 0x0004
DONE_COUNT = 0x0010
DONE_ATTN = 0x0020
DONE_SRVERROR = 0x0100

# ENVCHANGE types.
ENV_DATABASE = 1
ENV_LANGUAGE = 2
ENV_PACKETSIZE = 4
ENV_COLLATION = 7
ENV_BEGIN_TRAN = 8
ENV_COMMIT_TRAN = 9
ENV_ROLLBACK_TRAN = 10
ENV_RESET_ACK = 18

_DONE = struct.Struct("<BHHQ")


def done(status: int = 0, count: int = 0, token: int = TOKEN_DONE, curcmd: int = 0) -> bytes:
    return _DONE.pack(token, status, curcmd, count)


def _envchange(kind: int, body: bytes) -> bytes:
    return struct.pack("<BHB", TOKEN_ENVCHANGE, len(body) + 1, kind) + body


def env_string(kind: int, new: str, old: str) -> bytes:
    return _envchange(kind, b_varchar(new) + b_varchar(old))


def env_bytes(kind: int, new: bytes, old: bytes) -> bytes:
    return _envchange(kind, bytes([len(new)]) + new + bytes([len(old)]) + old)


def message(token: int, number: int, state: int, severity: int, text: str,
            server: str, proc: str = "", line: int = 1) -> bytes:
    body = (struct.pack("<iBB", number, state, severity) + us_varchar(text)
            + b_varchar(server) + b_varchar(proc) + struct.pack("<i", line))
    return struct.pack("<BH", token, len(body)) + body


def info(number, state, severity, text, server, proc="", line=1) -> bytes:
    return message(TOKEN_INFO, number, state, severity, text, server, proc, line)


def error(number, state, severity, text, server, proc="", line=1) -> bytes:
    return message(TOKEN_ERROR, number, state, severity, text, server, proc, line)


def loginack(tds_version: int, prog_name: str = "Microsoft SQL Server",
             prog_version: bytes = bytes([16, 0, 0x03, 0xE8])) -> bytes:
    """Interface 1 (SQL_TSQL); the TDS version goes big-endian here."""
    body = b"\x01" + struct.pack(">I", tds_version) + b_varchar(prog_name) + prog_version
    return struct.pack("<BH", TOKEN_LOGINACK, len(body)) + body


def returnstatus(value: int) -> bytes:
    return struct.pack("<Bi", TOKEN_RETURNSTATUS, value)


def returnvalue(ordinal: int, name: str, sqltype: SqlType, value) -> bytes:
    wt = wire_type(sqltype)
    if name and not name.startswith("@"):
        name = "@" + name
    return (struct.pack("<BH", TOKEN_RETURNVALUE, ordinal) + b_varchar(name or "")
            + b"\x01" + struct.pack("<IH", wt.user_type, 0x0001) + wt.type_info
            + encode_value(sqltype, value))
