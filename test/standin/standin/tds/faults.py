"""Fault injection state shared by all connections (set through the control
port).

A fault applies to every connection (spid=None) or to one SPID, and with
scope "all" (default), "existing" (connections open when it was set) or
"new" (connections logged in after it was set), and optionally only to
requests whose text contains `match` (case-insensitive), e.g. the worker's
fn_cdc_get_all_changes query.  One-shot faults are
consumed by the first connection that hits them; times=-1 keeps a fault
until `clear`.  refuse_logins is a switch, not a one-shot fault."""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import List, Optional

# Fault kinds a connection looks up at its trigger points.
DROP_AFTER_ROWS = "drop_after_rows"   # at the start of the next result set
STALL = "stall"                       # before the next response, or mid-result
CORRUPT = "corrupt"                   # the next result set, or the login response

# The corrupt kinds themselves live in corrupt.py (RESULT_KINDS / LOGIN_KINDS).
SCOPES = ("all", "existing", "new")


@dataclass
class Fault:
    id: int
    kind: str
    params: dict
    spid: Optional[int]
    scope: str
    remaining: int                    # -1 = unlimited
    existing: frozenset               # SPIDs open when the fault was set
    created: float = field(default_factory=time.time)
    hits: int = 0

    def applies_to(self, spid: int, request_text: str = "") -> bool:
        if self.spid is not None and self.spid != spid:
            return False
        match = self.params.get("match")
        if match and match.lower() not in (request_text or "").lower():
            return False
        if self.scope == "existing":
            return spid in self.existing
        if self.scope == "new":
            return spid not in self.existing
        return True

    def describe(self) -> dict:
        return {"id": self.id, "kind": self.kind, "params": self.params, "spid": self.spid,
                "scope": self.scope, "remaining": self.remaining, "hits": self.hits}


class FaultRegistry:
    def __init__(self):
        self._lock = threading.Lock()
        self._faults: List[Fault] = []
        self._ids = itertools.count(1)
        self.refuse_logins = False
        self.refuse_mode = "error"       # "error" (18456) or "close"
        self.down_until = 0.0            # restart: refuse TCP sessions until then
        self._holds = {}                 # hold id -> (event, description): stalls waiting for `release`
        self._hold_ids = itertools.count(1)

    def add(self, kind: str, params: dict, open_spids, spid: Optional[int] = None,
            scope: str = "all", times: int = 1) -> Fault:
        if scope not in SCOPES:
            raise ValueError("scope must be one of %s" % ", ".join(SCOPES))
        if times == 0 or times < -1:
            raise ValueError("times must be a positive count or -1 (unlimited)")
        fault = Fault(next(self._ids), kind, dict(params), spid, scope, times,
                      frozenset(open_spids))
        with self._lock:
            self._faults.append(fault)
        return fault

    def take(self, kind: str, spid: int, request_text: str = "", when=None) -> Optional[Fault]:
        """Consume one use of the oldest matching fault.  `request_text` is
        the SQL (or procedure name + statement) of the running request, for
        faults with a "match" substring; `when(fault)` can narrow the match
        (e.g. stall before the response vs. mid-result)."""
        with self._lock:
            for fault in self._faults:
                if fault.kind != kind or not fault.applies_to(spid, request_text):
                    continue
                if when is not None and not when(fault):
                    continue
                fault.hits += 1
                if fault.remaining > 0:
                    fault.remaining -= 1
                    if fault.remaining == 0:
                        self._faults.remove(fault)
                return fault
        return None

    def peek(self, kind: str, spid: int, request_text: str = "", when=None) -> Optional[Fault]:
        """The oldest matching fault, not consumed (see consume)."""
        with self._lock:
            for fault in self._faults:
                if fault.kind == kind and fault.applies_to(spid, request_text) and (when is None or when(fault)):
                    return fault
        return None

    def consume(self, fault: Fault) -> bool:
        """Use one use of a fault found by peek; False when another
        connection used it up meanwhile."""
        with self._lock:
            if fault not in self._faults:
                return False
            fault.hits += 1
            if fault.remaining > 0:
                fault.remaining -= 1
                if fault.remaining == 0:
                    self._faults.remove(fault)
            return True

    def clear(self, kind: Optional[str] = None, spid: Optional[int] = None) -> int:
        with self._lock:
            keep = [f for f in self._faults
                    if (kind is not None and f.kind != kind)
                    or (spid is not None and f.spid != spid)]
            removed = len(self._faults) - len(keep)
            self._faults = keep
            if kind in (None, "refuse_logins") and spid is None:
                self.refuse_logins = False
                self.refuse_mode = "error"
                self.down_until = 0.0
        return removed

    def list(self) -> List[dict]:
        with self._lock:
            return [f.describe() for f in self._faults]

    # --- stalls held until released (stall hold=true, control `release`) ----
    def hold_begin(self, spid: int, rows_sent: int) -> (int, threading.Event):
        event = threading.Event()
        with self._lock:
            hold_id = next(self._hold_ids)
            self._holds[hold_id] = (event, {"hold": hold_id, "spid": spid, "rows_sent": rows_sent,
                                            "since": time.time()})
        return hold_id, event

    def hold_end(self, hold_id: int) -> None:
        with self._lock:
            self._holds.pop(hold_id, None)

    def held(self) -> List[dict]:
        with self._lock:
            return [dict(d) for _, d in self._holds.values()]

    def release(self, spid: Optional[int] = None) -> int:
        """Let held stalls go on (all, or those of one connection)."""
        with self._lock:
            events = [e for e, d in self._holds.values() if spid is None or d["spid"] == spid]
        for e in events:
            e.set()
        return len(events)

    def is_down(self) -> bool:
        return time.time() < self.down_until
