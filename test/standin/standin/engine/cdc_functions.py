"""sys.fn_cdc_* scalar functions."""

from __future__ import annotations

from ..results import SqlError
from . import lsn as L
from . import types as T
from . import values as V
from .storage import visible


def _arg(comp, e, i, to_type=None):
    fn, t = comp.compile(e.args[i])
    if to_type is None or t.name == to_type.name:
        return fn
    return lambda row: V.convert(fn(row), t, to_type, explicit=True)


def _need(comp, e, n):
    if len(e.args) != n:
        raise comp.err(313 if len(e.args) < n else 8144, 16, 2 if len(e.args) < n else 2,
                       ("An insufficient number of arguments were supplied for the procedure or function %s."
                        if len(e.args) < n else "Procedure or function %s has too many arguments specified.")
                       % ".".join(e.name))


def compile_cdc_function(comp, e, fname):
    ctx = comp.ctx
    eng = ctx.engine

    def db_now():
        return ctx.db

    if fname == "fn_cdc_get_max_lsn":
        _need(comp, e, 0)

        def run(row):
            db = db_now()
            if db.cdc is None:
                return None
            with eng.lock:
                ctx.touch(db, user_table=False)      # a data access: fixes a SNAPSHOT transaction's view
                snap, _ = ctx.read_view()
                return db.cdc.max_lsn(snap)
        return run, T.LSN_TYPE
    if fname == "fn_cdc_get_min_lsn":
        _need(comp, e, 1)
        a = _arg(comp, e, 0, T.SYSNAME_TYPE)

        def run(row):
            db = db_now()
            name = a(row)
            if db.cdc is None or name is None:
                return L.ZERO
            ci = db.cdc.instances.get(name.rstrip(" ").lower())
            if ci is None or not eng.security.can_read_ci(ctx.session, db, ci):
                return L.ZERO
            return ci.start_lsn
        return run, T.LSN_TYPE
    if fname in ("fn_cdc_increment_lsn", "fn_cdc_decrement_lsn"):
        _need(comp, e, 1)
        a = _arg(comp, e, 0, T.LSN_TYPE)
        op = L.increment if fname == "fn_cdc_increment_lsn" else L.decrement
        return (lambda row: None if a(row) is None else op(a(row))), T.LSN_TYPE
    if fname == "fn_cdc_map_lsn_to_time":
        _need(comp, e, 1)
        a = _arg(comp, e, 0, T.LSN_TYPE)

        def run(row):
            v = a(row)
            db = db_now()
            if v is None or db.cdc is None:
                return None
            with eng.lock:
                ctx.touch(db, user_table=False)      # a data access: fixes a SNAPSHOT transaction's view
                snap, _ = ctx.read_view()
                rv = visible(db.cdc.mapping.rows.get(v), snap, None)
            return None if rv is None else rv.values[2]
        return run, T.DATETIME_TYPE
    if fname == "fn_cdc_map_time_to_lsn":
        _need(comp, e, 2)
        a = _arg(comp, e, 0, T.nvarchar(30))
        b = _arg(comp, e, 1, T.DATETIME_TYPE)

        def run(row):
            op, tm = a(row), b(row)
            db = db_now()
            if op is None or tm is None or db.cdc is None:
                return None
            op = op.strip().lower()
            if op not in ("largest less than", "largest less than or equal", "smallest greater than",
                          "smallest greater than or equal"):
                raise SqlError(313, 16, 3, "An insufficient number of arguments were supplied for the "
                               "procedure or function sys.fn_cdc_map_time_to_lsn.")
            with eng.lock:
                ctx.touch(db, user_table=False)      # a data access: fixes a SNAPSHOT transaction's view
                snap, _ = ctx.read_view()
                m = db.cdc.mapping
                rows = [rv.values for k in m.keys if (rv := visible(m.rows.get(k), snap, None)) is not None]
            if op.startswith("largest"):
                cands = [r for r in rows if (r[2] < tm if op == "largest less than" else r[2] <= tm)]
                if not cands:
                    return None
                return max(c[0] for c in cands)
            cands = [r for r in rows if (r[2] > tm if op == "smallest greater than" else r[2] >= tm)]
            if not cands:
                return None
            return min(c[0] for c in cands)
        return run, T.LSN_TYPE
    if fname == "fn_cdc_is_bit_set":
        _need(comp, e, 2)
        p = _arg(comp, e, 0, T.INT_TYPE)
        m = _arg(comp, e, 1, T.varbinary(128))

        def run(row):
            pos, mask = p(row), m(row)
            if pos is None or mask is None:
                return None
            return is_bit_set(pos, mask)
        return run, T.BIT_TYPE
    if fname == "fn_cdc_get_column_ordinal":
        _need(comp, e, 2)
        a = _arg(comp, e, 0, T.SYSNAME_TYPE)
        b = _arg(comp, e, 1, T.SYSNAME_TYPE)

        def run(row):
            db = db_now()
            ci_name, col = a(row), b(row)
            if db.cdc is None or ci_name is None or col is None:
                return None
            ci = db.cdc.instances.get(ci_name.lower())
            if ci is None:
                return None
            for i, c in enumerate(ci.captured):
                if c[1].lower() == col.lower():
                    return i + 1
            return -1
        return run, T.INT_TYPE
    if fname == "fn_cdc_has_column_changed":
        _need(comp, e, 3)
        a = _arg(comp, e, 0, T.SYSNAME_TYPE)
        b = _arg(comp, e, 1, T.SYSNAME_TYPE)
        m = _arg(comp, e, 2, T.varbinary(128))

        def run(row):
            db = db_now()
            ci = db.cdc.instances.get((a(row) or "").lower()) if db.cdc else None
            if ci is None or m(row) is None:
                return None
            for i, c in enumerate(ci.captured):
                if c[1].lower() == (b(row) or "").lower():
                    return is_bit_set(i + 1, m(row))
            return None
        return run, T.BIT_TYPE
    raise comp.err(4121, 16, 1, 'Cannot find either column "sys" or the user-defined function or aggregate '
                   '"sys.%s", or the name is ambiguous.' % e.name[-1])


def is_bit_set(position, mask: bytes) -> bool:
    """Ordinal 1 is the low bit of the LAST byte (big-endian mask)."""
    byte_index = len(mask) - 1 - (position - 1) // 8
    if position < 1 or byte_index < 0:
        return False
    return bool(mask[byte_index] & (1 << ((position - 1) % 8)))
