"""System stored procedures: CDC administration, sp_pkeys, sp_executesql.

Each procedure declares its parameters (name, required, default); arguments
arrive as (name or None, value, SqlType, output) after evaluation.  Handlers
return (items, return_status)."""

from __future__ import annotations

from ..results import ResultSet, SqlError
from ..sqltypes import Column, SqlType
from . import lsn as L
from . import types as T
from . import values as V

NV = T.SYSNAME_TYPE
REQ = object()


class Proc:
    def __init__(self, name, params, fn, needs_db_cdc=False):
        self.name = name
        self.params = params            # [(name, default or REQ)]
        self.fn = fn


PROCS = {}


def proc(name, *params):
    def deco(fn):
        PROCS[name] = Proc(name, list(params), fn)
        return fn
    return deco


# parameters that are not sysname/nvarchar
PARAM_TYPES = {
    "@supports_net_changes": T.BIT_TYPE, "@allow_partition_switch": T.BIT_TYPE, "@continuous": T.BIT_TYPE,
    "@fCleanupFailed": T.BIT_TYPE, "@start_job": T.BIT_TYPE, "@threshold": T.BIGINT_TYPE,
    "@maxtrans": T.INT_TYPE, "@maxscans": T.INT_TYPE, "@pollinginterval": T.BIGINT_TYPE,
    "@retention": T.BIGINT_TYPE, "@low_water_mark": T.LSN_TYPE,
    "@captured_column_list": T.nvarchar(-1), "@configname": T.varchar(35), "@configvalue": T.INT_TYPE,
}


def _typed(name, value, vtype, line):
    """Convert an argument to the parameter's type, as SQL Server does on EXEC."""
    if value is None or value == "DEFAULT" or vtype is None:
        return value
    want = PARAM_TYPES.get(name, T.SYSNAME_TYPE)
    try:
        return V.convert(value, vtype, want, explicit=want.name in T.BINARY_TYPES)
    except SqlError as e:
        e.line = line
        raise


def bind_args(p: Proc, args, line):
    """args: [(name|None, value, type, output)] -> dict param -> value."""
    out = {}
    names = [n for n, _ in p.params]
    pos = 0
    for name, v, t, _ in args:
        if name is None:
            if pos >= len(names):
                raise SqlError(8144, 16, 2, "Procedure or function %s has too many arguments specified." % p.name, line)
            out[names[pos]] = _typed(names[pos], v, t, line)
            pos += 1
        else:
            key = name.lower()
            match = next((n for n in names if n.lower() == key), None)
            if match is None:
                raise SqlError(8145, 16, 2, "%s is not a parameter for procedure %s." % (name, p.name), line)
            out[match] = _typed(match, v, t, line)
    for n, default in p.params:
        if n not in out:
            if default is REQ:
                raise SqlError(201, 16, 4, "Procedure or function '%s' expects parameter '%s', which was not "
                               "supplied." % (p.name, n), line)
            out[n] = default
        elif out[n] == "DEFAULT":
            out[n] = None if default is REQ else default
    return out


def _s(v):
    return None if v is None else str(v).strip() if isinstance(v, str) else v


def _require_cdc_db(db, line):
    if not db.is_cdc_enabled:
        raise SqlError(22901, 16, 1, "The database '%s' is not enabled for Change Data Capture. Ensure that the "
                       "correct database context is set and retry the operation. To report on the databases "
                       "enabled for Change Data Capture, query the is_cdc_enabled column in the sys.databases "
                       "catalog view." % db.name, line)


def _require_dbo(ctx, line):
    if not ctx.engine.security.is_dbo(ctx.session, ctx.db):
        raise SqlError(22904, 16, 1, "Caller is not authorized to initiate the requested action. DBO "
                       "privileges are required.", line)


@proc("sp_cdc_enable_db")
def sp_cdc_enable_db(ctx, a, line):
    db = ctx.db
    if not ctx.session.login.sysadmin:
        raise SqlError(22902, 16, 1, "Caller is not authorized to initiate the requested action. Sysadmin "
                       "privileges are required.", line)
    if db.name.lower() in ("master", "msdb", "model", "tempdb"):
        raise SqlError(22989, 16, 1, "Change data capture cannot be enabled on system database '%s'."
                       % db.name, line)
    if db.is_cdc_enabled:
        return [], 0
    if "cdc" in db.schemas:
        raise SqlError(22906, 16, 1, "The database '%s' cannot be enabled for Change Data Capture because a "
                       "database user named 'cdc' or a schema named 'cdc' already exists in the current "
                       "database. These objects are required exclusively by Change Data Capture. Drop or rename "
                       "the user or schema and retry the operation." % db.name, line)
    ctx.engine.cdc.enable_db(db)
    return [], 0


@proc("sp_cdc_disable_db")
def sp_cdc_disable_db(ctx, a, line):
    if not ctx.session.login.sysadmin:
        raise SqlError(22902, 16, 1, "Caller is not authorized to initiate the requested action. Sysadmin "
                       "privileges are required.", line)
    ctx.engine.cdc.disable_db(ctx.db)
    return [], 0


def _parse_column_list(text):
    """Comma list with optional [] or "" quoting."""
    from .lexer import tokenize, IDENT, QIDENT, OP, EOF
    names = []
    for t in tokenize(text):
        if t.kind in (IDENT, QIDENT):
            names.append(t.value)
        elif t.kind == OP and t.value == ",":
            continue
        elif t.kind == EOF:
            break
        else:
            raise SqlError(22935, 16, 1, "Could not parse the @captured_column_list value '%s'." % text)
    return names


@proc("sp_cdc_enable_table", ("@source_schema", REQ), ("@source_name", REQ), ("@role_name", REQ),
      ("@capture_instance", None), ("@supports_net_changes", None), ("@index_name", None),
      ("@captured_column_list", None), ("@filegroup_name", None), ("@allow_partition_switch", True))
def sp_cdc_enable_table(ctx, a, line):
    db = ctx.db
    eng = ctx.engine
    _require_cdc_db(db, line)
    _require_dbo(ctx, line)
    schema, name = _s(a["@source_schema"]), _s(a["@source_name"])
    table = db.find_table(schema or "", name or "")
    if table is None or table.is_system:
        raise SqlError(22931, 16, 1, "Source table '%s.%s' does not exist in the current database. Ensure that "
                       "the correct database context is set. Specify a valid schema and table name for the "
                       "database." % (schema, name), line)
    ci_name = a["@capture_instance"]
    ci_name = ci_name.rstrip() if ci_name is not None else "%s_%s" % (table.schema.name, table.name)
    if len(ci_name) > 100:
        raise SqlError(22927, 16, 1, "The length of the capture instance name '%s' exceeds the maximum of 100 "
                       "characters. Specify a shorter name." % ci_name, line)
    if ci_name.lower() in db.cdc.instances:
        raise SqlError(22926, 16, 1, "Could not create a capture instance because the capture instance name "
                       "'%s' already exists in the current database. Specify an explicit unique name for the "
                       "parameter @capture_instance." % ci_name, line)
    if len(table.capture_instances) >= 2:
        raise SqlError(22962, 16, 1, "Two capture instances already exist for source table '%s.%s'. A table can "
                       "have at most two capture instances. If the current tracking options are not appropriate, "
                       "disable change tracking for the obsolete instance by using sys.sp_cdc_disable_table and "
                       "retry the operation." % (table.schema.name, table.name), line)
    index_name = a["@index_name"]
    if index_name is not None:
        from .dml import pk_constraint_name
        if not table.pk or index_name.lower() != pk_constraint_name(table).lower():
            raise SqlError(22940, 16, 1, "Could not locate index '%s' for source table '%s.%s'. Verify that the "
                           "index exists and is a unique index." % (index_name, table.schema.name, table.name), line)
        index_cols = [table.columns[i] for i in table.pk]
    elif table.pk:
        from .dml import pk_constraint_name
        index_name = pk_constraint_name(table)
        index_cols = [table.columns[i] for i in table.pk]
    else:
        index_name = None
        index_cols = []
    net = a["@supports_net_changes"]
    net = bool(index_cols) if net is None else bool(net)
    if net and not index_cols:
        raise SqlError(22939, 16, 1, "The parameter @supports_net_changes is set to 1, but the source table "
                       "does not have a primary key defined and no alternate unique index has been specified.", line)
    if a["@captured_column_list"] is not None:
        names = _parse_column_list(a["@captured_column_list"])
        cols = []
        for n in names:
            i = table.column_index(n)
            if i < 0:
                raise SqlError(22933, 16, 1, "Could not create a capture instance because the column '%s' "
                               "specified in the captured column list does not exist in source table '%s.%s'."
                               % (n, table.schema.name, table.name), line)
            if table.columns[i] not in cols:
                cols.append(table.columns[i])
        for c in index_cols:
            if c not in cols:
                raise SqlError(22945, 16, 1, "Could not create a capture instance because the index column '%s' "
                               "is not in the captured column list. All index columns must be included in the "
                               "captured column list." % c.name, line)
        cols.sort(key=lambda c: table.columns.index(c))
    else:
        cols = list(table.columns)
    for c in cols:
        if c.name.startswith("__$"):
            raise SqlError(22975, 16, 1, "Could not create a capture instance because column '%s' in the source "
                           "table uses a reserved column name (__$)." % c.name, line)
    if eng.options.get("enable_table_waits", True):
        wait_for_table_writers(ctx, table, line)
    eng.cdc.create_capture_instance(db, table, ci_name, cols, index_name, index_cols, a["@role_name"], net,
                                    a["@filegroup_name"], bool(a["@allow_partition_switch"]))
    return [], 0


def open_writer(table, own):
    """A transaction other than `own` with uncommitted row versions in table."""
    for rv in table.rows.values():
        while rv is not None:
            for x in (rv.xmin, rv.xmax):
                if x is not None and x.__class__ is not int and x is not own:
                    return x
            if rv.xmin.__class__ is int:
                break
            rv = rv.prev
    return None


def wait_lock(ctx, line, still_blocked):
    """Wait like a lock request: until still_blocked() is false, honouring
    SET LOCK_TIMEOUT (1222) and ATTENTION (the statement is cancelled)."""
    import time
    from .dml import cancelled
    session = ctx.session
    deadline = None
    while still_blocked():
        timeout = session.lock_timeout_ms
        if timeout == 0:
            raise SqlError(1222, 16, 51, "Lock request time out period exceeded.", line)
        now = time.monotonic()
        if deadline is None:
            deadline = None if timeout < 0 else now + timeout / 1000.0
        if deadline is not None and now >= deadline:
            raise SqlError(1222, 16, 51, "Lock request time out period exceeded.", line)
        if session.cancelled:
            raise cancelled(line)
        ctx.engine.cond.wait(0.05)


def wait_for_table_writers(ctx, table, line):
    """sp_cdc_enable_table changes the source table's metadata under a schema
    modification lock (UNCONFIRMED whether it waits; engine option
    enable_table_waits, ENGINE.md): it waits until no other open transaction
    has written the table, and while it waits, transactions that have not
    written the table yet wait for it (lock queue)."""
    table.schema_lock_waiters += 1
    try:
        wait_lock(ctx, line, lambda: open_writer(table, ctx.txn) is not None)
    finally:
        table.schema_lock_waiters -= 1
        ctx.engine.cond.notify_all()


@proc("sp_cdc_disable_table", ("@source_schema", REQ), ("@source_name", REQ), ("@capture_instance", REQ))
def sp_cdc_disable_table(ctx, a, line):
    db = ctx.db
    _require_cdc_db(db, line)
    _require_dbo(ctx, line)
    schema, name = _s(a["@source_schema"]), _s(a["@source_name"])
    table = db.find_table(schema or "", name or "")
    if table is None:
        raise SqlError(22931, 16, 1, "Source table '%s.%s' does not exist in the current database. Ensure that "
                       "the correct database context is set. Specify a valid schema and table name for the "
                       "database." % (schema, name), line)
    ci_name = (a["@capture_instance"] or "").strip()
    if ci_name.lower() == "all":
        for ci in list(table.capture_instances):
            ctx.engine.cdc.drop_capture_instance(db, ci)
        return [], 0
    ci = db.cdc.instances.get(ci_name.lower())
    if ci is None or ci.source is not table:
        raise SqlError(22960, 16, 1, "Change data capture instance '%s' has not been enabled for the source "
                       "table '%s.%s'. Use sys.sp_cdc_help_change_data_capture to verify the capture instance "
                       "name and retry the operation." % (ci_name, table.schema.name, table.name), line)
    ctx.engine.cdc.drop_capture_instance(db, ci)
    return [], 0


@proc("sp_cdc_cleanup_change_table", ("@capture_instance", REQ), ("@low_water_mark", REQ),
      ("@threshold", 5000), ("@fCleanupFailed", None))
def sp_cdc_cleanup_change_table(ctx, a, line):
    db = ctx.db
    _require_cdc_db(db, line)
    _require_dbo(ctx, line)
    name = (a["@capture_instance"] or "").strip()
    ci = db.cdc.instances.get(name.lower())
    if ci is None:
        raise SqlError(22963, 16, 1, "Parameter @capture_instance '%s' is not a valid capture instance name "
                       "in the current database." % name, line)
    mark = a["@low_water_mark"]
    threshold = a["@threshold"]
    status = cleanup_to(ctx.engine, db, ci, mark, line, threshold=5000 if threshold is None else threshold)
    return [("output", "@fCleanupFailed", False)], status


def let_readers_run(eng):
    """Between two cleanup statements: release the engine lock for a moment
    (Condition.wait releases every level of the RLock), as SQL Server's
    cleanup commits each delete statement on its own while readers run."""
    eng.cond.wait(0.001)


def cleanup_to(eng, db, ci, mark, line=1, group_by_time=True, threshold=5000):
    if mark is None:
        return 0
    mark = bytes(mark)
    m = db.cdc.mapping
    cur = ci.start_lsn
    mx = db.cdc.max_lsn()
    # below the current low end point: outside the timeline (checked first,
    # since cleanup already deleted the mapping rows down there)
    if cur is not None and mark < cur:
        raise SqlError(22957, 16, 1, "LSN %s, specified as the new low end point for the change table associated "
                       "with capture instance '%s', is not within the Change Data Capture timeline [%s, %s]."
                       % ("0x" + mark.hex().upper(), ci.name, "0x" + cur.hex().upper(),
                          "0x" + (mx or L.ZERO).hex().upper()), line)
    rv = m.rows.get(mark)
    if rv is None or rv.xmax is not None:
        raise SqlError(22964, 16, 1, "LSN %s, specified as the new low end point for the change table associated "
                       "with capture instance '%s', is not a valid start_lsn in cdc.lsn_time_mapping."
                       % ("0x" + mark.hex().upper(), ci.name), line)
    if group_by_time:
        # entries that share the commit time: the smallest LSN of the group
        t_end = rv.values[2]
        for k in m.keys:
            r = m.rows[k]
            if r.xmax is None and r.values[2] == t_end:
                mark = max(k, cur) if cur is not None else k
                break
    eng.cdc.cleanup(db, ci, mark, threshold=threshold, between=lambda: let_readers_run(eng))
    return 0


HELP_COLS = [("source_schema", NV), ("source_table", NV), ("capture_instance", NV), ("object_id", T.INT_TYPE),
             ("source_object_id", T.INT_TYPE), ("start_lsn", T.LSN_TYPE), ("end_lsn", T.LSN_TYPE),
             ("supports_net_changes", T.BIT_TYPE), ("has_drop_pending", T.BIT_TYPE), ("role_name", NV),
             ("index_name", NV), ("filegroup_name", NV), ("create_date", T.DATETIME_TYPE),
             ("index_column_list", T.nvarchar(-1)), ("captured_column_list", T.nvarchar(-1))]


def _qlist(names):
    return ", ".join("[%s]" % n.replace("]", "]]") for n in names)


@proc("sp_cdc_help_change_data_capture", ("@source_schema", None), ("@source_name", None))
def sp_cdc_help(ctx, a, line):
    db = ctx.db
    _require_cdc_db(db, line)
    schema, name = _s(a["@source_schema"]), _s(a["@source_name"])
    if (schema is None) != (name is None):
        raise SqlError(22972, 16, 1, "When the parameter @source_schema or @source_name is non-null, both "
                       "parameters must be non-null.", line)
    sec = ctx.engine.security
    if schema is not None:
        # a named table must exist and be visible to the caller (22981), and
        # be enabled for CDC (22985): errors, not an empty result
        named = db.find_table(schema, name)
        if named is None or named.is_system or not sec.can_see(ctx.session, db, named):
            raise SqlError(22981, 16, 1, "Object does not exist or access is denied.", line)
        if not named.capture_instances:
            raise SqlError(22985, 16, 1, "Change data capture has not been enabled for source table '%s.%s'. "
                           "Specify the name of a table enabled for Change Data Capture. To report on the "
                           "tables enabled for Change Data Capture, query the is_tracked_by_cdc column in the "
                           "sys.tables catalog view." % (schema, name), line)
    rows = []
    for ci in sorted(db.cdc.instances.values(), key=lambda c: (c.source.schema.name.lower(),
                                                                c.source.name.lower(), c.name.lower())):
        t = ci.source
        if schema is not None and (t.schema.name.lower() != schema.lower() or t.name.lower() != name.lower()):
            continue
        if not sec.can_read_ci(ctx.session, db, ci):
            continue
        names = {c.column_id: c.name for c in t.columns}
        rows.append((t.schema.name, t.name, ci.name, ci.object_id, t.object_id, ci.start_lsn, None,
                     ci.supports_net_changes, None, ci.role_name, ci.index_name, ci.filegroup_name,
                     ci.create_date, _qlist(names.get(c, "?") for c in ci.index_column_ids) or None,
                     _qlist(c[1] for c in ci.captured)))
    cols = [Column(n, t, True) for n, t in HELP_COLS]
    return [ResultSet(cols, rows)], 0


JOB_COLS = [("job_id", SqlType("uniqueidentifier")), ("job_type", T.nvarchar(20)), ("job_name", NV),
            ("maxtrans", T.INT_TYPE), ("maxscans", T.INT_TYPE), ("continuous", T.BIT_TYPE),
            ("pollinginterval", T.BIGINT_TYPE), ("retention", T.BIGINT_TYPE), ("threshold", T.BIGINT_TYPE)]


@proc("sp_cdc_help_jobs")
def sp_cdc_help_jobs(ctx, a, line):
    import uuid
    db = ctx.db
    _require_cdc_db(db, line)
    _require_dbo(ctx, line)
    rows = []
    if db.cdc.job_exists:
        j = db.cdc.job
        rows.append((uuid.UUID(int=db.database_id * 2 + 1), "capture", "cdc.%s_capture" % db.name, j["maxtrans"],
                     j["maxscans"], bool(j["continuous"]), j["pollinginterval"], 0, 0))
        rows.append((uuid.UUID(int=db.database_id * 2 + 2), "cleanup", "cdc.%s_cleanup" % db.name, 0, 0, False,
                     0, j["retention"], j["threshold"]))
    return [ResultSet([Column(n, t, True) for n, t in JOB_COLS], rows)], 0


@proc("sp_cdc_change_job", ("@job_type", "capture"), ("@maxtrans", None), ("@maxscans", None),
      ("@continuous", None), ("@pollinginterval", None), ("@retention", None), ("@threshold", None))
def sp_cdc_change_job(ctx, a, line):
    db = ctx.db
    _require_cdc_db(db, line)
    _require_dbo(ctx, line)
    jt = (a["@job_type"] or "capture").strip().lower()
    if jt not in ("capture", "cleanup"):
        raise SqlError(22992, 16, 1, "The specified @job_type, %s, is not a valid job type. Specify 'capture' "
                       "or 'cleanup'." % a["@job_type"], line)
    for k in ("maxtrans", "maxscans", "continuous", "pollinginterval", "retention", "threshold"):
        v = a["@" + k]
        if v is not None:
            db.cdc.job[k] = int(v)
    return [], 0


@proc("sp_cdc_start_job", ("@job_type", "capture"))
def sp_cdc_start_job(ctx, a, line):
    _require_cdc_db(ctx.db, line)
    ctx.db.cdc.job_exists = True
    ctx.db.cdc.stopped = False
    return [], 0


@proc("sp_cdc_stop_job", ("@job_type", "capture"))
def sp_cdc_stop_job(ctx, a, line):
    _require_cdc_db(ctx.db, line)
    ctx.db.cdc.stopped = True
    return [], 0


@proc("sp_cdc_add_job", ("@job_type", REQ), ("@start_job", 1), ("@maxtrans", None), ("@maxscans", None),
      ("@continuous", None), ("@pollinginterval", None), ("@retention", None), ("@threshold", None))
def sp_cdc_add_job(ctx, a, line):
    _require_cdc_db(ctx.db, line)
    _require_dbo(ctx, line)
    ctx.db.cdc.job_exists = True
    return sp_cdc_change_job(ctx, a, line)


# Server configuration options a DBA sets around CDC ("Server configuration
# options (SQL Server)"; "Configure the max text repl size Server
# Configuration Option": 65536 bytes by default, -1 for no limit):
# name -> (minimum, maximum, default, advanced).  Kept, not enforced.
CONFIG_OPTIONS = {
    "Agent XPs": (0, 1, 1, True),
    "clr enabled": (0, 1, 0, False),
    "default language": (0, 9999, 0, False),
    "max text repl size (B)": (-1, 2147483647, 65536, False),
    "show advanced options": (0, 1, 0, False),
    "two digit year cutoff": (1753, 9999, 2049, True),
}
CONFIG_COLS = [("name", T.nvarchar(35)), ("minimum", T.INT_TYPE), ("maximum", T.INT_TYPE),
               ("config_value", T.INT_TYPE), ("run_value", T.INT_TYPE)]


def _config_state(eng):
    st = getattr(eng, "configuration", None)
    if st is None:
        st = eng.configuration = {n: [d, d] for n, (_, _, d, _) in CONFIG_OPTIONS.items()}
    return st


def _require_alter_settings(ctx, line):
    if not ctx.session.login.sysadmin:
        raise SqlError(15247, 16, 1, "User does not have permission to perform this action.", line)


@proc("sp_configure", ("@configname", None), ("@configvalue", None))
def sp_configure(ctx, a, line):
    """sp_configure [name [, value]] ("sp_configure (Transact-SQL)"): any
    unique part of a name matches; advanced options need 'show advanced
    options' 1 (run value); a new value waits for RECONFIGURE."""
    st = _config_state(ctx.engine)
    advanced = st["show advanced options"][1] == 1
    visible = [n for n in sorted(CONFIG_OPTIONS, key=str.lower) if advanced or not CONFIG_OPTIONS[n][3]]
    name = a["@configname"]
    if name is None:
        rows = [(n, CONFIG_OPTIONS[n][0], CONFIG_OPTIONS[n][1], st[n][0], st[n][1]) for n in visible]
        return [ResultSet([Column(c, t, True) for c, t in CONFIG_COLS], rows)], 0
    low = str(name).strip().lower()
    hits = [n for n in visible if n.lower() == low] or [n for n in visible if low in n.lower()]
    if not hits:
        raise SqlError(15123, 16, 1, "The configuration option '%s' does not exist, or it may be an advanced "
                       "option." % name, line)
    if len(hits) > 1:
        raise SqlError(15028, 16, 1, "The configuration option '%s' is not unique." % name, line)
    opt = hits[0]
    lo, hi, _, _ = CONFIG_OPTIONS[opt]
    value = a["@configvalue"]
    if value is None:
        return [ResultSet([Column(c, t, True) for c, t in CONFIG_COLS],
                          [(opt, lo, hi, st[opt][0], st[opt][1])])], 0
    _require_alter_settings(ctx, line)
    try:
        v = int(str(value).strip())
    except ValueError:
        raise SqlError(8114, 16, 5, "Error converting data type varchar to int.", line)
    if not lo <= v <= hi:
        raise SqlError(15129, 16, 1, "'%d' is not a valid value for configuration option '%s'." % (v, opt), line)
    old = st[opt][0]
    st[opt][0] = v
    from ..results import Message
    return [Message(15457, 1, 0, "Configuration option '%s' changed from %d to %d. Run the RECONFIGURE "
                    "statement to install." % (opt, old, v), line)], 0


def reconfigure(ctx, line):
    """RECONFIGURE [WITH OVERRIDE]: the configured values become the running ones."""
    _require_alter_settings(ctx, line)
    for vals in _config_state(ctx.engine).values():
        vals[1] = vals[0]


PKEY_COLS = [("TABLE_QUALIFIER", NV), ("TABLE_OWNER", NV), ("TABLE_NAME", NV), ("COLUMN_NAME", NV),
             ("KEY_SEQ", SqlType("smallint")), ("PK_NAME", NV)]


@proc("sp_pkeys", ("@table_name", REQ), ("@table_owner", None), ("@table_qualifier", None))
def sp_pkeys(ctx, a, line):
    from .dml import pk_constraint_name
    db = ctx.db
    name = a["@table_name"]
    owner = a["@table_owner"]
    rows = []
    for t in sorted(db.tables.values(), key=lambda t: (t.schema.name.lower(), t.name.lower())):
        if t.name.lower() != (name or "").lower():
            continue
        if owner is not None and t.schema.name.lower() != owner.lower():
            continue
        if owner is None and t.schema.name.lower() != "dbo":
            continue
        if not ctx.engine.security.can_see(ctx.session, db, t):
            continue
        for seq, i in enumerate(t.pk, 1):
            rows.append((db.name, t.schema.name, t.name, t.columns[i].name, seq, pk_constraint_name(t)))
    return [ResultSet([Column(n, t, True) for n, t in PKEY_COLS], rows)], 0


def find_proc(parts, line):
    name = parts[-1].lower()
    qual = [p.lower() for p in parts[:-1] if p]
    p = PROCS.get(name)
    if p is None or (qual and qual[-1] not in ("sys", "dbo")):
        raise SqlError(2812, 16, 62, "Could not find stored procedure '%s'." % ".".join(parts), line)
    return p
