"""Control port: newline-delimited JSON over TCP on 127.0.0.1.

Request  {"cmd": "...", ...args}
Reply    {"ok": true, ...} or {"ok": false, "error": "..."}

Protocol-side commands are handled here (faults, connections, log,
shutdown); every other command goes to engine.control(cmd, args)."""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from typing import Callable, Optional

from . import heap
from .tds import corrupt as C
from .tds import faults as F
from .tds.server import KILL_NOTICES


class ControlError(Exception):
    pass


def _int_or_none(value):
    return None if value is None else int(value)


def _flag(value) -> bool:
    if isinstance(value, str):
        return value.lower() in ("1", "true", "on", "yes")
    return bool(value)


class Controller:
    """Executes control commands against a StandinServer and its engine."""

    def __init__(self, server, engine, on_shutdown: Optional[Callable[[], None]] = None):
        self.server = server
        self.engine = engine
        self.on_shutdown = on_shutdown
        self.shutdown_requested = threading.Event()

    def _add_fault(self, kind: str, args: dict, params: dict) -> dict:
        if args.get("match"):
            params["match"] = str(args["match"])
        fault = self.server.faults.add(
            kind, params, self.server.open_spids(), spid=_int_or_none(args.get("spid")),
            scope=args.get("scope", "all"), times=int(args.get("times", 1)))
        self.server.log.write(0, "control", cmd=kind, args=args, fault_id=fault.id)
        return {"fault": fault.describe()}

    def handle(self, request: dict) -> dict:
        if not isinstance(request, dict) or "cmd" not in request:
            raise ControlError('request must be a JSON object with "cmd"')
        args = dict(request)
        cmd = args.pop("cmd")
        faults = self.server.faults
        if cmd == "ping":
            return {"port": self.server.port}
        if cmd == "connections":
            return {"connections": self.server.describe_connections()}
        if cmd == "faults":
            return {"faults": faults.list(), "refuse_logins": faults.refuse_logins,
                    "refuse_mode": faults.refuse_mode, "held": faults.held()}
        if cmd == "release":
            released = faults.release(_int_or_none(args.get("spid")))
            self.server.log.write(0, "control", cmd=cmd, args=args)
            return {"released": released}
        if cmd == "log":
            return {"entries": self.server.log.recent(int(args.get("since", 0)),
                                                      _int_or_none(args.get("spid")),
                                                      int(args.get("limit", 1000)))}
        if cmd == "drop_after_rows":
            rows = int(args.get("rows", 0))
            if rows < 0:
                raise ControlError("rows must be >= 0")
            return self._add_fault(F.DROP_AFTER_ROWS, args, {"rows": rows})
        if cmd == "stall":
            seconds = float(args.get("seconds", 0))
            if seconds < 0:
                raise ControlError("seconds must be >= 0")
            params = {"seconds": seconds}
            if args.get("after_rows") is not None:
                params["after_rows"] = int(args["after_rows"])
            if _flag(args.get("hold")):
                # held until `release`; seconds bounds the hold (default 300)
                if "after_rows" not in params:
                    raise ControlError("hold needs after_rows (a stall in the middle of a result)")
                params["hold"] = True
                if "seconds" not in args:
                    params["seconds"] = 300.0
            if args.get("phase") is not None:
                if args["phase"] not in ("request", "login"):
                    raise ControlError('phase must be "request" or "login"')
                if args["phase"] == "login" and "after_rows" in params:
                    raise ControlError("after_rows cannot be combined with phase=login")
                params["phase"] = args["phase"]
            return self._add_fault(F.STALL, args, params)
        if cmd == "corrupt":
            kind = args.get("kind", "bad_token")
            if kind not in C.ALL_KINDS:
                raise ControlError("kind must be one of %s" % ", ".join(C.ALL_KINDS))
            # login kinds replace the login response, the others a result set
            params = {"kind": kind, "phase": "login" if kind in C.LOGIN_KINDS else "result"}
            return self._add_fault(F.CORRUPT, args, params)
        if cmd == "refuse_logins":
            on = args.get("on", True)
            if isinstance(on, str):
                on = on.lower() in ("1", "true", "on", "yes")
            mode = args.get("mode", "error")
            if mode not in ("error", "close"):
                raise ControlError('mode must be "error" or "close"')
            faults.refuse_logins = bool(on)
            faults.refuse_mode = mode
            self.server.log.write(0, "control", cmd=cmd, args=args)
            return {"refuse_logins": faults.refuse_logins, "mode": mode}
        if cmd == "restart":
            down = float(args.get("down_seconds", 0))
            faults.down_until = time.time() + down if down > 0 else 0.0
            self.server.log.write(0, "control", cmd=cmd, args=args)
            closed = self.server.kill_all()
            return {"closed_connections": closed, "down_seconds": down}
        if cmd == "kill":
            spid = int(args["spid"])
            if not self.server.kill(spid):
                raise ControlError("no connection with spid %d" % spid)
            self.server.log.write(0, "control", cmd=cmd, args=args)
            return {"killed": spid}
        if cmd == "kill_notice":
            notice = args.get("notice", "done_error")
            if notice not in KILL_NOTICES:
                raise ControlError("notice must be one of %s" % ", ".join(KILL_NOTICES))
            self.server.kill_notice = notice
            self.server.log.write(0, "control", cmd=cmd, args=args)
            return {"kill_notice": notice}
        if cmd == "clear":
            removed = faults.clear(args.get("kind"), _int_or_none(args.get("spid")))
            self.server.log.write(0, "control", cmd=cmd, args=args)
            return {"removed": removed}
        if cmd == "tls":
            # what the server offers and with which certificate, for the
            # connections that log in from now on
            try:
                self.server.tls.configure(args.get("cert"), args.get("key"), args.get("offer"),
                                         args.get("protocols"))
            except (ValueError, OSError) as exc:
                raise ControlError(str(exc)) from exc
            self.server.log.write(0, "control", cmd=cmd, args=args)
            return {"tls": self.server.tls.describe()}
        if cmd == "rtt":
            # the simulated network round trip (tds/round_trips.py), for
            # every response from now on
            if args.get("ms") is not None:
                self.server.round_trips.set_rtt(args["ms"])
            self.server.log.write(0, "control", cmd=cmd, args=args)
            return {"rtt_ms": self.server.round_trips.rtt_ms}
        if cmd == "user_connections":
            # sp_configure 'user connections': at most this many sessions
            # logged in at once, 0 = SQL Server's default (32,767); a login
            # beyond it gets error 17809 and is closed (ENGINE.md)
            if args.get("max") is not None:
                n = _int_or_none(args.get("max"))
                if n is None or not 0 <= n <= 32767:
                    raise ControlError("max must be within 0..32767")
                self.server.user_connections = n
            self.server.log.write(0, "control", cmd=cmd, args=args)
            return {"user_connections": self.server.user_connections,
                    "logged_in": self.server.logged_in_count()}
        if cmd == "heap":
            # the garbage collector's policy and state (standin/heap.py)
            return {"heap": heap.describe()}
        if cmd == "requests":
            # messages per session and in total; reset=true zeroes them after reading
            out = self.server.round_trips.describe()
            if _flag(args.get("reset")):
                self.server.round_trips.reset()
            return out
        if cmd == "shutdown":
            # acted on after the reply is written (see _Handler), so the
            # caller always gets its {"ok": true}
            self.server.log.write(0, "control", cmd=cmd)
            self.shutdown_requested.set()
            return {}
        # Engine-side commands: capture_freeze, fill_table, cleanup, stats...
        result = self.engine.control(cmd, args)
        self.server.log.write(0, "control", cmd=cmd, args=args)
        if cmd == "restore" and not _flag(args.get("keep_connections")):
            # RESTORE takes the database offline: its connections are closed
            closed = 0
            for c in self.server.describe_connections():
                if (c.get("database") or "").lower() == str(result.get("database", "")).lower():
                    closed += self.server.kill(c["spid"])
            result = dict(result, closed_connections=closed)
        if result is None:
            result = {}
        if not isinstance(result, dict):
            result = {"result": result}
        result = dict(result)
        result.pop("ok", None)
        return result

    def handle_line(self, line: bytes) -> bytes:
        try:
            request = json.loads(line.decode("utf-8"))
            reply = {"ok": True}
            reply.update(self.handle(request))
        except Exception as exc:   # every failure becomes a JSON error reply
            msg = str(exc) or exc.__class__.__name__
            if isinstance(exc, KeyError):
                msg = "missing argument %s" % exc
            reply = {"ok": False, "error": msg}
        return (json.dumps(reply, default=str) + "\n").encode("utf-8")


class _Handler(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            if not line.strip():
                continue
            controller = self.server.controller
            self.wfile.write(controller.handle_line(line))
            self.wfile.flush()
            if controller.shutdown_requested.is_set() and controller.on_shutdown is not None:
                controller.on_shutdown()


class ControlServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, controller: Controller, host: str = "127.0.0.1", port: int = 0):
        super().__init__((host, port), _Handler)
        self.controller = controller
        self.port = self.server_address[1]

    def start(self) -> "ControlServer":
        threading.Thread(target=self.serve_forever, name="control", daemon=True).start()
        return self


def call(port: int, cmd: str, host: str = "127.0.0.1", timeout: float = 30.0, **args) -> dict:
    """Client helper: send one command, return the reply dict."""
    request = dict(args, cmd=cmd)
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall((json.dumps(request) + "\n").encode("utf-8"))
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    return json.loads(buf.decode("utf-8"))
