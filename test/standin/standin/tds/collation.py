"""5-byte TDS collations ([MS-TDS] 2.2.5.1.2) -> Python codec for char data.

varchar/char/text bytes travel in the code page of the column's collation;
FreeTDS and tedious convert from that code page, so we must encode with the
same one."""

from __future__ import annotations

import struct

# SQL sort ids (byte 4) that imply a code page.  52 = SQL_Latin1_General_CP1_CI_AS.
_SORTID_CODEPAGE = {
    30: "cp437", 31: "cp437", 32: "cp437", 33: "cp437", 34: "cp437",
    40: "cp850", 41: "cp850", 42: "cp850", 43: "cp850", 44: "cp850",
    49: "cp850", 51: "cp1252", 52: "cp1252", 53: "cp1252", 54: "cp1252",
    55: "cp850", 56: "cp850", 57: "cp850", 58: "cp850", 59: "cp850",
    60: "cp850", 61: "cp850", 71: "cp1252", 72: "cp1252", 73: "cp1252",
    74: "cp1252", 75: "cp1252", 80: "cp1250", 81: "cp1250", 82: "cp1250",
    104: "cp1251", 105: "cp1251", 106: "cp1251", 112: "cp1253",
    113: "cp1253", 114: "cp1253", 128: "cp1254", 136: "cp1255",
    144: "cp1256", 152: "cp1257", 183: "cp1252", 184: "cp1252",
}

# Windows LCID (low 16 bits are enough here) -> ANSI code page.
_LCID_CODEPAGE = {
    0x0405: "cp1250", 0x040E: "cp1250", 0x0415: "cp1250", 0x0418: "cp1250",
    0x041A: "cp1250", 0x041B: "cp1250", 0x0424: "cp1250",
    0x0402: "cp1251", 0x0419: "cp1251", 0x0422: "cp1251", 0x0423: "cp1251",
    0x0408: "cp1253", 0x041F: "cp1254", 0x040D: "cp1255", 0x0401: "cp1256",
    0x0425: "cp1257", 0x0426: "cp1257", 0x0427: "cp1257", 0x042A: "cp1258",
    0x041E: "cp874", 0x0411: "cp932", 0x0804: "cp936", 0x0412: "cp949",
    0x0404: "cp950",
}

UTF8_FLAG = 0x04000000   # fUTF8 in the 32-bit LCID/flags word


def codec_for(collation: bytes) -> str:
    if not collation or len(collation) != 5:
        return "cp1252"
    word, = struct.unpack_from("<I", collation, 0)
    sort_id = collation[4]
    if word & UTF8_FLAG:
        return "utf-8"
    if sort_id:
        return _SORTID_CODEPAGE.get(sort_id, "cp1252")
    return _LCID_CODEPAGE.get(word & 0xFFFF, "cp1252")
