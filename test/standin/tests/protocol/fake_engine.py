"""A tiny stand-in for standin.engine.Engine, used to test the protocol layer
alone.  It does not parse SQL: it recognises a handful of fixed commands.

  matrix                 the type matrix (one result set per type)
  rows N [cached]        N narrow rows (int, bigint, nvarchar(20), datetime2, decimal(18,4))
  slow N MS              N int rows, MS milliseconds apart (for cancel tests)
  multi                  two result sets and a DML row count
  error                  Msg 208 (statement error) then DONE(ERROR)
  fatal                  a severity-20 error: the session ends after the response
  print                  an INFO message then a one-row result
  unaliased              SELECT 1 (column name "")
  BEGIN TRAN / COMMIT / ROLLBACK / SET ... / SAVE TRANSACTION x
  SET TEXTSIZE n         stored in session.options like the real engine does
sp_executesql echoes its value parameters back as one row (column = name)
and returns OUTPUT parameters (int ones incremented by one)."""

from __future__ import annotations

import datetime
import decimal
import itertools
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from standin.results import (CachedRow, Done, EnvChange, Message, ResultSet,  # noqa: E402
                             ReturnStatus, ReturnValue, RowCount, SqlError)
from standin.sqltypes import (Column, SqlDateTime2, SqlType, t_bigint, t_int,  # noqa: E402
                              t_nvarchar)

NARROW_COLUMNS = [Column("id", t_int(), nullable=False), Column("big", t_bigint()),
                  Column("name", t_nvarchar(20)), Column("ts", SqlType("datetime2", scale=7)),
                  Column("amount", SqlType("decimal", precision=18, scale=4))]


def narrow_row(i: int) -> tuple:
    return (i, i * 1000003, "name-%d" % (i % 100000),
            SqlDateTime2(datetime.date(2024, 1, 1) + datetime.timedelta(days=i % 3000),
                         (i * 1234567) % 864000000000),
            decimal.Decimal(i % 1000000).scaleb(-4) + decimal.Decimal("1.0000"))


class FakeSession:
    def __init__(self, user, database):
        self.user = user
        self.database = database
        self.spid = 0
        self.cancelled = False
        self.tran = None
        self.options = {}


class FakeEngine:
    def __init__(self, config=None):
        self.logins = dict(getattr(config, "logins", None) or {"sa": "Passw0rd!"})
        self.databases = list(getattr(config, "databases", None) or ["cdcdb"])
        self.sessions = []
        self.closed = 0
        self.closed_sessions = []  # in close order, so tests can name the one they mean
        self.tran_ids = itertools.count(1)
        self.tables = {}          # n -> (rows, cache slots) for "rows n"
        self.matrix = None        # set by the type matrix test

    # --- Engine API --------------------------------------------------------
    def login(self, user, password, database, app_name, host_name, language=None):
        if self.logins.get(user) != password:
            raise SqlError(18456, 14, 1, "Login failed for user '%s'." % user)
        db = database or self.databases[0]
        if db not in self.databases and db != "master":
            raise SqlError(4060, 11, 1, 'Cannot open database "%s" requested by the login. '
                           "The login failed." % db)
        session = FakeSession(user, db)
        self.sessions.append(session)
        return session

    def close_session(self, session):
        self.closed += 1
        self.closed_sessions.append(session)
        session.tran = None

    def control(self, command, args):
        if command == "stats":
            return {"sessions": len(self.sessions), "closed": self.closed}
        raise ValueError("unknown command %r" % command)

    def execute_batch(self, session, sql):
        for stmt in [s.strip() for s in sql.split(";") if s.strip()]:
            if session.cancelled:
                return
            yield from self._statement(session, stmt)

    def execute_rpc(self, session, name, params):
        if name.lower().split(".")[-1] != "sp_executesql":
            yield SqlError(2812, 16, 62, "Could not find stored procedure '%s'." % name)
            return
        stmt = params[0].value if params else ""
        values = params[2:]
        if stmt.strip().lower().startswith("echo"):
            cols = [Column(p.name.lstrip("@"), p.type) for p in values]
            yield ResultSet(cols, [tuple(p.value for p in values)])
        else:
            yield from self.execute_batch(session, stmt)
        yield ReturnStatus(0)
        for i, p in enumerate(params):
            if p.output:
                value = p.value + 1 if isinstance(p.value, int) else p.value
                yield ReturnValue(i, p.name, p.type, value)

    # --- commands ----------------------------------------------------------
    def _statement(self, session, stmt):
        words = stmt.split()
        head = words[0].lower()
        if head == "matrix":
            for name, sqltype, cases in self.matrix:
                yield ResultSet([Column(name, sqltype)], [(v,) for v, _lit in cases])
        elif head == "rows":
            n = int(words[1])
            cached = len(words) > 2 and words[2] == "cached"
            yield ResultSet(NARROW_COLUMNS, self._narrow(session, n, cached))
        elif head == "slow":
            n, ms = int(words[1]), int(words[2])
            yield ResultSet([Column("n", t_int())], self._slow(session, n, ms))
        elif head == "multi":
            yield ResultSet([Column("a", t_int())], [(1,), (2,)])
            yield RowCount(3)
            yield ResultSet([Column("b", t_nvarchar(5))], [("x",)])
        elif head == "error":
            yield SqlError(208, 16, 1, "Invalid object name 'nope'.", line=1)
        elif head == "fatal":
            yield SqlError(21, 20, 1, "Warning: Fatal error 9001 occurred.", line=1)
        elif head == "print":
            yield Message(0, 1, 0, "hello from print")
            yield ResultSet([Column("a", t_int())], [(7,)])
        elif head == "unaliased":
            yield ResultSet([Column("", t_int(), nullable=False)], [(1,)])
        elif head == "begin":
            if session.tran is None:
                session.tran = next(self.tran_ids).to_bytes(8, "little")
                yield EnvChange("begin_tran", new=session.tran)
            yield Done()
        elif head in ("commit", "rollback"):
            if session.tran is None:
                yield SqlError(3902 if head == "commit" else 3903, 16, 1,
                               "The %s TRANSACTION request has no corresponding BEGIN "
                               "TRANSACTION." % head.upper())
                return
            old, session.tran = session.tran, None
            yield EnvChange("commit_tran" if head == "commit" else "rollback_tran", old=old)
            yield Done()
        elif head == "set" and len(words) == 3 and words[1].lower() == "textsize":
            session.options["TEXTSIZE"] = words[2]
            yield Done()
        elif head in ("set", "save", "use"):
            yield Done()
        else:
            yield SqlError(102, 15, 1, "Incorrect syntax near '%s'." % words[0])

    def _table(self, n):
        """The stored rows of a narrow table of n rows (built once, like a
        table filled by fill_table), with one cache slot per row."""
        table = self.tables.get(n)
        if table is None:
            table = self.tables[n] = ([narrow_row(i) for i in range(n)], [{} for _ in range(n)])
        return table

    def _narrow(self, session, n, cached):
        rows, slots = self._table(n)
        key = (0, 1, 2, 3, 4)
        for i, row in enumerate(rows):
            if session.cancelled:
                return
            yield CachedRow(row, slots[i], key) if cached else row

    def _slow(self, session, n, ms):
        for i in range(n):
            if session.cancelled:
                return
            yield (i,)
            time.sleep(ms / 1000.0)
