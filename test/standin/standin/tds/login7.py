"""LOGIN7 ([MS-TDS] 2.2.6.4): decode the client's login record."""

from __future__ import annotations

import struct
from dataclasses import dataclass

TDS74 = 0x74000004


@dataclass
class Login7:
    tds_version: int
    packet_size: int
    client_pid: int
    option_flags2: int
    host_name: str
    user_name: str
    password: str
    app_name: str
    server_name: str
    library_name: str
    language: str
    database: str

    @property
    def integrated_security(self) -> bool:
        return bool(self.option_flags2 & 0x80)


def deobfuscate_password(raw: bytes) -> str:
    """Undo the client's per-byte "swap nibbles then XOR 0xA5"."""
    out = bytearray(len(raw))
    for i, b in enumerate(raw):
        b ^= 0xA5
        out[i] = ((b << 4) | (b >> 4)) & 0xFF
    return out.decode("utf-16-le", errors="replace")


# Order of the (offset, length) pairs that start at byte 36.
_FIELDS = ("host_name", "user_name", "password", "app_name", "server_name",
           "extension", "library_name", "language", "database")


def parse_login7(payload: bytes) -> Login7:
    if len(payload) < 94:
        raise ValueError("LOGIN7 record too short (%d bytes)" % len(payload))
    (_length, tds_version, packet_size, _prog_ver, client_pid, _conn_id,
     _flags1, flags2, _type_flags, _flags3) = struct.unpack_from("<IIIIII4B", payload, 0)
    values = {}
    for i, name in enumerate(_FIELDS):
        offset, length = struct.unpack_from("<HH", payload, 36 + 4 * i)
        if name == "extension":
            continue   # FeatureExt: we acknowledge no features
        raw = payload[offset:offset + 2 * length]
        if len(raw) != 2 * length:
            raise ValueError("LOGIN7 field %s outside the record" % name)
        if name == "password":
            values[name] = deobfuscate_password(raw)
        else:
            values[name] = raw.decode("utf-16-le", errors="replace")
    return Login7(tds_version=tds_version, packet_size=packet_size,
                  client_pid=client_pid, option_flags2=flags2, **values)


def build_login7(user: str, password: str, database: str = "", app: str = "test",
                 host: str = "localhost", packet_size: int = 4096,
                 tds_version: int = TDS74, server: str = "127.0.0.1",
                 library: str = "standin-test", language: str = "") -> bytes:
    """A LOGIN7 record as a client would send it (for protocol tests)."""
    def obfuscate(text: str) -> bytes:
        out = bytearray()
        for b in text.encode("utf-16-le"):
            out.append((((b << 4) | (b >> 4)) & 0xFF) ^ 0xA5)
        return bytes(out)

    fields = [host, user, None, app, server, "", library, language, database]
    data = bytearray()
    pairs = []
    base = 94
    for i, text in enumerate(fields):
        if i == 2:
            raw = obfuscate(password)
            nchars = len(password.encode("utf-16-le")) // 2
        else:
            raw = text.encode("utf-16-le")
            nchars = len(raw) // 2
        pairs.append((base + len(data), nchars))
        data += raw
    fixed = bytearray(94)
    struct.pack_into("<IIIIII4BII", fixed, 0, 94 + len(data), tds_version, packet_size,
                     7, 1234, 0, 0xE0, 0x03, 0, 0, 0, 0x0409)
    for i, (off, n) in enumerate(pairs):
        struct.pack_into("<HH", fixed, 36 + 4 * i, off, n)
    struct.pack_into("<HH", fixed, 78, base + len(data), 0)   # SSPI
    struct.pack_into("<HH", fixed, 82, base + len(data), 0)   # AtchDBFile
    struct.pack_into("<HH", fixed, 86, base + len(data), 0)   # ChangePassword
    return bytes(fixed + data)
