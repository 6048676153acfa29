"""Connection and statement log: one JSON object per line, so tests can see
exactly what a client (the worker) sent.  Kept in memory too (last N
entries) for the control command `log`."""

from __future__ import annotations

import collections
import datetime
import json
import threading
from typing import Optional


def _jsonable(value):
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, bytes):
        return "0x" + value.hex().upper()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)


class StatementLog:
    def __init__(self, path: Optional[str] = None, keep: int = 20000):
        self._lock = threading.Lock()
        self._file = open(path, "a", encoding="utf-8") if path else None
        self._recent = collections.deque(maxlen=keep)
        self._seq = 0

    def write(self, spid: int, event: str, **fields) -> None:
        with self._lock:
            self._seq += 1
            entry = {"seq": self._seq,
                     "ts": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds"),
                     "spid": spid, "event": event}
            entry.update({k: _jsonable(v) for k, v in fields.items()})
            self._recent.append(entry)
            if self._file:
                self._file.write(json.dumps(entry, ensure_ascii=False) + "\n")
                self._file.flush()

    def recent(self, since: int = 0, spid: Optional[int] = None, limit: int = 1000) -> list:
        with self._lock:
            out = [e for e in self._recent
                   if e["seq"] > since and (spid is None or e["spid"] == spid)]
        return out[-limit:]

    def close(self) -> None:
        with self._lock:
            if self._file:
                self._file.close()
                self._file = None
