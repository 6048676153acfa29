"""Turns the engine's result items into one response message: DONE/DONEPROC/
DONEINPROC placement (MORE on all but the last, COUNT, ERROR, INXACT), rows
streamed while they are produced, attention and mid-result faults.

Why a "pending DONE": whether a DONE needs the MORE bit is only known when
the next item (or the end) arrives, and FreeTDS hangs if the last DONE of a
response still says MORE."""

from __future__ import annotations

import itertools
import traceback

from ..results import (Done, EnvChange, Message, ResultSet,
                       ReturnStatus, ReturnValue, RowCount, SqlError)
from . import faults as F
from . import tokens as T
from .encode import row_encoder
from .packets import ConnectionClosed
from .textsize import session_textsize, truncating_rows

ROW_CHUNK = 256   # rows encoded per step; attention is checked between steps


class Cancelled(Exception):
    """ATTENTION arrived: stop producing this response."""


class Response:
    def __init__(self, conn, rpc: bool):
        self.conn = conn
        self.w = conn.writer
        self.rpc = rpc
        self.pending = None         # (token, status, count) not yet written
        self.error_seen = False     # an ERROR since the last DONE
        self.return_status_seen = False

    # --- DONE bookkeeping --------------------------------------------------
    def _status_extra(self) -> int:
        return T.DONE_INXACT if self.conn.in_transaction else 0

    def flush_pending(self, more: bool = True) -> None:
        if self.pending is not None:
            token, status, count = self.pending
            if more:
                status |= T.DONE_MORE
            self.w.write(T.done(status | self._status_extra(), count, token))
            self.pending = None

    def _set_done(self, status: int, count: int = 0) -> None:
        self.flush_pending()
        if self.error_seen:
            status |= T.DONE_ERROR
            self.error_seen = False
        token = T.TOKEN_DONEINPROC if self.rpc else T.TOKEN_DONE
        self.pending = (token, status, count)

    # --- items -------------------------------------------------------------
    def run(self, items) -> None:
        """Write every item; raises Cancelled on attention (the caller ends
        the message and sends the attention ack)."""
        conn = self.conn
        try:
            for item in items:
                if conn.attention.is_set():
                    raise Cancelled()
                self.item(item)
            if conn.attention.is_set():
                raise Cancelled()
        except SqlError as err:
            # The engine raised instead of yielding: same wire result.
            self.item(err)
        except (Cancelled, ConnectionClosed):
            raise
        except Exception as exc:
            # An engine bug must still end the response cleanly, or the
            # client hangs; the log keeps the details.
            conn.log("internal_error", error=repr(exc), traceback=traceback.format_exc())
            self.item(SqlError(50000, 16, 1, "stand-in internal error: %r" % (exc,)))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    def item(self, item) -> None:
        conn = self.conn
        if isinstance(item, ResultSet):
            self.flush_pending()
            sent = self.result_set(item)
            # SET NOCOUNT ON (the engine's session.nocount): no COUNT bit
            nocount = getattr(conn.session, "nocount", False) is True
            self._set_done(0 if nocount else T.DONE_COUNT, sent)
        elif isinstance(item, RowCount):
            self._set_done(T.DONE_COUNT, item.count)
        elif isinstance(item, Done):
            self._set_done(0, 0)
        elif isinstance(item, SqlError):
            self.flush_pending()
            self.w.write(T.error(item.number, item.state, item.severity, item.message,
                                 conn.server_name, item.proc or "", item.line or 1))
            self.error_seen = True
            if item.severity >= 20:
                conn.fatal_error = True     # SQL Server ends the session
        elif isinstance(item, Message):
            self.flush_pending()
            write = T.error if item.severity > 10 else T.info
            self.w.write(write(item.number, item.state, item.severity, item.message,
                               conn.server_name, item.proc or "", item.line or 1))
        elif isinstance(item, EnvChange):
            self.flush_pending()
            self.w.write(conn.envchange_token(item))
        elif isinstance(item, ReturnStatus):
            self.flush_pending()
            self.w.write(T.returnstatus(item.value))
            self.return_status_seen = True
        elif isinstance(item, ReturnValue):
            self.flush_pending()
            self.w.write(T.returnvalue(item.ordinal, item.name, item.type, item.value))
        else:
            raise TypeError("engine yielded an unknown item %r" % (item,))

    def result_set(self, rs: ResultSet) -> int:
        conn = self.conn
        enc = row_encoder(rs.columns)
        drop = conn.take_fault(F.DROP_AFTER_ROWS)
        corrupt = conn.take_fault(F.CORRUPT, when=lambda f: f.params.get("phase") != "login")
        stall = conn.take_fault(F.STALL, when=lambda f: f.params.get("after_rows") is not None
                                and not f.params.get("hold") and f.params.get("phase") != "login")
        # a held stall is used only by a result that reaches its row count:
        # shorter results (the same query on an empty window) leave it armed
        hold = None
        if stall is None:
            hold = conn.server.faults.peek(F.STALL, conn.spid, conn.request_text,
                                           when=lambda f: f.params.get("hold") and f.params.get("phase") != "login")
        if hold is not None:
            stall = hold
        if corrupt is not None:
            # the rows the malformed result carried instead (or no return)
            return conn.send_corrupt(corrupt, enc, rs.rows)
        self.w.write(enc.metadata)
        limit = None if drop is None else int(drop.params.get("rows", 0))
        stall_at = None if stall is None else int(stall.params["after_rows"])
        sent = 0
        if stall_at is not None and stall_at <= 0:
            if hold is None or conn.server.faults.consume(hold):
                self._stall_now(stall, 0)
            stall_at = None
        rows = rs.rows
        textsize = session_textsize(conn.session, conn.server.default_textsize)
        if textsize is not None:
            rows = truncating_rows(rs.columns, rows, textsize)
        it = iter(rows)
        encode_rows = enc.encode_rows
        write = self.w.write
        attention = conn.attention
        try:
            while True:
                n = ROW_CHUNK
                if limit is not None:
                    n = min(n, limit - sent)
                if stall_at is not None:
                    n = min(n, stall_at - sent)
                if n <= 0:
                    break
                chunk = list(itertools.islice(it, n))
                if not chunk:
                    break
                write(encode_rows(chunk))
                sent += len(chunk)
                if stall_at is not None and sent >= stall_at:
                    if hold is None or conn.server.faults.consume(hold):
                        self._stall_now(stall, sent)
                    stall_at = None
                if attention.is_set():
                    raise Cancelled()
            if limit is not None:
                # after `rows` rows, or at the end of a shorter result (before
                # its DONE): the fault always fires on the result it took
                conn.log("fault", fault="drop_after_rows", rows=sent)
                self.w.flush_partial()
                conn.kill()
                raise ConnectionClosed("drop_after_rows fault")
        finally:
            close = getattr(it, "close", None)
            if close is not None and (limit is not None or attention.is_set()):
                close()
        return sent

    def _stall_now(self, stall, rows_sent: int) -> None:
        """Mid-result stall: everything so far reaches the client (packets
        without EOM), then silence with the socket open."""
        self.conn.log("fault", fault="stall", after_rows=rows_sent,
                      seconds=stall.params.get("seconds"), hold=bool(stall.params.get("hold")))
        self.w.flush_partial()
        if stall.params.get("hold"):
            # until the control command `release` (seconds: the longest hold)
            registry = self.conn.server.faults
            hold_id, released = registry.hold_begin(self.conn.spid, rows_sent)
            try:
                self.conn.sleep_interruptible(float(stall.params.get("seconds", 0)), released)
            finally:
                registry.hold_end(hold_id)
            return
        self.conn.sleep_interruptible(float(stall.params.get("seconds", 0)))

    def finish(self, last: bool = True) -> None:
        """End of a batch or of one RPC call."""
        if self.rpc:
            self.flush_pending(more=True)
            if not self.return_status_seen:
                self.w.write(T.returnstatus(0))
            status = 0 if last else T.DONE_MORE
            if self.error_seen:
                status |= T.DONE_ERROR
            self.w.write(T.done(status | self._status_extra(), 0, T.TOKEN_DONEPROC))
            return
        if self.pending is not None:
            if self.error_seen:
                token, status, count = self.pending
                self.pending = (token, status | T.DONE_ERROR, count)
            self.flush_pending(more=not last)
        else:
            status = T.DONE_ERROR if self.error_seen else 0
            if not last:
                status |= T.DONE_MORE
            self.w.write(T.done(status | self._status_extra(), 0))

    def cancelled(self) -> None:
        """Close the interrupted response with a final DONE (the ATTN ack
        follows as its own message)."""
        self.pending = None
        self.w.write(T.done(self._status_extra(), 0))
