"""Log sequence numbers: binary(10) = 4-byte VLF : 4-byte block : 2-byte slot."""

from __future__ import annotations

ZERO = bytes(10)


def to_bytes(lsn: int) -> bytes:
    return lsn.to_bytes(10, "big")


def from_bytes(b: bytes) -> int:
    return int.from_bytes(b, "big")


def increment(b: bytes) -> bytes:
    """slot+1 with carry into block and VLF (= 80-bit big-endian +1)."""
    v = from_bytes(b) + 1
    if v >= 1 << 80:
        v = (1 << 80) - 1
    return to_bytes(v)


def decrement(b: bytes) -> bytes:
    v = from_bytes(b)
    return to_bytes(v - 1 if v else 0)


def colon_form(b: bytes) -> str:
    h = b.hex().upper()
    return "%s:%s:%s" % (h[:8], h[8:16], h[16:])


class LsnCounter:
    """Hands out strictly increasing LSNs.  Every row operation gets the next
    slot; each commit record starts a new log block, as a real log would
    after a flush, so LSNs look like real ones (0x0000002A000001F00003)."""

    def __init__(self, vlf=0x25, block=0x1F0):
        self.value = (vlf << 48) | (block << 16)

    def next(self) -> int:
        v = self.value + 1
        if v & 0xFFFF == 0xFFFF:
            v = ((v >> 16) + 1) << 16 | 1
        self.value = v
        return v

    def next_block(self) -> int:
        self.value = (((self.value >> 16) + 1) << 16) | 1
        return self.value

    def current(self) -> int:
        return self.value
