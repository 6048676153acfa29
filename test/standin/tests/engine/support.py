"""Helpers for engine tests: run T-SQL against an Engine without sockets."""

from __future__ import annotations

import logging
import os
import sys
import unittest

# keep expected "unsupported T-SQL" warnings out of the test output
logging.getLogger("standin.unsupported").addHandler(logging.NullHandler())
logging.getLogger("standin.unsupported").propagate = False

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from standin.engine import Engine                                       # noqa: E402
from standin.results import (CachedRow, Done, EngineConfig, EnvChange, Message,  # noqa: E402
                             ResultSet, ReturnStatus, ReturnValue, RowCount, RpcParam, SqlError)

__all__ = ["CachedRow", "Done", "Engine", "EngineConfig", "EngineTest", "EnvChange", "LOGINS", "Message",
           "ResultSet", "ReturnStatus", "ReturnValue", "RowCount", "RpcParam", "SqlError", "materialize"]

LOGINS = {"sa": "Passw0rd!", "owner": "Own3r!", "reader": "Read3r!", "nobody": "N0body!"}


def materialize(items):
    """Pull every item (and every row) of an engine generator."""
    out = []
    for it in items:
        if isinstance(it, ResultSet):
            rows = [r.values if isinstance(r, CachedRow) else r for r in it.rows]
            out.append(ResultSet(it.columns, rows))
        else:
            out.append(it)
    return out


class EngineTest(unittest.TestCase):
    """Fresh engine per test; the capture job only runs on capture_now."""

    databases = ["cdcdb"]

    def setUp(self):
        self.engine = Engine(EngineConfig(databases=list(self.databases), logins=dict(LOGINS),
                                          capture_interval=3600))
        self.s = self.engine.login("sa", "Passw0rd!", "cdcdb", "test", "host")

    def tearDown(self):
        self.engine.shutdown()

    def session(self, user="sa", db="cdcdb"):
        return self.engine.login(user, LOGINS[user], db, "test", "host")

    def run_sql(self, sql, session=None):
        return materialize(self.engine.execute_batch(session or self.s, sql))

    def ok(self, sql, session=None):
        items = self.run_sql(sql, session)
        errs = [i for i in items if isinstance(i, SqlError)]
        if errs:
            self.fail("unexpected error for %r: %r" % (sql, errs))
        return items

    def rows(self, sql, session=None, index=0):
        sets = [i for i in self.ok(sql, session) if isinstance(i, ResultSet)]
        return sets[index].rows

    def scalar(self, sql, session=None):
        return self.rows(sql, session)[0][0]

    def error(self, sql, number, session=None):
        items = self.run_sql(sql, session)
        errs = [i for i in items if isinstance(i, SqlError)]
        self.assertTrue(errs, "expected error %d for %r, got %r" % (number, sql, items))
        self.assertEqual(errs[0].number, number, "%r -> %r" % (sql, errs))
        return errs[0], items

    def capture(self):
        return self.engine.control("capture_now", {})["published"]

    def enable_cdc(self, table="orders", schema="dbo", extra=""):
        if not self.engine.databases["cdcdb"].is_cdc_enabled:
            self.ok("EXEC sys.sp_cdc_enable_db")
        self.ok("EXEC sys.sp_cdc_enable_table @source_schema = N'%s', @source_name = N'%s', "
                "@role_name = NULL%s" % (schema, table, extra))

    def lsn_window(self, ci="dbo_orders"):
        mn = self.scalar("SELECT sys.fn_cdc_get_min_lsn(N'%s')" % ci)
        mx = self.scalar("SELECT sys.fn_cdc_get_max_lsn()")
        return mn, mx

    def changes(self, ci="dbo_orders", cols="*", option="all update old", frm=None, to=None):
        mn, mx = self.lsn_window(ci)
        frm = frm or mn
        to = to or mx
        return self.rows("SELECT %s FROM cdc.fn_cdc_get_all_changes_%s(0x%s, 0x%s, N'%s') "
                         "ORDER BY __$start_lsn, __$seqval, __$operation"
                         % (cols, ci, frm.hex(), to.hex(), option))
