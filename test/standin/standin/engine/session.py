"""Sessions and the per-statement execution context."""

from __future__ import annotations

from ..results import SqlError

SNAPSHOT = "SNAPSHOT"
READ_COMMITTED = "READ COMMITTED"


class Session:
    def __init__(self, spid, login, database, app_name="", host_name=""):
        self.spid = spid
        self.login = login                # security.Login
        self.user = login.name
        self.database = database          # current database name
        self.app_name = app_name
        self.host_name = host_name
        self.cancelled = False
        self.txn = None                   # explicit transaction (BEGIN TRAN)
        self.trancount = 0
        self.isolation = READ_COMMITTED
        self.options = {}
        self.nocount = False
        self.xact_abort = False
        self.lock_timeout_ms = -1
        self.vars = {}                    # lower name -> [SqlType, value]
        self.rowcount = 0
        self.last_error = 0
        self.last_identity = None
        self.identity_insert = None       # Table with IDENTITY_INSERT ON
        self.prepared = {}                # sp_prepare handles
        self.next_handle = 1
        self.closed = False
        # the login's default language, until LOGIN7 or SET LANGUAGE say otherwise
        from .languages import find_language, DEFAULT_LANGUAGE
        lang = find_language(getattr(login, "default_language", None)) or DEFAULT_LANGUAGE
        self.language = lang[0]
        self.dateformat = lang[2]
        self.datefirst = lang[3]

    @property
    def in_transaction(self):
        return self.txn is not None


class Ctx:
    """Everything a statement needs while it runs."""

    def __init__(self, engine, session, line=1):
        self.engine = engine
        self.session = session
        self.line = line
        self.db = engine.databases[session.database.lower()]
        self.txn = session.txn            # may be replaced by an autocommit txn
        self.stmt_snap = None

    # ---- variables
    def lookup_var(self, name, line=None):
        v = self.session.vars.get(name.lower())
        if v is None:
            raise SqlError(137, 15, 2, 'Must declare the scalar variable "%s".' % name, line or self.line)
        return v

    # ---- databases and isolation
    def resolve_database(self, name, line=None):
        if name is None or name == "":
            return self.db
        d = self.engine.databases.get(name.lower())
        if d is None:
            raise SqlError(911, 16, 1, "Database '%s' does not exist. Make sure that the name is entered "
                           "correctly." % name, line or self.line)
        return d

    def touch(self, db, user_table=True):
        """First access to data in a statement: apply SNAPSHOT rules."""
        s = self.session
        txn = self.txn
        if txn is not None and txn.finished:
            return          # rows of a finished autocommit statement being streamed: nothing to fix
        if txn is not None and txn.isolation is None:
            txn.isolation = s.isolation
        if s.isolation == SNAPSHOT:
            if txn is not None and txn.isolation != SNAPSHOT and txn.explicit:
                raise SqlError(3951, 16, 1, "Transaction failed in database '%s' because the statement was "
                               "run under snapshot isolation but the transaction did not start in snapshot "
                               "isolation. You cannot change the isolation level of the transaction to "
                               "snapshot after the transaction has started unless the transaction was "
                               "originally started under snapshot isolation level." % db.name, self.line)
            if user_table and not db.allow_snapshot:
                raise SqlError(3952, 16, 1, "Snapshot isolation transaction failed accessing database '%s' "
                               "because snapshot isolation is not allowed in this database. Use ALTER "
                               "DATABASE to allow snapshot isolation." % db.name, self.line)
        if txn is not None and txn.isolation == SNAPSHOT and txn.snap is None:
            txn.snap = self.engine.seq
            self.engine.register_snapshot(txn.snap)

    def read_view(self):
        """(snapshot seq, own txn) for reads of this statement."""
        txn = self.txn
        if txn is not None and txn.isolation == SNAPSHOT and txn.snap is not None:
            return txn.snap, txn
        if self.stmt_snap is None:
            self.stmt_snap = self.engine.seq
        return self.stmt_snap, txn
