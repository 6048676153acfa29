"""Catalog views: sys.*, INFORMATION_SCHEMA.*, cdc.* metadata, msdb.dbo.cdc_jobs.

Each view is built on demand as a list of rows (catalogs are small)."""

from __future__ import annotations

import decimal

from ..results import SqlError
from ..sqltypes import MAX, SqlType
from . import lsn as L
from . import types as T
from .query import ListSource

NV128 = T.SYSNAME_TYPE
INT = T.INT_TYPE
BIT = T.BIT_TYPE
TINY = SqlType("tinyint")
SMALL = SqlType("smallint")
DT = T.DATETIME_TYPE
NV60 = T.nvarchar(60)


def _cols(spec):
    return [(n, t, True, None) for n, t in spec]


def _visible_tables(eng, ctx, db):
    """The tables the caller may see, in object_id order: metadata visibility
    ("Metadata Visibility Configuration") hides objects without any
    permission from every catalog view."""
    sec = eng.security
    return [t for t in sorted(db.tables.values(), key=lambda t: t.object_id)
            if sec.can_see(ctx.session, db, t)]


def _require_select(eng, ctx, db, name):
    """cdc.change_tables & co. are ordinary tables of schema cdc: SELECT on
    them (or on the schema) is needed (MicrosoftDocs/sql-docs issue 8037)."""
    if not eng.security.can_select_name(ctx.session, db, "cdc", name):
        raise eng.security.denied(db, "cdc", name)


def v_databases(eng, ctx, db):
    cols = _cols([("name", NV128), ("database_id", INT), ("create_date", DT), ("compatibility_level", TINY),
                  ("collation_name", NV128), ("state", TINY), ("state_desc", NV60),
                  ("snapshot_isolation_state", TINY), ("snapshot_isolation_state_desc", NV60),
                  ("is_read_committed_snapshot_on", BIT), ("is_cdc_enabled", BIT)])
    rows = []
    for d in sorted(eng.databases.values(), key=lambda d: d.database_id):
        rows.append((d.name, d.database_id, eng.start_datetime, 160, "SQL_Latin1_General_CP1_CI_AS", 0,
                     "ONLINE", 1 if d.allow_snapshot else 0, "ON" if d.allow_snapshot else "OFF",
                     False, d.is_cdc_enabled))
    return cols, rows


def v_schemas(eng, ctx, db):
    cols = _cols([("name", NV128), ("schema_id", INT), ("principal_id", INT)])
    return cols, [(s.name, s.schema_id, 1) for s in sorted(db.schemas.values(), key=lambda s: s.schema_id)]


def v_tables(eng, ctx, db):
    cols = _cols([("name", NV128), ("object_id", INT), ("principal_id", INT), ("schema_id", INT),
                  ("parent_object_id", INT), ("type", SqlType("char", length=2)), ("type_desc", NV60),
                  ("create_date", DT), ("modify_date", DT), ("is_ms_shipped", BIT),
                  ("is_tracked_by_cdc", BIT), ("temporal_type", TINY)])
    rows = [(t.name, t.object_id, None, t.schema.schema_id, 0, "U ", "USER_TABLE", t.create_date,
             t.modify_date, t.is_system, bool(t.capture_instances), 0)
            for t in _visible_tables(eng, ctx, db)]
    return cols, rows


def v_objects(eng, ctx, db):
    cols = _cols([("name", NV128), ("object_id", INT), ("principal_id", INT), ("schema_id", INT),
                  ("parent_object_id", INT), ("type", SqlType("char", length=2)), ("type_desc", NV60),
                  ("create_date", DT), ("modify_date", DT), ("is_ms_shipped", BIT)])
    rows = [(t.name, t.object_id, None, t.schema.schema_id, 0, "U ", "USER_TABLE", t.create_date,
             t.modify_date, t.is_system) for t in _visible_tables(eng, ctx, db)]
    if db.cdc:
        cdc_id = db.schemas["cdc"].schema_id
        for ci in db.cdc.instances.values():
            if not eng.security.can_see_function(ctx.session, db, ci):
                continue
            rows.append(("fn_cdc_get_all_changes_" + ci.name, ci.object_id + 1, None, cdc_id, 0, "IF",
                         "SQL_INLINE_TABLE_VALUED_FUNCTION", ci.create_date, ci.create_date, False))
    return cols, rows


def v_columns(eng, ctx, db):
    cols = _cols([("object_id", INT), ("name", NV128), ("column_id", INT), ("system_type_id", TINY),
                  ("user_type_id", INT), ("max_length", SMALL), ("precision", TINY), ("scale", TINY),
                  ("collation_name", NV128), ("is_nullable", BIT), ("is_identity", BIT),
                  ("is_computed", BIT), ("is_sparse", BIT), ("is_column_set", BIT)])
    rows = []
    for t in _visible_tables(eng, ctx, db):
        for c in t.columns:
            tid, mx, p, s = type_facts(c.type)
            rows.append((t.object_id, c.name, c.column_id, tid, tid, mx, p, s, T.collation_name(c.type),
                         c.nullable, c.identity is not None, c.computed is not None, False, False))
    return cols, rows


def type_facts(t: SqlType):
    """(system_type_id, max_length, precision, scale) as sys.columns shows them."""
    tid, mx, p, s = T.SYSTEM_TYPES.get(t.name, (0, 0, 0, 0))
    n = t.name
    if n in ("varchar", "char", "binary", "varbinary"):
        mx = -1 if t.length == MAX else t.length
        p = s = 0
    elif n in ("nvarchar", "nchar"):
        mx = -1 if t.length == MAX else t.length * 2
        p = s = 0
    elif n in ("decimal", "numeric"):
        p, s = t.precision, t.scale
        mx = 5 if p <= 9 else 9 if p <= 19 else 13 if p <= 28 else 17
    elif n in ("time", "datetime2", "datetimeoffset"):
        s = t.scale
        base = {"time": 8, "datetime2": 19, "datetimeoffset": 26}[n]
        p = base + (s + 1 if s else 0)
        frac = 3 if s <= 2 else 4 if s <= 4 else 5
        mx = frac + {"time": 0, "datetime2": 3, "datetimeoffset": 5}[n]
    elif n == "real":
        p = 24
    elif n == "xml":
        mx = -1
    return tid, mx, p, s


def v_types(eng, ctx, db):
    cols = _cols([("name", NV128), ("system_type_id", TINY), ("user_type_id", INT), ("schema_id", INT),
                  ("max_length", SMALL), ("precision", TINY), ("scale", TINY), ("is_nullable", BIT),
                  ("is_user_defined", BIT)])
    rows = []
    for name, (tid, mx, p, s) in sorted(T.SYSTEM_TYPES.items(), key=lambda kv: kv[1][0]):
        uid = {"sysname": 256, "hierarchyid": 128, "geometry": 129, "geography": 130}.get(name, tid)
        rows.append((name, tid, uid, 4, mx, p, s, name != "sysname", False))
    return cols, rows


def v_indexes(eng, ctx, db):
    cols = _cols([("object_id", INT), ("name", NV128), ("index_id", INT), ("type", TINY),
                  ("type_desc", NV60), ("is_unique", BIT), ("is_primary_key", BIT),
                  ("is_unique_constraint", BIT)])
    from .dml import pk_constraint_name
    rows = []
    for t in _visible_tables(eng, ctx, db):
        if t.pk:
            rows.append((t.object_id, pk_constraint_name(t), 1, 1, "CLUSTERED", True, True, False))
        else:
            rows.append((t.object_id, None, 0, 0, "HEAP", False, False, False))
        for ui in t.unique_indexes:
            rows.append((t.object_id, ui.name, ui.index_id, 2, "NONCLUSTERED", True, False, ui.is_constraint))
    return cols, rows


def v_index_columns(eng, ctx, db):
    cols = _cols([("object_id", INT), ("index_id", INT), ("index_column_id", INT), ("column_id", INT),
                  ("key_ordinal", TINY), ("is_descending_key", BIT), ("is_included_column", BIT)])
    rows = []
    for t in _visible_tables(eng, ctx, db):
        for k, i in enumerate(t.pk):
            rows.append((t.object_id, 1, k + 1, t.columns[i].column_id, k + 1, False, False))
        for ui in t.unique_indexes:
            for k, c in enumerate(ui.columns):
                rows.append((t.object_id, ui.index_id, k + 1, c.column_id, k + 1, False, False))
    return cols, rows


def v_key_constraints(eng, ctx, db):
    from .dml import pk_constraint_name
    cols = _cols([("name", NV128), ("object_id", INT), ("parent_object_id", INT), ("type", SqlType("char", length=2)),
                  ("unique_index_id", INT)])
    visible = _visible_tables(eng, ctx, db)
    rows = [(pk_constraint_name(t), t.object_id + 3, t.object_id, "PK", 1) for t in visible if t.pk]
    rows += [(ui.name, ui.object_id, t.object_id, "UQ", ui.index_id) for t in visible
             for ui in t.unique_indexes if ui.is_constraint]
    return cols, rows


def v_dm_server_services(eng, ctx, db):
    cols = _cols([("servicename", NV128), ("status", INT), ("status_desc", NV60)])
    return cols, [("SQL Server (MSSQLSERVER)", 4, "Running"), ("SQL Server Agent (MSSQLSERVER)", 4, "Running")]


def v_database_principals(eng, ctx, db):
    cols = _cols([("name", NV128), ("principal_id", INT), ("type", SqlType("char", length=1)),
                  ("type_desc", NV60)])
    return cols, [(u.name, u.principal_id, "R" if u.is_role else "S", "DATABASE_ROLE" if u.is_role else "SQL_USER")
                  for u in db.users.values()]


def v_database_role_members(eng, ctx, db):
    cols = _cols([("role_principal_id", INT), ("member_principal_id", INT)])
    rows = []
    for u in db.users.values():
        for r in u.roles:
            ru = db.users.get(r)
            if ru is not None:
                rows.append((ru.principal_id, u.principal_id))
    return cols, rows


def v_info_columns(eng, ctx, db):
    cols = _cols([("TABLE_CATALOG", NV128), ("TABLE_SCHEMA", NV128), ("TABLE_NAME", NV128),
                  ("COLUMN_NAME", NV128), ("ORDINAL_POSITION", INT), ("COLUMN_DEFAULT", T.nvarchar(4000)),
                  ("IS_NULLABLE", T.varchar(3)), ("DATA_TYPE", NV128), ("CHARACTER_MAXIMUM_LENGTH", INT),
                  ("CHARACTER_OCTET_LENGTH", INT), ("NUMERIC_PRECISION", TINY), ("NUMERIC_PRECISION_RADIX", SMALL),
                  ("NUMERIC_SCALE", INT), ("DATETIME_PRECISION", SMALL), ("CHARACTER_SET_NAME", NV128),
                  ("COLLATION_NAME", NV128)])
    rows = []
    for t in _visible_tables(eng, ctx, db):
        for pos, c in enumerate(t.columns, 1):
            ty = c.type
            n = ty.name
            cml = col = None
            if n in ("char", "varchar", "binary", "varbinary", "nchar", "nvarchar"):
                cml = -1 if ty.length == MAX else ty.length
                col = -1 if ty.length == MAX else (ty.length * 2 if n[0] == "n" else ty.length)
            elif n in ("text", "image", "xml"):
                cml = col = 2147483647 if n != "xml" else -1
            elif n == "ntext":
                cml, col = 1073741823, 2147483646
            np = nr = ns = dp = None
            if n in ("tinyint", "smallint", "int", "bigint"):
                np, nr, ns = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 19}[n], 10, 0
            elif n in ("decimal", "numeric"):
                np, nr, ns = ty.precision, 10, ty.scale
            elif n in ("money", "smallmoney"):
                np, nr, ns = (19 if n == "money" else 10), 10, 4
            elif n in ("float", "real"):
                np, nr = (53 if n == "float" else 24), 2
            elif n in ("datetime2", "time", "datetimeoffset"):
                dp = ty.scale
            elif n == "datetime":
                dp = 3
            elif n in ("smalldatetime", "date"):
                dp = 0
            data_type = "timestamp" if n == "timestamp" else n
            charset = ("UNICODE" if n in ("nchar", "nvarchar", "ntext") else T.charset_name(ty)) \
                if ty.is_character() and n != "xml" else None
            rows.append((db.name, t.schema.name, t.name, c.name, pos, None, "YES" if c.nullable else "NO",
                         data_type, cml, col, np, nr, ns, dp, charset, T.collation_name(ty)))
    return cols, rows


def v_info_tables(eng, ctx, db):
    cols = _cols([("TABLE_CATALOG", NV128), ("TABLE_SCHEMA", NV128), ("TABLE_NAME", NV128),
                  ("TABLE_TYPE", T.varchar(10))])
    return cols, [(db.name, t.schema.name, t.name, "BASE TABLE") for t in _visible_tables(eng, ctx, db)]


def _cdc(db):
    if db.cdc is None:
        return None
    return db.cdc


def v_change_tables(eng, ctx, db):
    _require_select(eng, ctx, db, "change_tables")
    cols = _cols([("object_id", INT), ("version", INT), ("source_object_id", INT),
                  ("capture_instance", NV128), ("start_lsn", T.LSN_TYPE), ("end_lsn", T.LSN_TYPE),
                  ("supports_net_changes", BIT), ("has_drop_pending", BIT), ("role_name", NV128),
                  ("index_name", NV128), ("filegroup_name", NV128), ("create_date", DT),
                  ("partition_switch", BIT)])
    rows = [(ci.object_id, 0, ci.source.object_id, ci.name, ci.start_lsn, None, ci.supports_net_changes,
             None, ci.role_name, ci.index_name, ci.filegroup_name, ci.create_date, ci.partition_switch)
            for ci in sorted(db.cdc.instances.values(), key=lambda c: c.object_id)]
    return cols, rows


def v_captured_columns(eng, ctx, db):
    _require_select(eng, ctx, db, "captured_columns")
    cols = _cols([("object_id", INT), ("column_name", NV128), ("column_id", INT), ("column_type", NV128),
                  ("column_ordinal", INT), ("is_computed", BIT), ("masking_function", T.nvarchar(4000))])
    rows = []
    for ci in sorted(db.cdc.instances.values(), key=lambda c: c.object_id):
        for i, (cid, name, t, computed, lob) in enumerate(ci.captured, 1):
            rows.append((ci.object_id, name, cid, t.name, i, computed, None))
    return cols, rows


def v_index_columns_cdc(eng, ctx, db):
    _require_select(eng, ctx, db, "index_columns")
    cols = _cols([("object_id", INT), ("column_name", NV128), ("index_ordinal", TINY), ("column_id", INT)])
    rows = []
    for ci in sorted(db.cdc.instances.values(), key=lambda c: c.object_id):
        names = {c.column_id: c.name for c in ci.source.columns}
        for i, cid in enumerate(ci.index_column_ids, 1):
            rows.append((ci.object_id, names.get(cid), i, cid))
    return cols, rows


def v_ddl_history(eng, ctx, db):
    _require_select(eng, ctx, db, "ddl_history")
    cols = _cols([("source_object_id", INT), ("object_id", INT), ("required_column_update", BIT),
                  ("ddl_command", T.nvarchar(MAX)), ("ddl_lsn", T.LSN_TYPE), ("ddl_time", DT)])
    return cols, [(h["source_object_id"], h["object_id"], h["required_column_update"], h["ddl_command"],
                   h["ddl_lsn"], h["ddl_time"]) for h in db.cdc.ddl_history]


def v_scan_sessions(eng, ctx, db):
    if not eng.security.can_view_state(ctx.session, db):
        raise SqlError(297, 16, 1, "The user does not have permission to perform this action.")
    cols = _cols([("session_id", INT), ("start_time", DT), ("end_time", DT), ("duration", INT),
                  ("scan_phase", T.nvarchar(200)), ("error_count", INT), ("start_lsn", T.nvarchar(23)),
                  ("current_lsn", T.nvarchar(23)), ("end_lsn", T.nvarchar(23)), ("tran_count", SqlType("bigint")),
                  ("last_commit_lsn", T.nvarchar(23)), ("last_commit_time", DT), ("log_record_count", SqlType("bigint")),
                  ("schema_change_count", INT), ("command_count", SqlType("bigint")),
                  ("first_begin_cdc_lsn", T.nvarchar(23)), ("last_commit_cdc_lsn", T.nvarchar(23)),
                  ("last_commit_cdc_time", DT), ("latency", INT), ("empty_scan_count", INT),
                  ("failed_sessions_count", INT)])
    rows = []
    st = db.cdc
    if st is not None and st.scans_started is not None:
        # session 0 aggregates every session since the start: its end_time
        # is the end of the latest one (empty scans included)
        en = eng.datetime_at(st.last_scan_end)
        last = st.scan_sessions[-1] if st.scan_sessions else None
        f0 = lambda v: L.colon_form(L.to_bytes(v)) if v is not None else "00000000:00000000:0000"
        rows.append((0, eng.datetime_at(st.scans_started), en, 0, "Aggregate", 0,
                     f0(last["start_lsn"] if last else None), "00000000:00000000:0000",
                     f0(last["end_lsn"] if last else None), st.scan_tran_total, "00000000:00000000:0000",
                     en, 0, 0, st.scan_tran_total, "00000000:00000000:0000", "00000000:00000000:0000",
                     en, 0, last["empty_scan_count"] if last else 0, 0))
    if db.cdc is not None:
        for s in db.cdc.scan_sessions:
            st = eng.datetime_at(s["start_time"])
            en = eng.datetime_at(s["end_time"])
            f = lambda v: L.colon_form(L.to_bytes(v)) if v is not None else "00000000:00000000:0000"
            rows.append((s["session_id"], st, en, 0, "Done", 0, f(s["start_lsn"]), f(s["end_lsn"]),
                         f(s["end_lsn"]), s["tran_count"], f(s["end_lsn"]), en, 0, 0, s["tran_count"],
                         f(s["start_lsn"]), f(s["end_lsn"]), en, 0, s["empty_scan_count"], 0))
    return cols, rows


def v_cdc_jobs(eng, ctx, db):
    cols = _cols([("database_id", INT), ("job_type", NV60), ("job_id", SqlType("uniqueidentifier")),
                  ("maxtrans", INT), ("maxscans", INT), ("continuous", BIT), ("pollinginterval", SqlType("bigint")),
                  ("retention", SqlType("bigint")), ("threshold", SqlType("bigint"))])
    import uuid
    rows = []
    for d in sorted(eng.databases.values(), key=lambda d: d.database_id):
        if d.cdc is not None and d.cdc.job_exists:
            j = d.cdc.job
            rows.append((d.database_id, "capture", uuid.UUID(int=d.database_id * 2 + 1), j["maxtrans"],
                         j["maxscans"], bool(j["continuous"]), j["pollinginterval"], 0, 0))
            rows.append((d.database_id, "cleanup", uuid.UUID(int=d.database_id * 2 + 2), 0, 0, False, 0,
                         j["retention"], j["threshold"]))
    return cols, rows


def v_partitions(eng, ctx, db):
    """One partition per table (heap index_id 0, clustered PK 1); rows is the
    number of live newest row versions, an estimate as on SQL Server (it is
    maintained lazily there and may lag concurrent writes)."""
    cols = _cols([("partition_id", SqlType("bigint")), ("object_id", INT), ("index_id", INT),
                  ("partition_number", INT), ("hobt_id", SqlType("bigint")), ("rows", SqlType("bigint")),
                  ("data_compression", TINY), ("data_compression_desc", NV60)])
    rows = []
    for t in _visible_tables(eng, ctx, db):
        live = sum(1 for rv in t.rows.values() if rv.xmax is None)
        pid = t.object_id * 100 + 1
        rows.append((pid, t.object_id, 1 if t.pk else 0, 1, pid, live, 0, "NONE"))
    return cols, rows


def v_time_zone_info(eng, ctx, db):
    """The zones AT TIME ZONE accepts (engine/clock.py), as of the server's
    clock; a fixed-offset server zone is listed too."""
    from .clock import WINDOWS_ZONES, Zone
    cols = _cols([("name", NV128), ("current_utc_offset", T.nvarchar(12)), ("is_currently_dst", BIT)])
    zones = [Zone.named(n) for n in WINDOWS_ZONES]
    if eng.clock.zone.name not in WINDOWS_ZONES:
        zones.append(eng.clock.zone)
    now = eng.clock.now()
    rows = []
    for z in zones:
        off = z.offset_at(now)
        rows.append((z.name, "%s%02d:%02d" % ("-" if off < 0 else "+", abs(off) // 60, abs(off) % 60),
                     z.is_dst_at(now)))
    return cols, rows


def v_database_recovery_status(eng, ctx, db):
    """One row per database the caller may see (page
    "sys.database_recovery_status": master and tempdb for all, others for the
    owner or VIEW ANY DATABASE / ALTER ANY DATABASE holders)."""
    from .restore import numeric_lsn
    guid = SqlType("uniqueidentifier")
    num = SqlType("numeric", precision=25, scale=0)
    cols = _cols([("database_id", INT), ("database_guid", guid), ("family_guid", guid),
                  ("last_log_backup_lsn", num), ("recovery_fork_guid", guid),
                  ("first_recovery_fork_guid", guid), ("fork_point_lsn", num)])
    rows = []
    for d in sorted(eng.databases.values(), key=lambda d: d.database_id):
        if not eng.security.sees_recovery_status(ctx.session, d):
            continue
        fork = None if d.fork_point_lsn is None else decimal.Decimal(numeric_lsn(d.fork_point_lsn))
        rows.append((d.database_id, d.database_guid, d.family_guid, None, d.recovery_fork_guid,
                     d.first_recovery_fork_guid, fork))
    return cols, rows


SYS_VIEWS = {
    "databases": v_databases, "schemas": v_schemas, "tables": v_tables, "objects": v_objects,
    "all_objects": v_objects, "columns": v_columns, "all_columns": v_columns, "types": v_types,
    "indexes": v_indexes, "index_columns": v_index_columns, "key_constraints": v_key_constraints,
    "dm_server_services": v_dm_server_services, "database_principals": v_database_principals,
    "database_role_members": v_database_role_members, "dm_cdc_log_scan_sessions": v_scan_sessions,
    "partitions": v_partitions, "time_zone_info": v_time_zone_info,
    "database_recovery_status": v_database_recovery_status,
}
INFO_VIEWS = {"columns": v_info_columns, "tables": v_info_tables}
CDC_VIEWS = {"change_tables": v_change_tables, "captured_columns": v_captured_columns,
             "index_columns": v_index_columns_cdc, "ddl_history": v_ddl_history}


def find_view(db, schema, name):
    s, n = schema.lower(), name.lower()
    if s == "sys":
        return SYS_VIEWS.get(n)
    if s == "information_schema":
        return INFO_VIEWS.get(n)
    if s == "cdc" and db.cdc is not None:
        return CDC_VIEWS.get(n)
    return None


def view_source(eng, ctx, db, builder, qualifiers):
    cols, rows = builder(eng, ctx, db)
    return ListSource(cols, qualifiers, rows)
