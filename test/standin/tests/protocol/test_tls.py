"""TLS as SQL Server does it for TDS 7.x (ENGINE.md "TLS", standin/tds/tls.py):
the PRELOGIN ENCRYPTION table of [MS-TDS] 2.2.6.5, the handshake inside
PRELOGIN messages, login-only and full encryption, with a raw client,
FreeTDS db-lib and tedious, against good and bad certificates."""

import os
import socket
import ssl
import struct
import subprocess
import time
import unittest

import harness
from harness import RawClient, Standin, parse_tokens
from standin.tds import packets as P
from standin.tds import tls as TLS
from standin.tds.login7 import build_login7
from standin.tds.prelogin import (ENCRYPT_NOT_SUP, ENCRYPT_OFF, ENCRYPT_ON, ENCRYPT_REQ,
                                  parse_prelogin)

MAKE_CERTS = os.path.join(harness.STANDIN_DIR, "make-test-certs")


_certs = []


def certs() -> str:
    """The test CA and certificates (make-test-certs), made once per run."""
    if not _certs:
        path = os.path.join(harness.work_dir(), "certs")
        subprocess.run([MAKE_CERTS, path], check=True)
        _certs.append(path)
    return _certs[0]


def cert_pair(name):
    d = certs()
    return os.path.join(d, name + ".pem"), os.path.join(d, name + ".key")


def ca_file(name="ca"):
    return os.path.join(certs(), name + ".pem")


def dblib(standin, *sql, encryption="require", ca=None, crl=None, check_host=None):
    """dblib_dump with its own freetds.conf: encryption, "ca file", ..."""
    lines = ["[global]", "\ttds version = 7.4", "\tencryption = %s" % encryption,
             "\tclient charset = UTF-8"]
    if ca:
        lines.append("\tca file = %s" % ca)
    if crl:
        lines.append("\tcrl file = %s" % crl)
    if check_host is not None:
        lines.append("\tcheck certificate hostname = %s" % ("yes" if check_host else "no"))
    conf = os.path.join(harness.work_dir(), "freetds-tls-%d.conf" % time.monotonic_ns())
    with open(conf, "w") as f:
        f.write("\n".join(lines) + "\n")
    return harness.run_dblib(standin, *sql, env_extra={"FREETDSCONF": conf})


def events(standin, *names, since=0):
    return [e for e in standin.log.recent(since) if e["event"] in names]


class Negotiation(unittest.TestCase):
    """The table of [MS-TDS] 2.2.6.5, cell by cell."""

    def test_table(self):
        expected = {
            # client:   OFF                              ON                           NOT_SUP                                 REQ
            "off": [(ENCRYPT_OFF, TLS.MODE_LOGIN_ONLY), (ENCRYPT_ON, TLS.MODE_FULL),
                    (ENCRYPT_NOT_SUP, TLS.MODE_NONE), (ENCRYPT_ON, TLS.MODE_FULL)],
            "on": [(ENCRYPT_REQ, TLS.MODE_FULL), (ENCRYPT_ON, TLS.MODE_FULL),
                   (ENCRYPT_REQ, TLS.MODE_TERMINATE), (ENCRYPT_ON, TLS.MODE_FULL)],
            "required": [(ENCRYPT_REQ, TLS.MODE_FULL), (ENCRYPT_REQ, TLS.MODE_FULL),
                         (ENCRYPT_REQ, TLS.MODE_TERMINATE), (ENCRYPT_REQ, TLS.MODE_FULL)],
            "not-supported": [(ENCRYPT_NOT_SUP, TLS.MODE_NONE)] * 4,
        }
        for offer, row in expected.items():
            for client, want in zip((ENCRYPT_OFF, ENCRYPT_ON, ENCRYPT_NOT_SUP, ENCRYPT_REQ), row):
                self.assertEqual(TLS.negotiate(client, offer), want, (offer, client))

    def test_missing_option_is_off_and_client_certificates_are_refused(self):
        self.assertEqual(TLS.negotiate(None, "off"), (ENCRYPT_OFF, TLS.MODE_LOGIN_ONLY))
        self.assertEqual(TLS.negotiate(0x81, "off"), (ENCRYPT_REQ, TLS.MODE_TERMINATE))

    def test_offer_needs_a_certificate_and_a_private_key_file(self):
        with self.assertRaisesRegex(ValueError, "needs a certificate"):
            TLS.TlsConfig(offer="on")
        cert, key = cert_pair("server")
        self.assertEqual(TLS.TlsConfig(cert, key).offer, "off")
        loose = os.path.join(harness.work_dir(), "loose.key")
        with open(key, "rb") as src, open(loose, "wb") as dst:
            dst.write(src.read())
        os.chmod(loose, 0o644)
        with self.assertRaisesRegex(ValueError, "group or world access"):
            TLS.TlsConfig(cert, loose)


    def test_protocols_are_one_range(self):
        self.assertEqual(TLS.parse_protocols("1.2"), ("1.2",))
        self.assertEqual(TLS.parse_protocols("1.3, 1.2"), ("1.2", "1.3"))
        for bad in ("", "1.4", "1.0,1.2", "tls1.2"):
            with self.assertRaises(ValueError, msg=bad):
                TLS.parse_protocols(bad)


class TlsStandinCase(unittest.TestCase):
    """One stand-in with the test CA's server certificate, offer "off"."""

    @classmethod
    def setUpClass(cls):
        cert, key = cert_pair("server")
        cls.standin = Standin(tls=TLS.TlsConfig(cert, key))

    @classmethod
    def tearDownClass(cls):
        cls.standin.stop()

    def setUp(self):
        self.use("server", "off")
        self.standin.ctl("tls", protocols=TLS.DEFAULT_PROTOCOLS)

    def use(self, name, offer=None):
        cert, key = cert_pair(name)
        self.standin.ctl("tls", cert=cert, key=key, offer=offer)


class RawTls(TlsStandinCase):
    """Byte-level: the reply byte, packet types, the handshake and what is
    encrypted afterwards."""

    def handshake(self, client: RawClient):
        """Client side of the handshake inside PRELOGIN messages; returns
        (SSLObject, incoming BIO, outgoing BIO, packet types the server's
        handshake messages came in)."""
        ctx = ssl.create_default_context(cafile=ca_file())
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = ctx.wrap_bio(inc, out, server_hostname="127.0.0.1")
        types = []
        while True:
            try:
                obj.do_handshake()
                return obj, inc, out, types
            except ssl.SSLWantReadError:
                pass
            client.send(P.PT_PRELOGIN, out.read())
            packets, payload = client.read_message()
            types += [h[0] for h, _p in packets]
            inc.write(payload)

    def tls_send(self, client, obj, out, ptype, payload):
        obj.write(P.split_message(ptype, payload, 4096))
        client.send_raw(out.read())

    def tls_read_message(self, client, obj, inc):
        buf = b""
        parts = []
        while True:
            while len(buf) < 8 or len(buf) < struct.unpack(">H", buf[2:4])[0]:
                try:
                    buf += obj.read(65536)
                except ssl.SSLWantReadError:
                    inc.write(client.sock.recv(65536))
            length = struct.unpack(">H", buf[2:4])[0]
            parts.append(buf[8:length])
            status = buf[1]
            buf = buf[length:]
            if status & P.ST_EOM:
                return b"".join(parts)

    def test_reply_bytes_on_the_wire(self):
        for offer, client, reply in (("off", ENCRYPT_OFF, ENCRYPT_OFF), ("off", ENCRYPT_ON, ENCRYPT_ON),
                                     ("on", ENCRYPT_OFF, ENCRYPT_REQ),
                                     ("not-supported", ENCRYPT_ON, ENCRYPT_NOT_SUP)):
            self.standin.ctl("tls", offer=offer)
            c = RawClient(self.standin.port)
            packets, payload = c.prelogin(encryption=client)
            self.assertEqual(packets[0][0][0], P.PT_TABULAR)
            self.assertEqual(parse_prelogin(payload)[0x01], bytes([reply]), (offer, client))
            c.close()

    def test_forced_encryption_closes_on_a_client_without_tls(self):
        self.standin.ctl("tls", offer="on")
        c = RawClient(self.standin.port)
        _packets, payload = c.prelogin(encryption=ENCRYPT_NOT_SUP)
        self.assertEqual(parse_prelogin(payload)[0x01], bytes([ENCRYPT_REQ]))
        c.sock.settimeout(5)
        self.assertEqual(c.sock.recv(10), b"")
        c.close()

    def test_full_encryption(self):
        c = RawClient(self.standin.port)
        c.prelogin(encryption=ENCRYPT_ON)
        obj, inc, out, types = self.handshake(c)
        # [MS-TDS] 2.2.6.5: the handshake travels in PRELOGIN messages, both ways
        self.assertEqual(set(types), {P.PT_PRELOGIN})
        self.assertEqual(obj.version(), "TLSv1.2")
        self.tls_send(c, obj, out, P.PT_LOGIN7, build_login7("sa", "Passw0rd!", ""))
        tokens = parse_tokens(self.tls_read_message(c, obj, inc))
        self.assertEqual(tokens[-1], ("DONE", 0, 0))
        allh = struct.pack("<IIH", 22, 18, 2) + b"\x00" * 8 + struct.pack("<I", 1)
        self.tls_send(c, obj, out, P.PT_SQL_BATCH, allh + "rows 3".encode("utf-16-le"))
        tokens = parse_tokens(self.tls_read_message(c, obj, inc))
        self.assertEqual([t[0] for t in tokens].count("ROW") + [t[0] for t in tokens].count("NBCROW"), 3)
        # the session stays encrypted: a clear-text TDS packet is not accepted
        c.batch("rows 1")
        c.sock.settimeout(5)
        self.assertEqual(c.sock.recv(100), b"")
        c.close()
        login = events(self.standin, "login")[-1]
        self.assertEqual(login["encryption"], "full")

    def test_login_only_encryption(self):
        c = RawClient(self.standin.port)
        c.prelogin(encryption=ENCRYPT_OFF)
        obj, inc, out, _types = self.handshake(c)
        self.tls_send(c, obj, out, P.PT_LOGIN7, build_login7("sa", "Passw0rd!", ""))
        # the login response and everything after it come in clear
        _packets, payload = c.read_message()
        self.assertEqual(parse_tokens(payload)[-1], ("DONE", 0, 0))
        c.batch("rows 2")
        toks = parse_tokens(c.read_message()[1])
        self.assertEqual(toks[-1][2], 2)
        c.close()
        self.assertEqual(events(self.standin, "login")[-1]["encryption"], "login_only")

    def test_client_that_refuses_the_certificate(self):
        self.use("untrusted")
        c = RawClient(self.standin.port)
        c.prelogin(encryption=ENCRYPT_ON)
        with self.assertRaises(ssl.SSLCertVerificationError):
            self.handshake(c)
        c.close()
        deadline = time.time() + 5
        while not events(self.standin, "tls_failed") and time.time() < deadline:
            time.sleep(0.05)
        self.assertTrue(events(self.standin, "tls_failed"))


    def test_tls_1_3_alone_fails_every_tds_7_handshake(self):
        # only TLS 1.3 enabled on the machine: SQL Server uses it with TDS
        # 8.0 only, so a TDS 7.x handshake finds no version and is refused
        self.standin.ctl("tls", protocols="1.3")
        c = RawClient(self.standin.port)
        c.prelogin(encryption=ENCRYPT_ON)
        with self.assertRaisesRegex(ssl.SSLError, "PROTOCOL_VERSION|UNSUPPORTED_PROTOCOL"):
            self.handshake(c)
        c.close()
        deadline = time.time() + 5
        while not events(self.standin, "tls_failed") and time.time() < deadline:
            time.sleep(0.05)
        self.assertIn("NO_PROTOCOLS_AVAILABLE", events(self.standin, "tls_failed")[-1]["error"])


class FreeTdsTls(TlsStandinCase):
    """FreeTDS 1.3 db-lib: encryption = require with "ca file" validates
    the certificate; request gets login-only encryption."""

    def test_require_with_the_test_ca(self):
        since = self.standin.log.recent()[-1]["seq"] if self.standin.log.recent() else 0
        rc, out, err = dblib(self.standin, "rows 3", ca=ca_file())
        self.assertEqual(rc, 0, out + err)
        self.assertIn("ROW 2", out)
        prelogin = events(self.standin, "prelogin", since=since)[-1]
        self.assertEqual((prelogin["encryption"], prelogin["reply"], prelogin["tls"]),
                         (ENCRYPT_ON, ENCRYPT_ON, "full"))
        hs = events(self.standin, "tls_handshake", since=since)[-1]
        self.assertEqual(hs["protocol"], "TLSv1.2")

    def test_large_result_and_cancel_under_tls(self):
        rc, out, err = dblib(self.standin, "rows 20000", ca=ca_file())
        self.assertEqual(rc, 0, out + err)
        self.assertIn("ROW 19999", out)
        # ATTENTION inside TLS while the server is still writing
        rc, out, err = harness.run_dblib(
            self.standin, "slow 500 10", "rows 2", options=["-x", "3"],
            env_extra={"FREETDSCONF": self._conf()})
        self.assertEqual(rc, 0, out + err)
        self.assertIn("CANCELLED", out)
        self.assertIn("ROW 1", out)

    def _conf(self):
        path = os.path.join(harness.work_dir(), "freetds-tls-require.conf")
        with open(path, "w") as f:
            f.write("[global]\n\ttds version = 7.4\n\tencryption = require\n\tca file = %s\n" % ca_file())
        return path

    def test_request_gets_login_only_encryption(self):
        rc, out, err = dblib(self.standin, "rows 1", encryption="request")
        self.assertEqual(rc, 0, out + err)
        prelogin = events(self.standin, "prelogin")[-1]
        self.assertEqual((prelogin["encryption"], prelogin["reply"], prelogin["tls"]),
                         (ENCRYPT_OFF, ENCRYPT_OFF, "login_only"))
        self.assertEqual(events(self.standin, "login")[-1]["encryption"], "login_only")

    def test_forced_encryption_with_request_is_full(self):
        self.standin.ctl("tls", offer="on")
        rc, out, err = dblib(self.standin, "rows 1", encryption="request", ca=ca_file())
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(events(self.standin, "login")[-1]["encryption"], "full")

    def test_required_answer_is_full_encryption_too(self):
        self.standin.ctl("tls", offer="required")
        rc, out, err = dblib(self.standin, "rows 1", ca=ca_file())
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(events(self.standin, "prelogin")[-1]["reply"], ENCRYPT_REQ)
        self.assertEqual(events(self.standin, "login")[-1]["encryption"], "full")

    def test_encryption_off_against_forced_encryption_fails(self):
        self.standin.ctl("tls", offer="on")
        rc, out, _err = dblib(self.standin, "rows 1", encryption="off")
        self.assertNotEqual(rc, 0)
        self.assertIn("ERR 20002", out)
        self.assertEqual(events(self.standin, "prelogin")[-1]["tls"], "terminate")

    def test_require_against_a_server_without_tls_fails(self):
        self.standin.ctl("tls", offer="not-supported")
        n_logins = len(events(self.standin, "login"))
        rc, out, _err = dblib(self.standin, "rows 1", ca=ca_file())
        self.assertNotEqual(rc, 0)
        self.assertIn("ERR 20002", out)
        self.assertEqual(len(events(self.standin, "login")), n_logins)
        self.assertEqual(events(self.standin, "prelogin")[-1]["reply"], ENCRYPT_NOT_SUP)

    def test_bad_certificates_are_refused(self):
        for name in ("untrusted", "expired", "notyet", "wronghost"):
            self.use(name)
            n_logins = len(events(self.standin, "login"))
            rc, out, _err = dblib(self.standin, "rows 1", ca=ca_file())
            self.assertNotEqual(rc, 0, name)
            self.assertIn("ERR 20002", out, name)
            self.assertEqual(len(events(self.standin, "login")), n_logins, name)

    def test_revoked_needs_the_crl(self):
        self.use("revoked")
        rc, out, _err = dblib(self.standin, "rows 1", ca=ca_file(), crl=os.path.join(certs(), "crl.pem"))
        self.assertNotEqual(rc, 0)
        self.assertIn("ERR 20002", out)
        rc, out, err = dblib(self.standin, "rows 1", ca=ca_file())
        self.assertEqual(rc, 0, out + err)

    def test_enabled_tls_versions(self):
        # TLS 1.3 alone: no handshake, no login
        self.standin.ctl("tls", protocols="1.3")
        n_logins = len(events(self.standin, "login"))
        rc, out, _err = dblib(self.standin, "rows 1", ca=ca_file())
        self.assertNotEqual(rc, 0)
        self.assertIn("ERR 20002", out)
        self.assertEqual(len(events(self.standin, "login")), n_logins)
        # TLS 1.0 alone (SQL Server before its TLS 1.2 updates): FreeTDS
        # 1.3 ("enable tls v1 = yes" by default) still negotiates it
        self.standin.ctl("tls", protocols="1.0")
        rc, out, err = dblib(self.standin, "rows 1", ca=ca_file())
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(events(self.standin, "tls_handshake")[-1]["protocol"], "TLSv1")
        self.standin.ctl("tls", protocols="1.2,1.3")
        rc, out, err = dblib(self.standin, "rows 1", ca=ca_file())
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(events(self.standin, "tls_handshake")[-1]["protocol"], "TLSv1.2")

    def test_host_name_check_can_be_switched_off(self):
        self.use("wronghost")
        rc, out, err = dblib(self.standin, "rows 1", ca=ca_file(), check_host=False)
        self.assertEqual(rc, 0, out + err)

    def test_without_ca_file_freetds_does_not_validate(self):
        # why mssql_cdc always names a CA (or "system") when it validates
        self.use("untrusted")
        rc, out, err = dblib(self.standin, "rows 1")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(events(self.standin, "login")[-1]["encryption"], "full")


@unittest.skipUnless(harness.tedious_available(), "tedious not installed")
class TediousTls(TlsStandinCase):
    def tedious(self, *steps, ca=True, encrypt="true"):
        opts = ["--encrypt", encrypt] + (["--ca", ca_file()] if ca else [])
        return harness.run_tedious(self.standin, *steps, options=opts)

    def test_encrypt_true_with_the_test_ca(self):
        rc, out, err = self.tedious("rows 2")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("TLS TLSv1.2 ", out)
        self.assertIn("ROWCOUNT 2", out)
        prelogin = events(self.standin, "prelogin")[-1]
        self.assertEqual((prelogin["encryption"], prelogin["tls"]), (ENCRYPT_ON, "full"))

    def test_cancel_under_tls(self):
        rc, out, err = harness.run_tedious(self.standin, "slow 500 10", "rows 1",
                                           options=["--encrypt", "true", "--ca", ca_file(),
                                                    "--cancel-after", "3"])
        self.assertEqual(rc, 0, out + err)
        self.assertIn("ERROR ECANCEL", out)
        self.assertIn("ROWCOUNT 1", out)

    def test_bad_certificates_are_refused(self):
        for name, message in (("untrusted", "unable to verify the first certificate"),
                              ("expired", "certificate has expired"),
                              ("wronghost", "does not match certificate's altnames")):
            self.use(name)
            rc, out, _err = self.tedious("rows 1")
            self.assertNotEqual(rc, 0, name)
            self.assertIn("FAIL login ESOCKET", out, name)
            self.assertIn(message, out, name)

    def test_encrypt_false_against_forced_encryption(self):
        self.standin.ctl("tls", offer="on")
        rc, out, _err = self.tedious("rows 1", encrypt="false")
        self.assertNotEqual(rc, 0)
        self.assertIn("FAIL login", out)


if __name__ == "__main__":
    unittest.main()
