"""Compiling expression ASTs into Python closures over a row tuple.

compile_expr(e, scope, ctx) -> (fn, SqlType) where fn(row) evaluates the
expression for one row tuple of the statement's source.  Predicates return
True / False / None (UNKNOWN), giving SQL's three-valued logic.
"""

from __future__ import annotations

import decimal
import operator
import re

from ..results import SqlError
from ..sqltypes import MAX, SqlType
from . import ast as A
from . import types as T
from . import values as V

D = decimal.Decimal
_DCTX = decimal.Context(prec=60, rounding=decimal.ROUND_HALF_UP)


class ScopeColumn:
    __slots__ = ("qualifiers", "name", "index", "type", "nullable", "meta")

    def __init__(self, qualifiers, name, index, type_, nullable=True, meta=None):
        self.qualifiers = qualifiers      # set of lower-case qualifier strings ("t", "dbo.t", ...)
        self.name = name
        self.index = index
        self.type = type_
        self.nullable = nullable
        self.meta = meta                  # ColumnMeta for base-table columns


class Scope:
    def __init__(self, columns=None):
        self.columns = columns or []
        self.aggregates = None            # set by the query planner in aggregate mode
        self.windows = None               # id(Window node) -> row index of its precomputed value

    @property
    def width(self):
        return len(self.columns)

    def resolve(self, parts, line=1):
        name = parts[-1].lower()
        qual = ".".join(p.lower() for p in parts[:-1] if p != "") if len(parts) > 1 else None
        if qual is not None:
            # a 3/4-part qualifier: keep the last two parts (schema.table) and the last part
            q_parts = [p.lower() for p in parts[:-1]]
            quals = {".".join(q_parts[-2:]), q_parts[-1]} if len(q_parts) > 1 else {q_parts[-1]}
            hits = [c for c in self.columns if c.name.lower() == name and
                    (".".join(q_parts[-2:]) in c.qualifiers if len(q_parts) > 1 else q_parts[-1] in c.qualifiers)]
            if not hits:
                if not any(any(q in c.qualifiers for q in quals) for c in self.columns):
                    raise SqlError(4104, 16, 1, 'The multi-part identifier "%s" could not be bound.'
                                   % ".".join(parts), line)
                raise SqlError(207, 16, 1, "Invalid column name '%s'." % parts[-1], line)
        else:
            hits = [c for c in self.columns if c.name.lower() == name]
            if not hits:
                raise SqlError(207, 16, 1, "Invalid column name '%s'." % parts[-1], line)
        if len(hits) > 1:
            raise SqlError(209, 16, 1, "Ambiguous column name '%s'." % parts[-1], line)
        return hits[0]


def const(v):
    return lambda row: v


def is_const(e):
    """A literal, or an expression SQL Server folds to one before the rows
    are read: a sign, CAST/CONVERT of a constant (ENGINE.md, constant
    folding).  Callers evaluate it once and fall back to evaluating it per
    row when that fails, so its errors stay where they were."""
    if isinstance(e, A.Literal):
        return True
    if isinstance(e, A.Unary):
        return is_const(e.expr)
    if isinstance(e, A.Cast):
        return is_const(e.expr) and (e.style is None or is_const(e.style))
    return False


class Compiler:
    """Compiles expressions for one statement execution (ctx = statement context)."""

    def __init__(self, ctx, scope: Scope, line=1):
        self.ctx = ctx
        self.scope = scope
        self.line = line

    def err(self, *a):
        e = SqlError(*a)
        e.line = self.line
        return e

    def compile(self, e):
        m = getattr(self, "c_" + type(e).__name__, None)
        if m is None:
            raise self.err(102, 15, 1, "Incorrect syntax near '%s'." % type(e).__name__)
        return m(e)

    # ---------------------------------------------------------------- leaves
    def c_Literal(self, e):
        v = e.value
        return const(v), e.type

    def c_Collate(self, e):
        """expr COLLATE name: the value as is, compared and converted under
        that collation ("COLLATE (Transact-SQL)"); 447 for a non-character
        expression."""
        fn, t = self.compile(e.expr)
        if not t.is_character() and t is not T.NULL_TYPE:
            raise self.err(447, 16, 0, "Expression type %s is invalid for COLLATE clause." % t.name)
        return fn, T.with_collation(t, e.collation, self.line)

    def c_Var(self, e):
        var = self.ctx.lookup_var(e.name, self.line)
        return (lambda row, var=var: var[1]), var[0]

    def c_GlobalVar(self, e):
        from .functions import global_variable
        return global_variable(self, e.name)

    def c_ColRef(self, e):
        agg = self.scope.aggregates
        try:
            col = self.scope.resolve(e.parts, self.line)
        except SqlError:
            from .clr_functions import compile_property
            prop = compile_property(self, e.parts)   # geometry/geography col.STSrid
            if prop is None:
                raise
            return prop
        i = col.index
        if agg is not None and agg.group_exprs is not None and not agg.allows_column(col):
            raise self.err(8120, 16, 1, "Column '%s' is invalid in the select list because it is not "
                           "contained in either an aggregate function or the GROUP BY clause."
                           % ".".join(e.parts))
        return _column_reader(i), col.type

    def c_Star(self, e):
        raise self.err(102, 15, 1, "Incorrect syntax near '*'.")

    def c_Window(self, e):
        idx = (self.scope.windows or {}).get(id(e))
        if idx is None:
            raise self.err(4108, 16, 1, "Windowed functions can only appear in the SELECT or ORDER BY clauses.")
        return (lambda row, i=idx: row[i]), T.BIGINT_TYPE

    def c_Subquery(self, e):
        from .query import scalar_subquery
        return scalar_subquery(self, e.select)

    def c_Exists(self, e):
        from .query import exists_subquery
        return exists_subquery(self, e.select)

    # ---------------------------------------------------------------- functions
    def c_AtTimeZone(self, e):
        from .functions import at_time_zone
        return at_time_zone(self, e)

    def c_Func(self, e):
        from .functions import compile_function
        return compile_function(self, e)

    def c_Cast(self, e):
        fn, st = self.compile(e.expr)
        dst = e.type
        if dst.is_character() and st.is_character() and st.collation is not None:
            # the output of CAST/CONVERT has the collation of a character
            # input ("CAST and CONVERT", Output Collation): N'…' COLLATE x
            # cast to varchar converts through x's code page
            dst = SqlType(dst.name, dst.length, dst.precision, dst.scale, st.collation)
        conv = V.convert
        if e.style is None:
            if st.name in T.TEMPORAL_TYPES and dst.name in T.TEMPORAL_TYPES:
                # what convert() does for these types, without its dispatch per row
                temporal = V.convert_temporal

                def cast_temporal(row):
                    v = fn(row)
                    return None if v is None else temporal(v, st, dst)
                return cast_temporal, dst
            return (lambda row: conv(fn(row), st, dst, None, True)), dst
        sfn, sty = self.compile(e.style)

        def with_style(row):
            style = sfn(row)
            if style is not None and not isinstance(style, int):
                style = V.convert(style, sty, T.INT_TYPE)
            return conv(fn(row), st, dst, style, True)
        return with_style, dst

    def c_Case(self, e):
        whens = []
        res_types = []
        if e.operand is not None:
            ofn, ot = self.compile(e.operand)
            for c, r in e.whens:
                cfn = self.compile_compare("=", e.operand, c)[0]
                rfn, rt = self.compile(r)
                whens.append((cfn, rfn))
                res_types.append(rt)
        else:
            for c, r in e.whens:
                cfn, _ = self.compile(c)
                rfn, rt = self.compile(r)
                whens.append((cfn, rfn))
                res_types.append(rt)
        efn = None
        if e.else_ is not None:
            efn, et = self.compile(e.else_)
            res_types.append(et)
        rtype = res_types[0]
        for t in res_types[1:]:
            rtype = self._case_type(rtype, t)
        convs = [self._converter(t, rtype) for t in res_types]

        def run(row):
            for (c, r), cv in zip(whens, convs):
                if c(row) is True:
                    return cv(r(row))
            if efn is not None:
                return convs[-1](efn(row))
            return None
        return run, rtype

    @staticmethod
    def _case_type(t1, t2):
        """Result type of two CASE branches: the higher type; of two strings
        or binaries of that type the longer length, (max) winning (else an
        nvarchar(4000) branch would cut an nvarchar(max) one)."""
        r = T.higher(t1, t2)
        if t1.name == t2.name and t1.length is not None and t2.length is not None:
            n = MAX if MAX in (t1.length, t2.length) else max(t1.length, t2.length)
            if n != r.length:
                r = SqlType(r.name, n, r.precision, r.scale, r.collation)
        return r

    def _converter(self, src, dst):
        if src.name == dst.name or dst.name in T.STRING_TYPES and src.name in T.STRING_TYPES:
            return lambda v: v
        return lambda v: V.convert(v, src, dst)

    # ---------------------------------------------------------------- arithmetic
    def c_Unary(self, e):
        fn, t = self.compile(e.expr)
        if e.op == "+":
            return fn, t
        if e.op == "~":
            return (lambda row: None if fn(row) is None else ~fn(row)), t
        if t.name in T.STRING_TYPES or t.name in T.BINARY_TYPES:
            raise self.err(8117, 16, 1, "Operand data type %s is invalid for minus operator." % t.name)

        def neg(row):
            v = fn(row)
            if v is None:
                return None
            # copy_negate: -v would round a decimal to the default 28 digits
            return v.copy_negate() if isinstance(v, decimal.Decimal) else -v
        return neg, t

    def c_Binary(self, e):
        lf, lt = self.compile(e.left)
        rf, rt = self.compile(e.right)
        op = e.op
        # an untyped NULL takes the other operand's type ('x' + NULL is NULL)
        if lt is T.NULL_TYPE:
            lt = rt
        elif rt is T.NULL_TYPE:
            rt = lt
        ls, rs = lt.name in T.STRING_TYPES, rt.name in T.STRING_TYPES
        if op == "+" and (ls and rs or (ls and rt.name in T.BINARY_TYPES and False)):
            uni = lt.name in T.UNICODE_TYPES or rt.name in T.UNICODE_TYPES
            if lt.length == MAX or rt.length == MAX:
                n = MAX
            else:
                n = (lt.length or 1) + (rt.length or 1)
                lim = 4000 if uni else 8000
                if n > lim:
                    n = lim
            rtype = T.nvarchar(n) if uni else T.varchar(n)

            def concat(row):
                a = lf(row)
                if a is None:
                    return None
                b = rf(row)
                return None if b is None else a + b
            return concat, rtype
        if op == "+" and lt.name in T.BINARY_TYPES and rt.name in T.BINARY_TYPES:
            def bconcat(row):
                a, b = lf(row), rf(row)
                return None if a is None or b is None else a + b
            return bconcat, T.varbinary(MAX if MAX in (lt.length, rt.length) else
                                        min(8000, (lt.length or 1) + (rt.length or 1)))
        if ls or rs:
            # string op number: the string converts to the other type
            other = rt if ls else lt
            if other.name in T.STRING_TYPES or other.name in T.BINARY_TYPES:
                raise self.err(402, 16, 1, "The data types %s and %s are incompatible in the %s operator."
                               % (lt.name, rt.name, {"+": "add", "-": "subtract", "*": "multiply",
                                                     "/": "divide", "%": "modulo"}.get(op, op)))
            if ls:
                lf0, src = lf, lt
                lf = lambda row: V.convert(lf0(row), src, other)
                lt = other
            else:
                rf0, src = rf, rt
                rf = lambda row: V.convert(rf0(row), src, other)
                rt = other
        if lt.name in T.BINARY_TYPES and rt.name in T.BINARY_TYPES:
            raise self.err(8117, 16, 1, "Operand data type %s is invalid for %s operator."
                           % (lt.name, {"-": "subtract", "*": "multiply", "/": "divide", "%": "modulo",
                                        "&": "boolean AND", "|": "boolean OR", "^": "boolean XOR"}.get(op, op)))
        if (lt.name in T.BINARY_TYPES) != (rt.name in T.BINARY_TYPES) and \
                (lt.name not in T.INTEGER_TYPES and rt.name not in T.INTEGER_TYPES):
            raise self.err(402, 16, 1, "The data types %s and %s are incompatible in the %s operator."
                           % (lt.name, rt.name, {"+": "add", "-": "subtract", "*": "multiply",
                                                 "/": "divide", "%": "modulo"}.get(op, op)))
        if lt.name in T.BINARY_TYPES or rt.name in T.BINARY_TYPES:
            # binary with an integer: the binary converts to the integer type
            if lt.name in T.BINARY_TYPES:
                lf0, src = lf, lt
                lf = lambda row: V.convert(lf0(row), src, rt)
                lt = rt
            else:
                rf0, src = rf, rt
                rf = lambda row: V.convert(rf0(row), src, lt)
                rt = lt
        if lt.name in T.TEMPORAL_TYPES or rt.name in T.TEMPORAL_TYPES:
            raise self.err(8117, 16, 1, "Operand data type %s is invalid for %s operator."
                           % ((lt if lt.name in T.TEMPORAL_TYPES else rt).name,
                              {"+": "add", "-": "subtract", "*": "multiply", "/": "divide",
                               "%": "modulo"}.get(op, op)))
        if op in "&|^":
            f = {"&": int.__and__, "|": int.__or__, "^": int.__xor__}[op]

            def bit(row):
                a, b = lf(row), rf(row)
                return None if a is None or b is None else f(int(a), int(b))
            return bit, T.higher(lt, rt)
        rtype = T.arithmetic_type(op, lt, rt)
        rn = rtype.name
        if rn in ("float", "real"):
            def fl(row):
                a, b = lf(row), rf(row)
                if a is None or b is None:
                    return None
                a, b = float(a), float(b)
                if op == "+":
                    return a + b
                if op == "-":
                    return a - b
                if op == "*":
                    return a * b
                if b == 0:
                    raise SqlError(8134, 16, 1, "Divide by zero error encountered.")
                return a / b if op == "/" else a % b
            return fl, rtype
        if rn in T.INTEGER_TYPES:
            lo, hi = T.INT_RANGES[rn]

            def it(row):
                a, b = lf(row), rf(row)
                if a is None or b is None:
                    return None
                a, b = int(a), int(b)
                if op == "+":
                    r = a + b
                elif op == "-":
                    r = a - b
                elif op == "*":
                    r = a * b
                else:
                    if b == 0:
                        raise SqlError(8134, 16, 1, "Divide by zero error encountered.")
                    q = abs(a) // abs(b)
                    if op == "/":
                        r = q if (a >= 0) == (b >= 0) else -q
                    else:
                        r = abs(a) - q * abs(b)
                        r = r if a >= 0 else -r
                if lo is not None and not lo <= r <= hi:
                    raise SqlError(8115, 16, 2, "Arithmetic overflow error converting expression to "
                                   "data type %s." % rn)
                return r
            return it, rtype
        # exact numeric: decimal / money
        q = D(1).scaleb(-(rtype.scale if rtype.scale is not None else 4))
        limit = D(10) ** ((rtype.precision or 19) - (rtype.scale or 0))

        def dec(row):
            a, b = lf(row), rf(row)
            if a is None or b is None:
                return None
            a = D(int(a)) if isinstance(a, (int, bool)) else (D(repr(a)) if isinstance(a, float) else a)
            b = D(int(b)) if isinstance(b, (int, bool)) else (D(repr(b)) if isinstance(b, float) else b)
            if op == "+":
                r = _DCTX.add(a, b)
            elif op == "-":
                r = _DCTX.subtract(a, b)
            elif op == "*":
                r = _DCTX.multiply(a, b)
            else:
                if b == 0:
                    raise SqlError(8134, 16, 1, "Divide by zero error encountered.")
                r = _DCTX.divide(a, b) if op == "/" else _DCTX.remainder(a, b)
            r = r.quantize(q, context=_DCTX) if op != "/" else r.quantize(q, rounding=decimal.ROUND_HALF_UP,
                                                                        context=_DCTX)
            if abs(r) >= limit:
                raise SqlError(8115, 16, 2, "Arithmetic overflow error converting expression to data "
                               "type %s." % rn)
            return r
        return dec, rtype

    # ---------------------------------------------------------------- predicates
    def compile_compare(self, op, left, right):
        lf, lt = self.compile(left)
        rf, rt = self.compile(right)
        return self.compare_fns(op, lf, lt, rf, rt, is_const(left), is_const(right))

    def compare_fns(self, op, lf, lt, rf, rt, lconst=False, rconst=False):
        ct = V.comparison_type(lt, rt)
        if ct.name in T.LOB_OLD_TYPES:
            raise self.err(402, 16, 1, "The data types %s and %s are incompatible in the %s operator."
                           % (lt.name, rt.name, "equal to" if op == "=" else "greater than"))
        key = V.sort_key_fn(ct)
        if ct.name in T.BINARY_TYPES:
            key = _binary_key
        lf = self._to(lf, lt, ct, lconst)
        rf = self._to(rf, rt, ct, rconst)
        cmp = _COMPARISONS[op]
        if lconst != rconst:
            # one side a literal (`__$start_lsn > 0x…`, `tran_id <> 0x00`): its
            # sort key is the same for every row, so it is made once
            fast = _compare_with_constant(cmp, key, rf if lconst else lf, lf if lconst else rf, lconst)
            if fast is not None:
                return fast, T.BIT_TYPE

        def run(row):
            a = lf(row)
            if a is None:
                return None
            b = rf(row)
            if b is None:
                return None
            return cmp(key(a), key(b))
        return run, T.BIT_TYPE

    def _to(self, fn, src, dst, is_constant):
        if src.name == dst.name or (src.name in T.STRING_TYPES and dst.name in T.STRING_TYPES) \
                or (src.name in T.BINARY_TYPES and dst.name in T.BINARY_TYPES) \
                or (src.name in T.INTEGER_TYPES and dst.name in T.INTEGER_TYPES) \
                or (src.name in T.INTEGER_TYPES | {"decimal", "numeric", "money", "smallmoney"}
                    and dst.name in ("decimal", "numeric", "money", "smallmoney")):
            if dst.name == "bit" and src.name != "bit":
                return lambda row: None if fn(row) is None else fn(row) != 0
            return fn
        if is_constant:
            try:
                v = V.convert(fn(()), src, dst)
                return lambda row: v
            except SqlError:
                pass
        if dst.name in ("decimal", "numeric") and src.name in ("float", "real"):
            return lambda row: None if fn(row) is None else D(repr(fn(row)))
        target = dst
        if dst.name in ("decimal", "numeric"):
            target = SqlType("numeric", precision=38, scale=min(38, max(dst.scale or 0, 10)))
        return lambda row: V.convert(fn(row), src, target)

    def c_Compare(self, e):
        return self.compile_compare(e.op, e.left, e.right)

    def c_And(self, e):
        l, _ = self.compile(e.left)
        r, _ = self.compile(e.right)

        def run(row):
            a = l(row)
            if a is False:
                return False
            b = r(row)
            if b is False:
                return False
            return None if a is None or b is None else True
        return run, T.BIT_TYPE

    def c_Or(self, e):
        l, _ = self.compile(e.left)
        r, _ = self.compile(e.right)

        def run(row):
            a = l(row)
            if a is True:
                return True
            b = r(row)
            if b is True:
                return True
            return None if a is None or b is None else False
        return run, T.BIT_TYPE

    def c_Not(self, e):
        f, _ = self.compile(e.expr)

        def run(row):
            v = f(row)
            return None if v is None else not v
        return run, T.BIT_TYPE

    def c_IsNull(self, e):
        f, _ = self.compile(e.expr)
        if e.negated:
            return (lambda row: f(row) is not None), T.BIT_TYPE
        return (lambda row: f(row) is None), T.BIT_TYPE

    def c_Between(self, e):
        lo, _ = self.compile_compare(">=", e.expr, e.low)
        hi, _ = self.compile_compare("<=", e.expr, e.high)

        def run(row):
            a = lo(row)
            b = hi(row) if a is not False else False
            if a is False or b is False:
                r = False
            elif a is None or b is None:
                r = None
            else:
                r = True
            if e.negated:
                return None if r is None else not r
            return r
        return run, T.BIT_TYPE

    def c_InList(self, e):
        tests = [self.compile_compare("=", e.expr, item)[0] for item in e.items]
        neg = e.negated

        def run(row):
            unknown = False
            for t in tests:
                v = t(row)
                if v is True:
                    return False if neg else True
                if v is None:
                    unknown = True
            if unknown:
                return None
            return True if neg else False
        return run, T.BIT_TYPE

    def c_Like(self, e):
        f, t = self.compile(e.expr)
        pf, pt = self.compile(e.pattern)
        if pt.name not in T.STRING_TYPES:
            pf0 = pf
            pf = lambda row: None if pf0(row) is None else V.value_to_str(pf0(row), pt)
        ci = T.is_case_insensitive(t)
        cache = {}

        def to_regex(p):
            r = cache.get(p)
            if r is None:
                out, i = [], 0
                while i < len(p):
                    c = p[i]
                    if c == "%":
                        out.append(".*")
                    elif c == "_":
                        out.append(".")
                    elif c == "[":
                        j = p.find("]", i + 1)
                        if j < 0:
                            out.append(re.escape(c))
                        else:
                            body = p[i + 1:j]
                            if body.startswith("^"):
                                body = "^" + re.escape(body[1:]).replace("\\-", "-")
                            else:
                                body = re.escape(body).replace("\\-", "-")
                            out.append("[" + body + "]")
                            i = j
                    else:
                        out.append(re.escape(c))
                    i += 1
                r = re.compile("^" + "".join(out) + "$", re.S | (re.I if ci else 0))
                cache[p] = r
            return r

        def run(row):
            v = f(row)
            p = pf(row)
            if v is None or p is None:
                return None
            if not isinstance(v, str):
                v = V.value_to_str(v, t)
            m = to_regex(p.rstrip(" ") if True else p).match(v.rstrip(" "))
            r = m is not None
            return (not r) if e.negated else r
        return run, T.BIT_TYPE


_COMPARISONS = {"=": operator.eq, "<>": operator.ne, "<": operator.lt, ">": operator.gt,
                "<=": operator.le, ">=": operator.ge}


def _compare_with_constant(cmp, key, var_fn, const_fn, const_left):
    """compare_fns' comparison when one side is a constant with a value:
    None (use the general one) when the constant fails to evaluate or is
    NULL, so that errors and NULLs come from the general path as before."""
    try:
        c = const_fn(())
        if c is None:
            return None
        kc = key(c)
    except Exception:        # noqa: BLE001 - the general path raises it per row, as before
        return None
    i = getattr(var_fn, "column_index", None)
    if i is not None and not const_left:
        def run(row):          # a column itself: read without a call
            a = row[i]
            return None if a is None else cmp(key(a), kc)
    elif const_left:
        def run(row):
            a = var_fn(row)
            return None if a is None else cmp(kc, key(a))
    else:
        def run(row):
            a = var_fn(row)
            return None if a is None else cmp(key(a), kc)
    return run


def _column_reader(i):
    """row[i], as a function that says which column it reads (a comparison
    with a constant then reads the column inline)."""
    def read(row):
        return row[i]
    read.column_index = i
    return read


def _binary_key(v):
    return v.rstrip(b"\0")
