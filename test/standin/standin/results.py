"""What the SQL engine hands to the TDS layer, and the engine's entry points.

Contract between standin.engine (produces these) and standin.tds (encodes
them as TDS tokens).  The protocol layer never interprets SQL; the engine
never touches bytes of the wire format.

Engine interface (implemented by standin.engine.Engine):

    engine = Engine(config: EngineConfig)
    session = engine.login(user, password, database, app_name, host_name)
        -> Session, or raises SqlError (18456 for bad credentials,
           4060 for a database that cannot be opened)
    for item in engine.execute_batch(session, sql_text): ...
    for item in engine.execute_rpc(session, proc_name, params): ...
        Generators yielding ResultSet / RowCount / Message / EnvChange /
        ReturnStatus / ReturnValue / SqlError items in the order a real
        server would send them.  A SqlError item is a statement-level error
        that does not end the batch (the engine decides, like SQL Server,
        whether the batch continues; if it aborts, the generator just ends
        after yielding the error).  The generator checks session.cancelled
        between rows and statements and stops (returns) when it is set:
        that is how ATTENTION works.
    engine.close_session(session)   (connection closed: roll back its transaction)

ResultSet.rows may be a lazy iterator: the protocol layer pulls rows while it
writes packets, so a million-row SELECT never materializes.  Each row is a
tuple of values (standin.sqltypes representations), or a CachedRow when the
engine can offer a stable per-stored-row cache slot for the encoded bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, List, Optional

from .sqltypes import Column, SqlType


class SqlError(Exception):
    """A SQL Server error or message (ERROR token when severity >= 11).

    number/state/severity are the real SQL Server values; message is the
    exact text (already formatted).  line is the batch line number (1-based).
    """

    def __init__(self, number: int, severity: int, state: int, message: str,
                 line: int = 1, proc: str = ""):
        super().__init__(message)
        self.number = number
        self.severity = severity
        self.state = state
        self.message = message
        self.line = line
        self.proc = proc

    def __repr__(self) -> str:
        return "SqlError(%d, %d, %d, %r)" % (self.number, self.severity,
                                             self.state, self.message)


@dataclass
class Message:
    """An informational message (INFO token, severity <= 10), e.g. 5701."""

    number: int
    state: int
    severity: int
    message: str
    line: int = 1
    proc: str = ""


@dataclass
class CachedRow:
    """A row whose encoded form may be cached by the protocol layer.

    values  the projected values (tuple)
    cache   a dict owned by the stored row version; the protocol layer may
            store encodings in it under keys it chooses (include `key` in
            them).  The engine drops the dict when the row version changes.
    key     identifies the projection (e.g. tuple of column indexes)
    """

    values: tuple
    cache: dict
    key: Any


@dataclass
class ResultSet:
    """COLMETADATA + ROW tokens + a DONE(COUNT) with the number of rows sent."""

    columns: List[Column]
    rows: Iterable[Any]  # tuples or CachedRow


@dataclass
class RowCount:
    """A DONE with COUNT for a DML statement (INSERT/UPDATE/DELETE)."""

    count: int


@dataclass
class Done:
    """A DONE without row count (e.g. after SET, CREATE TABLE, EXEC)."""

    pass


@dataclass
class EnvChange:
    """ENVCHANGE token.

    kind: 'database' (new/old: str), 'begin_tran' (new: 8-byte descriptor),
          'commit_tran' / 'rollback_tran' (old: 8-byte descriptor),
          'language', 'packet_size'.
    """

    kind: str
    new: Any = None
    old: Any = None


@dataclass
class ReturnStatus:
    """RETURNSTATUS token after EXEC of a procedure."""

    value: int


@dataclass
class ReturnValue:
    """RETURNVALUE token for an OUTPUT parameter of an RPC."""

    ordinal: int
    name: str
    type: SqlType
    value: Any


@dataclass
class RpcParam:
    """A decoded RPC parameter."""

    name: str            # '@p1' or '' (positional)
    type: SqlType
    value: Any
    output: bool = False


@dataclass
class EngineConfig:
    """Stand-in configuration (command-line flags map onto this)."""

    databases: List[str] = field(default_factory=lambda: ["cdcdb"])
    # login name -> password; roles per login are engine business
    logins: dict = field(default_factory=lambda: {"sa": "Passw0rd!"})
    capture_interval: float = 0.2   # seconds between capture-job scans
    maxtrans: int = 500
    maxscans: int = 10
    server_name: str = "STANDIN"
    version_string: str = ("Microsoft SQL Server 2022 (RTM) - 16.0.1000.6 (X64) "
                           "(mssql_cdc stand-in)")
    utc_offset_minutes: int = 0     # server local time zone for getdate()/lsn_time_mapping (fixed)
    time_zone: Optional[str] = None  # a Windows zone name (engine/clock.py); wins over utc_offset_minutes
