"""The TDS listener: accept loop, one thread per connection, plus one reader
thread per connection after login so that an ATTENTION arriving while we
are still writing a response is seen at once ([MS-TDS] 2.2.1.7, 3.3.5.9).

Connection life: PRELOGIN (encryption negotiated, TLS handshake: tls.py)
-> LOGIN7 (checked by engine.login) -> login response -> requests (SQL_BATCH, RPC, TRANSACTION MANAGER) until the client
or a fault closes the socket; then engine.close_session rolls back."""

from __future__ import annotations

import itertools
import queue
import socket
import struct
import threading
import time
import traceback
from typing import Dict, Optional

from ..results import EnvChange, SqlError
from ..sqltypes import DEFAULT_COLLATION
from . import decode as D
from . import corrupt as C
from . import faults as F
from . import packets as P
from . import tls as TLS
from . import tokens as T
from .faults import FaultRegistry
from .login7 import TDS74, parse_login7
from .prelogin import OPT_ENCRYPTION, build_prelogin_reply, parse_prelogin
from .prepared import PreparedStatements, is_prepared_proc
from .response import Cancelled, Killed, Response
from .round_trips import RoundTrips
from .statement_log import StatementLog

INITIAL_PACKET_SIZE = 4096
FIRST_SPID = 51

_ISOLATION_SQL = {1: "READ UNCOMMITTED", 2: "READ COMMITTED", 3: "REPEATABLE READ",
                  4: "SERIALIZABLE", 5: "SNAPSHOT"}

# What a session killed by T-SQL KILL while it runs a request receives before
# its connection is closed (UNCONFIRMED, ENGINE.md "KILL"): nothing, a DONE
# with the error bit that ends the response, or Msg 596 and that DONE.  An
# idle session's connection is closed in every mode.
KILL_NOTICES = ("none", "done_error", "error_596")


class StandinServer:
    def __init__(self, engine, host: str = "127.0.0.1", port: int = 0,
                 server_name: str = "STANDIN", statement_log: Optional[StatementLog] = None,
                 faults: Optional[FaultRegistry] = None, default_textsize: Optional[int] = None,
                 tls: Optional[TLS.TlsConfig] = None,
                 kill_notice: str = "done_error", rtt_ms: float = 0.0):
        self.engine = engine
        # simulated network round trip and request counters (round_trips.py)
        self.round_trips = RoundTrips(rtt_ms)
        # certificate and ENCRYPTION setting (no TLS unless given one)
        self.tls = tls or TLS.TlsConfig()
        if kill_notice not in KILL_NOTICES:
            raise ValueError("kill_notice must be one of %s" % ", ".join(KILL_NOTICES))
        self.kill_notice = kill_notice
        try:
            engine.kill_session = self.kill_session     # T-SQL KILL (executor.s_Kill)
        except AttributeError:
            pass
        # TEXTSIZE for sessions that never SET it (None = unlimited)
        self.default_textsize = default_textsize
        self.server_name = server_name
        self.log = statement_log or StatementLog()
        self.faults = faults or FaultRegistry()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(128)
        self.host, self.port = self.sock.getsockname()[:2]
        self.connections: Dict[int, "Connection"] = {}
        self.user_connections = 0       # sp_configure 'user connections' (0: the default, 32,767)
        self._lock = threading.Lock()
        self._spids = itertools.count(FIRST_SPID)
        self._stopping = threading.Event()
        self._thread: Optional[threading.Thread] = None

    # --- lifecycle ---------------------------------------------------------
    def start(self) -> "StandinServer":
        self._thread = threading.Thread(target=self._accept_loop, name="tds-accept", daemon=True)
        self._thread.start()
        return self

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                client, addr = self.sock.accept()
            except OSError as exc:
                if self._stopping.is_set():
                    break
                # ECONNABORTED, EMFILE…: keep serving, never let one failed
                # accept stop the listener
                self.log.write(0, "accept_error", error=str(exc))
                time.sleep(0.01)
                continue
            if self._stopping.is_set():
                client.close()
                break
            if self.faults.is_down():
                # "restart" with down_seconds: the server is not back yet.
                self.log.write(0, "refused_tcp", peer="%s:%d" % addr[:2])
                client.close()
                continue
            try:
                client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                client.close()       # the peer is already gone
                continue
            spid = self._next_spid()
            conn = Connection(self, client, addr, spid)
            with self._lock:
                self.connections[spid] = conn
            threading.Thread(target=conn.run, name="tds-%d" % spid, daemon=True).start()

    def _next_spid(self) -> int:
        with self._lock:
            while True:
                spid = next(self._spids)
                if spid > 32767:
                    self._spids = itertools.count(FIRST_SPID)
                    continue
                if spid not in self.connections:
                    return spid

    def forget(self, conn: "Connection") -> None:
        with self._lock:
            if self.connections.get(conn.spid) is conn:
                del self.connections[conn.spid]

    def open_spids(self):
        with self._lock:
            return list(self.connections)

    def logged_in_count(self, besides=None) -> int:
        """Sessions past their login (the ones 'user connections' counts)."""
        with self._lock:
            return sum(1 for c in self.connections.values() if c is not besides and c.session is not None)

    def kill_all(self) -> int:
        with self._lock:
            conns = list(self.connections.values())
        for conn in conns:
            conn.kill()
        return len(conns)

    def kill(self, spid: int) -> bool:
        with self._lock:
            conn = self.connections.get(spid)
        if conn is None:
            return False
        conn.kill()
        return True

    def kill_session(self, spid: int) -> bool:
        """T-SQL KILL: end a logged-in session's connection; False when no
        session has that id."""
        with self._lock:
            conn = self.connections.get(spid)
        if conn is None or conn.session is None or conn.closed.is_set():
            return False
        conn.kill_by_statement(self.kill_notice)
        return True

    def describe_connections(self) -> list:
        with self._lock:
            conns = list(self.connections.values())
        return [c.describe() for c in conns]

    def shutdown(self) -> None:
        self._stopping.set()
        try:
            self.sock.close()
        except OSError:
            pass
        self.kill_all()
        deadline = time.time() + 2.0
        while self.connections and time.time() < deadline:
            time.sleep(0.01)


class Connection:
    def __init__(self, server: StandinServer, sock: socket.socket, addr, spid: int):
        self.server = server
        self.engine = server.engine
        self.server_name = server.server_name
        self.sock = sock
        self.peer = "%s:%d" % addr[:2]
        self.spid = spid
        self.writer = P.MessageWriter(sock, spid, INITIAL_PACKET_SIZE)
        self.session = None
        self.login = None
        self.tds_version = TDS74
        self.in_transaction = False
        self.encryption = TLS.MODE_NONE   # what the PRELOGIN exchange decided
        # ATTENTION bookkeeping.  Requests are numbered as they arrive; an
        # attention targets the last request the client had sent.  It
        # interrupts that request only if it is running now; otherwise it
        # is acknowledged once that request's response is out.  This keeps
        # "response, then ack" in order even when a new request and its
        # cancel race an earlier acknowledgement.
        self.attention = threading.Event()       # cancel the running request
        self._attn_lock = threading.Lock()
        self._received = 0                       # requests read (reader thread)
        self._running = None                     # number of the running request
        self._acked_upto = -1                    # last request number acknowledged
        self.requests: "queue.Queue" = queue.Queue()
        self.prepared = PreparedStatements()
        self.connected_at = time.time()
        self.last_event = ""
        self.request_text = ""     # what faults with "match" look at
        self.fatal_error = False   # severity >= 20 seen: close after the response
        self.kill_requested = None  # KILL notice to end the running request with
        self.closed = threading.Event()

    # --- helpers used by Response -----------------------------------------
    def log(self, event: str, **fields) -> None:
        self.last_event = event
        self.server.log.write(self.spid, event, **fields)

    def take_fault(self, kind: str, when=None):
        return self.server.faults.take(kind, self.spid, self.request_text, when)

    def sleep_interruptible(self, seconds: float, released: threading.Event = None) -> None:
        """Stall: wait, but wake on attention, when the socket is killed or
        when `released` (a held stall's event) is set."""
        deadline = time.time() + seconds
        while not self.closed.is_set() and self.kill_requested is None:
            left = deadline - time.time()
            if left <= 0 or self.attention.wait(min(left, 0.05)):
                return
            if released is not None and released.is_set():
                return

    def kill(self) -> None:
        self.closed.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass

    def kill_by_statement(self, notice: str) -> None:
        """Another session's KILL: an idle connection is closed now; a
        running request ends with the notice first (Response.killed)."""
        with self._attn_lock:
            if self._running is not None and notice != "none":
                self.kill_requested = notice
                self.server.log.write(self.spid, "killed", notice=notice, running=True)
                return
        self.server.log.write(self.spid, "killed", notice=notice, running=False)
        self.kill()

    def describe(self) -> dict:
        login = self.login
        return {"spid": self.spid, "peer": self.peer,
                "user": login.user_name if login else None,
                "app": login.app_name if login else None,
                "host": login.host_name if login else None,
                "database": getattr(self.session, "database", None),
                "in_transaction": self.in_transaction,
                "encryption": self.encryption,
                "connected_seconds": round(time.time() - self.connected_at, 3),
                "last_event": self.last_event}

    def envchange_token(self, env: EnvChange) -> bytes:
        kind = env.kind
        if kind == "database":
            return T.env_string(T.ENV_DATABASE, env.new or "", env.old or "")
        if kind == "language":
            return T.env_string(T.ENV_LANGUAGE, env.new or "", env.old or "")
        if kind == "packet_size":
            return T.env_string(T.ENV_PACKETSIZE, str(env.new), str(env.old or env.new))
        if kind == "begin_tran":
            self.in_transaction = True
            return T.env_bytes(T.ENV_BEGIN_TRAN, bytes(env.new or b"\0" * 8), b"")
        if kind in ("commit_tran", "rollback_tran"):
            self.in_transaction = False
            code = T.ENV_COMMIT_TRAN if kind == "commit_tran" else T.ENV_ROLLBACK_TRAN
            return T.env_bytes(code, b"", bytes(env.old or b"\0" * 8))
        raise ValueError("unknown EnvChange kind %r" % kind)

    # --- connection thread -------------------------------------------------
    def run(self) -> None:
        self.log("connect", peer=self.peer)
        reason = "client closed"
        try:
            if self._handshake():
                reader = threading.Thread(target=self._reader, name="tds-read-%d" % self.spid,
                                          daemon=True)
                reader.start()
                self._serve()
        except P.ConnectionClosed as exc:
            reason = str(exc)
        except Exception as exc:   # a bug in us must not kill the whole stand-in
            reason = "internal error: %r" % (exc,)
            self.log("internal_error", error=repr(exc), traceback=traceback.format_exc())
            traceback.print_exc()
        finally:
            self.kill()
            if self.session is not None:
                try:
                    self.engine.close_session(self.session)
                except Exception as exc:
                    self.log("internal_error", error="close_session: %r" % (exc,))
            self.server.forget(self)
            self.server.round_trips.end_session(self.spid)
            self.log("disconnect", reason=reason, bytes_sent=self.writer.bytes_sent)

    def _read_message(self):
        """Pre-login: read packets until EOM."""
        parts = []
        while True:
            ptype, status, payload = P.read_packet(self.sock)
            parts.append(payload)
            if status & P.ST_EOM:
                return ptype, b"".join(parts)

    def _handshake(self) -> bool:
        ptype, payload = self._read_message()
        stall = self.take_fault(F.STALL, when=lambda f: f.params.get("phase") == "login")
        if stall is not None:
            # login_timeout tests: the TCP session is open, the server mute
            self.log("fault", fault="stall", phase="login", seconds=stall.params.get("seconds"))
            self.sleep_interruptible(float(stall.params.get("seconds", 0)))
        if ptype == P.PT_PRELOGIN:
            self._round_trip("prelogin")
            try:
                options = parse_prelogin(payload)
            except ValueError as exc:
                self.log("prelogin_error", error=str(exc))
                return False
            requested = options.get(OPT_ENCRYPTION, b"")[:1]
            requested = requested[0] if requested else None
            offer, context = self.server.tls.snapshot()
            reply, mode = TLS.negotiate(requested, offer)
            self.log("prelogin", encryption=requested, reply=reply, tls=mode)
            self.writer.write(build_prelogin_reply(reply))
            self.writer.end_message()
            if mode == TLS.MODE_TERMINATE:
                # [MS-TDS] 2.2.6.5: the server requires encryption, the
                # client cannot do it
                time.sleep(0.05)    # let the reply reach the client before the FIN
                return False
            ptype, payload = self._start_tls(context, mode)
            if ptype is None:
                return False
        if ptype != P.PT_LOGIN7:
            self.log("login_error", error="expected LOGIN7, got packet type 0x%02X" % ptype)
            return False
        try:
            login = parse_login7(payload)
        except ValueError as exc:
            self.log("login_error", error=str(exc))
            return False
        self.login = login
        self._round_trip("login", app=login.app_name)
        self.tds_version = min(login.tds_version, TDS74) if login.tds_version >= 0x70000000 else TDS74
        faults = self.server.faults
        if faults.refuse_logins:
            self.log("login_refused", user=login.user_name, mode=faults.refuse_mode)
            if faults.refuse_mode == "close":
                return False
            self._login_failed(SqlError(18456, 14, 1, "Login failed for user '%s'." % login.user_name))
            return False
        limit = self.server.user_connections
        if limit and self.server.logged_in_count(besides=self) >= limit:
            # severity 20: the server closes the connection after the error
            self.log("login_failed", user=login.user_name, number=17809)
            self._login_failed(SqlError(17809, 20, 1, "Could not connect because the maximum number of '%d' "
                                        "user connections has already been reached. The system administrator "
                                        "can use sp_configure to increase the maximum value. The connection "
                                        "has been closed." % limit))
            return False
        if login.integrated_security:
            self._login_failed(SqlError(18452, 14, 1, "Login failed. The login is from an untrusted "
                                        "domain and cannot be used with Integrated authentication."))
            return False
        try:
            session = self.engine.login(login.user_name, login.password, login.database,
                                        login.app_name, login.host_name, language=login.language)
        except SqlError as err:
            self.log("login_failed", user=login.user_name, database=login.database,
                     number=err.number, message=err.message)
            self._login_failed(err)
            return False
        self.session = session
        try:
            session.spid = self.spid
        except AttributeError:
            pass
        database = getattr(session, "database", None) or login.database or "master"
        granted = P.grant_packet_size(login.packet_size)
        self.log("login", user=login.user_name, database=database, app=login.app_name, language=login.language,
                 host=login.host_name, library=login.library_name,
                 tds_version="0x%08X" % login.tds_version, packet_size=granted,
                 encryption=self.encryption)
        w = self.writer
        corrupt = self.take_fault(F.CORRUPT, when=lambda f: f.params.get("phase") == "login")
        if corrupt is not None:
            self.send_corrupt_login(corrupt)    # never returns
        w.write(T.env_string(T.ENV_DATABASE, database, "master"))
        w.write(T.info(5701, 2, 0, "Changed database context to '%s'." % database, self.server_name))
        w.write(T.env_bytes(T.ENV_COLLATION, DEFAULT_COLLATION, b""))
        language = getattr(session, "language", None) or "us_english"
        w.write(T.env_string(T.ENV_LANGUAGE, language, ""))
        w.write(T.info(5703, 1, 0, "Changed language setting to %s." % language, self.server_name))
        w.write(T.loginack(self.tds_version))
        w.write(T.env_string(T.ENV_PACKETSIZE, str(granted),
                             str(login.packet_size or INITIAL_PACKET_SIZE)))
        w.write(T.done(0, 0))
        w.end_message()
        w.set_packet_size(granted)     # both sides switch after the login response
        return True

    def _start_tls(self, context, mode: str):
        """After the PRELOGIN reply: the TLS handshake if one side encrypts,
        then the LOGIN7 message (inside TLS unless nothing is encrypted).
        From then on the whole session uses TLS (MODE_FULL) or clear text
        again (MODE_LOGIN_ONLY).  Returns the LOGIN7 message, (None, None)
        when the handshake failed."""
        if mode == TLS.MODE_NONE:
            return self._read_message()
        try:
            channel = TLS.handshake(context, self.sock, self._read_message, self.spid)
        except TLS.TlsError as exc:
            self.log("tls_failed", error=str(exc))
            return None, None
        self.log("tls_handshake", protocol=channel.version, cipher=channel.cipher, mode=mode)
        raw = self.sock
        self.sock = channel
        try:
            message = self._read_message()
        finally:
            if mode == TLS.MODE_LOGIN_ONLY:
                self.sock = raw
        if mode == TLS.MODE_FULL:
            self.writer.sock = channel
        self.encryption = mode
        return message

    def _login_failed(self, err: SqlError) -> None:
        self.writer.write(T.error(err.number, err.state, err.severity, err.message,
                                  self.server_name, "", 1))
        self.writer.write(T.done(T.DONE_ERROR, 0))
        self.writer.end_message()

    def _reader(self) -> None:
        """Reassembles client messages; ATTENTION is flagged immediately."""
        parts = []
        first_status = None
        try:
            while True:
                ptype, status, payload = P.read_packet(self.sock)
                if ptype == P.PT_ATTENTION:
                    with self._attn_lock:
                        target = self._received
                        if self._running == target:
                            self.attention.set()
                            if self.session is not None:
                                try:
                                    self.session.cancelled = True
                                except AttributeError:
                                    pass
                    # counted on arrival: when the request it cancels is
                    # still writing, _serve acknowledges it before taking
                    # this item, and a client that read the acknowledgement
                    # must already see the attention in the counters
                    self.server.round_trips.count(self.spid, "attention", "", None)
                    self.log("attention", request=target)
                    self.requests.put(("attention", target, b""))
                    continue
                if first_status is None:
                    first_status = status
                parts.append(payload)
                if status & P.ST_EOM:
                    with self._attn_lock:
                        self._received += 1
                    self.requests.put((ptype, first_status | (status & P.ST_IGNORE), b"".join(parts)))
                    parts = []
                    first_status = None
        except (P.ConnectionClosed, P.ProtocolError) as exc:
            # a request of a connection that is gone ends (a long Sort of
            # ENGINE.md "Sorts take time" stops reading its rows)
            if self.session is not None:
                try:
                    self.session.cancelled = True
                except AttributeError:
                    pass
            self.requests.put(None)

    def _serve(self) -> None:
        number = 0
        while True:
            item = self.requests.get()
            if item is None:
                raise P.ConnectionClosed("client closed")
            ptype, status, payload = item
            if ptype == "attention":
                self.server.round_trips.wait(self.closed)
                if status > self._acked_upto:
                    # its request had already answered (or had not started)
                    self._ack_attention(status)
                continue
            number += 1
            with self._attn_lock:
                self._running = number
            try:
                self._handle(ptype, status, payload)
            finally:
                with self._attn_lock:
                    self._running = None
            if self.attention.is_set():
                self._ack_attention(number)
            if self.kill_requested is not None:
                raise P.ConnectionClosed("killed by KILL")
            if self.fatal_error:
                raise P.ConnectionClosed("fatal error (severity >= 20)")

    def _ack_attention(self, number: int) -> None:
        self._acked_upto = max(self._acked_upto, number)
        self.writer.write(T.done(T.DONE_ATTN, 0))
        self.writer.end_message()
        self.attention.clear()
        if self.session is not None:
            try:
                self.session.cancelled = False
            except AttributeError:
                pass
        self.log("attention_ack")

    # --- requests ----------------------------------------------------------
    def _round_trip(self, kind: str, text: str = "", app=None) -> None:
        """Count a client message and hold its response for the simulated
        network round trip (round_trips.py)."""
        self.server.round_trips.count(self.spid, kind, text, app)
        self.server.round_trips.wait(self.closed)

    def _handle(self, ptype: int, status: int, payload: bytes) -> None:
        w = self.writer
        kind = {P.PT_SQL_BATCH: "sql_batch", P.PT_RPC: "rpc",
                P.PT_TRANSACTION_MANAGER: "transaction_manager"}.get(ptype, "other")
        self.request_text = self._request_text(ptype, payload)     # what faults with "match" see
        self._round_trip(kind, self.request_text)
        if status & P.ST_IGNORE:
            self.log("ignored_request", packet_type=ptype)
            w.write(T.done(0, 0))
            w.end_message()
            return
        stall = self.take_fault(F.STALL, when=lambda f: f.params.get("after_rows") is None
                                and f.params.get("phase") != "login")
        if stall is not None:
            self.log("fault", fault="stall", seconds=stall.params.get("seconds"))
            self.sleep_interruptible(float(stall.params.get("seconds", 0)))
        if status & (P.ST_RESETCONNECTION | P.ST_RESETCONNECTION_SKIPTRAN):
            self._reset_session()
            w.write(T.env_bytes(T.ENV_RESET_ACK, b"", b""))
        try:
            if ptype == P.PT_SQL_BATCH:
                self._batch(D.decode_sql_batch(payload))
            elif ptype == P.PT_RPC:
                self._rpc(payload)
            elif ptype == P.PT_TRANSACTION_MANAGER:
                self._transaction_manager(payload)
            else:
                self.log("unsupported_request", packet_type=ptype)
                self._error_response(SqlError(
                    4016 if ptype == P.PT_BULK_LOAD else 8009, 16, 1,
                    "The stand-in does not support TDS packet type 0x%02X." % ptype))
        except Cancelled:
            self.log("cancelled")
        w.end_message()

    @staticmethod
    def _request_text(ptype: int, payload: bytes) -> str:
        """Text a fault's "match" is compared with: the batch SQL, or for an
        RPC the procedure names and string parameters."""
        try:
            if ptype == P.PT_SQL_BATCH:
                return D.decode_sql_batch(payload)
            if ptype == P.PT_RPC:
                parts = []
                for call in D.decode_rpc(payload):
                    parts.append(call.name)
                    parts.extend(p.value for p in call.params if isinstance(p.value, str))
                return "\n".join(parts)
        except D.DecodeError:
            pass
        return ""

    def _error_response(self, err: SqlError) -> None:
        self.writer.write(T.error(err.number, err.state, err.severity, err.message,
                                  self.server_name, err.proc or "", err.line or 1))
        self.writer.write(T.done(T.DONE_ERROR, 0))

    def _run_items(self, items, rpc: bool, last: bool = True) -> Response:
        resp = Response(self, rpc)
        try:
            resp.run(items)
        except Cancelled:
            resp.cancelled()
            raise
        except Killed:
            resp.killed(self.kill_requested)
            self.writer.end_message()
            self._close_after("KILL")
        resp.finish(last)
        return resp

    def _batch(self, sql: str) -> None:
        self.log("batch", sql=sql)
        self._run_items(self.engine.execute_batch(self.session, sql), rpc=False)

    def _rpc(self, payload: bytes) -> None:
        try:
            calls = D.decode_rpc(payload)
        except D.DecodeError as exc:
            self.log("rpc_decode_error", error=str(exc))
            self._error_response(SqlError(
                8009, 16, 1, "The incoming tabular data stream (TDS) remote procedure call (RPC) "
                "protocol stream is incorrect. %s" % exc))
            return
        for i, call in enumerate(calls):
            self.log("rpc", proc=call.name, proc_id=call.proc_id,
                     params=[{"name": p.name, "type": p.type.sql(), "value": p.value,
                              "output": p.output} for p in call.params])
            if is_prepared_proc(call.name):
                items = self.prepared.run(self.engine, self.session, call.name, call.params)
            else:
                items = self.engine.execute_rpc(self.session, call.name, call.params)
            self._run_items(items, rpc=True, last=(i == len(calls) - 1))

    def _transaction_manager(self, payload: bytes) -> None:
        """tedious beginTransaction()/commitTransaction()/... arrive as TM
        requests; the engine only knows T-SQL, so we hand it the equivalent
        statements."""
        req = D.decode_transaction_manager(payload)
        name = (" " + req.name) if req.name else ""
        if req.request_type == D.TM_BEGIN_XACT:
            sql = "BEGIN TRANSACTION" + name
            if req.isolation in _ISOLATION_SQL:
                sql = "SET TRANSACTION ISOLATION LEVEL %s; %s" % (_ISOLATION_SQL[req.isolation], sql)
        elif req.request_type == D.TM_COMMIT_XACT:
            sql = "COMMIT TRANSACTION" + name
        elif req.request_type == D.TM_ROLLBACK_XACT:
            sql = "ROLLBACK TRANSACTION" + name
        elif req.request_type == D.TM_SAVE_XACT:
            sql = "SAVE TRANSACTION" + name
        else:
            self.log("tm", request_type=req.request_type, unsupported=True)
            self._error_response(SqlError(8009, 16, 1, "Unsupported transaction manager request %d."
                                          % req.request_type))
            return
        if req.begin_again:
            sql += "; BEGIN TRANSACTION"
        self.log("tm", request_type=req.request_type, sql=sql)
        self._run_items(self.engine.execute_batch(self.session, sql), rpc=False)

    def _reset_session(self) -> None:
        """RESETCONNECTION (pooled tedious): a fresh session for the same
        login, like sp_reset_connection (rolls back an open transaction)."""
        login = self.login
        self.log("reset_connection")
        self.engine.close_session(self.session)
        self.in_transaction = False
        self.session = self.engine.login(login.user_name, login.password, login.database,
                                         login.app_name, login.host_name, language=login.language)
        try:
            self.session.spid = self.spid
        except AttributeError:
            pass

    # --- corrupt fault -----------------------------------------------------
    def send_corrupt(self, fault, enc, rows):
        """Replace a result set with a malformed or hostile one (corrupt.py).
        Returns the row count when the response stays well-formed TDS;
        otherwise closes the socket once the bytes are out."""
        kind = fault.params.get("kind", "bad_token")
        self.log("fault", fault="corrupt", kind=kind)
        sent = C.RESULT_KINDS[kind](self, enc, rows)
        if sent is not None:
            return sent
        self._close_after_corrupt(kind)

    def send_corrupt_login(self, fault) -> None:
        kind = fault.params["kind"]
        self.log("fault", fault="corrupt", kind=kind, phase="login")
        C.LOGIN_KINDS[kind](self, self.login)
        self._close_after_corrupt(kind)

    def _close_after_corrupt(self, kind: str) -> None:
        self._close_after("corrupt fault (%s)" % kind)

    def _close_after(self, why: str) -> None:
        # a moment for the bytes to reach the client before the FIN does
        time.sleep(0.05)
        self.kill()
        raise P.ConnectionClosed(why)
