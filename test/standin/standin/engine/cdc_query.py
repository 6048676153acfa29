"""cdc.fn_cdc_get_all_changes_<ci>(from_lsn, to_lsn, row_filter_option)."""

from __future__ import annotations

from ..results import SqlError
from . import types as T
from . import values as V
from .expressions import Compiler, Scope
from .query import Source, scan_table

ALL_PREFIX = "fn_cdc_get_all_changes_"
NET_PREFIX = "fn_cdc_get_net_changes_"
MSG_313 = ("An insufficient number of arguments were supplied for the procedure or function "
           "cdc.fn_cdc_get_all_changes_ ... .")


def invalid_object(parts, line):
    return SqlError(208, 16, 1, "Invalid object name '%s'." % ".".join(parts), line)


class ChangesSource(Source):
    """Rows of a change table in (start_lsn, command_id, seqval, operation)
    order, the change table's clustered order.  The function's result has no
    __$command_id, and an ORDER BY __$start_lsn, __$seqval, __$operation is
    not that order (a split update, ENGINE.md "CDC model"): it is sorted,
    the whole window before the first row, like SQL Server's sort operator."""

    def __init__(self, ci, qualifiers, from_b, to_b, with_old):
        cols = [("__$start_lsn", T.LSN_TYPE, False, None), ("__$seqval", T.LSN_TYPE, False, None),
                ("__$operation", T.INT_TYPE, False, None), ("__$update_mask", T.varbinary(128), True, None)]
        for cid, name, t, computed, lob in ci.captured:
            cols.append((name, t, True, None))
        super().__init__(cols, qualifiers)
        self.ci = ci
        self.from_b = from_b
        self.to_b = to_b
        self.with_old = with_old

    def natural_order_ok(self, positions):
        return positions == [0][:len(positions)]

    def lower_bound_column(self):
        return 0

    def iterate(self, ctx, lower=None):
        lo = self.from_b if lower is None or lower < self.from_b else lower
        with_old = self.with_old
        ncap = len(self.ci.captured)
        for vals, rv in scan_table(ctx, self.ci.ct, (lo,), self.to_b):
            op = vals[3]
            if op == 3 and not with_old:
                continue
            yield (vals[0], vals[2], op, vals[4]) + vals[5:5 + ncap], None


def tvf_source(ctx, src, line):
    parts = src.parts
    name = parts[-1]
    low = name.lower()
    eng = ctx.engine
    db_name = parts[-3] if len(parts) >= 3 else None
    db = ctx.resolve_database(db_name, line)
    schema = parts[-2].lower() if len(parts) >= 2 else "dbo"
    ci = None
    if schema == "cdc" and low.startswith(ALL_PREFIX) and db.cdc is not None:
        ci = db.cdc.instances.get(low[len(ALL_PREFIX):])
    if ci is None:
        raise invalid_object(parts, line)
    if not eng.security.can_read_ci(ctx.session, db, ci):
        raise SqlError(229, 14, 5, "The SELECT permission was denied on the object '%s', database '%s', "
                       "schema 'cdc'." % (ALL_PREFIX + ci.name, db.name), line)
    if len(src.args) != 3:
        raise SqlError(313, 16, 2, "An insufficient number of arguments were supplied for the procedure or "
                       "function cdc.%s%s." % (ALL_PREFIX, ci.name), line)
    comp = Compiler(ctx, Scope([]), line)
    vals = []
    for a in src.args:
        fn, t = comp.compile(a)
        vals.append((fn(()), t))
    (f, ft), (to, tt), (opt, ot) = vals
    ctx.touch(db, user_table=False)
    f = None if f is None else V.convert(f, ft, T.LSN_TYPE, explicit=True)
    to = None if to is None else V.convert(to, tt, T.LSN_TYPE, explicit=True)
    option = None if opt is None else V.value_to_str(opt, ot).strip(" ").lower()
    err = SqlError(313, 16, 3, MSG_313, line)
    if f is None or to is None or option not in ("all", "all update old"):
        raise err
    snap, _ = ctx.read_view()
    mn = ci.start_lsn
    mx = db.cdc.max_lsn(snap)
    if mn is None or mx is None or f < mn or to > mx:
        raise err
    if f > to and eng.options.get("from_gt_to_error", True):
        raise err
    quals = {(src.alias or name).lower()}
    if not src.alias:
        quals.add("cdc." + low)
    return ChangesSource(ci, quals, f, to, option == "all update old")
