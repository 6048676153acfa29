"""TDS packet framing ([MS-TDS] 2.2.3): reading client messages and writing
server messages split at the negotiated packet size.

Every server packet is type 0x04 (TABULAR RESULT) and carries the SPID in
bytes 4-5, because FreeTDS takes the session id from the header."""

from __future__ import annotations

import socket
import struct
# Packet types (client -> server unless noted).
PT_SQL_BATCH = 0x01
PT_RPC = 0x03
PT_TABULAR = 0x04          # every server -> client message
PT_ATTENTION = 0x06
PT_BULK_LOAD = 0x07
PT_TRANSACTION_MANAGER = 0x0E
PT_LOGIN7 = 0x10
PT_SSPI = 0x11
PT_PRELOGIN = 0x12

# Status bits.
ST_EOM = 0x01
ST_IGNORE = 0x02
ST_RESETCONNECTION = 0x08
ST_RESETCONNECTION_SKIPTRAN = 0x10

HEADER = struct.Struct(">BBHHBB")
HEADER_SIZE = 8

MIN_PACKET_SIZE = 512
MAX_PACKET_SIZE = 32767


class ConnectionClosed(Exception):
    """The peer closed the socket (or it broke) while we read or wrote."""


class ProtocolError(Exception):
    """The client sent bytes that are not valid TDS."""


def grant_packet_size(requested: int) -> int:
    """Packet size the server grants for a LOGIN7 request: clamped to the
    range the spec allows and rounded down to a multiple of 4, as SQL Server
    does.  0 means "server default" (4096)."""
    if requested <= 0:
        requested = 4096
    size = max(MIN_PACKET_SIZE, min(MAX_PACKET_SIZE, requested))
    return size - size % 4


def recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n > 0:
        try:
            chunk = sock.recv(n)
        except OSError as exc:
            raise ConnectionClosed(str(exc)) from exc
        if not chunk:
            raise ConnectionClosed("peer closed the connection")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_packet(sock: socket.socket):
    """Read one packet; returns (type, status, payload)."""
    header = recv_exact(sock, HEADER_SIZE)
    ptype, status, length, _spid, _pid, _window = HEADER.unpack(header)
    if length < HEADER_SIZE:
        raise ProtocolError("packet length %d shorter than its header" % length)
    payload = recv_exact(sock, length - HEADER_SIZE) if length > HEADER_SIZE else b""
    return ptype, status, payload


class MessageWriter:
    """Accumulates the bytes of one server message and sends them as packets
    of the negotiated size.  Full packets go out as soon as enough bytes are
    buffered (so a huge result streams); end_message() sends the rest with
    EOM.  Packet ids restart at 1 for every message."""

    # Send once this many full packets are buffered: large writes keep the
    # per-send overhead small without holding a whole result in memory.
    FLUSH_PACKETS = 16

    def __init__(self, sock: socket.socket, spid: int, packet_size: int):
        self.sock = sock
        self.spid = spid
        self.packet_size = packet_size
        self.buf = bytearray()
        self.packet_id = 1
        self.bytes_sent = 0
        self.in_message = False   # some packet of the current message is out

    def set_packet_size(self, size: int) -> None:
        self.packet_size = size

    def write(self, data) -> None:
        self.buf += data
        if len(self.buf) >= (self.packet_size - HEADER_SIZE) * self.FLUSH_PACKETS:
            self.flush_full_packets()

    def pending(self) -> int:
        return len(self.buf)

    def _header(self, status: int, length: int) -> bytes:
        h = HEADER.pack(PT_TABULAR, status, length, self.spid & 0xFFFF,
                        self.packet_id & 0xFF, 0)
        self.packet_id += 1
        return h

    def flush_full_packets(self) -> None:
        """Send every complete packet in the buffer (never the last partial
        one, which may still become the EOM packet)."""
        body = self.packet_size - HEADER_SIZE
        n = len(self.buf) // body
        if len(self.buf) % body == 0 and n:
            n -= 1    # keep one full packet back: it may have to carry EOM
        if n <= 0:
            return
        data = bytes(self.buf[:n * body])
        del self.buf[:n * body]
        parts = []
        for i in range(n):
            parts.append(self._header(0, self.packet_size))
            parts.append(data[i * body:(i + 1) * body])
        self._send(b"".join(parts))
        self.in_message = True

    def end_message(self) -> None:
        """Send everything buffered; the last packet carries EOM."""
        body = self.packet_size - HEADER_SIZE
        data = bytes(self.buf)
        self.buf.clear()
        parts = []
        total = len(data)
        off = 0
        while True:
            chunk = data[off:off + body]
            off += len(chunk)
            last = off >= total
            parts.append(self._header(ST_EOM if last else 0, HEADER_SIZE + len(chunk)))
            parts.append(chunk)
            if last:
                break
        self._send(b"".join(parts))
        self.packet_id = 1
        self.in_message = False

    def flush_partial(self) -> None:
        """Send every buffered byte in packets without EOM (fault injection:
        the client must see the rows before we stall or drop the socket)."""
        body = self.packet_size - HEADER_SIZE
        data = bytes(self.buf)
        self.buf.clear()
        parts = []
        for off in range(0, len(data), body):
            chunk = data[off:off + body]
            parts.append(self._header(0, HEADER_SIZE + len(chunk)))
            parts.append(chunk)
        if parts:
            self._send(b"".join(parts))
        self.in_message = True

    def send_raw(self, data: bytes) -> None:
        self._send(data)

    def _send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError as exc:
            raise ConnectionClosed(str(exc)) from exc
        self.bytes_sent += len(data)


def build_packet(ptype: int, status: int, payload: bytes, spid: int = 0,
                 packet_id: int = 1) -> bytes:
    """One packet with header (used by tests and by the corrupt fault)."""
    return HEADER.pack(ptype, status, HEADER_SIZE + len(payload), spid, packet_id, 0) + payload


def split_message(ptype: int, payload: bytes, packet_size: int, spid: int = 0,
                  first_status: int = 0) -> bytes:
    """A whole client or server message as packets (test helper)."""
    body = packet_size - HEADER_SIZE
    out = []
    chunks = [payload[i:i + body] for i in range(0, len(payload), body)] or [b""]
    for i, chunk in enumerate(chunks):
        status = ST_EOM if i == len(chunks) - 1 else 0
        if i == 0:
            status |= first_status
        out.append(build_packet(ptype, status, chunk, spid, (i + 1) & 0xFF))
    return b"".join(out)
