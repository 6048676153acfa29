"""CREATE/DROP/ALTER TABLE, TRUNCATE, CREATE SCHEMA."""

from __future__ import annotations

from ..results import SqlError
from . import ast as A
from . import types as T
from . import values as V
from .expressions import Compiler, Scope, ScopeColumn
from .storage import ColumnMeta, Table


def _check_name(name, line):
    if len(name) > 128:
        raise SqlError(103, 15, 4, "The identifier that starts with '%s' is too long. Maximum length is 128."
                       % name[:128], line)


def resolve_schema(ctx, parts, line):
    db_name = parts[-3] if len(parts) >= 3 else None
    db = ctx.resolve_database(db_name, line)
    schema_name = parts[-2] if len(parts) >= 2 and parts[-2] else "dbo"
    schema = db.schemas.get(schema_name.lower())
    return db, schema, schema_name


def build_columns(ctx, table_name, defs, start_id, line, existing=()):
    cols = []
    names = {c.name.lower() for c in existing}
    cid = start_id
    for d in defs:
        _check_name(d.name, d.line or line)
        if d.name.lower() in names:
            raise SqlError(2705, 16, 3, "Column names in each table must be unique. Column name '%s' in table "
                           "'%s' specified more than once." % (d.name, table_name), d.line or line)
        names.add(d.name.lower())
        t = d.type
        if t is not None and d.collation:
            if not t.is_character():
                raise SqlError(447, 16, 0, "Expression type %s is invalid for COLLATE clause." % t.name, line)
            t = T.with_collation(t, d.collation)
        nullable = True if d.nullable is None else d.nullable
        if d.identity is not None:
            if t.name not in ("tinyint", "smallint", "int", "bigint") and not (
                    t.name in ("decimal", "numeric") and t.scale == 0):
                raise SqlError(2749, 16, 2, "Identity column '%s' must be of data type int, bigint, smallint, "
                               "tinyint, or decimal or numeric with a scale of 0, and constrained to be "
                               "nonnullable." % d.name, line)
            nullable = False if d.nullable is None else d.nullable
            if nullable:
                raise SqlError(8147, 16, 1, "Could not create IDENTITY attribute on nullable column '%s', table "
                               "'%s'." % (d.name, table_name), line)
        if t is not None and t.name == "timestamp":
            nullable = False if d.nullable is None else d.nullable
        if d.pk and d.nullable is None:
            nullable = False
        c = ColumnMeta(d.name, t, nullable, d.identity, d.default, d.computed, d.persisted, cid)
        cid += 1
        cols.append(c)
    if sum(1 for c in list(existing) + cols if c.identity) > 1:
        raise SqlError(2744, 16, 2, "Multiple identity columns specified for table '%s'. Only one identity "
                       "column per table is allowed." % table_name, line)
    if sum(1 for c in list(existing) + cols if c.is_rowversion) > 1:
        raise SqlError(2738, 16, 2, "A table can only have one timestamp column. Because table '%s' already "
                       "has one, the column '%s' cannot be added." % (table_name, cols[-1].name), line)
    return cols


def type_computed(ctx, all_cols, line):
    """Give computed columns their type by compiling the expression."""
    base = [ScopeColumn({"t"}, c.name, i, c.type or T.INT_TYPE, c.nullable, c)
            for i, c in enumerate(all_cols)]
    for c in all_cols:
        if c.computed is not None and c.type is None:
            comp = Compiler(ctx, Scope([b for b in base if all_cols[b.index].computed is None]), line)
            _, t = comp.compile(c.computed)
            c.type = t
            c.is_rowversion = False


def apply_pk(table, pk_names, pk_name, line, check_rows=False):
    from .unique import key_columns
    idx = key_columns(table, pk_names, line)
    for i in idx:
        if table.columns[i].nullable:
            raise SqlError(8111, 16, 1, "Cannot define PRIMARY KEY constraint on nullable column in table '%s'."
                           % table.name, line)
    table.pk = idx
    table.pk_name = pk_name
    table.cluster = list(idx)
    table.refresh_keyfns()
    if check_rows:
        rows, keys = {}, []
        for k in table.keys:
            rv = table.rows[k]
            nk = table.key_of(rv.values)
            if nk in rows:
                raise SqlError(1505, 16, 1, "The CREATE UNIQUE INDEX statement terminated because a duplicate "
                               "key was found for the object name '%s' and the index name '%s'."
                               % (table.full_name, pk_name or "PK"), line)
            rows[nk] = rv
            keys.append(nk)
        keys.sort()
        table.rows, table.keys = rows, keys


def create_table(ctx, st: A.CreateTable):
    eng = ctx.engine
    db, schema, sname = resolve_schema(ctx, st.parts, st.line)
    name = st.parts[-1]
    _check_name(name, st.line)
    if not eng.security.is_dbo(ctx.session, db):
        raise SqlError(262, 14, 1, "CREATE TABLE permission denied in database '%s'." % db.name, st.line)
    if schema is None:
        raise SqlError(2760, 16, 1, 'The specified schema name "%s" either does not exist or you do not have '
                       'permission to use it.' % sname, st.line)
    if db.find_table(schema.name, name) is not None or eng.name_taken(db, schema, name):
        raise SqlError(2714, 16, 6, "There is already an object named '%s' in the database." % name, st.line)
    cols = build_columns(ctx, name, st.columns, 1, st.line)
    type_computed(ctx, cols, st.line)
    table = Table(db, schema, name, eng.new_object_id(), cols)
    table.create_date = table.modify_date = eng.now_datetime()
    if st.pk_columns:
        apply_pk(table, st.pk_columns, st.pk_name, st.line)
    from .unique import add_unique
    for uname, ucols in st.uniques or []:
        add_unique(eng, table, uname, ucols, True, st.line)
    db.tables[(schema.name.lower(), name.lower())] = table
    db.by_id[table.object_id] = table
    return table


def drop_table(ctx, st: A.DropTable):
    eng = ctx.engine
    for parts in st.names:
        db, schema, sname = resolve_schema(ctx, parts, st.line)
        table = db.find_table(schema.name, parts[-1]) if schema else None
        if table is None:
            if st.if_exists:
                continue
            raise SqlError(3701, 11, 5, "Cannot drop the table '%s', because it does not exist or you do not "
                           "have permission." % ".".join(p for p in parts if p), st.line)
        if not eng.security.is_dbo(ctx.session, db):
            raise SqlError(3701, 11, 5, "Cannot drop the table '%s', because it does not exist or you do not "
                           "have permission." % ".".join(p for p in parts if p), st.line)
        if table.is_system:
            raise SqlError(3701, 11, 5, "Cannot drop the table '%s', because it does not exist or you do not "
                           "have permission." % ".".join(p for p in parts if p), st.line)
        for ci in list(table.capture_instances):
            eng.cdc.drop_capture_instance(db, ci)
        del db.tables[(schema.name.lower(), table.name.lower())]
        del db.by_id[table.object_id]
        if ctx.session.identity_insert is table:
            ctx.session.identity_insert = None


def _rewrite_rows(table, fn):
    for k in table.keys:
        rv = table.rows.get(k)
        while rv is not None:
            rv.values = fn(rv.values)
            rv.cache = None
            rv = rv.prev


def _has_rows(table):
    for k in table.keys:
        rv = table.rows[k]
        if rv.xmax is None or rv.xmax.__class__ is not int:
            return True
    return False


def alter_add(ctx, st: A.AlterTableAdd):
    eng = ctx.engine
    table = eng.resolve_table(ctx, st.parts, st.line, for_ddl=True)
    new_cols = build_columns(ctx, table.name, st.columns, table.next_column_id, st.line, table.columns)
    all_cols = table.columns + new_cols
    type_computed(ctx, all_cols, st.line)
    nonempty = _has_rows(table)
    fills = []
    for c in new_cols:
        v = None
        if c.default is not None:
            f, t = Compiler(ctx, Scope([]), st.line).compile(c.default)
            v = V.convert(f(()), t, c.type)
        if not c.nullable and v is None and c.identity is None and not c.is_rowversion and \
                c.computed is None and nonempty:
            raise SqlError(4901, 16, 1, "ALTER TABLE only allows columns to be added that can contain nulls, or "
                           "have a DEFAULT definition specified, or the column being added is an identity or "
                           "timestamp column, or alternatively if none of the previous conditions are satisfied "
                           "the table must be empty to allow addition of this column. Column '%s' cannot be added "
                           "to non-empty table '%s' because it does not satisfy these conditions."
                           % (c.name, table.name), st.line)
        if c.default is not None and c.nullable:
            v = None          # without WITH VALUES existing rows get NULL in nullable columns
        fills.append((c, v))
    if st.pk_columns and table.pk:
        raise SqlError(1779, 16, 0, "Table '%s' already has a primary key defined on it." % table.name, st.line)
    table.columns = all_cols
    table.next_column_id += len(new_cols)
    if new_cols:
        counter = [table.identity_current]

        def extend(vals):
            extra = []
            for c, v in fills:
                if c.is_rowversion:
                    extra.append(table.db.next_rowversion())
                elif c.identity is not None:
                    seed, inc = c.identity
                    counter[0] = seed if counter[0] is None else counter[0] + inc
                    extra.append(counter[0])
                else:
                    extra.append(v)
            return tuple(vals) + tuple(extra)
        _rewrite_rows(table, extend)
        if any(c.identity for c in new_cols):
            table.identity_current = counter[0]
    table.refresh_keyfns()
    if st.pk_columns:
        apply_pk(table, st.pk_columns, st.pk_name, st.line, check_rows=True)
    from .unique import add_unique
    for uname, ucols in st.uniques or []:
        add_unique(eng, table, uname, ucols, True, st.line)
    table.modify_date = eng.now_datetime()
    eng.cdc.record_ddl(table, "ALTER TABLE %s ADD ..." % table.full_name, required_update=False)


def _refuse_unique_dependency(table, column, name, line):
    from .unique import index_on_column
    dep = index_on_column(table, column)
    if dep is not None:
        raise SqlError(5074, 16, 1, "The object '%s' is dependent on column '%s'." % (dep, name), line)


def alter_drop(ctx, st: A.AlterTableDrop):
    eng = ctx.engine
    table = eng.resolve_table(ctx, st.parts, st.line, for_ddl=True)
    drop_idx = []
    for name in st.columns:
        i = table.column_index(name)
        if i < 0:
            if st.if_exists:
                continue
            raise SqlError(4924, 16, 1, "ALTER TABLE DROP COLUMN failed because column '%s' does not exist in "
                           "table '%s'." % (name, table.name), st.line)
        if i in table.pk:
            raise SqlError(5074, 16, 1, "The object '%s' is dependent on column '%s'."
                           % (table.pk_name or "PK__%s" % table.name, name), st.line)
        for ci in table.capture_instances:
            if table.columns[i].column_id in ci.index_column_ids:
                raise SqlError(5074, 16, 1, "The object '%s' is dependent on column '%s'."
                               % (ci.index_name or "PK", name), st.line)
        _refuse_unique_dependency(table, table.columns[i], name, st.line)
        drop_idx.append(i)
    if not drop_idx:
        return
    keep = [i for i in range(len(table.columns)) if i not in drop_idx]
    old_cluster_cols = [table.columns[i] for i in table.cluster]
    old_pk_cols = [table.columns[i] for i in table.pk]
    table.columns = [table.columns[i] for i in keep]
    table.pk = [table.columns.index(c) for c in old_pk_cols]
    table.cluster = [table.columns.index(c) for c in old_cluster_cols]
    _rewrite_rows(table, lambda vals: tuple(vals[i] for i in keep))
    table.refresh_keyfns()
    table.modify_date = eng.now_datetime()
    eng.cdc.record_ddl(table, "ALTER TABLE %s DROP COLUMN %s" % (table.full_name, ", ".join(st.columns)),
                       required_update=False)


def alter_drop_constraint(ctx, st: A.AlterTableDropConstraint):
    """ALTER TABLE t DROP CONSTRAINT [IF EXISTS] name, for the primary key and
    UNIQUE constraints.  A key a capture instance uses as its index (the
    primary key at sys.sp_cdc_enable_table, or @index_name) cannot be dropped
    while the instance exists: 22979.  A primary key added after the table
    was enabled is not the instance's, and "the key and key columns can be
    removed without restrictions" (page "Enable and disable change data
    capture").  Without its primary key the table is a heap: rows keep their
    values and get row ids in key order."""
    from .dml import pk_constraint_name
    eng = ctx.engine
    table = eng.resolve_table(ctx, st.parts, st.line, for_ddl=True)
    low = st.name.lower()
    unique = next((u for u in table.unique_indexes if u.name.lower() == low), None)
    is_pk = bool(table.pk) and pk_constraint_name(table).lower() == low
    if not is_pk and unique is None:
        if st.if_exists:
            return
        raise SqlError(3728, 16, 1, "'%s' is not a constraint." % st.name, st.line)
    for ci in table.capture_instances:
        if ci.index_name is not None and ci.index_name.lower() == low:
            raise SqlError(22979, 16, 1, "The unique index '%s' on table '%s' is used by Change Data Capture. The "
                           "constraint using this index cannot be dropped or disabled." % (ci.index_name,
                                                                                          table.full_name),
                           st.line)
    if unique is not None:
        table.unique_indexes.remove(unique)
    else:
        clustered_on_pk = table.cluster == table.pk
        table.pk = []
        table.pk_name = None
        if clustered_on_pk:
            table.cluster = []
            table.refresh_keyfns()
            rows, keys = {}, []
            for k in table.keys:
                nk = table.key_of(table.rows[k].values)
                rows[nk] = table.rows[k]
                keys.append(nk)
            table.rows, table.keys = rows, keys
    table.modify_date = eng.now_datetime()
    eng.cdc.record_ddl(table, "ALTER TABLE %s DROP CONSTRAINT %s" % (table.full_name, st.name),
                       required_update=False)


def alter_column(ctx, st: A.AlterColumn):
    """ALTER TABLE t ALTER COLUMN c type [NULL|NOT NULL]: converts every stored
    version; a captured column's change-table type follows (ddl_history
    required_column_update = 1), as SQL Server propagates type changes."""
    eng = ctx.engine
    table = eng.resolve_table(ctx, st.parts, st.line, for_ddl=True)
    d = st.column
    i = table.column_index(d.name)
    if i < 0:
        raise SqlError(4924, 16, 1, "ALTER TABLE ALTER COLUMN failed because column '%s' does not exist in table "
                       "'%s'." % (d.name, table.name), st.line)
    old = table.columns[i]
    if d.type is None or old.computed is not None or old.is_rowversion:
        raise SqlError(4928, 16, 1, "Cannot alter column '%s' because it is '%s'." % (
            d.name, "COMPUTED" if old.computed is not None else "timestamp"), st.line)
    for ci in table.capture_instances:
        if old.column_id in ci.index_column_ids:
            raise SqlError(5074, 16, 1, "The object '%s' is dependent on column '%s'." % (ci.index_name, d.name),
                           st.line)
    _refuse_unique_dependency(table, old, d.name, st.line)
    new_type = T.with_collation(d.type, d.collation) if d.collation else d.type
    nullable = True if d.nullable is None else d.nullable
    if i in table.pk and nullable:
        raise SqlError(8111, 16, 1, "Cannot define PRIMARY KEY constraint on nullable column in table '%s'."
                       % table.name, st.line)
    full = "%s.%s.%s" % (table.db.name, table.schema.name, table.name)

    def conv(v):
        if v is None:
            if not nullable:
                raise SqlError(515, 16, 2, "Cannot insert the value NULL into column '%s', table '%s'; column "
                               "does not allow nulls. UPDATE fails." % (d.name, full), st.line)
            return None
        return V.store_check(V.convert(v, old.type, new_type), new_type, full, d.name)
    # convert first (all or nothing), then swap the tuples in
    converted = []
    for k in table.keys:
        rv = table.rows.get(k)
        while rv is not None:
            converted.append((rv, conv(rv.values[i])))
            rv = rv.prev
    for rv, v in converted:
        vals = list(rv.values)
        vals[i] = v
        rv.values = tuple(vals)
        rv.cache = None
    old.type = new_type
    old.nullable = nullable
    table.refresh_keyfns()
    changed_ci = False
    from .cdc import ct_type, lob_kind
    for ci in table.capture_instances:
        for n, cap in enumerate(ci.captured):
            if cap[0] == old.column_id:
                ci.captured[n] = (cap[0], cap[1], ct_type(new_type), cap[3], lob_kind(new_type))
                ct_col = ci.ct.columns[ci.ct.column_index(cap[1])]
                ct_col.type = ct_type(new_type)
                changed_ci = True
    table.modify_date = eng.now_datetime()
    eng.cdc.record_ddl(table, "ALTER TABLE %s ALTER COLUMN %s %s" % (table.full_name, d.name, new_type.sql()),
                       required_update=changed_ci)


def truncate(ctx, st: A.Truncate):
    eng = ctx.engine
    table = eng.resolve_table(ctx, st.parts, st.line, for_ddl=True)
    if table.capture_instances:
        raise SqlError(4711, 16, 1, "Cannot truncate table '%s' because it is published for replication or "
                       "enabled for Change Data Capture." % table.name, st.line)
    from .dml import Writer
    snap, txn = ctx.read_view()
    from .storage import visible
    w = Writer(ctx, table, st.line)
    for key in list(table.keys):
        rv = visible(table.rows.get(key), snap, txn)
        if rv is None:
            continue
        head = w.head_for_write(key)
        if head is not None and head.xmax is None:
            ctx.txn.delete(table, key, head)
    for c in table.columns:
        if c.identity is not None:
            table.identity_current = None


def create_schema(ctx, st: A.CreateSchema):
    if not ctx.engine.security.is_dbo(ctx.session, ctx.db):
        raise SqlError(2760, 16, 1, 'The specified schema name "%s" either does not exist or you do not have '
                       'permission to use it.' % st.name, st.line)
    try:
        ctx.db.add_schema(st.name)
    except SqlError as e:
        e.line = st.line
        raise
