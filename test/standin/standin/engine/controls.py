"""Engine-side test controls (the control port forwards to Engine.control)."""

from __future__ import annotations

import datetime
import decimal
import random
import uuid

from ..sqltypes import (MAX, SqlDateTime, SqlDateTime2, SqlDateTimeOffset, SqlSmallDateTime, SqlTime,
                        SqlVariant, TICKS_PER_DAY)
from . import lsn as L
from . import types as T
from . import values as V
from .storage import RowVersion


def run_control(eng, command, args):
    h = CONTROLS.get(command)
    if h is None:
        raise ValueError("unknown control command %r" % command)
    return h(eng, args)


def _db(eng, args):
    name = args.get("database") or next(d for d in eng.databases.values() if d.name.lower() != "master").name
    db = eng.databases.get(name.lower())
    if db is None:
        raise ValueError("unknown database %r" % name)
    return db


def c_freeze(eng, args):
    eng.capture_frozen = True
    return {"frozen": True}


def c_resume(eng, args):
    eng.capture_frozen = False
    eng._wake.set()
    return {"frozen": False}


def c_capture_now(eng, args):
    return {"published": eng.capture_cycle_all()}


def c_set_interval(eng, args):
    s = float(args["seconds"])
    if s <= 0:
        raise ValueError("seconds must be > 0")
    eng.capture_interval = s
    eng._wake.set()
    return {"capture_interval": s}


def c_cleanup(eng, args):
    from .procedures import cleanup_to
    db = _db(eng, args)
    with eng.lock:
        if db.cdc is None:
            raise ValueError("CDC is not enabled in %s" % db.name)
        ci = db.cdc.instances.get(str(args["capture_instance"]).lower())
        if ci is None:
            raise ValueError("unknown capture instance %r" % args["capture_instance"])
        mark = args.get("low_water_mark")
        if mark is None:
            mark = db.cdc.max_lsn()
            if mark is None:
                raise ValueError("lsn_time_mapping is empty")
        elif isinstance(mark, str):
            mark = bytes.fromhex(mark[2:] if mark.lower().startswith("0x") else mark)
        cleanup_to(eng, db, ci, mark, group_by_time=False)   # the exact mark, for deterministic tests
        return {"capture_instance": ci.name, "min_lsn": "0x" + ci.start_lsn.hex().upper()}


def c_stats(eng, args):
    with eng.lock:
        out = {"seq": eng.seq, "active_snapshots": sum(eng.active_snaps.values()),
               "capture_frozen": eng.capture_frozen, "capture_interval": eng.capture_interval,
               "capture": dict(eng.capture_stats), "databases": {}}
        for db in eng.databases.values():
            d = {"tables": {t.full_name: len(t.rows) for t in db.tables.values()},
                 "is_cdc_enabled": db.is_cdc_enabled, "lsn": "0x" + L.to_bytes(db.lsn.current()).hex().upper()}
            if db.cdc is not None:
                mx = db.cdc.max_lsn()
                d["pending_transactions"] = len(db.cdc.log)
                d["max_lsn"] = None if mx is None else "0x" + mx.hex().upper()
                d["capture_instances"] = {ci.name: None if ci.start_lsn is None else "0x" + ci.start_lsn.hex().upper()
                                          for ci in db.cdc.instances.values()}
            out["databases"][db.name] = d
        return out


def _generator(col, rng, is_key, key_pos):
    """A function i -> value for column col (row index i)."""
    t = col.type
    n = t.name
    if n in ("tinyint", "smallint", "int", "bigint"):
        lo, hi = T.INT_RANGES[n]
        if is_key:
            return lambda i: i + 1
        hi = min(hi, 10 ** 6)
        lo = max(lo, 0)
        return lambda i: rng.randint(lo, hi)
    if n == "bit":
        return lambda i: bool(rng.getrandbits(1))
    if n in ("decimal", "numeric", "money", "smallmoney"):
        s = t.scale if n in ("decimal", "numeric") else 4
        p = t.precision if n in ("decimal", "numeric") else (19 if n == "money" else 10)
        q = decimal.Decimal(1).scaleb(-s)
        top = min(10 ** (p - s) - 1, 10 ** 6)
        if is_key:
            return lambda i: decimal.Decimal(i + 1).quantize(q)
        return lambda i: (decimal.Decimal(rng.randint(0, top * 10 ** s)) / (10 ** s)).quantize(q)
    if n in ("float", "real"):
        if is_key:
            return lambda i: float(i + 1)
        return lambda i: rng.random() * 1000
    if n in ("char", "varchar", "nchar", "nvarchar", "text", "ntext", "sysname", "xml"):
        ln = 20 if t.length in (None, MAX) else t.length
        if n == "xml":
            return lambda i: "<r i=\"%d\"/>" % i
        if is_key:
            w = max(1, ln)
            return lambda i: ("k%0*d" % (max(1, w - 1), i))[:w] if n in ("varchar", "nvarchar", "sysname") else \
                ("k%0*d" % (max(1, w - 1), i)).ljust(w)[:w]
        if n in ("char", "nchar"):
            return lambda i: ("v%d" % rng.randint(0, 10 ** 6)).ljust(ln)[:ln]
        return lambda i: ("v%d" % rng.randint(0, 10 ** 6))[:ln]
    if n in ("binary", "varbinary", "image", "timestamp", "hierarchyid", "geometry", "geography"):
        ln = 8 if t.length in (None, MAX) else t.length
        if is_key:
            return lambda i: i.to_bytes(max(ln, 8), "big")[-ln:]
        if n == "binary":
            return lambda i: rng.getrandbits(8 * ln).to_bytes(ln, "big")
        return lambda i: rng.getrandbits(8 * min(ln, 8)).to_bytes(min(ln, 8), "big")
    if n == "uniqueidentifier":
        if is_key:
            return lambda i: uuid.UUID(int=(i + 1) * 0x9E3779B97F4A7C15 % (1 << 128))
        return lambda i: uuid.UUID(int=rng.getrandbits(128))
    base = datetime.date(2020, 1, 1)
    if n == "date":
        return (lambda i: base + datetime.timedelta(days=i)) if is_key else \
            (lambda i: base + datetime.timedelta(days=rng.randint(0, 3650)))
    if n == "time":
        unit = 10 ** (7 - t.scale)
        return lambda i: SqlTime((i * unit if is_key else rng.randrange(0, TICKS_PER_DAY // unit) * unit) % TICKS_PER_DAY)
    if n == "datetime":
        d0 = (base - datetime.date(1900, 1, 1)).days
        return lambda i: SqlDateTime(d0 + (i // 86400 if is_key else rng.randint(0, 3650)),
                                     (i % 86400) * 300 if is_key else rng.randrange(0, 25920000))
    if n == "smalldatetime":
        d0 = (base - datetime.date(1900, 1, 1)).days
        return lambda i: SqlSmallDateTime(d0 + (i // 1440 if is_key else rng.randint(0, 3650)),
                                          i % 1440 if is_key else rng.randrange(0, 1440))
    if n in ("datetime2", "datetimeoffset"):
        unit = 10 ** (7 - t.scale)
        per_day = TICKS_PER_DAY // unit

        def f(i):
            k = i if is_key else rng.randrange(0, per_day * 3650)
            d = base + datetime.timedelta(days=k // per_day)
            ticks = (k % per_day) * unit
            if n == "datetime2":
                return SqlDateTime2(d, ticks)
            return SqlDateTimeOffset(d, ticks, 0 if is_key else rng.choice((-300, 0, 60, 330)))
        return f
    if n == "sql_variant":
        return lambda i: SqlVariant(T.INT_TYPE, i)
    return lambda i: None


def c_fill_table(eng, args):
    """Bulk-create rows (one committed transaction, no CDC log: fill before
    enabling CDC on the table)."""
    db = _db(eng, args)
    name = args["table"]
    parts = name.split(".")
    schema, tname = (parts[-2].strip("[]"), parts[-1].strip("[]")) if len(parts) > 1 else ("dbo", name.strip("[]"))
    count = int(args["rows"])
    rng = random.Random(args.get("seed", 1))
    with eng.lock:
        table = db.find_table(schema, tname)
        if table is None:
            raise ValueError("unknown table %s.%s" % (schema, tname))
        if table.capture_instances:
            raise ValueError("fill_table does not log changes; fill %s before enabling CDC" % table.full_name)
        start = 0
        # start after existing rows so integer keys stay unique
        if table.keys:
            start = len(table.rows) + (table.identity_current or 0) + 1
        gens = []
        for i, c in enumerate(table.columns):
            if c.identity is not None:
                seed, inc = c.identity
                cur = table.identity_current
                first = seed if cur is None else cur + inc
                gens.append((lambda f, inc: lambda k: f + k * inc)(first, inc))
            elif c.computed is not None:
                gens.append(None)
            elif c.is_rowversion:
                gens.append(None)
            else:
                gens.append(_generator(c, rng, i in table.cluster, table.cluster.index(i) if i in table.cluster else -1))
        computed = []
        if any(c.computed is not None for c in table.columns):
            from .dml import table_scope
            from .expressions import Compiler
            from .session import Ctx
            ctx = Ctx.__new__(Ctx)           # computed expressions need no session state
            ctx.engine, ctx.db, ctx.session, ctx.txn, ctx.line, ctx.stmt_snap = eng, db, None, None, 1, None
            for i, c in enumerate(table.columns):
                if c.computed is not None:
                    fn, t = Compiler(ctx, table_scope(table), 1).compile(c.computed)
                    computed.append((i, fn, t, c.type))
        seq = eng.next_seq()
        rows, keys = table.rows, table.keys
        rv_db = table.db
        new_keys = []
        for k in range(count):
            vals = []
            for g, c in zip(gens, table.columns):
                if g is not None:
                    vals.append(g(start + k if c.identity is None else k))
                elif c.is_rowversion:
                    vals.append(rv_db.next_rowversion())
                else:
                    vals.append(None)
            if computed:
                base = tuple(vals)
                for i, fn, t, ct in computed:
                    v = fn(base)
                    vals[i] = None if v is None else V.convert(v, t, ct)
            vals = tuple(vals)
            key = table.key_of(vals)
            if key in rows:
                raise ValueError("generated duplicate key %r" % (key,))
            rows[key] = RowVersion(vals, seq)
            new_keys.append(key)
        if new_keys:
            if keys and new_keys[0] < keys[-1] or any(new_keys[i] > new_keys[i + 1] for i in range(len(new_keys) - 1)):
                keys.extend(new_keys)
                keys.sort()
            else:
                keys.extend(new_keys)
        for c in table.columns:
            if c.identity is not None and count:
                seed, inc = c.identity
                first = seed if table.identity_current is None else table.identity_current + inc
                table.identity_current = first + (count - 1) * inc
        db.lsn.next_block()
        eng.publish_seq(seq)
        return {"table": table.full_name, "rows": count, "total": len(rows)}


CONTROLS = {
    "capture_freeze": c_freeze, "capture_resume": c_resume, "capture_now": c_capture_now,
    "set_capture_interval": c_set_interval, "cleanup": c_cleanup, "stats": c_stats,
    "fill_table": c_fill_table,
}
