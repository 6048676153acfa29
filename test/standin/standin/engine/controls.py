"""Engine-side test controls (the control port forwards to Engine.control)."""

from __future__ import annotations

import datetime
import decimal
import random
import struct
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


def c_deny_select(eng, args):
    """deny_select {login, on=true}: the login loses (or, on=false, gets back)
    SELECT on every object, like a DENY that overrides its grants."""
    login = str(args["login"]).lower()
    on = args.get("on", True)
    if isinstance(on, str):
        on = on.lower() not in ("false", "0", "off", "no")
    with eng.lock:
        if login not in eng.security.logins:
            raise ValueError("unknown login %r" % args["login"])
        if on:
            eng.security.denied_select.add(login)
        else:
            eng.security.denied_select.discard(login)
        return {"denied_select": sorted(eng.security.denied_select)}


def c_capture_now(eng, args):
    return {"published": eng.capture_cycle_all()}


def c_set_interval(eng, args):
    s = float(args["seconds"])
    if s <= 0:
        raise ValueError("seconds must be > 0")
    eng.capture_interval = s
    eng._wake.set()
    return {"capture_interval": s}


def dummy_rows_option(value):
    """'every' | 'never' | seconds (> 0) -> the engine option dummy_rows."""
    v = str(value).strip().lower()
    if v in ("every", "never"):
        return v
    try:
        secs = float(v)
    except ValueError:
        raise ValueError("dummy_rows must be 'every', 'never' or a number of seconds, not %r" % value)
    if secs <= 0:
        raise ValueError("dummy_rows seconds must be > 0")
    return secs


def empty_scans_option(value):
    v = str(value).strip().lower()
    if v not in ("rows", "fold"):
        raise ValueError("empty_scans must be 'rows' or 'fold', not %r" % value)
    return v


def c_capture_options(eng, args):
    """capture_options {dummy_rows?, empty_scans?}: the UNCONFIRMED habits of
    the capture job (see cdc.py): dummy mapping rows on idle cycles 'every'
    cycle, 'never' or at most every N seconds; empty log scan sessions as
    'rows' or 'fold'ed into one row.  Returns the current settings."""
    with eng.lock:
        if "dummy_rows" in args:
            eng.options["dummy_rows"] = dummy_rows_option(args["dummy_rows"])
        if "empty_scans" in args:
            eng.options["empty_scans"] = empty_scans_option(args["empty_scans"])
        return {"dummy_rows": eng.options.get("dummy_rows", "every"),
                "empty_scans": eng.options.get("empty_scans", "rows")}


def c_security_options(eng, args):
    """security_options {null_role_access?}: who may read the query functions
    of a capture instance enabled with @role_name = NULL (UNCONFIRMED, see
    security.py): 'select' (SELECT on the source table suffices) or
    'dbo_only' (db_owner, or a grant on the function / schema cdc)."""
    with eng.lock:
        if "null_role_access" in args:
            v = str(args["null_role_access"]).strip().lower()
            if v not in ("select", "dbo_only"):
                raise ValueError("null_role_access must be 'select' or 'dbo_only', not %r" % args["null_role_access"])
            eng.options["null_role_access"] = v
        return {"null_role_access": eng.options.get("null_role_access", "select")}


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
        # the exact mark, for deterministic tests; batches of the cleanup job's
        # threshold (sys.sp_cdc_change_job @threshold) unless given
        threshold = int(args.get("threshold") or db.cdc.job["threshold"])
        cleanup_to(eng, db, ci, mark, group_by_time=False, threshold=threshold)
        return {"capture_instance": ci.name, "min_lsn": "0x" + ci.start_lsn.hex().upper()}


def c_wkb_byte_order(eng, args):
    """wkb_byte_order order=big|little: the byte order of STAsBinary() (UNCONFIRMED, ENGINE.md)."""
    order = str(args.get("order", "little")).lower()
    if order not in ("big", "little"):
        raise ValueError("order must be big or little")
    with eng.lock:
        eng.options["wkb_big_endian"] = order == "big"
    return {"order": order}


def _flag(value, default):
    if value is None:
        return default
    if isinstance(value, str):
        return value.lower() in ("1", "true", "on", "yes")
    return bool(value)


def c_restore(eng, args):
    """restore {lsn?, new_fork?, new_database_guid?, database?}: the database
    as of LSN `lsn` (default: now), on a new recovery fork (restore.py).  The
    control port then closes the connections to that database, as RESTORE
    needs exclusive access."""
    from .restore import restore
    db = _db(eng, args)
    with eng.lock:
        lsn = args.get("lsn")
        if lsn is None:
            value = db.lsn.current()
        else:
            text = str(lsn)
            value = L.from_bytes(bytes.fromhex(text[2:] if text.lower().startswith("0x") else text))
        return restore(eng, db, value, new_fork=_flag(args.get("new_fork"), True),
                       new_database_guid=_flag(args.get("new_database_guid"), False))


def c_set_option(eng, args):
    """set_option {name, value}: an engine option (ENGINE.md) at run time."""
    name = str(args["name"])
    if name not in eng.options:
        raise ValueError("unknown engine option %r (known: %s)" % (name, ", ".join(sorted(eng.options))))
    value = _flag(args.get("value"), True)
    with eng.lock:
        eng.options[name] = value
    return {name: value}


def c_sort_cost(eng, args):
    """sort_cost {us_per_row}: what a blocking Sort costs before its first
    row, in microseconds per input row (ENGINE.md "Sorts take time")."""
    cost = float(args.get("us_per_row", 0))
    if not 0 <= cost <= 1e6:
        raise ValueError("us_per_row must be within 0..1000000")
    with eng.lock:
        eng.options["sort_row_cost_us"] = cost
    return {"sort_row_cost_us": cost}


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


# fill_table's value generators.  Every value must lie inside its column's
# type (a smallmoney above 214,748.3647 only fails later, when a SELECT
# encodes it), and key columns must stay unique: a key generator maps the
# row index i to a distinct value, and _key_capacity says how far it can go
# so a fill that would overflow the key type is refused up front.

_BASE_DATE = datetime.date(2020, 1, 1)
_DAYS_TO_MAX_DATE = (datetime.date(9999, 12, 31) - _BASE_DATE).days
_DAYS_1900 = (_BASE_DATE - datetime.date(1900, 1, 1)).days
_SMALLDATETIME_MAX_DAYS = (datetime.date(2079, 6, 6) - datetime.date(1900, 1, 1)).days
_NON_KEY_SPAN = 10 ** 6          # non-key numbers stay in 0 .. 10^6 (or their type's maximum)
_FLOAT32 = struct.Struct("<f")
_MONEY_MAX_UNITS = {"money": 2 ** 63 - 1, "smallmoney": 2 ** 31 - 1}     # in 1/10000
_INTEGERS = ("tinyint", "smallint", "int", "bigint")      # bit is handled on its own
_STRING_TYPES = ("char", "varchar", "nchar", "nvarchar", "text", "ntext", "sysname", "xml")
_BYTES_TYPES = ("binary", "varbinary", "image", "timestamp", "hierarchyid", "geometry", "geography")


def _scale(t, default=7):
    return default if t.scale is None else t.scale


def _exact_shape(t):
    """(scale, largest value in units of 10^-scale) of a decimal or money type."""
    n = t.name
    if n in _MONEY_MAX_UNITS:
        return 4, _MONEY_MAX_UNITS[n]
    p = t.precision or 18
    s = t.scale or 0
    return s, 10 ** p - 1


def _text_length(t):
    return 20 if t.length in (None, MAX) else t.length


def _bytes_length(t):
    return 8 if t.length in (None, MAX) else t.length


def _string_key(width):
    """Zero-padded decimal keys ('k0042'), all of one width so that they sort
    numerically under any collation and fixed-length padding changes nothing."""
    digits = width - 1 if width > 1 else 1
    prefix = "k" if width > 1 else ""
    return lambda i: prefix + "%0*d" % (digits, i)


def _key_capacity(t):
    """The largest row index the key generator of type t can take (None: unbounded)."""
    n = t.name
    if n in _INTEGERS:
        return T.INT_RANGES[n][1] - 1
    if n == "bit":
        return 1
    if n in ("decimal", "numeric", "money", "smallmoney"):
        s, units = _exact_shape(t)
        return units // 10 ** s - 1
    if n == "real":
        return 2 ** 24 - 1               # consecutive integers stay exact in float32
    if n == "float":
        return 2 ** 53 - 1
    if n in _STRING_TYPES:
        w = _text_length(t)
        return 10 ** (w - 1 if w > 1 else 1) - 1
    if n in _BYTES_TYPES:
        return 256 ** _bytes_length(t) - 1
    if n == "date":
        return _DAYS_TO_MAX_DATE
    if n == "time":
        return TICKS_PER_DAY // 10 ** (7 - _scale(t)) - 1
    if n == "datetime":
        return (_DAYS_TO_MAX_DATE + 1) * 86400 - 1
    if n == "smalldatetime":
        return (_SMALLDATETIME_MAX_DAYS - _DAYS_1900 + 1) * 1440 - 1
    if n in ("datetime2", "datetimeoffset"):
        return (_DAYS_TO_MAX_DATE + 1) * (TICKS_PER_DAY // 10 ** (7 - _scale(t))) - 1
    if n == "sql_variant":
        return 2 ** 31 - 1
    return None


def _key_generator(t):
    """i -> a distinct value of type t, increasing with i."""
    n = t.name
    if n in _INTEGERS:
        return lambda i: i + 1
    if n == "bit":
        return lambda i: bool(i)
    if n in ("decimal", "numeric", "money", "smallmoney"):
        q = decimal.Decimal(1).scaleb(-_exact_shape(t)[0])
        return lambda i: decimal.Decimal(i + 1).quantize(q)
    if n in ("float", "real"):
        return lambda i: float(i + 1)
    if n == "xml":
        return lambda i: "<r i=\"%d\"/>" % i
    if n in _STRING_TYPES:
        return _string_key(_text_length(t))
    if n in _BYTES_TYPES:
        ln = _bytes_length(t)
        return lambda i: i.to_bytes(ln, "big")
    if n == "uniqueidentifier":
        # an odd multiplier is a bijection mod 2^128: distinct, and spread over the byte groups
        return lambda i: uuid.UUID(int=(i + 1) * 0x9E3779B97F4A7C15 % (1 << 128))
    if n == "date":
        return lambda i: _BASE_DATE + datetime.timedelta(days=i)
    if n == "time":
        unit = 10 ** (7 - _scale(t))
        return lambda i: SqlTime(i * unit)
    if n == "datetime":
        return lambda i: SqlDateTime(_DAYS_1900 + i // 86400, (i % 86400) * 300)
    if n == "smalldatetime":
        return lambda i: SqlSmallDateTime(_DAYS_1900 + i // 1440, i % 1440)
    if n in ("datetime2", "datetimeoffset"):
        unit = 10 ** (7 - _scale(t))
        per_day = TICKS_PER_DAY // unit

        def at(i):
            d = _BASE_DATE + datetime.timedelta(days=i // per_day)
            ticks = (i % per_day) * unit
            return SqlDateTime2(d, ticks) if n == "datetime2" else SqlDateTimeOffset(d, ticks, 0)
        return at
    if n == "sql_variant":
        return lambda i: SqlVariant(T.INT_TYPE, i)
    return lambda i: None


def _value_generator(t, rng):
    """i -> a random value of type t (deterministic for a given rng seed)."""
    n = t.name
    if n in _INTEGERS:
        lo, hi = T.INT_RANGES[n]
        lo, hi = max(lo, 0), min(hi, _NON_KEY_SPAN)
        return lambda i: rng.randint(lo, hi)
    if n == "bit":
        return lambda i: bool(rng.getrandbits(1))
    if n in ("decimal", "numeric", "money", "smallmoney"):
        s, units = _exact_shape(t)
        top = min(units, _NON_KEY_SPAN * 10 ** s)
        return lambda i: decimal.Decimal(rng.randint(0, top)).scaleb(-s)
    if n == "real":
        # stored values must be what a real can hold, or they compare unlike what a SELECT returns
        return lambda i: _FLOAT32.unpack(_FLOAT32.pack(rng.random() * 1000))[0]
    if n == "float":
        return lambda i: rng.random() * 1000
    if n == "xml":
        return lambda i: "<r i=\"%d\"/>" % i
    if n in _STRING_TYPES:
        ln = _text_length(t)
        if n in ("char", "nchar"):
            return lambda i: ("v%d" % rng.randint(0, 10 ** 6)).ljust(ln)[:ln]
        return lambda i: ("v%d" % rng.randint(0, 10 ** 6))[:ln]
    if n in _BYTES_TYPES:
        ln = _bytes_length(t)
        if n != "binary":
            ln = min(ln, 8)
        return lambda i: rng.getrandbits(8 * ln).to_bytes(ln, "big")
    if n == "uniqueidentifier":
        return lambda i: uuid.UUID(int=rng.getrandbits(128))
    if n == "date":
        return lambda i: _BASE_DATE + datetime.timedelta(days=rng.randint(0, 3650))
    if n == "time":
        unit = 10 ** (7 - _scale(t))
        return lambda i: SqlTime(rng.randrange(0, TICKS_PER_DAY // unit) * unit)
    if n == "datetime":
        return lambda i: SqlDateTime(_DAYS_1900 + rng.randint(0, 3650), rng.randrange(0, 300 * 86400))
    if n == "smalldatetime":
        return lambda i: SqlSmallDateTime(_DAYS_1900 + rng.randint(0, 3650), rng.randrange(0, 1440))
    if n in ("datetime2", "datetimeoffset"):
        unit = 10 ** (7 - _scale(t))
        per_day = TICKS_PER_DAY // unit

        def any_instant(i):
            k = rng.randrange(0, per_day * 3650)
            d = _BASE_DATE + datetime.timedelta(days=k // per_day)
            ticks = (k % per_day) * unit
            if n == "datetime2":
                return SqlDateTime2(d, ticks)
            return SqlDateTimeOffset(d, ticks, rng.choice((-300, 0, 60, 330)))
        return any_instant
    if n == "sql_variant":
        return lambda i: SqlVariant(T.INT_TYPE, i)
    return lambda i: None


def _generator(col, rng, is_key, last_index):
    """A function i -> value for column col (row index i, at most last_index)."""
    if not is_key:
        return _value_generator(col.type, rng)
    cap = _key_capacity(col.type)
    if cap is not None and last_index > cap:
        raise ValueError("fill_table: key column %s of type %s holds at most %d generated rows"
                         % (col.name, col.type.name, cap + 1))
    return _key_generator(col.type)


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
                gens.append(_generator(c, rng, i in table.cluster, start + count - 1))
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


def c_clock(eng, args):
    """The server's clock (engine/clock.py): `zone` a Windows zone name or
    `offset_minutes` a fixed offset; `utc` an ISO 8601 instant the clock
    jumps to and runs on from (e.g. just before a DST transition)."""
    import datetime
    from .clock import WINDOWS_ZONES, Zone
    clock = eng.clock
    with eng.lock:
        if args.get("zone") is not None:
            zone = Zone.named(str(args["zone"]))
            if zone is None:
                raise ValueError("unknown zone %r (known: %s)" % (args["zone"], ", ".join(WINDOWS_ZONES)))
            clock.zone = zone
        elif args.get("offset_minutes") is not None:
            minutes = int(args["offset_minutes"])
            if not -840 <= minutes <= 840:
                raise ValueError("offset_minutes must be within -840..840")
            clock.zone = Zone.fixed_offset(minutes)
        if args.get("utc") is not None:
            when = datetime.datetime.fromisoformat(str(args["utc"]).replace("Z", "+00:00"))
            if when.tzinfo is None:
                raise ValueError("utc must name its offset (Z or +00:00)")
            clock.set_utc(when)
        return clock.describe()


CONTROLS = {
    "capture_freeze": c_freeze, "capture_resume": c_resume, "capture_now": c_capture_now,
    "set_capture_interval": c_set_interval, "cleanup": c_cleanup, "stats": c_stats,
    "fill_table": c_fill_table, "deny_select": c_deny_select, "wkb_byte_order": c_wkb_byte_order,
    "capture_options": c_capture_options, "security_options": c_security_options, "restore": c_restore,
    "set_option": c_set_option, "clock": c_clock, "sort_cost": c_sort_cost,
}
