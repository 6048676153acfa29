"""Simulated network round trip and request counters (issue 16).

A network model, not SQL Server behaviour (ENGINE.md "Network model"):
every response to a client message -- the PRELOGIN and LOGIN7 replies of
the handshake, each request's response, an attention's acknowledgement --
is held for rtt_ms before its first packet is written.  The request's
travel and the response's travel are folded into that single wait.

The counters say how many messages each session sent (by kind) and, per
session, how many requests began with each text prefix, so that a
benchmark can tell requests per window from requests per snapshot chunk."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Dict

KINDS = ("prelogin", "login", "sql_batch", "rpc", "transaction_manager", "attention", "other")
PREFIX_CHARS = 80        # how much of a request's text names it in by_prefix
MAX_CLOSED = 1000        # ended sessions kept for `requests`
MAX_PREFIXES = 256       # distinct prefixes kept per session (the rest: "<other>")


class SessionCounts:
    def __init__(self, spid: int):
        self.spid = spid
        self.by_kind: Counter = Counter()
        self.by_prefix: Counter = Counter()
        self.app = None

    def describe(self) -> dict:
        return {"spid": self.spid, "app": self.app,
                "requests": sum(n for k, n in self.by_kind.items() if k not in ("prelogin", "login")),
                "by_kind": dict(self.by_kind), "by_prefix": dict(self.by_prefix)}


class RoundTrips:
    """Shared by every connection of one StandinServer."""

    def __init__(self, rtt_ms: float = 0.0):
        self.set_rtt(rtt_ms)
        self._lock = threading.Lock()
        self.total: Counter = Counter()
        self.sessions: Dict[int, SessionCounts] = {}
        self.closed: Dict[int, SessionCounts] = {}     # ended sessions, until reset

    def set_rtt(self, rtt_ms) -> None:
        rtt_ms = float(rtt_ms)
        if not 0 <= rtt_ms <= 60000:
            raise ValueError("rtt_ms must be within 0..60000")
        self.rtt_ms = rtt_ms

    def wait(self, closed: threading.Event) -> None:
        """The simulated round trip before a response; ends early when the
        connection is closed."""
        delay = self.rtt_ms
        if delay > 0:
            closed.wait(delay / 1000.0)

    def count(self, spid: int, kind: str, text: str = "", app=None) -> None:
        if kind not in KINDS:
            kind = "other"
        with self._lock:
            self.total[kind] += 1
            s = self.sessions.get(spid)
            if s is None:
                s = self.sessions[spid] = SessionCounts(spid)
            if app is not None:
                s.app = app
            s.by_kind[kind] += 1
            if kind in ("sql_batch", "rpc", "transaction_manager"):
                prefix = " ".join(text.split())[:PREFIX_CHARS]
                if prefix not in s.by_prefix and len(s.by_prefix) >= MAX_PREFIXES:
                    prefix = "<other>"
                s.by_prefix[prefix] += 1

    def end_session(self, spid: int) -> None:
        with self._lock:
            s = self.sessions.pop(spid, None)
            if s is not None:
                self.closed[spid] = s
                while len(self.closed) > MAX_CLOSED:
                    del self.closed[next(iter(self.closed))]

    def describe(self) -> dict:
        with self._lock:
            total = dict(self.total)
            open_ = [s.describe() for s in self.sessions.values()]
            closed = [s.describe() for s in self.closed.values()]
        return {"rtt_ms": self.rtt_ms,
                "total": dict(total, requests=sum(n for k, n in total.items()
                                                  if k not in ("prelogin", "login"))),
                "sessions": open_, "closed_sessions": closed}

    def reset(self) -> None:
        with self._lock:
            self.total.clear()
            self.closed.clear()
            for s in self.sessions.values():
                s.by_kind.clear()
                s.by_prefix.clear()
