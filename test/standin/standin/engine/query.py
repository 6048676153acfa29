"""SELECT: sources, planning (natural order / keyset lower bound), execution.

Rows stream lazily from stored tables in clustered-key order when the ORDER
BY matches it (or there is none); otherwise the result is materialized and
sorted.  A lower bound on the first clustering column found in the WHERE
clause (e.g. `id > 42`, `(a > 1) OR (a = 1 AND b > 'x')`) positions the scan
by bisection, so keyset paging over a million rows does not rescan.
"""

from __future__ import annotations

import bisect
import decimal
import operator
import time

from ..results import CachedRow, SqlError
from ..sqltypes import Column, SqlType
from . import ast as A
from . import types as T
from . import values as V
from .expressions import Compiler, Scope, ScopeColumn
from .storage import visible

CHUNK = 1000


# ------------------------------------------------------------------ sources

class Source:
    """Something rows come from.  cols: list of (name, SqlType, nullable, meta)."""

    table = None          # stored Table for plain table sources

    def __init__(self, cols, qualifiers):
        self.cols = cols
        self.qualifiers = qualifiers

    def scope_columns(self, offset=0):
        return [ScopeColumn(self.qualifiers, n, offset + i, t, nl, m)
                for i, (n, t, nl, m) in enumerate(self.cols)]

    def natural_order_ok(self, positions):
        return False

    def lower_bound_column(self):
        return None

    def iterate(self, ctx, lower=None):
        """Yield (values, row_version_or_None)."""
        raise NotImplementedError


class ListSource(Source):
    def __init__(self, cols, qualifiers, rows):
        super().__init__(cols, qualifiers)
        self.rows = rows

    def iterate(self, ctx, lower=None):
        for r in self.rows:
            yield r, None


class StoredSource(Source):
    """A stored table read at the statement's snapshot, in clustered order."""

    def __init__(self, table, qualifiers, cols=None):
        if cols is None:
            cols = [(c.name, c.type, c.nullable, c) for c in table.columns]
        super().__init__(cols, qualifiers)
        self.table = table

    def natural_order_ok(self, positions):
        cl = self.table.cluster
        if positions == cl[:len(positions)]:
            return True
        # orders known to coincide with the clustered order (change tables)
        return any(positions == o[:len(positions)] for o in self.table.equivalent_orders)

    def lower_bound_column(self):
        cl = self.table.cluster
        return cl[0] if cl else None

    def iterate(self, ctx, lower=None, upper=None, reverse=False):
        if lower is not None and len(self.table.cluster) > 1:
            lower = (lower,)          # composite keys are tuples; a 1-tuple sorts before all its extensions
        return scan_table(ctx, self.table, lower, upper, reverse)

    def upper_bound_column(self):
        return self.lower_bound_column()


def scan_table(ctx, table, lower=None, upper=None, reverse=False):
    """Chunked scan: takes the engine lock per chunk, resumes after the last
    key seen, so concurrent writers never invalidate the iteration.
    lower: first key (or 1-tuple prefix) to visit; upper: stop once the first
    clustering column's key is greater than this.  reverse: visit the keys in
    descending order, from upper down to lower, as SQL Server's backward scan
    of an index serves ORDER BY <clustered key> DESC (ENGINE.md, access paths)."""
    composite = len(table.cluster) > 1
    lock = ctx.engine.lock
    snap, txn = ctx.read_view()
    # Change tables are read as cdc.fn_cdc_get_all_changes_<ci> reads them,
    # WITH (NOLOCK): no statement snapshot, every chunk sees the newest
    # committed rows, so a cleanup that deletes ahead of the scan makes rows
    # vanish from its result (ENGINE.md, CDC model)
    nolock = table.nolock_reads
    if not nolock:
        ctx.engine.register_snapshot(snap)
    session = ctx.session
    position = _backward_position if reverse else _forward_position
    try:
        last = None
        while True:
            with lock:
                if nolock:
                    snap = ctx.engine.seq
                keys = table.keys
                rows = table.rows
                chunk = []
                for k in position(keys, composite, lower, upper, last):
                    if len(chunk) >= CHUNK:
                        break
                    rv = visible(rows.get(k), snap, txn)
                    if rv is not None:
                        chunk.append(rv)
                    last = k
                else:
                    chunk.append(None)            # the range is exhausted
            done = chunk and chunk[-1] is None
            for rv in chunk:
                if rv is not None:
                    yield rv.values, rv
            if done or session.cancelled:
                return
    finally:
        if not nolock:
            ctx.engine.unregister_snapshot(snap)


def _forward_position(keys, composite, lower, upper, last):
    """Keys in ascending order from lower (or after last), up to upper."""
    if last is None:
        i = 0 if lower is None else bisect.bisect_left(keys, lower)
    else:
        i = bisect.bisect_right(keys, last)
    n = len(keys)
    while i < n:
        k = keys[i]
        if upper is not None and (k[0] if composite else k) > upper:
            return
        yield k
        i += 1


def _backward_position(keys, composite, lower, upper, last):
    """Keys in descending order from upper (or before last), down to lower."""
    if last is not None:
        i = bisect.bisect_left(keys, last) - 1
    elif upper is None:
        i = len(keys) - 1
    elif composite:
        i = bisect.bisect_right(keys, upper, key=lambda k: k[0]) - 1
    else:
        i = bisect.bisect_right(keys, upper) - 1
    while i >= 0:
        k = keys[i]
        if lower is not None and k < lower:
            return
        yield k
        i -= 1


# ------------------------------------------------------------------ aggregates

class AggState:
    def __init__(self, source_scope, group_exprs):
        self.source_scope = source_scope
        self.group_exprs = group_exprs
        self.specs = []             # (kind, fn, type, distinct, star)
        self.group_cols = set()

    def allows_column(self, col):
        return col.index in self.group_cols

    def register(self, comp, e):
        kind = e.name[-1].lower()
        saved = self.source_scope.aggregates
        self.source_scope.aggregates = None
        try:
            if e.star:
                if kind not in ("count", "count_big"):
                    raise comp.err(102, 15, 1, "Incorrect syntax near '*'.")
                fn, t = None, T.INT_TYPE
            else:
                if len(e.args) != 1:
                    raise comp.err(174, 15, 1, "The %s function requires 1 argument(s)." % kind)
                fn, t = comp.compile(e.args[0])
        finally:
            self.source_scope.aggregates = saved
        k = len(self.specs)
        if kind in ("count",):
            rt = T.INT_TYPE
        elif kind == "count_big":
            rt = T.BIGINT_TYPE
        elif kind in ("sum", "avg"):
            if t.name in ("tinyint", "smallint", "int", "bit"):
                rt = T.INT_TYPE
            elif t.name in ("decimal", "numeric"):
                rt = SqlType("numeric", precision=38, scale=t.scale if kind == "sum" else max(t.scale, 6))
            elif t.name in ("bigint", "money", "smallmoney", "float"):
                rt = SqlType(t.name if t.name != "smallmoney" else "money")
            elif t.name == "real":
                rt = T.FLOAT_TYPE
            else:
                raise comp.err(8117, 16, 1, "Operand data type %s is invalid for %s operator." % (t.name, kind))
        else:
            rt = t
        self.specs.append((kind, fn, t, e.distinct, e.star, rt))
        idx = self.source_scope.width + k
        return (lambda row, idx=idx: row[idx]), rt

    def run(self, rows, group_fns, width):
        groups = {}
        order = []
        specs = self.specs
        keyfns = [(f, V.sort_key_fn(t)) for f, t in group_fns]
        for row in rows:
            gk = tuple(None if (v := f(row)) is None else kf(v) for f, kf in keyfns)
            g = groups.get(gk)
            if g is None:
                g = groups[gk] = [row, [_new_acc(s) for s in specs]]
                order.append(gk)
            accs = g[1]
            for s, acc in zip(specs, accs):
                _feed(s, acc, row)
        if not groups and not group_fns:
            groups[()] = [tuple([None] * width), [_new_acc(s) for s in specs]]
            order.append(())
        for gk in order:
            rep, accs = groups[gk]
            yield tuple(rep) + tuple(_result(s, a) for s, a in zip(specs, accs))


def _new_acc(spec):
    return [0, None, set() if spec[3] else None]     # count, value, distinct-set


def _feed(spec, acc, row):
    kind, fn, t, distinct, star, rt = spec
    if star:
        acc[0] += 1
        return
    v = fn(row)
    if v is None:
        return
    if distinct:
        k = V.sort_key_fn(t)(v)
        if k in acc[2]:
            return
        acc[2].add(k)
    acc[0] += 1
    if kind in ("min", "max"):
        cur = acc[1]
        if cur is None:
            acc[1] = v
        else:
            kf = V.sort_key_fn(t)
            if (kf(v) < kf(cur)) if kind == "min" else (kf(v) > kf(cur)):
                acc[1] = v
    elif kind in ("sum", "avg"):
        acc[1] = v if acc[1] is None else acc[1] + v


def _result(spec, acc):
    kind, fn, t, distinct, star, rt = spec
    if kind in ("count", "count_big"):
        return acc[0]
    if kind == "avg":
        if acc[1] is None:
            return None
        if isinstance(acc[1], int):
            q = abs(acc[1]) // acc[0]
            return q if acc[1] >= 0 else -q
        r = acc[1] / acc[0]
        if isinstance(r, decimal.Decimal):
            return r.quantize(decimal.Decimal(1).scaleb(-rt.scale))
        return r
    if kind == "sum" and rt.name in T.INTEGER_TYPES and acc[1] is not None:
        lo, hi = T.INT_RANGES[rt.name]
        if not lo <= acc[1] <= hi:
            raise SqlError(8115, 16, 2, "Arithmetic overflow error converting expression to data type %s." % rt.name)
    return acc[1]


def has_aggregate(e):
    if isinstance(e, A.Func):
        if len(e.name) == 1 and e.name[0].lower() in ("count", "count_big", "min", "max", "sum", "avg"):
            return True
        return any(has_aggregate(a) for a in e.args)
    if isinstance(e, (A.Subquery, A.Exists)) or e is None:
        return False
    if isinstance(e, A.Node):
        for f in e.fields:
            v = getattr(e, f)
            if isinstance(v, A.Node) and has_aggregate(v):
                return True
            if isinstance(v, list):
                for x in v:
                    if isinstance(x, A.Node) and has_aggregate(x):
                        return True
                    if isinstance(x, tuple) and any(isinstance(y, A.Node) and has_aggregate(y) for y in x):
                        return True
    return False


# ------------------------------------------------------------------ planning helpers

def lower_bound(where, col_index, scope, ctx, col_type):
    """A value v such that every row satisfying `where` has column >= v
    (conservative), or None."""
    if where is None:
        return None
    if isinstance(where, A.And):
        a = lower_bound(where.left, col_index, scope, ctx, col_type)
        b = lower_bound(where.right, col_index, scope, ctx, col_type)
        if a is None:
            return b
        if b is None:
            return a
        return max(a, b)
    if isinstance(where, A.Or):
        a = lower_bound(where.left, col_index, scope, ctx, col_type)
        b = lower_bound(where.right, col_index, scope, ctx, col_type)
        if a is None or b is None:
            return None
        return min(a, b)
    if isinstance(where, A.Between) and not where.negated:
        return lower_bound(A.Compare(">=", where.expr, where.low), col_index, scope, ctx, col_type)
    if isinstance(where, A.Compare) and where.op in (">", ">=", "="):
        col, other = where.left, where.right
        if not isinstance(col, A.ColRef):
            return None
        try:
            c = scope.resolve(col.parts)
        except SqlError:
            return None
        if c.index != col_index or not _bindable(other):
            return None
        try:
            comp = Compiler(ctx, scope)
            fn, t = comp.compile(other)
            v = fn(())
            if v is None or not _exact_family(t, col_type):
                return None
            v = V.convert(v, t, col_type)
        except SqlError:
            return None
        if col_type.name in T.BINARY_TYPES:
            # stored keys are raw bytes; comparison pads with 0x00, so the
            # smallest raw form of the bound is the one without trailing zeros
            return v.rstrip(b"\0")
        return V.sort_key_fn(col_type)(v)
    return None


def upper_bound(where, col_index, scope, ctx, col_type):
    """A key u such that every row satisfying `where` has column key <= u, or None."""
    if where is None:
        return None
    if isinstance(where, A.And):
        a = upper_bound(where.left, col_index, scope, ctx, col_type)
        b = upper_bound(where.right, col_index, scope, ctx, col_type)
        if a is None:
            return b
        if b is None:
            return a
        return min(a, b)
    if isinstance(where, A.Or):
        a = upper_bound(where.left, col_index, scope, ctx, col_type)
        b = upper_bound(where.right, col_index, scope, ctx, col_type)
        if a is None or b is None:
            return None
        return max(a, b)
    if isinstance(where, A.Between) and not where.negated:
        return upper_bound(A.Compare("<=", where.expr, where.high), col_index, scope, ctx, col_type)
    if isinstance(where, A.Compare) and where.op in ("<", "<=", "="):
        flipped = A.Compare(">=", where.left, where.right)
        if col_type.name == "binary" and isinstance(col_type.length, int):
            # binary(n) values are stored padded to n bytes, so raw comparison
            # is SQL Server's padded one: the bound padded to n is exact
            # (change tables: __$start_lsn <= 0x…)
            v = lower_bound(flipped, col_index, scope, ctx, col_type)
            return None if v is None else v.ljust(col_type.length, b"\0")
        if col_type.name in T.BINARY_TYPES:
            return None       # varbinary: padded comparison, no exact upper key for raw bytes
        return lower_bound(flipped, col_index, scope, ctx, col_type)
    return None


def _bindable(e):
    """Row-independent and deterministic, so it can be evaluated once to
    position a scan: literals, variables, and arithmetic or CASTs over them
    (`id > @i * 10`, `k > CAST(N'2020-01-01 00:00:00.0000000' AS datetime2)`,
    the shapes a keyset-paged reader and a batch loop send)."""
    if isinstance(e, (A.Literal, A.Var)):
        return True
    if isinstance(e, (A.Unary, A.Cast)):
        return _bindable(e.expr)
    if isinstance(e, A.Binary):
        return _bindable(e.left) and _bindable(e.right)
    return False


def _exact_family(src, dst):
    s, d = src.name, dst.name
    if s == d:
        return True
    if s in T.INTEGER_TYPES and d in T.INTEGER_TYPES:
        return True
    if s in T.STRING_TYPES and (d in T.STRING_TYPES or d in T.TEMPORAL_TYPES or d == "uniqueidentifier"):
        return True
    if s in T.BINARY_TYPES and d in T.BINARY_TYPES:
        return True
    if s in T.INTEGER_TYPES and d in ("decimal", "numeric"):
        return True
    return False


# ------------------------------------------------------------------ execution

class SelectResult:
    """lazy: the rows are a blocking Sort that has not run yet (engine
    option sort_row_cost_us, ENGINE.md "Sorts take time"): the caller must
    not pull the first row under the engine lock."""

    def __init__(self, columns, rows, lazy=False):
        self.columns = columns
        self.rows = rows
        self.lazy = lazy


def _sorted_later(ctx, stream, order_fns):
    """A Sort with its cost: reads and sorts every input row (the scan takes
    the engine lock per chunk, as a streaming read does, so other sessions
    run meanwhile), then waits rows x sort_row_cost_us before the first row;
    an ATTENTION ends the wait."""
    session = ctx.session
    mat = []
    for item in stream:
        mat.append(item)
        if len(mat) % CHUNK == 0 and session.cancelled:
            return
    _sort3(mat, order_fns)
    deadline = time.monotonic() + len(mat) * (ctx.engine.options.get("sort_row_cost_us") or 0) / 1e6
    while not session.cancelled and time.monotonic() < deadline:
        time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
    if session.cancelled:
        return
    yield from mat


def build_source(ctx, src, line):
    if src is None:
        return None
    if isinstance(src, A.Join):
        left = build_source(ctx, src.left, line)
        right = build_source(ctx, src.right, line)
        return JoinSource(ctx, left, right, src.kind, src.on, line)
    if isinstance(src, A.Derived):
        res = execute_select(ctx, src.select, cache_rows=False)
        cols = []
        for i, c in enumerate(res.columns):
            if not c.name:
                raise SqlError(8155, 16, 2, "No column name was specified for column %d of '%s'."
                               % (i + 1, src.alias), line)
            cols.append((c.name, c.type, c.nullable, None))
        rows = [r.values if isinstance(r, CachedRow) else r for r in res.rows]
        return ListSource(cols, {src.alias.lower()}, rows)
    if isinstance(src, A.FuncSource):
        from .cdc_query import tvf_source
        return tvf_source(ctx, src, line)
    cte = cte_source(ctx, src, line)
    if cte is not None:
        return cte
    return ctx.engine.open_table_source(ctx, src, line)


class JoinSource(Source):
    """[INNER|LEFT] JOIN and CROSS JOIN as a nested loop over the left side.

    Rows come in the left side's order, so an ORDER BY the left side's
    clustered key streams, and bounds on the left side's first clustering
    column in the WHERE clause position its scan, like a plain table (a
    change table joined to cdc.lsn_time_mapping: the direct change query).
    ON right.key = left.col, with right a stored table clustered on that one
    column, is a point lookup per left row (an index nested loop join);
    other ON clauses compare every left row with the right side's rows."""

    def __init__(self, ctx, left, right, kind, on, line):
        cols = left.cols + right.cols
        super().__init__(cols, set())
        self.left, self.right, self.kind = left, right, kind
        self.scope = Scope(left.scope_columns(0) + right.scope_columns(len(left.cols)))
        self.on_fn = Compiler(ctx, self.scope, line).compile(on)[0] if on is not None else None
        self.width_right = len(right.cols)
        self.lookup = self._point_lookup(on)

    def _point_lookup(self, on):
        """(left column index, right table) when ON is an equality of the right
        table's single clustering column with a left column of the same type."""
        right = self.right
        if not (isinstance(on, A.Compare) and on.op == "=" and isinstance(on.left, A.ColRef)
                and isinstance(on.right, A.ColRef)):
            return None
        if not isinstance(right, StoredSource) or len(right.table.cluster) != 1 or \
                len(right.cols) != len(right.table.columns):
            return None
        nleft = len(self.left.cols)
        try:
            a = self.scope.resolve(on.left.parts)
            b = self.scope.resolve(on.right.parts)
        except SqlError:
            return None
        if a.index >= nleft:
            a, b = b, a
        if a.index >= nleft or b.index < nleft or b.index - nleft != right.table.cluster[0]:
            return None
        if a.type.name != b.type.name or a.type.length != b.type.length or \
                getattr(a.type, "collation", None) != getattr(b.type, "collation", None):
            return None
        return a.index, right.table

    def scope_columns(self, offset=0):
        out = []
        for c in self.scope.columns:
            out.append(ScopeColumn(c.qualifiers, c.name, c.index + offset, c.type, c.nullable, c.meta))
        return out

    def natural_order_ok(self, positions):
        return all(p < len(self.left.cols) for p in positions) and self.left.natural_order_ok(positions)

    def lower_bound_column(self):
        # every joined row comes from one left row: a bound on a left column
        # may skip left rows the WHERE clause would reject anyway
        return self.left.lower_bound_column() if isinstance(self.left, StoredSource) else None

    def upper_bound_column(self):
        return self.lower_bound_column()

    def iterate(self, ctx, lower=None, upper=None):
        left_rows = self.left.iterate(ctx, lower, upper) if upper is not None else self.left.iterate(ctx, lower)
        on = self.on_fn
        nulls = tuple([None] * self.width_right)
        outer = self.kind == "LEFT"
        if self.lookup is not None:
            li, table = self.lookup
            keyfn = V.sort_key_fn(table.columns[table.cluster[0]].type)
            snap, txn = ctx.read_view()
            rows = table.rows
            for lrow, _ in left_rows:
                v = lrow[li]
                rv = None if v is None else visible(rows.get(keyfn(v)), snap, txn)
                if rv is not None:
                    row = lrow + rv.values
                    if on is None or on(row) is True:
                        yield row, None
                        continue
                if outer:
                    yield lrow + nulls, None
            return
        right_rows = [r for r, _ in self.right.iterate(ctx)]
        for lrow, _ in left_rows:
            matched = False
            for rrow in right_rows:
                row = lrow + rrow
                if on is None or on(row) is True:
                    matched = True
                    yield row, None
            if not matched and outer:
                yield lrow + nulls, None


def find_windows(e, out):
    if isinstance(e, A.Window):
        out.append(e)
        return out
    if isinstance(e, (A.Subquery, A.Exists)) or not isinstance(e, A.Node):
        return out
    for f in e.fields:
        v = getattr(e, f)
        if isinstance(v, A.Node):
            find_windows(v, out)
        elif isinstance(v, list):
            for x in v:
                if isinstance(x, A.Node):
                    find_windows(x, out)
                elif isinstance(x, tuple):
                    for y in x:
                        find_windows(y, out)
    return out


def apply_windows(ctx, source, scope, where_fn, windows, line):
    """Materialize the filtered rows and append one column per ROW_NUMBER()."""
    comp = Compiler(ctx, scope, line)
    rows = [r for r, _ in source.iterate(ctx) if where_fn is None or where_fn(r) is True]
    width = scope.width
    numbers = []
    for w in windows:
        parts = [comp.compile(p) for p in w.partition_by]
        orders = [(comp.compile(e), desc) for e, desc in w.order_by]
        idx = list(range(len(rows)))
        for (f, t), desc in reversed(orders):
            kf = V.sort_key_fn(t)
            idx.sort(key=lambda i, f=f, kf=kf: (0,) if f(rows[i]) is None else (1, kf(f(rows[i]))), reverse=desc)
        pkeys = [(f, V.sort_key_fn(t)) for f, t in parts]
        counters = {}
        out = [0] * len(rows)
        for i in idx:
            pk = tuple(None if (v := f(rows[i])) is None else kf(v) for f, kf in pkeys)
            counters[pk] = counters.get(pk, 0) + 1
            out[i] = counters[pk]
        numbers.append(out)
    scope.windows = {}
    for k, w in enumerate(windows):
        scope.windows[id(w)] = width + k
        scope.columns.append(ScopeColumn(set(), "\0window%d" % k, width + k, T.BIGINT_TYPE))
    ext = [r + tuple(n[i] for n in numbers) for i, r in enumerate(rows)]
    return ListSource(source.cols + [("", T.BIGINT_TYPE, False, None)] * len(windows), set(), ext)


def cte_source(ctx, ref, line):
    """A single-part name that matches a CTE of the statement, or None."""
    ctes = getattr(ctx, "ctes", None)
    if not ctes or len(ref.parts) != 1:
        return None
    cte = ctes.get(ref.parts[0].lower())
    if cte is None:
        return None
    name, cols, sel = cte
    saved = ctx.ctes
    ctx.ctes = {k: v for k, v in saved.items() if k != name.lower()}   # not recursive
    try:
        res = execute_select(ctx, sel, cache_rows=False)
    finally:
        ctx.ctes = saved
    names = cols or [c.name for c in res.columns]
    if len(names) != len(res.columns):
        raise SqlError(8158, 16, 1, "'%s' has more columns than were specified in the column list." % name, line)
    for i, n in enumerate(names):
        if not n:
            raise SqlError(8155, 16, 2, "No column name was specified for column %d of '%s'." % (i + 1, name), line)
    rows = [r.values if isinstance(r, CachedRow) else r for r in res.rows]
    return ListSource([(n, c.type, c.nullable, None) for n, c in zip(names, res.columns)],
                      {(ref.alias or name).lower()}, rows)


def execute_select(ctx, sel: A.Select, cache_rows=True) -> SelectResult:
    """cache_rows=False: the rows are read inside the statement (a derived
    table), not sent, so they are not wrapped for the encoder's cache."""
    line = sel.line or 1
    if sel.ctes:
        saved = getattr(ctx, "ctes", None)
        ctx.ctes = dict(saved or {})
        for cte in sel.ctes:
            ctx.ctes[cte[0].lower()] = cte
    source = build_source(ctx, sel.source, line)
    if source is None:
        scope = Scope([])
    elif isinstance(source, JoinSource):
        scope = Scope(source.scope_columns(0))
    else:
        scope = Scope(source.scope_columns(0))
    comp = Compiler(ctx, scope, line)

    where_fn = comp.compile(sel.where)[0] if sel.where is not None else None
    windows = []
    for e, _ in sel.items:
        find_windows(e, windows)
    for e, _ in sel.order_by or []:
        find_windows(e, windows)
    if windows:
        if source is None:
            source = ListSource([], set(), [()])
        source = apply_windows(ctx, source, scope, where_fn, windows, line)
        where_fn = None

    agg_mode = bool(sel.group_by) or any(has_aggregate(e) for e, _ in sel.items) or \
        has_aggregate(sel.having) or any(has_aggregate(e) for e, _ in (sel.order_by or []))
    group_fns = []
    agg = None
    if agg_mode:
        agg = AggState(scope, sel.group_by or [])
        for g in sel.group_by or []:
            f, t = comp.compile(g)
            group_fns.append((f, t))
            if isinstance(g, A.ColRef):
                agg.group_cols.add(scope.resolve(g.parts, line).index)
        scope.aggregates = agg

    # select list
    items = []         # (fn, Column, base_index or None)
    for e, alias in sel.items:
        if isinstance(e, A.Star):
            if source is None:
                raise SqlError(263, 16, 1, "Must specify table to select from.", line)
            cols = scope.columns
            if e.qualifier is not None:
                q = ".".join(p.lower() for p in e.qualifier)
                cols = [c for c in cols if q in c.qualifiers]
                if not cols:
                    raise SqlError(4104, 16, 1, 'The multi-part identifier "%s" could not be bound.'
                                   % ".".join(e.qualifier), line)
            if agg_mode:
                raise SqlError(8120, 16, 1, "Column '%s' is invalid in the select list because it is not "
                               "contained in either an aggregate function or the GROUP BY clause."
                               % cols[0].name, line)
            for c in cols:
                items.append(((lambda row, i=c.index: row[i]), _out_col(c.name, c), c.index))
            continue
        fn, t = comp.compile(e)
        base = None
        col = Column(alias if alias is not None else "", t, True)
        if isinstance(e, A.ColRef):
            try:
                sc = scope.resolve(e.parts, line)
            except SqlError:
                sc = None       # a CLR property (col.STSrid): compiled above, named as SQL Server names it
                col = Column(alias if alias is not None else e.parts[-1], t, True)
            if sc is not None:
                col = _out_col(alias if alias is not None else sc.name, sc)
                if not agg_mode:
                    base = sc.index
        items.append((fn, col, base))

    having_fn = comp.compile(sel.having)[0] if sel.having is not None else None

    if sel.assign:
        return _select_assign(ctx, sel, source, scope, comp, where_fn, agg, group_fns)

    # ORDER BY
    order_fns = []
    order_positions = []
    desc_positions = []         # the same, for columns ordered DESC
    natural_ok = False
    backward = False            # the clustered order read backwards serves it
    if sel.order_by:
        for e, desc in sel.order_by:
            pos = None
            if isinstance(e, A.Literal) and isinstance(e.value, int):
                pos = e.value - 1
                if not 0 <= pos < len(items):
                    raise SqlError(108, 16, 1, "The ORDER BY position number %d is out of range of the "
                                   "number of items in the select list." % e.value, line)
            elif isinstance(e, A.ColRef) and len(e.parts) == 1:
                for i, (_, c, _) in enumerate(items):
                    if c.name.lower() == e.parts[0].lower() and (sel.items and
                                                                 any(a is not None and a.lower() == c.name.lower()
                                                                     for _, a in sel.items)):
                        pos = i
                        break
            if pos is not None:
                it = items[pos]
                order_fns.append(((lambda p, s, i=pos: p[i]), it[1].type, desc))
                order_positions.append(it[2] if not desc else None)
                desc_positions.append(it[2] if desc else None)
            else:
                f, t = comp.compile(e)
                if t.name in T.LOB_OLD_TYPES:
                    raise SqlError(306, 16, 2, "The text, ntext, and image data types cannot be compared or "
                                   "sorted, except when using IS NULL or LIKE operator.", line)
                order_fns.append(((lambda p, s, f=f: f(s)), t, desc))
                ix = None
                if isinstance(e, A.ColRef) and not agg_mode:
                    ix = scope.resolve(e.parts, line).index
                order_positions.append(ix if not desc else None)
                desc_positions.append(ix if desc else None)
        if not agg_mode and source is not None and None not in order_positions \
                and source.natural_order_ok(order_positions):
            natural_ok = True
        elif not agg_mode and isinstance(source, StoredSource) and None not in desc_positions \
                and source.natural_order_ok(desc_positions):
            natural_ok = backward = True
    elif source is not None and not agg_mode:
        natural_ok = True

    top = None
    if sel.top is not None:
        tf, tt = Compiler(ctx, Scope([]), line).compile(sel.top)
        if sel.top_percent:
            raise SqlError(102, 15, 1, "Incorrect syntax near 'PERCENT'.", line)
        if tt.name not in T.INTEGER_TYPES and tt.name not in ("decimal", "numeric", "float", "real"):
            raise SqlError(1060, 16, 1, "The number of rows in the TOP clause must be an integer.", line)
        top = tf(())
        if top is None or top < 0:
            raise SqlError(1014, 15, 1, "A TOP or FETCH clause contains an invalid value.", line)
        top = int(top)
    offset = fetch = None
    if sel.offset is not None:
        offset = _row_count_value(ctx, sel.offset, line)
        if offset < 0:
            raise SqlError(10742, 16, 1, "The offset specified in a OFFSET clause may not be negative.", line)
        if sel.fetch is not None:
            fetch = _row_count_value(ctx, sel.fetch, line)
            if fetch <= 0:
                raise SqlError(10744, 16, 1, "The number of rows provided for a FETCH clause must be "
                               "greater then zero.", line)

    # source rows
    lower = upper = None
    if source is not None and where_fn is not None:
        lb_col = source.lower_bound_column()
        if lb_col is not None:
            lower = lower_bound(sel.where, lb_col, scope, ctx, source.cols[lb_col][1])
            if isinstance(source, (StoredSource, JoinSource)):
                upper = upper_bound(sel.where, lb_col, scope, ctx, source.cols[lb_col][1])
    columns = [c for _, c, _ in items]

    if sel.union_all:
        return _union(ctx, sel, items, columns, source, where_fn, order_fns, top, line)

    def src_rows():
        if source is None:
            yield (), None
            return
        if backward:
            it = source.iterate(ctx, lower, upper, reverse=True)
        elif upper is not None:
            it = source.iterate(ctx, lower, upper)
        else:
            it = source.iterate(ctx, lower)
        for row, rv in it:
            if where_fn is None or where_fn(row) is True:
                yield row, rv

    fns = [f for f, _, _ in items]
    plain = source is not None and source.table is not None and not agg_mode and \
        all(b is not None for _, _, b in items)
    proj_key = (tuple(b for _, _, b in items), tuple(c.type for c in columns)) if plain else None

    if agg_mode:
        width = scope.width

        def grouped():
            for row in agg.run((r for r, _ in src_rows()), group_fns, width):
                if having_fn is None or having_fn(row) is True:
                    yield tuple(f(row) for f in fns), row, None
        stream = grouped()
    elif plain:
        idxs = proj_key[0]
        if list(idxs) == list(range(len(source.cols))):
            stream = ((row, row, rv) for row, rv in src_rows())
        else:
            # one C call per row instead of a generator per row: the keyset
            # chunk of a snapshot reader projects every row this way
            pick = operator.itemgetter(*idxs) if len(idxs) > 1 else (lambda row, i=idxs[0]: (row[i],))
            stream = ((pick(row), row, rv) for row, rv in src_rows())
    else:
        stream = ((tuple(f(row) for f in fns), row, rv) for row, rv in src_rows())

    if sel.distinct:
        stream = _distinct(stream, columns)

    lazy = False
    if order_fns and not natural_ok and ctx.engine.options.get("sort_row_cost_us"):
        stream = _sorted_later(ctx, stream, order_fns)
        lazy = True
    elif order_fns and not natural_ok:
        mat = [(p, s, rv) for p, s, rv in stream]
        _sort3(mat, order_fns)
        stream = iter(mat)

    if offset:
        stream = _skip(stream, offset)
    limit = top
    if fetch is not None:
        limit = fetch if limit is None else min(limit, fetch)
    if limit is not None:
        stream = _limit(stream, limit)

    if plain and cache_rows:
        def out():
            for p, s, rv in stream:
                if rv is not None:
                    yield CachedRow(p, rv.cache_dict(), proj_key)
                else:
                    yield p
    else:
        def out():
            for p, s, rv in stream:
                yield p
    return SelectResult(columns, out(), lazy)


def _row_count_value(ctx, e, line):
    """OFFSET/FETCH values: integers only."""
    fn, t = Compiler(ctx, Scope([]), line).compile(e)
    if t.name not in T.INTEGER_TYPES:
        raise SqlError(10743, 16, 1, "The number of rows provided for a OFFSET clause must be an integer.", line)
    v = fn(())
    if v is None:
        raise SqlError(1014, 15, 1, "A TOP or FETCH clause contains an invalid value.", line)
    return int(v)


def _sort3(mat, order_fns):
    for fn, t, desc in reversed(order_fns):
        kf = V.sort_key_fn(t)
        if t.name in T.BINARY_TYPES:
            kf = lambda v: v.rstrip(b"\0")

        def key(it, fn=fn, kf=kf):
            v = fn(it[0], it[1])
            return (0,) if v is None else (1, kf(v))
        mat.sort(key=key, reverse=desc)


def _skip(it, n):
    for i, x in enumerate(it):
        if i >= n:
            yield x


def _limit(it, n):
    if n <= 0:
        return
    for i, x in enumerate(it):
        yield x
        if i + 1 >= n:
            return


def _distinct(stream, columns):
    keyfns = [V.sort_key_fn(c.type) for c in columns]
    seen = set()
    for p, s, rv in stream:
        k = tuple(None if v is None else kf(v) for v, kf in zip(p, keyfns))
        if k in seen:
            continue
        seen.add(k)
        yield p, s, None


def _out_col(name, sc):
    m = sc.meta
    if m is not None:
        t = sc.type
        table_name = None
        if t.name in T.LOB_OLD_TYPES:      # TDS sends a table name with text/ntext/image columns
            table_name = next((q for q in sorted(sc.qualifiers) if "." in q), None)
        return Column(name, t, m.nullable, identity=bool(m.identity), computed=m.computed is not None,
                      table_name=table_name)
    return Column(name, sc.type, sc.nullable)


def _union(ctx, sel, items, columns, source, where_fn, order_fns, top, line):
    first = A.Select(**{f: getattr(sel, f) for f in A.Select.fields})
    first.union_all = None
    first.order_by = None
    first.top = sel.top
    parts = [execute_select(ctx, first)]
    for other in sel.union_all:
        r = execute_select(ctx, other)
        if len(r.columns) != len(columns):
            raise SqlError(205, 16, 1, "All queries combined using a UNION, INTERSECT or EXCEPT operator "
                           "must have an equal number of expressions in their target lists.", line)
        parts.append(r)
    rows = []
    for p in parts:
        for r in p.rows:
            rows.append(r.values if isinstance(r, CachedRow) else r)
    cols = list(parts[0].columns)
    for p in parts[1:]:
        cols = [Column(a.name, T.higher(a.type, b.type), True) for a, b in zip(cols, p.columns)]
    if sel.order_by:
        fns = []
        for e, desc in sel.order_by:
            if isinstance(e, A.Literal):
                i = e.value - 1
            else:
                names = [c.name.lower() for c in cols]
                nm = e.parts[-1].lower() if isinstance(e, A.ColRef) else None
                if nm not in names:
                    raise SqlError(104, 16, 1, "ORDER BY items must appear in the select list if the "
                                   "statement contains a UNION, INTERSECT or EXCEPT operator.", line)
                i = names.index(nm)
            fns.append(((lambda p, s, i=i: p[i]), cols[i].type, desc))
        mat = [(r, r, None) for r in rows]
        _sort3(mat, fns)
        rows = [m[0] for m in mat]
    return SelectResult(cols, iter(rows))


def _select_assign(ctx, sel, source, scope, comp, where_fn, agg, group_fns):
    targets = []
    for name, e in sel.assign:
        var = ctx.lookup_var(name, sel.line)
        fn, t = comp.compile(e)
        targets.append((var, fn, t))
    rows = []
    if source is None:
        rows = [()]
    else:
        rows = (r for r, _ in source.iterate(ctx) if where_fn is None or where_fn(r) is True)
        if agg is not None:
            rows = agg.run(rows, group_fns, scope.width)
    n = 0
    for row in rows:
        n += 1
        for var, fn, t in targets:
            var[1] = V.convert(fn(row), t, var[0], explicit=True)
    ctx.session.rowcount = n
    return None


def scalar_subquery(comp, sel):
    ctx = comp.ctx

    def run(row):
        res = execute_select(ctx, sel, cache_rows=False)
        vals = [r.values if isinstance(r, CachedRow) else r for r in res.rows]
        if len(vals) > 1:
            raise SqlError(512, 16, 1, "Subquery returned more than 1 value. This is not permitted when the "
                           "subquery follows =, !=, <, <= , >, >= or when the subquery is used as an expression.")
        return vals[0][0] if vals else None
    res = execute_select(ctx, sel)
    return run, res.columns[0].type


def exists_subquery(comp, sel):
    ctx = comp.ctx

    def run(row):
        res = execute_select(ctx, sel, cache_rows=False)
        for _ in res.rows:
            return True
        return False
    return run, T.BIT_TYPE
