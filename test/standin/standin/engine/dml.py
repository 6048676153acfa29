"""INSERT / UPDATE / DELETE with constraint checks, row locking and CDC logging."""

from __future__ import annotations

import time

from ..results import SqlError
from . import ast as A
from . import types as T
from . import values as V
from .expressions import Compiler, Scope, ScopeColumn
from .session import SNAPSHOT
from .storage import visible
from .transactions import ChangeRecord
from .unique import check_statement as check_unique
from .unique import key_change_detector


def cancelled(line):
    """ATTENTION arrived: the statement is rolled back (the client only sees the attention ack)."""
    return SqlError(3617, 16, 1, "The statement was cancelled by the client.", line)


def table_scope(table, alias=None):
    quals = {table.name.lower(), "%s.%s" % (table.schema.name.lower(), table.name.lower())}
    if alias:
        quals = {alias.lower()}
    return Scope([ScopeColumn(quals, c.name, i, c.type, c.nullable, c)
                  for i, c in enumerate(table.columns)])


def pk_constraint_name(table):
    return table.pk_name or "PK__%s__%016X" % (table.name[:8], (table.object_id * 2654435761) & 0xFFFFFFFFFFFFFFFF)


def key_text(table, values):
    out = []
    for i in table.pk or table.cluster:
        v = values[i]
        t = table.columns[i].type
        out.append("<NULL>" if v is None else V.value_to_str(v, t, 1 if t.name in T.BINARY_TYPES else None))
    return ", ".join(out)


class Writer:
    """Row-level write helper for one statement."""

    def __init__(self, ctx, table, line):
        self.ctx = ctx
        self.engine = ctx.engine
        self.table = table
        self.db = table.db
        self.txn = ctx.txn
        self.line = line
        if table.schema_lock_waiters and self.txn is not None and \
                not any(e[1] is table for e in self.txn.undo):
            # a pending sp_cdc_enable_table (schema lock) goes first
            from .procedures import wait_lock
            wait_lock(ctx, line, lambda: table.schema_lock_waiters > 0)
        self.tracked = bool(table.capture_instances)

    # ---- locking
    def head_for_write(self, key):
        """Newest version of key after waiting for other writers; applies the
        snapshot update-conflict rule."""
        eng = self.engine
        txn = self.txn
        session = self.ctx.session
        deadline = None
        while True:
            head = self.table.rows.get(key)
            other = None
            if head is not None:
                if head.xmin.__class__ is not int and head.xmin is not txn:
                    other = head.xmin
                elif head.xmax is not None and head.xmax.__class__ is not int and head.xmax is not txn:
                    other = head.xmax
            if other is None:
                break
            # waiting on a transaction that (transitively) waits on us: deadlock, we are the victim
            o = other
            while o is not None:
                if o is txn:
                    txn.waiting_for = None
                    raise SqlError(1205, 13, 51, "Transaction (Process ID %d) was deadlocked on lock resources "
                                   "with another process and has been chosen as the deadlock victim. Rerun the "
                                   "transaction." % session.spid, self.line)
                o = getattr(o, "waiting_for", None)
            txn.waiting_for = other
            timeout = session.lock_timeout_ms
            if timeout == 0:
                raise SqlError(1222, 16, 51, "Lock request time out period exceeded.", self.line)
            now = time.monotonic()
            if deadline is None:
                deadline = None if timeout < 0 else now + timeout / 1000.0
            if deadline is not None and now >= deadline:
                txn.waiting_for = None
                raise SqlError(1222, 16, 51, "Lock request time out period exceeded.", self.line)
            if session.cancelled:
                txn.waiting_for = None
                raise cancelled(self.line)
            eng.cond.wait(0.05 if deadline is None else max(0.001, min(0.05, deadline - now)))
        txn.waiting_for = None
        if txn.isolation == SNAPSHOT and head is not None:
            snap = txn.snap
            if (head.xmin.__class__ is int and head.xmin > snap) or \
                    (head.xmax.__class__ is int and head.xmax > snap):
                txn.doomed = True
                raise SqlError(3960, 16, 2, "Snapshot isolation transaction aborted due to update conflict. "
                               "You cannot use snapshot isolation to access table '%s' directly or indirectly "
                               "in database '%s' to update, delete, or insert the row that has been modified "
                               "or deleted by another transaction. Retry the transaction or change the "
                               "isolation level for the update/delete statement."
                               % (self.table.full_name, self.db.name), self.line)
        return head

    # ---- logging
    def lsn(self):
        db = self.db
        v = db.lsn.next()
        if db not in self.txn.begin_lsn:
            self.txn.begin_lsn[db] = v
        return v

    def log(self, op, before, after, changed=None, command_id=None, seq=None):
        if seq is None:
            seq = self.lsn()
        if not self.tracked:
            return
        if command_id is None:
            self.txn.command_id += 1
            command_id = self.txn.command_id
        self.txn.records.setdefault(self.db, []).append(
            ChangeRecord(self.table, op, seq, command_id, before, after, changed, self.table.column_ids))

    def log_split(self, pairs):
        """The rows of a deferred ("split") update, [(before, after)], as SQL
        Server records them: every delete, then every insert, in execution
        order, which is __$command_id order.  __$seqval follows the engine
        option split_update_seqval (ENGINE.md "CDC model"): 'shared' (a row's
        delete and insert share one), 'ascending' (seqval order = execution
        order) or 'inverted' (each insert's seqval before its delete's, the
        KB3030352 shape)."""
        if not pairs:
            return
        mode = self.engine.options.get("split_update_seqval", "shared")
        if mode == "shared":
            d_seqs = i_seqs = [self.lsn() for _ in pairs]
        elif mode == "ascending":
            d_seqs = [self.lsn() for _ in pairs]
            i_seqs = [self.lsn() for _ in pairs]
        else:
            i_seqs, d_seqs = [], []
            for _ in pairs:
                i_seqs.append(self.lsn())
                d_seqs.append(self.lsn())
        for (before, _after), seq in zip(pairs, d_seqs):
            self.log("D", before, None, seq=seq)
        for (_before, after), seq in zip(pairs, i_seqs):
            self.log("I", None, after, seq=seq)

    # ---- operations
    def insert_row(self, values):
        t = self.table
        key = t.key_of(values)
        if t.cluster:
            head = self.head_for_write(key)
            if head is not None and head.xmax is None:
                raise self.dup_error(values)
        self.txn.insert(t, key, values)
        self.log("I", None, values)

    def dup_error(self, values):
        t = self.table
        return SqlError(2627, 14, 1, "Violation of PRIMARY KEY constraint '%s'. Cannot insert duplicate key "
                        "in object '%s'. The duplicate key value is (%s)."
                        % (pk_constraint_name(t), t.full_name, key_text(t, values)), self.line)


def finish_values(ctx, table, values, explicit_cols, line, for_update=False, changed=None):
    """Convert, default, compute and check a full row; returns a tuple."""
    cols = table.columns
    out = list(values)
    for i, c in enumerate(cols):
        if c.computed is not None:
            continue
        v = out[i]
        if c.is_rowversion:
            out[i] = table.db.next_rowversion()
            continue
        if v is None and not c.nullable:
            raise SqlError(515, 16, 2, "Cannot insert the value NULL into column '%s', table '%s.%s.%s'; "
                           "column does not allow nulls. %s fails."
                           % (c.name, table.db.name, table.schema.name, table.name,
                              "UPDATE" if for_update else "INSERT"), line)
        if v is not None:
            out[i] = V.store_check(v, c.type, "%s.%s.%s" % (table.db.name, table.schema.name, table.name),
                                   c.name)
    if any(c.computed is not None for c in cols):
        row = tuple(out)
        for i, c in enumerate(cols):
            if c.computed is not None:
                fn, t = Compiler(ctx, table_scope(table), line).compile(c.computed)
                v = fn(row)
                out[i] = V.convert(v, t, c.type) if v is not None else None
    return tuple(out)


def convert_for(c, v, t, line):
    if v is None:
        return None
    try:
        if t.name == c.type.name and t.name not in ("decimal", "numeric", "char", "nchar", "binary",
                                                    "datetime2", "time", "datetimeoffset", "varchar"):
            return v
        return V.convert(v, t, c.type)
    except SqlError as e:
        e.line = line
        raise


def execute_insert(ctx, st: A.Insert):
    eng = ctx.engine
    table = eng.resolve_table(ctx, st.target, st.line, for_write=True)
    cols = table.columns
    if st.columns is not None:
        idxs = []
        for name in st.columns:
            i = table.column_index(name)
            if i < 0:
                raise SqlError(207, 16, 1, "Invalid column name '%s'." % name, st.line)
            if i in idxs:
                raise SqlError(264, 16, 1, "The column name '%s' is specified more than once in the SET "
                               "clause or column list of an INSERT. A column cannot be assigned more than one "
                               "value in the same clause. Modify the clause to make sure that a column is "
                               "updated only once. If this statement updates or inserts columns into a view, "
                               "column aliasing can conceal the duplication in your code." % name, st.line)
            c = cols[i]
            if c.computed is not None:
                raise SqlError(271, 16, 1, 'The column "%s" cannot be modified because it is either a computed '
                               'column or is the result of a UNION operator.' % c.name, st.line)
            if c.is_rowversion:
                raise SqlError(273, 16, 1, "Cannot insert an explicit value into a timestamp column. Use INSERT "
                               "with a column list to exclude the timestamp column, or insert a DEFAULT into "
                               "the timestamp column.", st.line)
            idxs.append(i)
    else:
        idxs = [i for i, c in enumerate(cols) if c.computed is None and not c.is_rowversion and
                (c.identity is None or ctx.session.identity_insert is table)]
    ident = next((i for i, c in enumerate(cols) if c.identity is not None), None)
    ident_on = ctx.session.identity_insert is table
    if ident is not None:
        if ident in idxs and not ident_on:
            raise SqlError(544, 16, 1, "Cannot insert explicit value for identity column in table '%s' when "
                           "IDENTITY_INSERT is set to OFF." % table.name, st.line)
        if ident_on and ident not in idxs:
            raise SqlError(545, 16, 1, "Explicit value must be specified for identity column in table '%s' "
                           "either when IDENTITY_INSERT is set to ON or when a replication user is inserting "
                           "into a NOT FOR REPLICATION identity column." % table.name, st.line)

    comp = Compiler(ctx, Scope([]), st.line)
    # source rows (as lists of (value, type) aligned with idxs)
    if st.default_values:
        idxs = []
        src = iter([[]])
    elif st.rows is not None:
        compiled = []
        for r in st.rows:
            if len(r) != len(idxs):
                if st.columns is None:
                    raise SqlError(213, 16, 1, "Column name or number of supplied values does not match table "
                                   "definition.", st.line)
                if len(r) > len(idxs):
                    raise SqlError(110, 15, 1, "There are fewer columns in the INSERT statement than values "
                                   "specified in the VALUES clause. The number of values in the VALUES clause "
                                   "must match the number of columns specified in the INSERT statement.", st.line)
                raise SqlError(109, 15, 1, "There are more columns in the INSERT statement than values specified "
                               "in the VALUES clause. The number of values in the VALUES clause must match the "
                               "number of columns specified in the INSERT statement.", st.line)
            compiled.append([None if e == "DEFAULT" else comp.compile(e) for e in r])

        def gen():
            for r in compiled:
                yield [(None, None, True) if x is None else (x[0](()), x[1], False) for x in r]
        src = gen()
    else:
        from .query import execute_select
        from ..results import CachedRow
        res = execute_select(ctx, st.select)
        if len(res.columns) != len(idxs):
            raise SqlError(120 if len(res.columns) < len(idxs) else 121, 15, 1,
                           "The select list for the INSERT statement contains %s items than the insert list. "
                           "The number of SELECT values must match the number of INSERT columns."
                           % ("fewer" if len(res.columns) < len(idxs) else "more"), st.line)
        types = [c.type for c in res.columns]
        rows = [r.values if isinstance(r, CachedRow) else r for r in res.rows]

        def gen():
            for r in rows:
                yield [(v, t, False) for v, t in zip(r, types)]
        src = gen()

    w = Writer(ctx, table, st.line)
    n = 0
    written = [] if table.unique_indexes else None
    defaults = {}
    for i, c in enumerate(cols):
        if c.default is not None:
            defaults[i] = Compiler(ctx, Scope([]), st.line).compile(c.default)
    for r in src:
        vals = [None] * len(cols)
        given = set()
        for i, (v, t, is_default) in zip(idxs, r):
            c = cols[i]
            if is_default:
                continue
            given.add(i)
            vals[i] = convert_for(c, v, t, st.line)
        for i, c in enumerate(cols):
            if i not in given and i in defaults:
                f, t = defaults[i]
                vals[i] = convert_for(c, f(()), t, st.line)
        if ident is not None:
            c = cols[ident]
            if ident_on:
                v = vals[ident]
                if v is not None:
                    seed, inc = c.identity
                    cur = table.identity_current
                    if cur is None or (v > cur if inc > 0 else v < cur):
                        table.identity_current = v
            else:
                seed, inc = c.identity
                v = seed if table.identity_current is None else table.identity_current + inc
                lo, hi = T.INT_RANGES.get(c.type.name, (None, None))
                if lo is not None and not lo <= v <= hi:
                    raise SqlError(8115, 16, 1, "Arithmetic overflow error converting IDENTITY to data type %s."
                                   % c.type.name, st.line)
                table.identity_current = v
                vals[ident] = v if c.type.name in T.INTEGER_TYPES else V.convert(v, T.BIGINT_TYPE, c.type)
            ctx.session.last_identity = vals[ident]
        row = finish_values(ctx, table, vals, given, st.line)
        w.insert_row(row)
        if written is not None:
            written.append(row)
        n += 1
        if ctx.session.cancelled:
            raise cancelled(st.line)
    check_unique(table, written, st.line)
    return n


def _target_rows(ctx, table, where, line, alias=None):
    from .query import lower_bound, upper_bound
    import bisect
    scope = table_scope(table, alias)
    fn = Compiler(ctx, scope, line).compile(where)[0] if where is not None else None
    snap, txn = ctx.read_view()
    out = []
    keys = table.keys
    lo, hi = 0, len(keys)
    if where is not None and table.cluster:
        # key range from the WHERE clause (e.g. id = 5): no full scan for point updates
        ctype = table.columns[table.cluster[0]].type
        composite = len(table.cluster) > 1
        lb = lower_bound(where, table.cluster[0], scope, ctx, ctype)
        ub = upper_bound(where, table.cluster[0], scope, ctx, ctype)
        if lb is not None:
            lo = bisect.bisect_left(keys, (lb,) if composite else lb)
        if ub is not None:
            hi = lo
            while hi < len(keys) and (keys[hi][0] if composite else keys[hi]) <= ub:
                hi += 1
    for key in keys[lo:hi]:
        rv = visible(table.rows.get(key), snap, txn)
        if rv is not None and (fn is None or fn(rv.values) is True):
            out.append((key, rv))
    return out, scope


def execute_update(ctx, st: A.Update):
    table = ctx.engine.resolve_table(ctx, st.target, st.line, for_write=True)
    cols = table.columns
    scope = table_scope(table)
    comp = Compiler(ctx, scope, st.line)
    assigns = []
    seen = set()
    for name, e in st.assignments:
        i = table.column_index(name)
        if i < 0:
            raise SqlError(207, 16, 1, "Invalid column name '%s'." % name, st.line)
        c = cols[i]
        if i in seen:
            raise SqlError(264, 16, 1, "The column name '%s' is specified more than once in the SET clause or "
                           "column list of an INSERT. A column cannot be assigned more than one value in the "
                           "same clause. Modify the clause to make sure that a column is updated only once. If "
                           "this statement updates or inserts columns into a view, column aliasing can conceal "
                           "the duplication in your code." % name, st.line)
        seen.add(i)
        if c.identity is not None:
            raise SqlError(8102, 16, 1, "Cannot update identity column '%s'." % c.name, st.line)
        if c.computed is not None:
            raise SqlError(271, 16, 1, 'The column "%s" cannot be modified because it is either a computed '
                           'column or is the result of a UNION operator.' % c.name, st.line)
        if c.is_rowversion:
            raise SqlError(272, 16, 1, "Cannot update a timestamp column.", st.line)
        if e == "DEFAULT":
            if c.default is not None:
                assigns.append((i, Compiler(ctx, Scope([]), st.line).compile(c.default)))
            else:
                assigns.append((i, ((lambda row: None), c.type)))
        else:
            assigns.append((i, comp.compile(e)))
    targets, _ = _target_rows(ctx, table, st.where, st.line)
    where_fn = Compiler(ctx, scope, st.line).compile(st.where)[0] if st.where is not None else None
    w = Writer(ctx, table, st.line)
    changed_ids = {cols[i].column_id for i, _ in assigns}
    planned = []
    for key, rv in targets:
        # wait for other writers first, then work on the newest committed
        # version (re-checking the predicate, like a locking read committed)
        head = w.head_for_write(key)
        if head is None or head.xmax is not None:
            continue
        if head is not rv and where_fn is not None and where_fn(head.values) is not True:
            continue
        old = head.values
        new = list(old)
        for i, (f, t) in assigns:
            new[i] = convert_for(cols[i], f(old), t, st.line)
        new = finish_values(ctx, table, new, None, st.line, for_update=True)
        planned.append((key, head, new, table.key_of(new) if table.cluster else key))
    # In-place updates; a change of the primary key, or of a unique index's
    # key (engine option unique_update = 'split', the default), is a
    # deferred update that CDC records as delete + insert (ENGINE.md).
    # unique_update = 'in_place_keys': even a primary-key change is logged
    # as 3/4 (the row still moves to its new key in storage)
    mode = ctx.engine.options.get("unique_update", "split")
    detect = key_change_detector(table) if mode == "split" else None
    keys_in_place = mode == "in_place_keys"
    split = [p for p in planned
             if (p[3] != p[0] and not keys_in_place) or (detect is not None and detect(p[1].values, p[2]))]
    split_ids = {id(p) for p in split}
    for p in planned:
        key, head, new, newkey = p
        if newkey == key:
            w.txn.update(table, key, head, new)
            if id(p) not in split_ids:
                w.log("U", head.values, new, changed_ids)
    moved = [p for p in planned if p[3] != p[0]]
    for key, head, new, newkey in moved:
        w.txn.delete(table, key, head)
    for key, head, new, newkey in moved:
        cur = w.head_for_write(newkey)
        if cur is not None and cur.xmax is None:
            raise w.dup_error(new)
        w.txn.insert(table, newkey, new)
    if keys_in_place:
        for key, head, new, newkey in moved:
            w.log("U", head.values, new, changed_ids)
    w.log_split([(p[1].values, p[2]) for p in split])
    check_unique(table, [p[2] for p in planned] if table.unique_indexes else None, st.line)
    return len(planned)


def execute_delete(ctx, st: A.Delete):
    table = ctx.engine.resolve_table(ctx, st.target, st.line, for_write=True, what="DELETE")
    targets, _ = _target_rows(ctx, table, st.where, st.line)
    w = Writer(ctx, table, st.line)
    n = 0
    for key, rv in targets:
        head = w.head_for_write(key)
        if head is None or head.xmax is not None:
            continue
        w.txn.delete(table, key, head)
        w.log("D", head.values, None)
        n += 1
    return n
