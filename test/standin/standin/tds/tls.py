"""TLS the way SQL Server does it for TDS 7.x (ENGINE.md, "TLS").

1. PRELOGIN carries the client's ENCRYPTION byte; the server answers with
   its own, chosen from the client's byte and the server's setting by the
   table of [MS-TDS] 2.2.6.5 (`negotiate`).
2. If either side then encrypts, the TLS handshake follows, its records
   carried as the payload of PRELOGIN (0x12) messages in both directions:
   each client flight is one message, each server flight one message
   (`handshake`).
3. ENCRYPT_OFF from the server means only the LOGIN7 message travels in
   TLS, after which both sides continue in clear; ENCRYPT_ON / ENCRYPT_REQ
   mean the whole session does (whole TDS packets inside TLS records:
   `TlsSocket`).

The TLS engine is Python's ssl module on memory BIOs (ssl.MemoryBIO +
SSLObject), so that handshake records can be wrapped in TDS packets."""

from __future__ import annotations

import os
import ssl
import threading
from typing import Optional

from . import packets as P
from .prelogin import ENCRYPT_NOT_SUP, ENCRYPT_OFF, ENCRYPT_ON, ENCRYPT_REQ

# What the server is set to (run-standin --tls-offer, control "tls").
OFFER_OFF = "off"                  # a certificate, encryption not forced
OFFER_ON = "on"                    # Force Encryption = Yes
OFFER_REQUIRED = "required"        # like "on", but always answers ENCRYPT_REQ
OFFER_NOT_SUPPORTED = "not-supported"   # no certificate: no TLS at all
OFFERS = (OFFER_OFF, OFFER_ON, OFFER_REQUIRED, OFFER_NOT_SUPPORTED)

# The TLS versions enabled for the server on its machine (Schannel's
# "Enabled" value per protocol, ENGINE.md "TLS"), oldest first.  A TDS 7.x
# handshake uses those up to TLS 1.2: SQL Server speaks TLS 1.3 only with
# TDS 8.0.  The default is what a current SQL Server negotiates.
PROTOCOLS = ("1.0", "1.1", "1.2", "1.3")
DEFAULT_PROTOCOLS = "1.2"
_VERSIONS = {"1.0": ssl.TLSVersion.TLSv1, "1.1": ssl.TLSVersion.TLSv1_1,
             "1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}

# What the connection does after the PRELOGIN exchange.
MODE_NONE = "none"                 # everything in clear
MODE_LOGIN_ONLY = "login_only"     # LOGIN7 in TLS, then clear
MODE_FULL = "full"                 # the whole session in TLS
MODE_TERMINATE = "terminate"       # answer, then close the connection

# [MS-TDS] 2.2.6.5, "Value returned by server" for each client value, by the
# server's setting: (reply byte, what follows).  "required" is no column of
# the table: it answers ENCRYPT_REQ where "on" answers ENCRYPT_ON, so tests
# can show that clients treat both bytes alike.
_TABLE = {
    OFFER_OFF: {ENCRYPT_OFF: (ENCRYPT_OFF, MODE_LOGIN_ONLY),
                ENCRYPT_ON: (ENCRYPT_ON, MODE_FULL),
                ENCRYPT_NOT_SUP: (ENCRYPT_NOT_SUP, MODE_NONE),
                ENCRYPT_REQ: (ENCRYPT_ON, MODE_FULL)},
    OFFER_ON: {ENCRYPT_OFF: (ENCRYPT_REQ, MODE_FULL),
               ENCRYPT_ON: (ENCRYPT_ON, MODE_FULL),
               ENCRYPT_NOT_SUP: (ENCRYPT_REQ, MODE_TERMINATE),
               ENCRYPT_REQ: (ENCRYPT_ON, MODE_FULL)},
    OFFER_REQUIRED: {ENCRYPT_OFF: (ENCRYPT_REQ, MODE_FULL),
                     ENCRYPT_ON: (ENCRYPT_REQ, MODE_FULL),
                     ENCRYPT_NOT_SUP: (ENCRYPT_REQ, MODE_TERMINATE),
                     ENCRYPT_REQ: (ENCRYPT_REQ, MODE_FULL)},
    # The table's "(connection terminated)" for ENCRYPT_ON/REQ against a
    # server without TLS is the client's doing: a server that cannot
    # encrypt has no reason to refuse anyone, and answers the same to all.
    OFFER_NOT_SUPPORTED: {ENCRYPT_OFF: (ENCRYPT_NOT_SUP, MODE_NONE),
                          ENCRYPT_ON: (ENCRYPT_NOT_SUP, MODE_NONE),
                          ENCRYPT_NOT_SUP: (ENCRYPT_NOT_SUP, MODE_NONE),
                          ENCRYPT_REQ: (ENCRYPT_NOT_SUP, MODE_NONE)},
}

# The handshake's own messages: at most this much per packet (FreeTDS
# grows its buffer to 4096 for the handshake; SQL Server 2000 "did not like"
# handshake records split across smaller packets).
HANDSHAKE_PACKET_SIZE = 4096


class TlsError(Exception):
    """The TLS handshake failed (the client refused our certificate, sent
    garbage, or closed)."""


def negotiate(client_byte: Optional[int], offer: str):
    """(reply byte, mode) for a client's ENCRYPTION byte.  A client that
    sent no ENCRYPTION option is treated as ENCRYPT_OFF, the value the
    option defaults to in [MS-TDS] 2.2.6.5; the client-certificate values
    (0x80 and up) are refused: the stand-in has no client certificates."""
    if client_byte is None:
        client_byte = ENCRYPT_OFF
    row = _TABLE[offer]
    if client_byte not in row:
        return (ENCRYPT_NOT_SUP if offer == OFFER_NOT_SUPPORTED else ENCRYPT_REQ), MODE_TERMINATE
    return row[client_byte]


class TlsConfig:
    """The server's certificate and what it offers.  Certificates can be
    swapped at run time (control "tls"); each connection takes the context
    that is current when its handshake starts."""

    def __init__(self, cert_file: Optional[str] = None, key_file: Optional[str] = None,
                 offer: Optional[str] = None, protocols: Optional[str] = None):
        self._lock = threading.Lock()
        self._context = None
        self.cert_file = self.key_file = None
        self.offer = OFFER_NOT_SUPPORTED
        self.protocols = parse_protocols(protocols or DEFAULT_PROTOCOLS)
        self.configure(cert_file, key_file, offer)

    def configure(self, cert_file=None, key_file=None, offer=None, protocols=None) -> None:
        """Load a new certificate/key (both or neither), set the offer and/or
        the enabled TLS versions ("1.2", "1.3", "1.0,1.1", ...).  The first
        certificate makes the offer "off" (what SQL Server does with a
        certificate and Force Encryption = No) unless one is given.
        Raises ValueError for an offer without a certificate."""
        with self._lock:
            context = self._context
            enabled = parse_protocols(protocols) if protocols else self.protocols
            if cert_file or key_file:
                if not (cert_file and key_file):
                    raise ValueError("a certificate needs its key and the other way round")
                check_key_file(key_file)
            elif context is not None and enabled != self.protocols:
                cert_file, key_file = self.cert_file, self.key_file
            if cert_file:
                context = _server_context(cert_file, key_file, enabled)
            if offer is None:
                offer = OFFER_OFF if self._context is None and context is not None else self.offer
            if offer not in OFFERS:
                raise ValueError("offer must be one of %s" % ", ".join(OFFERS))
            if offer != OFFER_NOT_SUPPORTED and context is None:
                raise ValueError("offering TLS needs a certificate (--tls-cert, --tls-key)")
            if context is not self._context:
                self.cert_file, self.key_file = cert_file, key_file
            self._context = context
            self.offer = offer
            self.protocols = enabled

    def snapshot(self):
        with self._lock:
            return self.offer, self._context

    def describe(self) -> dict:
        with self._lock:
            return {"offer": self.offer, "cert": self.cert_file, "protocols": ",".join(self.protocols)}


def parse_protocols(text: str) -> tuple:
    """The enabled TLS versions of a comma list, oldest first; they must
    be neighbours (one range), as a minimum and maximum can express."""
    # str(): the control port's JSON may carry 1.3 as a number
    wanted = {v.strip() for v in str(text).split(",") if v.strip()}
    if not wanted or not wanted <= set(PROTOCOLS):
        raise ValueError("protocols must be a comma list of %s" % ", ".join(PROTOCOLS))
    enabled = tuple(v for v in PROTOCOLS if v in wanted)
    first = PROTOCOLS.index(enabled[0])
    if enabled != PROTOCOLS[first:first + len(enabled)]:
        raise ValueError("protocols must be one range of versions, not %s" % ",".join(enabled))
    return enabled


def _server_context(cert_file: str, key_file: str, enabled=(DEFAULT_PROTOCOLS,)) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    # TDS 7.x: SQL Server 2022 speaks TLS 1.3 only with TDS 8.0 (ENGINE.md),
    # so a handshake uses the enabled versions up to TLS 1.2.  With none
    # left (TLS 1.3 alone) the minimum exceeds the maximum, and OpenSSL
    # answers every ClientHello with a protocol_version alert.
    usable = [v for v in enabled if v != "1.3"]
    ctx.minimum_version = _VERSIONS[usable[0] if usable else "1.3"]
    ctx.maximum_version = _VERSIONS[usable[-1] if usable else "1.2"]
    if usable and usable[0] in ("1.0", "1.1"):
        # what an old Windows negotiates; OpenSSL's default security level
        # would refuse it
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    ctx.load_cert_chain(cert_file, key_file)
    # FreeTDS 1.3 and SQL Server know nothing of renegotiation or tickets
    ctx.options |= ssl.OP_NO_TICKET
    if hasattr(ssl, "OP_NO_RENEGOTIATION"):
        ctx.options |= ssl.OP_NO_RENEGOTIATION
    return ctx


def handshake(context: ssl.SSLContext, sock, read_message, spid: int):
    """Run the server side of the TLS handshake over PRELOGIN messages.
    read_message() returns the next client message (type, payload).
    Returns a TlsSocket on the raw socket; raises TlsError."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = context.wrap_bio(incoming, outgoing, server_side=True)
    while True:
        try:
            obj.do_handshake()
            done = True
        except ssl.SSLWantReadError:
            done = False
        except ssl.SSLError as exc:
            _send_flight(sock, outgoing.read(), spid)    # the alert, if any
            raise TlsError(_reason(exc)) from exc
        flight = outgoing.read()
        if flight:
            _send_flight(sock, flight, spid)
        if done:
            return TlsSocket(sock, obj, incoming, outgoing)
        try:
            ptype, payload = read_message()
        except P.ConnectionClosed as exc:
            raise TlsError("client closed the connection during the TLS handshake (%s)" % exc) from exc
        if ptype != P.PT_PRELOGIN:
            raise TlsError("expected a PRELOGIN message with TLS handshake data, got packet type 0x%02X"
                           % ptype)
        incoming.write(payload)


def _send_flight(sock, data: bytes, spid: int) -> None:
    if not data:
        return
    try:
        sock.sendall(P.split_message(P.PT_PRELOGIN, data, HANDSHAKE_PACKET_SIZE, spid))
    except OSError as exc:
        raise P.ConnectionClosed(str(exc)) from exc


def _reason(exc: ssl.SSLError) -> str:
    # "[SSL: TLSV1_ALERT_UNKNOWN_CA] tlsv1 alert unknown ca (_ssl.c:2580)"
    return getattr(exc, "reason", None) or str(exc)


class TlsSocket:
    """The socket calls the connection uses (recv, sendall, shutdown,
    close), with the data passing through the TLS session.  The reader
    thread receives while the connection thread sends: every SSLObject call
    holds one lock, while the blocking socket read happens outside it."""

    RECV_CHUNK = 65536

    def __init__(self, sock, obj: ssl.SSLObject, incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO):
        self.raw = sock
        self._obj = obj
        self._in = incoming
        self._out = outgoing
        self._lock = threading.Lock()

    @property
    def version(self) -> str:
        return self._obj.version() or ""

    @property
    def cipher(self) -> str:
        c = self._obj.cipher()
        return c[0] if c else ""

    def recv(self, n: int) -> bytes:
        while True:
            with self._lock:
                try:
                    return self._obj.read(n)
                except ssl.SSLWantReadError:
                    pass
                except ssl.SSLZeroReturnError:
                    return b""
                except ssl.SSLError as exc:
                    raise OSError("TLS: %s" % _reason(exc)) from exc
            data = self.raw.recv(self.RECV_CHUNK)
            if not data:
                return b""
            with self._lock:
                self._in.write(data)

    def sendall(self, data) -> None:
        view = memoryview(data)
        with self._lock:
            while view:
                try:
                    written = self._obj.write(view)
                except ssl.SSLError as exc:
                    raise OSError("TLS: %s" % _reason(exc)) from exc
                view = view[written:]
            self.raw.sendall(self._out.read())

    def shutdown(self, how) -> None:
        self.raw.shutdown(how)

    def close(self) -> None:
        self.raw.close()


def check_key_file(path: str) -> None:
    """Refuse a private key other OS users can read (PostgreSQL refuses such
    an ssl_key_file too): a test that leaves one readable teaches the wrong
    habit."""
    mode = os.stat(path).st_mode
    if mode & 0o077:
        raise ValueError("private key file %s has group or world access (mode %04o); chmod 600 it"
                         % (path, mode & 0o7777))
