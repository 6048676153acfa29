"""Shared test plumbing: an in-process stand-in (fake or real engine), a
hermetic freetds.conf, the db-lib and tedious dump clients, and a raw
TDS client for byte-level assertions."""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
STANDIN_DIR = os.path.abspath(os.path.join(HERE, "..", ".."))
CLIENTS = os.path.join(STANDIN_DIR, "tests", "clients")
sys.path.insert(0, STANDIN_DIR)
sys.path.insert(0, HERE)

from standin.control import ControlServer, Controller   # noqa: E402
from standin.tds import packets as P                     # noqa: E402
from standin.tds.decode import Reader, read_type_info, read_value   # noqa: E402
from standin.tds.login7 import build_login7              # noqa: E402
from standin.tds.server import StandinServer             # noqa: E402
from standin.tds.statement_log import StatementLog       # noqa: E402
from fake_engine import FakeEngine                       # noqa: E402

_build_lock = threading.Lock()
_work = tempfile.mkdtemp(prefix="standin-tests-")


def work_dir() -> str:
    return _work


def client_binary(name: str, lib: str) -> str:
    """Compile tests/clients/<name>.c once per test run."""
    exe = os.path.join(_work, name)
    with _build_lock:
        if not os.path.exists(exe):
            subprocess.run(["cc", "-O2", "-Wall", "-o", exe, os.path.join(CLIENTS, name + ".c"),
                            "-l" + lib], check=True)
    return exe


def dblib_binary() -> str:
    return client_binary("dblib_dump", "sybdb")


def freetds_conf(encryption: str = "off", extra: str = "") -> str:
    path = os.path.join(_work, "freetds-%s.conf" % encryption)
    with open(path, "w") as f:
        f.write("[global]\n\ttds version = 7.4\n\tencryption = %s\n\tclient charset = UTF-8\n%s"
                % (encryption, extra))
    return path


def tedious_available() -> bool:
    return (shutil.which("node") is not None and
            os.path.isdir(os.path.join(STANDIN_DIR, "node_modules", "tedious")))


class Standin:
    """A stand-in server running in this process."""

    def __init__(self, engine=None, log_path=None, **server_options):
        self.engine = engine or FakeEngine()
        self.log = StatementLog(log_path)
        self.server = StandinServer(self.engine, "127.0.0.1", 0, statement_log=self.log,
                                    **server_options).start()
        self.controller = Controller(self.server, self.engine)
        self.control = ControlServer(self.controller).start()
        self.port = self.server.port
        self.address = "127.0.0.1:%d" % self.port

    def ctl(self, cmd, **args) -> dict:
        return self.controller.handle(dict(args, cmd=cmd))

    def stop(self):
        self.server.shutdown()
        self.control.shutdown()
        self.control.server_close()
        self.log.close()


def run_dblib(standin, *sql, user="sa", password="Passw0rd!", options=(), encryption="off",
              timeout=60, env_extra=None):
    env = dict(os.environ, FREETDSCONF=freetds_conf(encryption), TDSVER="7.4")
    env.pop("TDSDUMP", None)
    if env_extra:
        env.update(env_extra)
    cmd = [dblib_binary()] + list(options) + [standin.address, user, password] + list(sql)
    p = subprocess.run(cmd, capture_output=True, timeout=timeout, env=env)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def run_tedious(standin, *steps, user="sa", password="Passw0rd!", options=(), timeout=60):
    cmd = ["node", os.path.join(CLIENTS, "tedious_dump.js")] + list(options) + \
        [standin.address, user, password] + list(steps)
    p = subprocess.run(cmd, capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def parse_dump(text: str):
    """Dump output -> list of result sets [{"cols": [...], "rows": [[...]]}]."""
    results = []
    row = None
    for line in text.splitlines():
        if line.startswith("RESULT "):
            results.append({"cols": [], "rows": []})
        elif line.startswith("COL ") and results:
            results[-1]["cols"].append(line.split(" ", 3)[3] if line.count(" ") >= 3 else "")
        elif line.startswith("ROW ") and results:
            row = []
            results[-1]["rows"].append(row)
        elif line.startswith("V ") and row is not None:
            row.append(line.split(" ", 2)[2])
    return results


# --- raw client ------------------------------------------------------------

class RawClient:
    """Minimal TDS client for byte-level tests: sends messages, returns the
    packets and token stream of each response."""

    def __init__(self, port: int, timeout: float = 10.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.packet_size = 4096

    def send(self, ptype: int, payload: bytes, status: int = 0, packet_size=None):
        self.sock.sendall(P.split_message(ptype, payload, packet_size or self.packet_size,
                                          first_status=status))

    def send_raw(self, data: bytes):
        self.sock.sendall(data)

    def read_message(self):
        """(list of (header tuple, payload), whole payload)."""
        packets = []
        while True:
            ptype, status, payload, header = self._read_packet()
            packets.append((header, payload))
            if status & P.ST_EOM:
                return packets, b"".join(p for _h, p in packets)

    def _read_packet(self):
        header = P.recv_exact(self.sock, 8)
        h = P.HEADER.unpack(header)
        payload = P.recv_exact(self.sock, h[2] - 8)
        return h[0], h[1], payload, h

    def prelogin(self, encryption=0x00):
        from standin.tds.prelogin import OPT_ENCRYPTION, OPT_VERSION
        opts = [(OPT_VERSION, b"\x0b\x00\x00\x00\x00\x00"), (OPT_ENCRYPTION, bytes([encryption]))]
        table_len = 5 * len(opts) + 1
        table, data = b"", b""
        for tok, val in opts:
            table += struct.pack(">BHH", tok, table_len + len(data), len(val))
            data += val
        self.send(P.PT_PRELOGIN, table + b"\xff" + data)
        return self.read_message()

    def login(self, user="sa", password="Passw0rd!", database="", packet_size=4096):
        self.prelogin()
        self.send(P.PT_LOGIN7, build_login7(user, password, database, packet_size=packet_size))
        packets, payload = self.read_message()
        tokens = parse_tokens(payload)
        for t in tokens:
            if t[0] == "ENVCHANGE" and t[1] == 4:
                self.packet_size = int(t[2])
        return packets, tokens

    def batch(self, sql: str, status: int = 0):
        allh = struct.pack("<IIH", 22, 18, 2) + b"\x00" * 8 + struct.pack("<I", 1)
        self.send(P.PT_SQL_BATCH, allh + sql.encode("utf-16-le"), status)

    def close(self):
        self.sock.close()


def parse_tokens(payload: bytes):
    """Token stream -> list of tuples (name, ...).  Enough for our tests."""
    r = Reader(payload)
    out = []
    cols = None
    while r.remaining():
        tok = r.u8()
        if tok in (0xFD, 0xFE, 0xFF):
            status, curcmd, count = r.unpack("<HHQ")
            out.append(({0xFD: "DONE", 0xFE: "DONEPROC", 0xFF: "DONEINPROC"}[tok], status, count))
        elif tok == 0xE3:
            n = r.u16()
            body = Reader(r.take(n))
            kind = body.u8()
            if kind in (1, 2, 4):
                out.append(("ENVCHANGE", kind, body.b_varchar(), body.b_varchar()))
            else:
                new = body.take(body.u8())
                old = body.take(body.u8())
                out.append(("ENVCHANGE", kind, new, old))
        elif tok in (0xAA, 0xAB):
            n = r.u16()
            body = Reader(r.take(n))
            number, state, cls = body.unpack("<iBB")
            text = body.us_varchar()
            server = body.b_varchar()
            proc = body.b_varchar()
            line = body.unpack("<i")[0]
            out.append(("ERROR" if tok == 0xAA else "INFO", number, state, cls, text, server, proc, line))
        elif tok == 0xAD:
            n = r.u16()
            body = Reader(r.take(n))
            iface = body.u8()
            version = struct.unpack(">I", body.take(4))[0]
            prog = body.b_varchar()
            progver = body.take(4)
            out.append(("LOGINACK", iface, version, prog, progver))
        elif tok == 0x81:
            ncols = r.u16()
            cols = []
            for _ in range(ncols):
                usertype, flags = r.unpack("<IH")
                ti = read_type_info(r, text_in_row=True)
                name = r.b_varchar()
                cols.append((name, ti, flags, usertype))
            out.append(("COLMETADATA", cols))
        elif tok == 0xD1:
            out.append(("ROW", [read_value(r, ti, text_in_row=True) for _n, ti, _f, _u in cols]))
        elif tok == 0xD2:
            bitmap = r.take((len(cols) + 7) // 8)
            vals = []
            for i, (_n, ti, _f, _u) in enumerate(cols):
                if bitmap[i >> 3] & (1 << (i & 7)):
                    vals.append(None)
                else:
                    vals.append(read_value(r, ti, text_in_row=True))
            out.append(("NBCROW", vals))
        elif tok == 0x79:
            out.append(("RETURNSTATUS", r.unpack("<i")[0]))
        elif tok == 0xAC:
            ordinal = r.u16()
            name = r.b_varchar()
            status = r.u8()
            r.unpack("<IH")
            ti = read_type_info(r)
            out.append(("RETURNVALUE", ordinal, name, status, read_value(r, ti)))
        else:
            raise ValueError("unexpected token 0x%02X at %d" % (tok, r.pos - 1))
    return out


class StandinTestCase(unittest.TestCase):
    """Starts one fake-engine stand-in per test class."""

    engine_factory = FakeEngine

    @classmethod
    def setUpClass(cls):
        cls.standin = Standin(cls.engine_factory())

    @classmethod
    def tearDownClass(cls):
        cls.standin.stop()

    def tearDown(self):
        self.standin.ctl("clear")
