"""The Engine: databases, sessions, locking, commit, capture thread, controls."""

from __future__ import annotations

import itertools
import logging
import threading

from ..results import EngineConfig, ReturnStatus, ReturnValue, SqlError
from ..sqltypes import TICKS_PER_SECOND
from . import languages
from . import values as V
from .cdc import Cdc
from .clock import WINDOWS_ZONES, ServerClock, Zone
from .database import Database
from .executor import Executor
from .query import StoredSource
from .security import Security
from .session import Ctx, Session
from .views import find_view, view_source

log = logging.getLogger("standin.engine")
statement_log = logging.getLogger("standin.statements")


# engine options with a fixed set of values (the UNCONFIRMED shapes of ENGINE.md)
OPTION_CHOICES = {"split_update_seqval": ("shared", "ascending", "inverted"),
                  "unique_update": ("split", "in_place", "in_place_keys")}


def _journal_entries(undo):
    """The row changes of a committing transaction as (table, key, before,
    after, schema_version) per database, for the `restore` control (a
    point-in-time restore undoes them, newest first)."""
    out = {}
    for kind, table, key, rv in undo:
        if table.is_system:
            continue
        if kind == "ins":
            before, after = None, rv.values
        elif kind == "del":
            before, after = rv.values, None
        else:
            before, after = rv.prev.values, rv.values
        out.setdefault(table.db, []).append((table, key, before, after, table.schema_version))
    return out


class Engine:
    def __init__(self, config: EngineConfig = None, **options):
        self.config = config or EngineConfig()
        # engine options that are not part of EngineConfig (see ENGINE.md)
        self.options = {"lob_op4_unchanged_null": False, "from_gt_to_error": True,
                        "dummy_rows": "every", "empty_scans": "rows", "null_role_access": "select",
                        "enable_table_waits": True, "wkb_big_endian": False,
                        "split_update_seqval": "shared", "unique_update": "split",
                        "current_timezone_id": True, "sort_row_cost_us": 0}
        self.options.update(options)
        for name, allowed in OPTION_CHOICES.items():
            if self.options[name] not in allowed:
                raise ValueError("engine option %s must be one of %s" % (name, ", ".join(allowed)))
        zone = (Zone.named(self.config.time_zone) if self.config.time_zone
                else Zone.fixed_offset(self.config.utc_offset_minutes))
        if zone is None:
            raise ValueError("unknown time zone %r (known: %s)" % (self.config.time_zone, ", ".join(WINDOWS_ZONES)))
        self.clock = ServerClock(zone)
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.seq = 1                      # last published commit sequence number
        self._seq_alloc = 1
        self.active_snaps = {}
        self.pending_gc = []
        self._object_ids = itertools.count(581577110, 16003)
        self._spids = itertools.count(51)
        self.security = Security(self)
        self.cdc = Cdc(self)
        self.executor = Executor(self)
        self.start_datetime = self.now_datetime()
        self.databases = {}
        for name in ["master"] + [d for d in self.config.databases if d.lower() != "master"]:
            self.databases[name.lower()] = Database(self, name, len(self.databases) + 1 if name.lower() != "master"
                                                    else 1)
        # database ids: master 1, (2-4 reserved for tempdb/model/msdb), user databases from 5
        for i, db in enumerate(d for d in self.databases.values() if d.name.lower() != "master"):
            db.database_id = 5 + i
        for name, pw in self.config.logins.items():
            self.security.add_login(name, pw, sysadmin=(name.lower() == "sa"))
            if name.lower() != "sa":
                for db in self.databases.values():
                    if db.name.lower() != "master":
                        db.add_principal(name, login=name)
        self.capture_frozen = False
        self.capture_interval = self.config.capture_interval
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.capture_stats = {"cycles": 0, "published": 0}
        self._thread = threading.Thread(target=self._capture_loop, name="standin-capture", daemon=True)
        self._thread.start()

    # ================================================================ API
    def login(self, user, password, database, app_name="", host_name="", language=None):
        """language: the LOGIN7 language field (FreeTDS: freetds.conf `language`);
        an empty or unknown one leaves the login's default language."""
        login = self.security.authenticate(user, password)
        dbname = database or "master"
        db = self.databases.get(dbname.lower())
        if db is None or not self.security.can_open(login, db):
            raise SqlError(4060, 11, 1, 'Cannot open database "%s" requested by the login. The login failed.'
                           % dbname)
        session = Session(next(self._spids), login, db.name, app_name, host_name)
        if language and languages.find_language(language) is not None:
            languages.set_language(session, language)
        return session

    def execute_batch(self, session, sql_text):
        statement_log.info("spid %s batch: %s", session.spid, sql_text)
        languages.enter(session)
        return self.executor.run_batch(session, sql_text)

    def execute_rpc(self, session, proc_name, params):
        statement_log.info("spid %s rpc %s(%s)", session.spid, proc_name,
                           ", ".join("%s=%r" % (p.name, p.value) for p in params))
        languages.enter(session)
        return self._rpc(session, proc_name, params)

    def _rpc(self, session, proc_name, params):
        from .parser import Parser
        args = [((p.name or None), p.value, p.type, p.output) for p in params]
        try:
            parts = Parser(proc_name).multipart()
        except SqlError:
            parts = [proc_name]
        if parts[-1].lower() == "sp_executesql":
            yield from self._rpc_executesql(session, args)
            return
        from .procedures import find_proc, bind_args
        try:
            with self.lock:
                p = find_proc(parts, 1)
                bound = bind_args(p, args, 1)
                ctx = Ctx(self, session, 1)
                items, status = p.fn(ctx, bound, 1)
        except SqlError as e:
            yield e
            yield ReturnStatus(-6 if e.number != 2812 else 0)
            return
        outputs = [i for i in items if isinstance(i, tuple)]
        for i in items:
            if not isinstance(i, tuple):
                yield i
        yield ReturnStatus(status)
        for k, (_, name, value) in enumerate(outputs):
            param = next((prm for prm in params if (prm.name or "").lower() == name.lower() and prm.output), None)
            if param is not None:
                yield ReturnValue(params.index(param), param.name, param.type, value)

    def _rpc_executesql(self, session, args):
        """Streaming sp_executesql for RPC callers (results are not materialized)."""
        from .executor import parse_param_decls, _check_batch_rules
        from .parser import parse_batch
        if not args:
            yield SqlError(201, 16, 4, "Procedure or function 'sp_executesql' expects parameter '@statement', "
                           "which was not supplied.")
            return
        stmt_text = args[0][1]
        decl_text = args[1][1] if len(args) > 1 else ""
        try:
            decls = parse_param_decls(decl_text or "")
            scope = {name.lower(): [typ, None] for name, typ, out in decls}
            outputs = []
            pos = 0
            for pname, v, t, is_out in args[2:]:
                if pname is None:
                    if pos >= len(decls):
                        raise SqlError(8144, 16, 2, "Procedure or function  has too many arguments specified.")
                    dname, typ, dout = decls[pos]
                    pos += 1
                else:
                    m = [d for d in decls if d[0].lower() == pname.lower()]
                    if not m:
                        raise SqlError(8145, 16, 2, "%s is not a parameter for procedure ." % pname)
                    dname, typ, dout = m[0]
                scope[dname.lower()][1] = V.convert(v, t, typ) if (v is not None and t is not None) else v
                if is_out:
                    outputs.append((dname, typ))
            stmts = parse_batch(stmt_text or "")
            _check_batch_rules(stmts)
        except SqlError as e:
            yield e
            return
        saved = session.vars
        session.vars = scope
        try:
            yield from self.executor.run_statements(session, stmts)
        finally:
            session.vars = saved
        yield ReturnStatus(0)
        for i, (name, typ) in enumerate(outputs):
            yield ReturnValue(i, name, typ, scope[name.lower()][1])

    def close_session(self, session):
        with self.lock:
            if session.txn is not None:
                txn = session.txn
                session.txn = None
                session.trancount = 0
                self.end_txn(txn, commit=False)
            session.closed = True

    # ================================================================ time
    def now_ts(self):
        """The server's clock (engine/clock.py: real time plus a settable shift)."""
        return self.clock.now()

    def datetime_at(self, ts):
        """The local datetime of the instant ts in the server's zone."""
        local = self.clock.zone.local_at(ts)
        ticks = ((local.hour * 60 + local.minute) * 60 + local.second) * TICKS_PER_SECOND + local.microsecond * 10
        return V.datetime_from(local.date(), ticks)

    def now_datetime(self):
        return self.datetime_at(self.clock.now())

    # ================================================================ ids, sequence
    def new_object_id(self):
        return next(self._object_ids)

    def next_seq(self):
        self._seq_alloc = max(self._seq_alloc, self.seq) + 1
        return self._seq_alloc

    def publish_seq(self, seq):
        if seq > self.seq:
            self.seq = seq

    def register_snapshot(self, snap):
        with self.lock:
            self.active_snaps[snap] = self.active_snaps.get(snap, 0) + 1

    def unregister_snapshot(self, snap):
        with self.lock:
            n = self.active_snaps.get(snap, 0) - 1
            if n <= 0:
                self.active_snaps.pop(snap, None)
            else:
                self.active_snaps[snap] = n
            if not self.active_snaps and self.pending_gc:
                pending, self.pending_gc = self.pending_gc, []
                self._gc(pending)

    # ================================================================ transactions
    def end_txn(self, txn, commit):
        with self.lock:
            if commit and txn.undo:
                seq = self.next_seq()
                dbs = {entry[1].db for entry in txn.undo} | set(txn.records)
                now = self.now_ts()
                journal = _journal_entries(txn.undo)
                for db in dbs:
                    commit_lsn = db.lsn.next_block()
                    recs = txn.records.get(db, [])
                    self.cdc.on_commit(db, txn, recs, commit_lsn, now)
                    if journal.get(db):
                        db.journal.append((commit_lsn, journal[db]))
                txn.end_time = now
                touched = txn.finish_commit(seq)
                self.publish_seq(seq)
                if self.active_snaps and min(self.active_snaps) < seq:
                    self.pending_gc.extend(touched)
                else:
                    self._gc(touched)
            else:
                txn.rollback_to((0, {}, 0))
            txn.finished = True
            if txn.snap is not None:
                snap, txn.snap = txn.snap, None
                self.unregister_snapshot(snap)
            self.cond.notify_all()

    def _gc(self, touched):
        for table, key in touched:
            head = table.rows.get(key)
            rv = head
            while rv is not None and rv.xmin.__class__ is not int:
                rv = rv.prev
            if rv is None:
                continue
            if rv is head and rv.xmax.__class__ is int:
                del table.rows[key]
                table.remove_key(key)
            else:
                rv.prev = None

    def gc_table(self, table):
        if self.active_snaps:
            return
        dead = [k for k in table.keys if table.rows[k].xmax.__class__ is int]
        if dead:
            for k in dead:
                del table.rows[k]
            table.keys = [k for k in table.keys if k in table.rows]

    # ================================================================ name resolution
    def _split(self, ctx, parts, line):
        if len(parts) > 3:
            raise SqlError(117, 15, 1, "The object name '%s' contains more than the maximum number of prefixes. "
                           "The maximum is 2." % ".".join(parts), line)
        db_name = parts[-3] if len(parts) == 3 else None
        schema = parts[-2] if len(parts) >= 2 and parts[-2] else "dbo"
        return db_name, schema, parts[-1]

    def resolve_table(self, ctx, parts, line, for_write=False, for_ddl=False, what=None):
        db_name, schema, name = self._split(ctx, parts, line)
        db = ctx.resolve_database(db_name, line)
        table = db.find_table(schema, name)
        if table is None:
            raise SqlError(208, 16, 1, "Invalid object name '%s'." % ".".join(parts), line)
        sec = self.security
        if for_ddl and not sec.is_dbo(ctx.session, db):
            raise SqlError(1088, 16, 13, "Cannot find the object \"%s\" because it does not exist or you do not "
                           "have permissions." % table.name, line)
        if for_write and not sec.can_write(ctx.session, db, table):
            raise sec.select_denied(db, table, what or "INSERT")
        ctx.touch(db, user_table=True)
        return table

    def open_table_source(self, ctx, ref, line):
        parts = ref.parts
        if len(parts) == 3 and parts[0].lower() == "msdb" and parts[2].lower() == "cdc_jobs":
            from .views import v_cdc_jobs
            return view_source(self, ctx, ctx.db, v_cdc_jobs, {(ref.alias or "cdc_jobs").lower()})
        db_name, schema, name = self._split(ctx, parts, line)
        db = ctx.resolve_database(db_name, line)
        quals = {ref.alias.lower()} if ref.alias else {name.lower(), "%s.%s" % (schema.lower(), name.lower())}
        builder = find_view(db, schema, name)
        if builder is not None:
            ctx.touch(db, user_table=False)
            return view_source(self, ctx, db, builder, quals)
        table = db.find_table(schema, name)
        if table is None:
            raise SqlError(208, 16, 1, "Invalid object name '%s'." % ".".join(parts), line)
        if not self.security.can_select(ctx.session, db, table):
            raise self.security.select_denied(db, table)
        ctx.touch(db, user_table=True)
        return StoredSource(table, quals)

    def find_object(self, ctx, parts):
        if not parts or len(parts) > 3:
            return None
        db_name = parts[-3] if len(parts) == 3 else None
        schema = parts[-2] if len(parts) >= 2 and parts[-2] else "dbo"
        db = self.databases.get(db_name.lower()) if db_name else ctx.db
        if db is None:
            return None
        return db.find_table(schema, parts[-1])

    def find_named_object(self, ctx, parts):
        """The catalog tables of schema cdc that are built on demand and the
        query functions, as 'cdc.<name>' (lower case) for GRANT; None if
        there is no such object."""
        if not parts or len(parts) > 3 or len(parts) < 2 or (parts[-2] or "").lower() != "cdc":
            return None
        db = self.databases.get(parts[-3].lower()) if len(parts) == 3 and parts[-3] else ctx.db
        if db is None or db.cdc is None:
            return None
        from .views import CDC_VIEWS
        name = parts[-1].lower()
        if name in CDC_VIEWS or (name.startswith("fn_cdc_get_all_changes_")
                                 and name[len("fn_cdc_get_all_changes_"):] in db.cdc.instances):
            return "cdc." + name
        return None

    def name_taken(self, db, schema, name):
        return False

    def virtual_object_name(self, db, oid):
        if db.cdc:
            for ci in db.cdc.instances.values():
                if ci.object_id + 1 == oid:
                    return ("cdc", "fn_cdc_get_all_changes_" + ci.name)
        return None

    # ================================================================ capture job
    def _capture_loop(self):
        while not self._stop.is_set():
            self._wake.wait(self.capture_interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            if self.capture_frozen:
                continue
            try:
                self.capture_cycle_all()
            except Exception:          # keep the job alive; the log shows the bug
                log.exception("capture cycle failed")

    def capture_cycle_all(self):
        total = 0
        with self.lock:
            for db in list(self.databases.values()):
                if db.cdc is not None and db.cdc.job_exists and not db.cdc.stopped:
                    total += self.cdc.capture_cycle(db)
            self.capture_stats["cycles"] += 1
            self.capture_stats["published"] += total
            self.cond.notify_all()
        return total

    def shutdown(self):
        self._stop.set()
        self._wake.set()

    # ================================================================ controls
    def control(self, command, args=None):
        from .controls import run_control
        return run_control(self, command, args or {})
