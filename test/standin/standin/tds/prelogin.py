"""PRELOGIN ([MS-TDS] 2.2.6.5): parse the client's options, build our reply.

Which ENCRYPTION byte the reply carries, and whether TLS follows, is
decided in tls.py from the client's byte and the server's setting."""

from __future__ import annotations

import struct

OPT_VERSION = 0x00
OPT_ENCRYPTION = 0x01
OPT_INSTOPT = 0x02
OPT_THREADID = 0x03
OPT_MARS = 0x04
OPT_TRACEID = 0x05
OPT_FEDAUTHREQUIRED = 0x06
OPT_TERMINATOR = 0xFF

ENCRYPT_OFF = 0x00
ENCRYPT_ON = 0x01
ENCRYPT_NOT_SUP = 0x02
ENCRYPT_REQ = 0x03

# SQL Server 2022 RTM: 16.0.1000, sub-build 0 (build is big-endian).
SERVER_VERSION = bytes([16, 0]) + struct.pack(">H", 1000) + b"\x00\x00"


def parse_prelogin(payload: bytes) -> dict:
    """Option table -> {token: data bytes}.  Raises ValueError on garbage."""
    options = {}
    pos = 0
    while True:
        if pos >= len(payload):
            raise ValueError("PRELOGIN option table not terminated")
        token = payload[pos]
        if token == OPT_TERMINATOR:
            break
        if pos + 5 > len(payload):
            raise ValueError("PRELOGIN option entry truncated")
        offset, length = struct.unpack_from(">HH", payload, pos + 1)
        if offset + length > len(payload):
            raise ValueError("PRELOGIN option %d points outside the payload" % token)
        options[token] = payload[offset:offset + length]
        pos += 5
    return options


def build_prelogin_reply(encryption: int = ENCRYPT_NOT_SUP) -> bytes:
    entries = [
        (OPT_VERSION, SERVER_VERSION),
        (OPT_ENCRYPTION, bytes([encryption])),
        (OPT_INSTOPT, b"\x00"),
        (OPT_THREADID, b""),
        (OPT_MARS, b"\x00"),
    ]
    table_len = 5 * len(entries) + 1
    table = bytearray()
    data = bytearray()
    for token, value in entries:
        table += struct.pack(">BHH", token, table_len + len(data), len(value))
        data += value
    table.append(OPT_TERMINATOR)
    return bytes(table + data)
