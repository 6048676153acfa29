"""Built-in scalar functions and @@global variables."""

from __future__ import annotations

import datetime
import uuid

from ..results import SqlError
from ..sqltypes import TICKS_PER_DAY, SqlDateTimeOffset, SqlType, TICKS_PER_SECOND
from . import ast as A
from . import types as T
from . import values as V
from .clock import Zone

AGGREGATES = {"count", "count_big", "min", "max", "sum", "avg"}


def now_parts(engine, ctx=None):
    """Server local time (date, ticks), UTC (date, ticks) and offset minutes
    from the server's clock (engine/clock.py).  Once per statement (ctx): the
    date/time functions are runtime constants in SQL Server, evaluated once
    per query, so every row (and every such call) of a statement sees the
    same instant and offset."""
    cached = getattr(ctx, "now_parts", None)
    if cached is not None:
        return cached
    clock = engine.clock
    ts = clock.now()
    off = clock.zone.offset_at(ts)
    utc = datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).replace(tzinfo=None)
    local = utc + datetime.timedelta(minutes=off)
    ticks = ((local.hour * 60 + local.minute) * 60 + local.second) * TICKS_PER_SECOND + local.microsecond * 10
    uticks = ((utc.hour * 60 + utc.minute) * 60 + utc.second) * TICKS_PER_SECOND + utc.microsecond * 10
    parts = (local.date(), ticks, utc.date(), uticks, off)
    if ctx is not None:
        ctx.now_parts = parts
    return parts


def global_variable(comp, name):
    ctx = comp.ctx
    s = ctx.session
    e = ctx.engine
    n = name.upper()
    if n == "@@VERSION":
        return A and (lambda row: e.config.version_string), T.nvarchar(300)
    if n == "@@SPID":
        return (lambda row: s.spid), SqlType("smallint")
    if n == "@@TRANCOUNT":
        return (lambda row: s.trancount), T.INT_TYPE
    if n == "@@ROWCOUNT":
        return (lambda row: s.rowcount), T.INT_TYPE
    if n == "@@SERVERNAME":
        return (lambda row: e.config.server_name), T.nvarchar(128)
    if n == "@@IDENTITY":
        return (lambda row: s.last_identity), SqlType("numeric", precision=38, scale=0)
    if n == "@@ERROR":
        return (lambda row: s.last_error), T.INT_TYPE
    if n == "@@LOCK_TIMEOUT":
        return (lambda row: s.lock_timeout_ms), T.INT_TYPE
    if n == "@@TEXTSIZE":
        return (lambda row: s.options.get("TEXTSIZE", 2147483647)), T.INT_TYPE
    if n == "@@DBTS":
        return (lambda row: ctx.db.rowversion.to_bytes(8, "big")), T.varbinary(8)
    if n == "@@MAX_PRECISION":
        return (lambda row: 38), SqlType("tinyint")
    if n == "@@LANGUAGE":
        return (lambda row: s.language), T.nvarchar(128)
    if n == "@@DATEFIRST":
        return (lambda row: s.datefirst), SqlType("tinyint")
    if n == "@@SERVICENAME":
        return (lambda row: "MSSQLSERVER"), T.nvarchar(128)
    if n == "@@OPTIONS":
        return (lambda row: 5496), T.INT_TYPE
    raise comp.err(137, 15, 2, 'Must declare the scalar variable "%s".' % name)


def _args(comp, e):
    return [comp.compile(a) for a in e.args]


def _nargs(comp, e, lo, hi=None):
    hi = lo if hi is None else hi
    n = len(e.args)
    if not lo <= n <= hi:
        raise comp.err(174, 15, 1, "The %s function requires %d argument(s)." % (e.name[-1].lower(), lo))


def _int_arg(fn, t):
    if t.name in T.INTEGER_TYPES:
        return fn
    return lambda row: None if fn(row) is None else V.convert(fn(row), t, T.BIGINT_TYPE)


def _str_arg(fn, t):
    if t.name in T.STRING_TYPES:
        return fn
    return lambda row: None if fn(row) is None else V.value_to_str(fn(row), t)


def compile_function(comp, e):
    ctx = comp.ctx
    parts = [p.lower() for p in e.name]
    fname = parts[-1]
    qual = parts[:-1]
    if len(qual) > 1 and fname in CLR_METHODS:
        # t.col.Method(): a qualified CLR column, not database.schema.function
        from .clr_functions import compile_instance_method
        m = compile_instance_method(comp, e, fname)
        if m is not None:
            return m
    if len(qual) > 1:
        dbname = qual[-2] if len(qual) >= 2 else None
        if dbname:
            ctx.resolve_database(e.name[-3] if len(e.name) >= 3 else None, comp.line)
        qual = qual[-1:]
    if fname in AGGREGATES and not qual:
        agg = comp.scope.aggregates
        if agg is None:
            raise comp.err(147 if True else 0, 15, 1, "An aggregate may not appear in the WHERE clause "
                           "unless it is in a subquery contained in a HAVING clause or a select list, "
                           "and the column being aggregated is an outer reference.")
        return agg.register(comp, e)
    if qual and qual[0] == "sys" and fname.startswith("fn_cdc_") or fname in CDC_FUNCS and qual == ["sys"]:
        from .cdc_functions import compile_cdc_function
        return compile_cdc_function(comp, e, fname)
    if qual and qual[0].endswith("::"):
        from .clr_functions import compile_static_method
        return compile_static_method(comp, e, qual[0][:-2], fname)
    if qual and fname in CLR_METHODS:
        from .clr_functions import compile_instance_method
        m = compile_instance_method(comp, e, fname)
        if m is not None:
            return m
    if qual and qual[0] not in ("dbo", "sys"):
        raise comp.err(4121, 16, 1, 'Cannot find either column "%s" or the user-defined function or '
                       'aggregate "%s", or the name is ambiguous.' % (e.name[-2], ".".join(e.name)))
    h = BUILTINS.get(fname)
    if h is None:
        if qual:
            raise comp.err(4121, 16, 1, 'Cannot find either column "%s" or the user-defined function or '
                           'aggregate "%s", or the name is ambiguous.' % (e.name[-2], ".".join(e.name)))
        raise comp.err(195, 15, 10, "'%s' is not a recognized built-in function name." % e.name[-1])
    return h(comp, e)


CLR_METHODS = {"tostring", "stastext", "stasbinary", "astextzm", "getlevel", "stsrid"}
CDC_FUNCS = {"fn_cdc_get_max_lsn", "fn_cdc_get_min_lsn", "fn_cdc_increment_lsn", "fn_cdc_decrement_lsn",
             "fn_cdc_map_lsn_to_time", "fn_cdc_map_time_to_lsn", "fn_cdc_is_bit_set",
             "fn_cdc_get_column_ordinal", "fn_cdc_has_column_changed"}

BUILTINS = {}


def builtin(*names):
    def deco(f):
        for n in names:
            BUILTINS[n] = f
        return f
    return deco


@builtin("isnull")
def f_isnull(comp, e):
    _nargs(comp, e, 2)
    (a, at), (b, bt) = _args(comp, e)
    conv = comp._converter(bt, at)

    def run(row):
        v = a(row)
        return conv(b(row)) if v is None else v
    return run, at


@builtin("coalesce")
def f_coalesce(comp, e):
    if len(e.args) < 2:
        raise comp.err(189, 15, 1, "The coalesce function requires 2 to n arguments.")
    args = _args(comp, e)
    rt = args[0][1]
    for _, t in args[1:]:
        rt = T.higher(rt, t)
    fns = [(f, comp._converter(t, rt)) for f, t in args]

    def run(row):
        for f, c in fns:
            v = f(row)
            if v is not None:
                return c(v)
        return None
    return run, rt


@builtin("nullif")
def f_nullif(comp, e):
    _nargs(comp, e, 2)
    a, at = comp.compile(e.args[0])
    eq, _ = comp.compile_compare("=", e.args[0], e.args[1])
    return (lambda row: None if eq(row) is True else a(row)), at


@builtin("iif")
def f_iif(comp, e):
    _nargs(comp, e, 3)
    return comp.compile(A.Case(None, [(e.args[0], e.args[1])], e.args[2]))


@builtin("len")
def f_len(comp, e):
    _nargs(comp, e, 1)
    a, t = comp.compile(e.args[0])
    a = _str_arg(a, t)
    return (lambda row: None if a(row) is None else len(a(row).rstrip(" "))), T.INT_TYPE


@builtin("datalength")
def f_datalength(comp, e):
    _nargs(comp, e, 1)
    a, t = comp.compile(e.args[0])

    def run(row):
        v = a(row)
        if v is None:
            return None
        if isinstance(v, str):
            return len(v.encode("utf-16-le")) if t.name in T.UNICODE_TYPES else len(v.encode(T.codec(t), "replace"))
        if isinstance(v, (bytes, bytearray)):
            return len(v)
        return T.SYSTEM_TYPES.get(t.name, (0, 8))[1]
    return run, T.INT_TYPE


@builtin("substring")
def f_substring(comp, e):
    _nargs(comp, e, 3)
    (s, st), (b, bt), (n, nt) = _args(comp, e)
    if st.name not in T.STRING_TYPES and st.name not in T.BINARY_TYPES:
        s, st = _str_arg(s, st), T.varchar(8000)
    b, n = _int_arg(b, bt), _int_arg(n, nt)

    def run(row):
        v, start, ln = s(row), b(row), n(row)
        if v is None or start is None or ln is None:
            return None
        if ln < 0:
            raise SqlError(537, 16, 3, "Invalid length parameter passed to the LEFT or SUBSTRING function.")
        lo = max(start, 1)
        hi = start + ln
        if hi <= lo:
            return v[:0]
        return v[lo - 1:hi - 1]
    return run, st


@builtin("left", "right")
def f_leftright(comp, e):
    _nargs(comp, e, 2)
    (s, st), (n, nt) = _args(comp, e)
    s = _str_arg(s, st)
    n = _int_arg(n, nt)
    right = e.name[-1].lower() == "right"

    def run(row):
        v, k = s(row), n(row)
        if v is None or k is None:
            return None
        if k < 0:
            raise SqlError(536, 16, 1, "Invalid length parameter passed to the %s function."
                           % ("RIGHT" if right else "LEFT"))
        return (v[-k:] if k else "") if right else v[:k]
    return run, st if st.name in T.STRING_TYPES else T.varchar(8000)


def _strfn(f):
    def h(comp, e):
        _nargs(comp, e, 1)
        a, t = comp.compile(e.args[0])
        a = _str_arg(a, t)
        return (lambda row: None if a(row) is None else f(a(row))), (t if t.name in T.STRING_TYPES else T.varchar(8000))
    return h


BUILTINS["upper"] = _strfn(str.upper)
BUILTINS["lower"] = _strfn(str.lower)
BUILTINS["ltrim"] = _strfn(lambda s: s.lstrip(" "))
BUILTINS["rtrim"] = _strfn(lambda s: s.rstrip(" "))
BUILTINS["trim"] = _strfn(lambda s: s.strip(" "))
BUILTINS["reverse"] = _strfn(lambda s: s[::-1])


@builtin("replicate")
def f_replicate(comp, e):
    """REPLICATE(string, n): like SQL Server, the result is cut at 8000
    bytes unless the string is varchar(max)/nvarchar(max); n < 0 is NULL."""
    _nargs(comp, e, 2)
    (s, st), (n, nt) = _args(comp, e)
    s = _str_arg(s, st)
    n = _int_arg(n, nt)
    if st.name in T.STRING_TYPES and T.is_max_lob(st):
        rt, cap = st, None
    elif st.name in T.UNICODE_TYPES:
        rt, cap = T.nvarchar(4000), 4000
    else:
        rt, cap = T.varchar(8000), 8000

    def run(row):
        v, k = s(row), n(row)
        if v is None or k is None or k < 0:
            return None
        out = v * k
        return out if cap is None else out[:cap]
    return run, rt


@builtin("char")
def f_char(comp, e):
    """CHAR(n): the character of code n (0-255) in the code page of the
    database's default collation, char(1); NULL outside that range (page
    "CHAR (Transact-SQL)").  CHAR(0) is a NUL character, which a varchar
    column stores like any other."""
    _nargs(comp, e, 1)
    a, t = comp.compile(e.args[0])
    a = _int_arg(a, t)
    rt = SqlType("char", length=1, collation=T.DEFAULT_COLLATION)

    def run(row):
        n = a(row)
        if n is None or not 0 <= n <= 255:
            return None
        return bytes([n]).decode(T.codec(rt), "replace")
    return run, rt


@builtin("nchar")
def f_nchar(comp, e):
    """NCHAR(n): the UTF-16 character of code n, nchar(1); NULL outside 0
    through 65535 (page "NCHAR (Transact-SQL)", collations without the SC
    flag).  The stand-in also answers NULL for the surrogate halves
    0xD800-0xDFFF (SQL Server returns the lone code unit)."""
    _nargs(comp, e, 1)
    a, t = comp.compile(e.args[0])
    a = _int_arg(a, t)

    def run(row):
        n = a(row)
        if n is None or not 0 <= n <= 0xFFFF or 0xD800 <= n <= 0xDFFF:
            return None
        return chr(n)
    return run, SqlType("nchar", length=1, collation=T.DEFAULT_COLLATION)


@builtin("replace")
def f_replace(comp, e):
    _nargs(comp, e, 3)
    (a, at), (b, bt), (c, ct) = _args(comp, e)

    def run(row):
        x, y, z = a(row), b(row), c(row)
        if x is None or y is None or z is None:
            return None
        if not y:
            return x
        import re
        return re.sub(re.escape(y), lambda m: z, x, flags=re.I)
    return run, at


@builtin("charindex")
def f_charindex(comp, e):
    _nargs(comp, e, 2, 3)
    args = [(_str_arg(f, t), t) for f, t in _args(comp, e)[:2]] + \
        [(_int_arg(f, t), t) for f, t in _args(comp, e)[2:]]

    def run(row):
        needle, hay = args[0][0](row), args[1][0](row)
        start = args[2][0](row) if len(args) > 2 else 1
        if needle is None or hay is None:
            return None
        return hay.lower().find(needle.lower(), max((start or 1) - 1, 0)) + 1
    return run, T.INT_TYPE


@builtin("concat")
def f_concat(comp, e):
    args = [(_str_arg(f, t), t) for f, t in _args(comp, e)]
    uni = any(t.name in T.UNICODE_TYPES for _, t in args)
    return (lambda row: "".join(f(row) or "" for f, _ in args)), (T.nvarchar(4000) if uni else T.varchar(8000))


@builtin("quotename")
def f_quotename(comp, e):
    _nargs(comp, e, 1, 2)
    a, t = comp.compile(e.args[0])
    return (lambda row: None if a(row) is None else "[" + a(row).replace("]", "]]") + "]"), T.nvarchar(258)


@builtin("abs")
def f_abs(comp, e):
    _nargs(comp, e, 1)
    a, t = comp.compile(e.args[0])
    return (lambda row: None if a(row) is None else abs(a(row))), t


@builtin("newid")
def f_newid(comp, e):
    return (lambda row: uuid.uuid4()), SqlType("uniqueidentifier")


def _now(comp, kind):
    eng = comp.ctx.engine
    ctx = comp.ctx

    def run(row):
        d, t, ud, ut, off = now_parts(eng, ctx)
        if kind == "getdate":
            return V.datetime_from(d, t)
        if kind == "getutcdate":
            return V.datetime_from(ud, ut)
        if kind == "sysdatetime":
            return V.dt2_from(d, t, 7)
        if kind == "sysutcdatetime":
            return V.dt2_from(ud, ut, 7)
        d2 = V.dt2_from(d, t, 7)
        return SqlDateTimeOffset(d2.date, d2.ticks, off)
    types = {"getdate": T.DATETIME_TYPE, "getutcdate": T.DATETIME_TYPE, "current_timestamp": T.DATETIME_TYPE,
             "sysdatetime": SqlType("datetime2", scale=7), "sysutcdatetime": SqlType("datetime2", scale=7),
             "sysdatetimeoffset": SqlType("datetimeoffset", scale=7)}
    return run, types[kind]


for _n in ("getdate", "getutcdate", "sysdatetime", "sysutcdatetime", "sysdatetimeoffset"):
    BUILTINS[_n] = (lambda n: lambda comp, e: _now(comp, n))(_n)


@builtin("current_timezone_id")
def f_current_timezone_id(comp, e):
    """The Windows name of the server's zone (SQL Server 2022, Azure; page
    "CURRENT_TIMEZONE_ID").  Engine option current_timezone_id=False is a
    server before 2022, where the function does not exist (195)."""
    eng = comp.ctx.engine
    if not eng.options.get("current_timezone_id", True):
        raise comp.err(195, 15, 10, "'%s' is not a recognized built-in function name." % e.name[-1])
    _nargs(comp, e, 0)
    return (lambda row: eng.clock.zone.name), T.varchar(128)


def at_time_zone(comp, e):
    """inputdate AT TIME ZONE timezone (engine/clock.py has the DST rules)."""
    fn, t = comp.compile(e.expr)
    zfn, zt = comp.compile(e.zone)
    scales = {"datetime": 3, "smalldatetime": 0}
    if t.name not in ("datetime", "smalldatetime", "datetime2", "datetimeoffset"):
        raise comp.err(8116, 16, 1, "Argument data type %s is invalid for argument 1 of AT TIME ZONE function."
                       % t.name)
    if zt.name not in T.STRING_TYPES:
        raise comp.err(8116, 16, 1, "Argument data type %s is invalid for argument 2 of AT TIME ZONE function."
                       % zt.name)
    scale = scales.get(t.name, 7 if t.scale is None else t.scale)
    line = comp.line

    def run(row):
        v = fn(row)
        name = zfn(row)
        if v is None or name is None:
            return None
        zone = Zone.named(name)
        if zone is None:
            raise SqlError(9820, 16, 1, "The time zone parameter '%s' provided to AT TIME ZONE clause is invalid."
                           % name.replace("\0", "."), line)
        date, ticks, off = V.temporal_parts(v)
        total = date.toordinal() * TICKS_PER_DAY + ticks
        new_off = zone.constant_offset
        if new_off is not None:
            # a zone without rules (UTC, a fixed offset): the same result as
            # the rules below, without asking them for every row
            if off is None:
                off = new_off
            out = total + (new_off - off) * 60 * TICKS_PER_SECOND
        else:
            if off is None:
                local = datetime.datetime.combine(date, datetime.time()) + \
                    datetime.timedelta(microseconds=ticks // 10)
                off = zone.offset_of_local(local)
            utc_ticks = total - off * 60 * TICKS_PER_SECOND
            ts = (utc_ticks - datetime.date(1970, 1, 1).toordinal() * TICKS_PER_DAY) / TICKS_PER_SECOND
            new_off = zone.offset_at(ts)
            out = utc_ticks + new_off * 60 * TICKS_PER_SECOND
        if out == total:
            if scale == 7:         # rounding to 100 ns changes nothing
                return SqlDateTimeOffset(date, ticks, new_off)
            d2 = V.dt2_from(date, ticks, scale)
        else:
            d2 = V.dt2_from(datetime.date.fromordinal(out // TICKS_PER_DAY), out % TICKS_PER_DAY, scale)
        return SqlDateTimeOffset(d2.date, d2.ticks, new_off)
    return run, SqlType("datetimeoffset", scale=scale)


@builtin("todatetimeoffset")
def f_todto(comp, e):
    _nargs(comp, e, 2)
    (a, at), (b, bt) = _args(comp, e)

    def run(row):
        v, off = a(row), b(row)
        if v is None or off is None:
            return None
        if isinstance(off, str):
            sign = -1 if off.strip().startswith("-") else 1
            hh, mm = off.strip().lstrip("+-").split(":")
            off = sign * (int(hh) * 60 + int(mm))
        date, ticks, _ = V.temporal_parts(v)
        return SqlDateTimeOffset(date, ticks or 0, int(off))
    scale = at.scale if at.name in ("datetime2", "datetimeoffset") else (3 if at.name == "datetime" else 7)
    return run, SqlType("datetimeoffset", scale=scale)


_DATEDIFF_UNITS = {"year": "year", "yy": "year", "yyyy": "year", "month": "month", "mm": "month", "m": "month",
                   "day": "day", "dd": "day", "d": "day", "hour": "hour", "hh": "hour",
                   "minute": "minute", "mi": "minute", "n": "minute", "second": "second", "ss": "second",
                   "s": "second", "millisecond": "millisecond", "ms": "millisecond"}


@builtin("datediff")
def f_datediff(comp, e):
    """DATEDIFF(datepart, start, end): the number of datepart boundaries
    crossed from start to end (page "DATEDIFF (Transact-SQL)"); datetimeoffset
    operands compare in UTC."""
    _nargs(comp, e, 3)
    part = e.args[0].value if isinstance(e.args[0], A.Literal) else None
    unit = _DATEDIFF_UNITS.get(part)
    if unit is None:
        raise comp.err(155, 15, 1, "'%s' is not a recognized datediff option." % (part or "?"))
    (a, at), (b, bt) = _args(comp, e)[1:]
    dt2 = SqlType("datetime2", scale=7)

    def parts(v, t):
        if isinstance(v, str):
            v = V.convert(v, t, dt2)
        date, ticks, off = V.temporal_parts(v)
        date = date or V.EPOCH_1900
        ticks = ticks or 0
        if off:
            total = (date.toordinal() * 86400 * TICKS_PER_SECOND + ticks) - off * 60 * TICKS_PER_SECOND
            date = datetime.date.fromordinal(total // (86400 * TICKS_PER_SECOND))
            ticks = total % (86400 * TICKS_PER_SECOND)
        return date, ticks

    def run(row):
        x, y = a(row), b(row)
        if x is None or y is None:
            return None
        (d1, t1), (d2, t2) = parts(x, at), parts(y, bt)
        if unit == "year":
            return d2.year - d1.year
        if unit == "month":
            return (d2.year - d1.year) * 12 + d2.month - d1.month
        days = d2.toordinal() - d1.toordinal()
        if unit == "day":
            return days
        per = {"hour": 3600 * TICKS_PER_SECOND, "minute": 60 * TICKS_PER_SECOND, "second": TICKS_PER_SECOND,
               "millisecond": TICKS_PER_SECOND // 1000}[unit]
        return days * (86400 * TICKS_PER_SECOND // per) + t2 // per - t1 // per
    return run, T.INT_TYPE


@builtin("datepart")
def f_datepart(comp, e):
    _nargs(comp, e, 2)
    part = e.args[0].value if isinstance(e.args[0], A.Literal) else None
    a, t = comp.compile(e.args[1])

    def run(row):
        v = a(row)
        if v is None:
            return None
        date, ticks, off = V.temporal_parts(v) if not isinstance(v, str) else V.temporal_parts(
            V.convert(v, t, SqlType("datetimeoffset", scale=7)))
        p = part
        if p in ("tzoffset", "tz"):
            return off or 0
        if p in ("year", "yy", "yyyy"):
            return date.year
        if p in ("month", "mm", "m"):
            return date.month
        if p in ("day", "dd", "d"):
            return date.day
        if p in ("hour", "hh"):
            return (ticks or 0) // (3600 * TICKS_PER_SECOND)
        if p in ("minute", "mi", "n"):
            return (ticks or 0) // (60 * TICKS_PER_SECOND) % 60
        if p in ("second", "ss", "s"):
            return (ticks or 0) // TICKS_PER_SECOND % 60
        raise SqlError(155, 15, 1, "'%s' is not a recognized datepart option." % p)
    return run, T.INT_TYPE


def _db_of(comp, fn_db, row):
    ctx = comp.ctx
    if fn_db is None:
        return ctx.db
    v = fn_db(row)
    if v is None:
        return None
    for d in ctx.engine.databases.values():
        if d.database_id == v:
            return d
    return None


@builtin("object_id")
def f_object_id(comp, e):
    _nargs(comp, e, 1, 2)
    a, _ = comp.compile(e.args[0])
    ctx = comp.ctx

    def run(row):
        name = a(row)
        if name is None:
            return None
        from .parser import Parser
        try:
            p = Parser(name)
            parts = p.multipart()
        except SqlError:
            return None
        obj = ctx.engine.find_object(ctx, parts)
        # metadata visibility: NULL for an object the caller has no permission on
        if obj is None or not ctx.engine.security.can_see(ctx.session, obj.db, obj):
            return None
        return obj.object_id
    return run, T.INT_TYPE


@builtin("object_name", "object_schema_name")
def f_object_name(comp, e):
    _nargs(comp, e, 1, 2)
    a, _ = comp.compile(e.args[0])
    dbf = comp.compile(e.args[1])[0] if len(e.args) > 1 else None
    want_schema = e.name[-1].lower() == "object_schema_name"

    def run(row):
        oid = a(row)
        db = _db_of(comp, dbf, row)
        if oid is None or db is None:
            return None
        t = db.by_id.get(oid)
        if t is None:
            v = comp.ctx.engine.virtual_object_name(db, oid)
            if v is None:
                return None
            return v[0] if want_schema else v[1]
        if not comp.ctx.engine.security.can_see(comp.ctx.session, db, t):
            return None
        return t.schema.name if want_schema else t.name
    return run, T.SYSNAME_TYPE


@builtin("db_id")
def f_db_id(comp, e):
    _nargs(comp, e, 0, 1)
    ctx = comp.ctx
    if not e.args:
        return (lambda row: ctx.db.database_id), SqlType("smallint")
    a, _ = comp.compile(e.args[0])

    def run(row):
        n = a(row)
        d = ctx.engine.databases.get((n or "").lower())
        return None if d is None else d.database_id
    return run, SqlType("smallint")


@builtin("db_name")
def f_db_name(comp, e):
    _nargs(comp, e, 0, 1)
    ctx = comp.ctx
    if not e.args:
        return (lambda row: ctx.db.name), T.nvarchar(128)
    a, _ = comp.compile(e.args[0])

    def run(row):
        d = _db_of(comp, a, row)
        return None if d is None else d.name
    return run, T.nvarchar(128)


@builtin("schema_name", "schema_id")
def f_schema_name(comp, e):
    ctx = comp.ctx
    want_id = e.name[-1].lower() == "schema_id"
    if not e.args:
        return (lambda row: 1 if want_id else "dbo"), (T.INT_TYPE if want_id else T.SYSNAME_TYPE)
    a, _ = comp.compile(e.args[0])

    def run(row):
        v = a(row)
        if v is None:
            return None
        for s in ctx.db.schemas.values():
            if want_id and s.name.lower() == str(v).lower():
                return s.schema_id
            if not want_id and s.schema_id == v:
                return s.name
        return None
    return run, (T.INT_TYPE if want_id else T.SYSNAME_TYPE)


@builtin("is_rolemember", "is_member")
def f_is_rolemember(comp, e):
    _nargs(comp, e, 1, 2)
    a, _ = comp.compile(e.args[0])
    ctx = comp.ctx

    def run(row):
        role = a(row)
        if role is None:
            return None
        return 1 if ctx.engine.security.is_member(ctx.session, ctx.db, role) else 0
    return run, T.INT_TYPE


@builtin("is_srvrolemember")
def f_is_srvrolemember(comp, e):
    a, _ = comp.compile(e.args[0])
    ctx = comp.ctx
    return (lambda row: 1 if (a(row) or "").lower() == "sysadmin" and ctx.session.login.sysadmin else 0), T.INT_TYPE


@builtin("suser_name", "suser_sname", "system_user", "original_login")
def f_suser(comp, e):
    ctx = comp.ctx
    return (lambda row: ctx.session.login.name), T.nvarchar(128)


@builtin("user_name", "current_user")
def f_user_name(comp, e):
    ctx = comp.ctx
    return (lambda row: ctx.engine.security.user_name(ctx.session, ctx.db)), T.nvarchar(128)


@builtin("scope_identity")
def f_scope_identity(comp, e):
    s = comp.ctx.session
    return (lambda row: s.last_identity), SqlType("numeric", precision=38, scale=0)


@builtin("serverproperty")
def f_serverproperty(comp, e):
    a, _ = comp.compile(e.args[0])
    eng = comp.ctx.engine
    props = {"productversion": "16.0.1000.6", "edition": "Developer Edition (64-bit)",
             "engineedition": 3, "servername": None, "productlevel": "RTM",
             "productmajorversion": "16", "productminorversion": "0", "productbuild": "1000",
             "collation": "SQL_Latin1_General_CP1_CI_AS", "machinename": None, "instancename": None,
             "isclustered": 0, "ishadrenabled": 0, "isfulltextinstalled": 0, "ismanagedinstance": None}

    def run(row):
        k = (a(row) or "").lower()
        if k in ("servername", "machinename"):
            return V.SqlVariant(T.nvarchar(128), eng.config.server_name)
        v = props.get(k)
        if v is None:
            return None
        return V.SqlVariant(T.INT_TYPE if isinstance(v, int) else T.nvarchar(128), v)
    return run, SqlType("sql_variant")


@builtin("sql_variant_property")
def f_svp(comp, e):
    a, _ = comp.compile(e.args[0])
    p, _ = comp.compile(e.args[1])

    def run(row):
        v, prop = a(row), (p(row) or "").lower()
        if v is None:
            return None
        if prop == "basetype":
            return V.SqlVariant(T.SYSNAME_TYPE, v.base_type.name)
        return None
    return run, SqlType("sql_variant")


@builtin("has_perms_by_name")
def f_has_perms(comp, e):
    ctx = comp.ctx
    return (lambda row: 1 if ctx.engine.security.is_dbo(ctx.session, ctx.db) else 0), T.INT_TYPE
