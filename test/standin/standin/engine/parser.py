"""Recursive-descent parser for the T-SQL subset the stand-in supports.

parse_batch(text) parses the whole batch before anything runs (as SQL Server
compiles a batch), so a syntax error anywhere aborts the whole batch.  Any
construct outside the subset is a syntax error (Msg 102/156) and is logged on
the "standin.unsupported" logger so gaps are visible.
"""

from __future__ import annotations

import decimal
import logging

from ..results import SqlError
from ..sqltypes import SqlType
from . import ast as A
from . import types as T
from . import values as V
from .lexer import (BINARY, DECIMAL, EOF, FLOAT, IDENT, INT, NSTRING, OP, QIDENT,
                    RESERVED, STRING, VAR, Token, tokenize)

unsupported_log = logging.getLogger("standin.unsupported")

ISOLATION_LEVELS = {"READ UNCOMMITTED", "READ COMMITTED", "REPEATABLE READ", "SNAPSHOT", "SERIALIZABLE"}
AGGREGATES = {"COUNT", "COUNT_BIG", "MIN", "MAX", "SUM", "AVG"}
# statement keywords that are not reserved words
STATEMENT_WORDS = {"GO", "SAVE", "PRINT", "TRUNCATE", "MERGE", "THROW", "RAISERROR", "WAITFOR", "DBCC", "IF", "ENABLE",
                   "DISABLE", "RECONFIGURE", "CHECKPOINT", "KILL", "SHUTDOWN", "READTEXT", "WRITETEXT",
                   "UPDATETEXT", "OPEN", "CLOSE", "DEALLOCATE", "BULK", "REVERT", "SEND", "RECEIVE", "GET",
                   "MOVE", "LINENO", "SETUSER", "WITH"}


class Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks = tokenize(text)
        self.i = 0

    # ------------------------------------------------------------ helpers
    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def peek(self, k=1) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def advance(self) -> Token:
        t = self.toks[self.i]
        if t.kind != EOF:
            self.i += 1
        return t

    def error(self, tok=None):
        tok = tok or self.tok
        if tok.kind == EOF:
            prev = self.toks[self.i - 1] if self.i else tok
            err = SqlError(102, 15, 1, "Incorrect syntax near '%s'." % prev.text, prev.line)
        elif tok.kind == IDENT and tok.value.upper() in RESERVED:
            err = SqlError(156, 15, 1, "Incorrect syntax near the keyword '%s'." % tok.value.upper(), tok.line)
        else:
            err = SqlError(102, 15, 1, "Incorrect syntax near '%s'." % tok.text, tok.line)
        unsupported_log.warning("unsupported or invalid T-SQL at line %d near %r: %s",
                                err.line, tok.text, self.text[:500])
        return err

    def is_kw(self, *words, k=0):
        t = self.peek(k) if k else self.tok
        return t.kind == IDENT and t.value.upper() in words

    def accept_kw(self, *words):
        if self.is_kw(*words):
            return self.advance().value.upper()
        return None

    def expect_kw(self, *words):
        if not self.is_kw(*words):
            raise self.error()
        return self.advance().value.upper()

    def is_op(self, *ops, k=0):
        t = self.peek(k) if k else self.tok
        return t.kind == OP and t.value in ops

    def accept_op(self, *ops):
        if self.is_op(*ops):
            return self.advance().value
        return None

    def expect_op(self, op):
        if not self.is_op(op):
            raise self.error()
        return self.advance()

    def is_name(self, k=0):
        t = self.peek(k) if k else self.tok
        return t.kind == QIDENT or (t.kind == IDENT and t.value.upper() not in RESERVED)

    def name(self) -> str:
        t = self.tok
        if t.kind == QIDENT or (t.kind == IDENT and t.value.upper() not in RESERVED):
            self.advance()
            return t.value
        raise self.error()

    def any_name(self) -> str:
        """A name where reserved words are allowed (after a dot, e.g. sys.columns)."""
        t = self.tok
        if t.kind in (QIDENT, IDENT):
            self.advance()
            return t.value
        raise self.error()

    def multipart(self):
        parts = [self.name()]
        while self.is_op("."):
            self.advance()
            if self.is_op("."):          # db..table
                parts.append("")
                continue
            parts.append(self.any_name())
        if len(parts) > 4:
            raise self.error()
        return parts

    # ------------------------------------------------------------ batch
    def parse_batch(self):
        stmts = []
        first = self.tok
        if first.kind in (IDENT, QIDENT) and not (first.kind == IDENT and (
                first.value.upper() in RESERVED or first.value.upper() in STATEMENT_WORDS)):
            # SQL Server runs a bare procedure name at the start of a batch as EXEC
            stmts.append(self.exec_statement(implicit=True))
        while True:
            while self.accept_op(";"):
                pass
            if self.tok.kind == EOF:
                return stmts
            stmts.append(self.statement())

    def statement(self):
        t = self.tok
        line = t.line
        if t.kind != IDENT:
            if t.kind == OP and t.value == "(":
                return self.select_statement()
            raise self.error()
        kw = t.value.upper()
        if kw == "GO":
            raise self.error()
        if kw == "SELECT":
            return self.select_statement()
        if kw == "WITH":
            return self.with_select()
        if kw == "INSERT":
            return self.insert()
        if kw == "UPDATE":
            return self.update()
        if kw == "DELETE":
            return self.delete()
        if kw == "CREATE":
            return self.create()
        if kw == "DROP":
            return self.drop()
        if kw == "ALTER":
            return self.alter()
        if kw == "TRUNCATE":
            self.advance()
            self.expect_kw("TABLE")
            return A.Truncate(self.multipart(), line=line)
        if kw == "DECLARE":
            return self.declare()
        if kw == "SET":
            return self.set_statement()
        if kw == "BEGIN":
            if self.is_kw("TRAN", "TRANSACTION", k=1):
                self.advance()
                self.advance()
                name = None
                if self.tok.kind in (IDENT, QIDENT, VAR) and not self.is_kw(*RESERVED) \
                        and not self.is_kw(*STATEMENT_WORDS):
                    name = self.advance().value
                return A.BeginTran(name, line=line)
            self.advance()
            body = []
            while not self.is_kw("END"):
                if self.tok.kind == EOF:
                    raise self.error()
                if self.accept_op(";"):
                    continue
                body.append(self.statement())
            self.advance()
            return A.Block(body, line=line)
        if kw == "COMMIT":
            self.advance()
            self.accept_kw("TRAN", "TRANSACTION", "WORK")
            if self.tok.kind in (QIDENT, VAR) or (self.tok.kind == IDENT and not self.is_kw(*RESERVED)
                                                   and not self.is_kw("GO")):
                if self.peek().kind == EOF or self.is_op(";", k=1) or self.peek().kind == IDENT:
                    self.advance()
            return A.CommitTran(line=line)
        if kw == "ROLLBACK":
            self.advance()
            self.accept_kw("TRAN", "TRANSACTION", "WORK")
            name = None
            if self.tok.kind in (QIDENT, VAR) or (self.tok.kind == IDENT and not self.is_kw(*RESERVED)
                                                   and (self.peek().kind == EOF or self.is_op(";", k=1))):
                name = self.advance().value
            return A.RollbackTran(name, line=line)
        if kw == "SAVE":
            self.advance()
            self.expect_kw("TRAN", "TRANSACTION")
            return A.SaveTran(self.advance().value, line=line)
        if kw in ("EXEC", "EXECUTE"):
            return self.exec_statement()
        if kw == "USE":
            self.advance()
            return A.Use(self.name(), line=line)
        if kw == "GRANT":
            return self.grant()
        if kw == "RECONFIGURE":
            self.advance()
            override = False
            if self.accept_kw("WITH"):
                if not (self.tok.kind == IDENT and self.tok.value.upper() == "OVERRIDE"):
                    raise self.error()
                self.advance()
                override = True
            return A.Reconfigure(override, line=line)
        if kw in ("DENY", "REVOKE"):
            return self.deny_or_revoke(kw)
        if kw == "PRINT":
            self.advance()
            return A.Print(self.expr(), line=line)
        if kw == "IF":
            self.advance()
            cond = self.expr()
            then = self.statement()
            while self.accept_op(";"):
                pass
            else_ = None
            if self.accept_kw("ELSE"):
                else_ = self.statement()
            return A.If(cond, then, else_, line=line)
        if kw == "WHILE":
            self.advance()
            cond = self.expr()
            return A.While(cond, self.statement(), line=line)
        if kw == "BREAK":
            self.advance()
            return A.Break(line=line)
        if kw == "CONTINUE":
            self.advance()
            return A.Continue(line=line)
        if kw == "KILL":
            # KILL session_id (a constant); UOW and WITH STATUSONLY are not supported
            self.advance()
            if self.tok.kind != INT:
                raise self.error()
            return A.Kill(int(self.advance().value), line=line)
        if kw == "WAITFOR":
            self.advance()
            if not (self.tok.kind == IDENT and self.tok.value.upper() == "DELAY"):
                raise self.error()
            self.advance()
            return A.WaitFor(self.expr(), line=line)
        if kw == "RAISERROR":
            self.advance()
            self.expect_op("(")
            msg = self.expr()
            self.expect_op(",")
            sev = self.expr()
            self.expect_op(",")
            state = self.expr()
            self.expect_op(")")
            return A.RaiseError(None, msg, sev, state, line=line)
        if kw == "THROW":
            self.advance()
            num = self.expr()
            self.expect_op(",")
            msg = self.expr()
            self.expect_op(",")
            state = self.expr()
            return A.RaiseError(num, msg, None, state, line=line)
        raise self.error()

    # ------------------------------------------------------------ SELECT
    def select_statement(self):
        sel = self.select()
        return sel

    def with_select(self):
        """WITH name [(cols)] AS (SELECT ...) [, ...] SELECT ...  (non-recursive CTEs)."""
        self.expect_kw("WITH")
        ctes = []
        while True:
            name = self.name()
            cols = None
            if self.accept_op("("):
                cols = [self.name()]
                while self.accept_op(","):
                    cols.append(self.name())
                self.expect_op(")")
            self.expect_kw("AS")
            self.expect_op("(")
            if not self.is_kw("SELECT"):
                raise self.error()
            ctes.append((name, cols, self.select()))
            self.expect_op(")")
            if not self.accept_op(","):
                break
        if not self.is_kw("SELECT"):
            raise self.error()
        sel = self.select()
        sel.ctes = ctes
        return sel

    def select(self):
        line = self.tok.line
        if self.accept_op("("):
            sel = self.select()
            self.expect_op(")")
        else:
            sel = self.select_core(line)
        while self.is_kw("UNION"):
            self.advance()
            if not self.accept_kw("ALL"):
                raise self.error()
            other = self.select_core(self.tok.line)
            sel.union_all = (sel.union_all or []) + [other]
        if self.accept_kw("ORDER"):
            self.expect_kw("BY")
            sel.order_by = self.order_list()
            if self.accept_kw("OFFSET"):
                sel.offset = self.expr()
                self.expect_kw("ROW", "ROWS")
                if self.accept_kw("FETCH"):
                    self.expect_kw("FIRST", "NEXT")
                    sel.fetch = self.expr()
                    self.expect_kw("ROW", "ROWS")
                    self.expect_kw("ONLY")
        if self.accept_kw("OPTION"):
            self.expect_op("(")
            depth = 1
            while depth:
                t = self.advance()
                if t.kind == EOF:
                    raise self.error()
                if t.kind == OP and t.value == "(":
                    depth += 1
                elif t.kind == OP and t.value == ")":
                    depth -= 1
        return sel

    def order_list(self):
        out = []
        while True:
            e = self.expr()
            desc = self.accept_kw("ASC", "DESC") == "DESC"
            out.append((e, desc))
            if not self.accept_op(","):
                return out

    def select_core(self, line):
        self.expect_kw("SELECT")
        sel = A.Select(items=[], line=line)
        if self.accept_kw("DISTINCT"):
            sel.distinct = True
        else:
            self.accept_kw("ALL")
        if self.accept_kw("TOP"):
            if self.accept_op("("):
                sel.top = self.expr()
                self.expect_op(")")
            else:
                t = self.tok
                if t.kind not in (INT, VAR):
                    raise self.error()
                sel.top = self.primary()
            if self.accept_kw("PERCENT"):
                sel.top_percent = True
        assigns = []
        while True:
            if self.tok.kind == VAR and self.is_op("=", k=1) and not self.tok.value.startswith("@@"):
                name = self.advance().value
                self.advance()
                assigns.append((name, self.expr()))
            elif self.is_op("*"):
                self.advance()
                sel.items.append((A.Star(None), None))
            elif self.is_name() and self.is_op(".", k=1) and (self.peek(2).kind == OP and self.peek(2).value == "*"):
                q = [self.name()]
                self.advance()
                self.advance()
                sel.items.append((A.Star(q), None))
            elif (self.tok.kind in (QIDENT, IDENT, STRING) and self.is_op("=", k=1)
                  and (self.tok.kind != IDENT or self.tok.value.upper() not in RESERVED)):
                alias = self.advance().value
                self.advance()
                sel.items.append((self.expr(), alias))
            else:
                e = self.expr()
                alias = None
                if self.accept_kw("AS"):
                    alias = self.alias_name()
                elif self.tok.kind in (QIDENT, STRING) or (self.tok.kind == IDENT and self.is_name()):
                    alias = self.alias_name()
                sel.items.append((e, alias))
            if not self.accept_op(","):
                break
        if assigns:
            if sel.items:
                raise SqlError(141, 15, 1, "A SELECT statement that assigns a value to a variable must not "
                               "be combined with data-retrieval operations.", line)
            sel.assign = assigns
        if self.is_kw("INTO"):
            raise self.error()
        if self.accept_kw("FROM"):
            sel.source = self.source()
        if self.accept_kw("WHERE"):
            sel.where = self.expr()
        if self.accept_kw("GROUP"):
            self.expect_kw("BY")
            sel.group_by = [self.expr()]
            while self.accept_op(","):
                sel.group_by.append(self.expr())
        if self.accept_kw("HAVING"):
            sel.having = self.expr()
        return sel

    def alias_name(self):
        t = self.tok
        if t.kind in (QIDENT, STRING) or (t.kind == IDENT and t.value.upper() not in RESERVED):
            self.advance()
            return t.value
        raise self.error()

    def source(self):
        left = self.source_item()
        while True:
            if self.accept_op(","):
                right = self.source_item()
                left = A.Join(left, right, "CROSS", None)
                continue
            kind = None
            if self.is_kw("JOIN"):
                kind = "INNER"
            elif self.is_kw("INNER") and self.is_kw("JOIN", k=1):
                self.advance()
                kind = "INNER"
            elif self.is_kw("LEFT"):
                self.advance()
                self.accept_kw("OUTER")
                kind = "LEFT"
                if not self.is_kw("JOIN"):
                    raise self.error()
            elif self.is_kw("CROSS") and self.is_kw("JOIN", k=1):
                self.advance()
                self.advance()
                left = A.Join(left, self.source_item(), "CROSS", None)
                continue
            if not kind:
                return left
            self.expect_kw("JOIN")
            right = self.source_item()
            self.expect_kw("ON")
            left = A.Join(left, right, kind, self.expr())

    def source_item(self):
        if self.is_op("("):
            self.advance()
            if not self.is_kw("SELECT"):
                raise self.error()
            sel = self.select()
            self.expect_op(")")
            self.accept_kw("AS")
            return A.Derived(sel, self.alias_name())
        parts = self.multipart()
        if self.is_op("("):
            self.advance()
            args = []
            if not self.is_op(")"):
                args.append(self.expr())
                while self.accept_op(","):
                    args.append(self.expr())
            self.expect_op(")")
            alias = self.opt_alias()
            return A.FuncSource(parts, args, alias)
        alias = self.opt_alias()
        hints = []
        if self.is_kw("WITH") and self.is_op("(", k=1):
            self.advance()
            self.advance()
            while True:
                hints.append(self.any_name().upper())
                if not self.accept_op(","):
                    break
            self.expect_op(")")
        return A.TableRef(parts, alias, hints)

    def opt_alias(self):
        if self.accept_kw("AS"):
            return self.alias_name()
        if self.tok.kind == QIDENT or (self.tok.kind == IDENT and self.is_name()
                                       and not self.is_kw("WITH")):
            return self.alias_name()
        return None

    # ------------------------------------------------------------ expressions
    def expr(self):
        return self.or_expr()

    def or_expr(self):
        e = self.and_expr()
        while self.accept_kw("OR"):
            e = A.Or(e, self.and_expr())
        return e

    def and_expr(self):
        e = self.not_expr()
        while self.accept_kw("AND"):
            e = A.And(e, self.not_expr())
        return e

    def not_expr(self):
        if self.accept_kw("NOT"):
            return A.Not(self.not_expr())
        if self.is_kw("EXISTS"):
            self.advance()
            self.expect_op("(")
            sel = self.select()
            self.expect_op(")")
            return A.Exists(sel)
        return self.predicate()

    def predicate(self):
        e = self.additive()
        while True:
            t = self.tok
            if t.kind == OP and t.value in ("=", "<>", "!=", "<", ">", "<=", ">=", "!<", "!>"):
                self.advance()
                op = {"!=": "<>", "!<": ">=", "!>": "<="}.get(t.value, t.value)
                e = A.Compare(op, e, self.additive())
                continue
            if self.is_kw("IS"):
                self.advance()
                neg = bool(self.accept_kw("NOT"))
                self.expect_kw("NULL")
                e = A.IsNull(e, neg)
                continue
            neg = False
            if self.is_kw("NOT") and self.is_kw("BETWEEN", "IN", "LIKE", k=1):
                self.advance()
                neg = True
            if self.accept_kw("BETWEEN"):
                lo = self.additive()
                self.expect_kw("AND")
                hi = self.additive()
                e = A.Between(e, lo, hi, neg)
                continue
            if self.accept_kw("IN"):
                self.expect_op("(")
                if self.is_kw("SELECT"):
                    raise self.error()
                items = [self.expr()]
                while self.accept_op(","):
                    items.append(self.expr())
                self.expect_op(")")
                e = A.InList(e, items, neg)
                continue
            if self.accept_kw("LIKE"):
                e = A.Like(e, self.additive(), neg)
                if self.is_kw("ESCAPE"):
                    raise self.error()
                continue
            return e

    def additive(self):
        e = self.multiplicative()
        while self.is_op("+", "-", "&", "|", "^"):
            op = self.advance().value
            e = A.Binary(op, e, self.multiplicative())
        return e

    def multiplicative(self):
        e = self.unary()
        while self.is_op("*", "/", "%"):
            op = self.advance().value
            e = A.Binary(op, e, self.unary())
        return e

    def unary(self):
        if self.is_op("-", "+", "~"):
            op = self.advance().value
            inner = self.unary()
            if op == "-" and isinstance(inner, A.Literal) and isinstance(inner.value, (int, decimal.Decimal, float)) \
                    and not isinstance(inner.value, bool):
                # copy_negate: unary minus would round to the default 28 digits
                v = inner.value.copy_negate() if isinstance(inner.value, decimal.Decimal) else -inner.value
                t = inner.type
                if isinstance(v, int) and v == -2 ** 31 and t.name == "numeric":
                    t = T.INT_TYPE
                return A.Literal(v, t)
            return A.Unary(op, inner)
        e = self.primary()
        if self.is_kw("COLLATE"):
            self.advance()
            e = A.Collate(e, self.any_name())
        while self.is_kw("AT") and self.is_kw("TIME", k=1) and self.is_kw("ZONE", k=2):
            self.advance()
            self.advance()
            self.advance()
            e = A.AtTimeZone(e, self.primary())
        return e

    def primary(self):
        t = self.tok
        k = t.kind
        if k == INT:
            self.advance()
            v = int(t.value)
            return A.Literal(v, T.literal_int_type(v))
        if k == DECIMAL:
            self.advance()
            v = decimal.Decimal(t.value)
            digits = t.value.replace(".", "").lstrip("0") or "0"
            scale = len(t.value.split(".")[1]) if "." in t.value else 0
            p = max(len(digits), scale, 1)
            if p > 38:
                raise SqlError(1007, 15, 1, "The number '%s' is out of the range for numeric "
                               "representation (maximum precision 38)." % t.value, t.line)
            return A.Literal(v, SqlType("numeric", precision=p, scale=scale))
        if k == FLOAT:
            self.advance()
            return A.Literal(float(t.value), T.FLOAT_TYPE)
        if k == STRING:
            self.advance()
            # a non-Unicode literal is converted through the database's code
            # page (every stand-in database: SQL_Latin1_General_CP1_CI_AS)
            v = V.to_codepage(t.value)
            return A.Literal(v, T.varchar(max(1, len(v)) if len(v) <= 8000 else -1))
        if k == NSTRING:
            self.advance()
            n = len(t.value.encode("utf-16-le")) // 2
            return A.Literal(t.value, T.nvarchar(max(1, n) if n <= 4000 else -1))
        if k == BINARY:
            self.advance()
            return A.Literal(t.value, T.varbinary(max(1, len(t.value)) if len(t.value) <= 8000 else -1))
        if k == VAR:
            self.advance()
            if t.value.startswith("@@"):
                return A.GlobalVar(t.value.upper())
            return A.Var(t.value)
        if k == OP and t.value == "(":
            self.advance()
            if self.is_kw("SELECT"):
                sel = self.select()
                self.expect_op(")")
                return A.Subquery(sel)
            e = self.expr()
            self.expect_op(")")
            return e
        if k == IDENT:
            kw = t.value.upper()
            if kw == "NULL":
                self.advance()
                return A.Literal(None, T.NULL_TYPE)
            if kw == "CASE":
                return self.case()
            if kw in ("CAST", "TRY_CAST") and self.is_op("(", k=1):
                self.advance()
                self.advance()
                e = self.expr()
                self.expect_kw("AS")
                typ = self.data_type(cast=True)
                self.expect_op(")")
                return A.Cast(e, typ, None, False)
            if kw in ("CONVERT", "TRY_CONVERT") and self.is_op("(", k=1):
                self.advance()
                self.advance()
                typ = self.data_type(cast=True)
                self.expect_op(",")
                e = self.expr()
                style = None
                if self.accept_op(","):
                    style = self.expr()
                self.expect_op(")")
                return A.Cast(e, typ, style, True)
        if k == IDENT and t.value.lower() in ("geometry", "geography", "hierarchyid") and self.is_op("::", k=1):
            self.advance()
            self.advance()
            method = self.any_name()
            self.expect_op("(")
            args = []
            if not self.is_op(")"):
                args.append(self.expr())
                while self.accept_op(","):
                    args.append(self.expr())
            self.expect_op(")")
            return A.Func([t.value.lower() + "::", method], args, False, False)
        if k in (IDENT, QIDENT):
            if k == IDENT and t.value.upper() in RESERVED and t.value.upper() not in (
                    "LEFT", "RIGHT", "USER", "CURRENT", "IDENTITY"):
                raise self.error()
            parts = [self.any_name()]
            while self.is_op("."):
                self.advance()
                if self.is_op("*"):
                    raise self.error()
                parts.append(self.any_name())
            if self.is_op("("):
                self.advance()
                fname = parts[-1].upper()
                if self.is_op("*"):
                    self.advance()
                    self.expect_op(")")
                    f = A.Func(parts, [], True, False)
                else:
                    distinct = bool(self.accept_kw("DISTINCT"))
                    args = []
                    if not self.is_op(")"):
                        args.append(self.func_arg(fname, 0))
                        while self.accept_op(","):
                            args.append(self.func_arg(fname, len(args)))
                    self.expect_op(")")
                    f = A.Func(parts, args, False, distinct)
                if self.is_kw("OVER"):
                    return self.window(f)
                return f
            if len(parts) > 4:
                raise self.error()
            return A.ColRef(parts)
        raise self.error()

    def window(self, f):
        self.expect_kw("OVER")
        if f.name[-1].upper() != "ROW_NUMBER" or len(f.name) != 1 or f.args:
            raise self.error(self.toks[self.i - 1])
        self.expect_op("(")
        partition = []
        if self.tok.kind == IDENT and self.tok.value.upper() == "PARTITION":
            self.advance()
            self.expect_kw("BY")
            partition.append(self.expr())
            while self.accept_op(","):
                partition.append(self.expr())
        order = []
        if self.accept_kw("ORDER"):
            self.expect_kw("BY")
            order = self.order_list()
        self.expect_op(")")
        if not order:
            raise SqlError(4112, 16, 1, "The function 'ROW_NUMBER' must have an OVER clause with ORDER BY.",
                           self.tok.line)
        return A.Window(f, partition, order)

    def func_arg(self, fname, index):
        # DATEPART(TZOFFSET, x), DATEADD(day, n, x): the first argument is a keyword
        if fname in ("DATEPART", "DATEADD", "DATEDIFF", "DATENAME") and index == 0 and self.tok.kind == IDENT:
            return A.Literal(self.advance().value.lower(), T.varchar(30))
        return self.expr()

    def case(self):
        self.expect_kw("CASE")
        operand = None
        if not self.is_kw("WHEN"):
            operand = self.expr()
        whens = []
        while self.accept_kw("WHEN"):
            c = self.expr()
            self.expect_kw("THEN")
            whens.append((c, self.expr()))
        if not whens:
            raise self.error()
        else_ = None
        if self.accept_kw("ELSE"):
            else_ = self.expr()
        self.expect_kw("END")
        return A.Case(operand, whens, else_)

    def data_type(self, cast=False):
        """A type declaration; in CAST/CONVERT a character or binary type
        without a length is 30 long (1 in declarations), as in SQL Server."""
        line = self.tok.line
        parts = [self.any_name()]
        while self.accept_op("."):
            parts.append(self.any_name())
        if len(parts) > 1 and parts[0].lower() != "sys":
            raise self.error()
        name = parts[-1]
        if name.lower() == "double" and self.is_kw("PRECISION"):
            self.advance()
        args = []
        if self.accept_op("("):
            while True:
                if self.is_kw("MAX"):
                    self.advance()
                    args.append("max")
                elif self.tok.kind == INT:
                    args.append(int(self.advance().value))
                else:
                    raise self.error()
                if not self.accept_op(","):
                    break
            self.expect_op(")")
        if cast and not args and name.lower() in ("char", "varchar", "nchar", "nvarchar", "binary", "varbinary"):
            args = [30]
        return T.make_type(name, args, line)

    # ------------------------------------------------------------ DML
    def insert(self):
        line = self.tok.line
        self.expect_kw("INSERT")
        self.accept_kw("INTO")
        target = self.multipart()
        if self.is_kw("WITH"):
            raise self.error()
        cols = None
        if self.is_op("("):
            self.advance()
            cols = [self.name()]
            while self.accept_op(","):
                cols.append(self.name())
            self.expect_op(")")
        if self.accept_kw("DEFAULT"):
            self.expect_kw("VALUES")
            return A.Insert(target, cols, None, None, True, line=line)
        if self.accept_kw("VALUES"):
            rows = []
            while True:
                self.expect_op("(")
                row = [self.value_expr()]
                while self.accept_op(","):
                    row.append(self.value_expr())
                self.expect_op(")")
                rows.append(row)
                if not self.accept_op(","):
                    break
            if len(rows) > 1000:
                raise SqlError(10738, 15, 1, "The number of row value expressions in the INSERT statement "
                               "exceeds the maximum allowed number of 1000 row values.", line)
            return A.Insert(target, cols, rows, None, False, line=line)
        if self.is_kw("SELECT") or self.is_op("("):
            return A.Insert(target, cols, None, self.select(), False, line=line)
        if self.is_kw("EXEC", "EXECUTE"):
            raise self.error()
        raise self.error()

    def value_expr(self):
        if self.is_kw("DEFAULT"):
            self.advance()
            return "DEFAULT"
        return self.expr()

    def update(self):
        line = self.tok.line
        self.expect_kw("UPDATE")
        if self.is_kw("TOP"):
            raise self.error()
        target = self.multipart()
        self.expect_kw("SET")
        assigns = []
        while True:
            if self.tok.kind == VAR:
                raise self.error()
            parts = self.multipart()
            op = self.advance()
            if op.kind != OP or op.value not in ("=", "+=", "-=", "*=", "/="):
                raise self.error(op)
            e = self.value_expr()
            if op.value != "=":
                if e == "DEFAULT":
                    raise self.error()
                e = A.Binary(op.value[0], A.ColRef(parts), e)
            assigns.append((parts[-1], e))
            if not self.accept_op(","):
                break
        if self.is_kw("FROM"):
            raise self.error()
        where = None
        if self.accept_kw("WHERE"):
            where = self.expr()
        return A.Update(target, assigns, where, line=line)

    def delete(self):
        line = self.tok.line
        self.expect_kw("DELETE")
        if self.is_kw("TOP"):
            raise self.error()
        self.accept_kw("FROM")
        target = self.multipart()
        if self.is_kw("FROM"):
            raise self.error()
        where = None
        if self.accept_kw("WHERE"):
            where = self.expr()
        return A.Delete(target, where, line=line)

    # ------------------------------------------------------------ DDL
    def create(self):
        line = self.tok.line
        self.expect_kw("CREATE")
        if self.accept_kw("TABLE"):
            parts = self.multipart()
            self.expect_op("(")
            cols, pk_cols, pk_name, uniques = self.table_elements(line)
            self.expect_op(")")
            return A.CreateTable(parts, cols, pk_cols, pk_name, uniques=uniques, line=line)
        if self.accept_kw("SCHEMA"):
            name = self.name()
            if self.accept_kw("AUTHORIZATION"):
                self.name()
            return A.CreateSchema(name, line=line)
        if self.is_kw("INDEX", "NONCLUSTERED", "CLUSTERED", "UNIQUE"):
            # non-unique secondary indexes change no result: accepted without
            # effect; UNIQUE ones are enforced (unique.py)
            unique = bool(self.accept_kw("UNIQUE"))
            clustered = self.accept_kw("NONCLUSTERED", "CLUSTERED") == "CLUSTERED"
            self.expect_kw("INDEX")
            name = self.name()
            self.expect_kw("ON")
            table = self.multipart()
            cols = self.key_column_list()
            if self.is_kw("INCLUDE") or self.is_kw("WITH") or self.is_kw("WHERE"):
                raise self.error()
            return A.CreateIndex(name, table, cols, unique=unique, clustered=clustered, line=line)
        if self.is_kw("LOGIN"):
            self.advance()
            name = self.name()
            self.expect_kw("WITH")
            if not (self.tok.kind == IDENT and self.tok.value.upper() == "PASSWORD"):
                raise self.error()
            self.advance()
            self.expect_op("=")
            pw = self.advance()
            if pw.kind not in (STRING, NSTRING):
                raise self.error(pw)
            default_language = None
            while self.accept_op(","):
                opt = self.any_name().upper()
                self.expect_op("=")
                v = self.advance()
                if opt == "DEFAULT_LANGUAGE":
                    default_language = v.value
            return A.CreateLogin(name, pw.value, default_language, line=line)
        if self.accept_kw("USER"):
            name = self.name()
            login = name
            if self.accept_kw("FOR", "FROM"):
                if not (self.tok.kind == IDENT and self.tok.value.upper() == "LOGIN"):
                    raise self.error()
                self.advance()
                login = self.name()
            return A.CreateUser(name, login, line=line)
        if self.is_kw("ROLE"):
            self.advance()
            name = self.name()
            if self.accept_kw("AUTHORIZATION"):
                self.name()
            return A.CreateRole(name, line=line)
        raise self.error()

    def key_column_list(self):
        self.expect_op("(")
        cs = []
        while True:
            cs.append(self.name())
            self.accept_kw("ASC", "DESC")
            if not self.accept_op(","):
                break
        self.expect_op(")")
        return cs

    def table_elements(self, line):
        """Column definitions and table constraints: (cols, pk_cols, pk_name,
        uniques) with uniques a list of (constraint name or None, [cols])."""
        cols, pk_cols, pk_name, uniques = [], None, None, []
        while True:
            if self.is_kw("CONSTRAINT", "PRIMARY", "UNIQUE"):
                name = None
                if self.accept_kw("CONSTRAINT"):
                    name = self.name()
                if self.accept_kw("UNIQUE"):
                    self.accept_kw("CLUSTERED", "NONCLUSTERED")
                    uniques.append((name, self.key_column_list()))
                    if not self.accept_op(","):
                        break
                    continue
                self.expect_kw("PRIMARY")
                self.expect_kw("KEY")
                self.accept_kw("CLUSTERED", "NONCLUSTERED")
                cs = self.key_column_list()
                if pk_cols is not None:
                    raise SqlError(8110, 16, 0, "Cannot add multiple PRIMARY KEY constraints to table '%s'."
                                   % "?", line)
                pk_cols, pk_name = cs, name
            else:
                cols.append(self.column_def())
            if not self.accept_op(","):
                break
        for c in cols:
            if c.pk:
                if pk_cols is not None:
                    raise SqlError(8110, 16, 0, "Cannot add multiple PRIMARY KEY constraints to table.", line)
                pk_cols, pk_name = [c.name], c.pk_name
            if c.unique:
                uniques.append((c.unique_name, [c.name]))
        return cols, pk_cols, pk_name, uniques

    def column_def(self):
        line = self.tok.line
        name = self.name()
        col = A.ColumnDef(name, None, None, None, None, False, None, False, None, None, line=line)
        if self.accept_kw("AS"):
            col.computed = self.expr()
            if self.tok.kind == IDENT and self.tok.value.upper() == "PERSISTED":
                self.advance()
                col.persisted = True
                if self.accept_kw("NOT"):
                    self.expect_kw("NULL")
                    col.nullable = False
            return col
        col.type = self.data_type()
        while True:
            if self.accept_kw("NULL"):
                col.nullable = True
            elif self.is_kw("NOT") and self.is_kw("NULL", k=1):
                self.advance()
                self.advance()
                col.nullable = False
            elif self.accept_kw("COLLATE"):
                col.collation = self.any_name()
            elif self.accept_kw("IDENTITY"):
                seed, inc = 1, 1
                if self.accept_op("("):
                    seed = self.signed_int()
                    self.expect_op(",")
                    inc = self.signed_int()
                    self.expect_op(")")
                col.identity = (seed, inc)
            elif self.is_kw("CONSTRAINT", "PRIMARY", "DEFAULT", "UNIQUE"):
                cname = None
                if self.accept_kw("CONSTRAINT"):
                    cname = self.name()
                if self.accept_kw("DEFAULT"):
                    col.default = self.unary()
                elif self.accept_kw("UNIQUE"):
                    self.accept_kw("CLUSTERED", "NONCLUSTERED")
                    col.unique = True
                    col.unique_name = cname
                else:
                    self.expect_kw("PRIMARY")
                    self.expect_kw("KEY")
                    self.accept_kw("CLUSTERED", "NONCLUSTERED")
                    col.pk = True
                    col.pk_name = cname
            elif self.tok.kind == IDENT and self.tok.value.upper() in ("SPARSE", "ROWGUIDCOL"):
                self.advance()
            else:
                return col

    def signed_int(self):
        neg = bool(self.accept_op("-"))
        t = self.tok
        if t.kind != INT:
            raise self.error()
        self.advance()
        return -int(t.value) if neg else int(t.value)

    def drop(self):
        line = self.tok.line
        self.expect_kw("DROP")
        self.expect_kw("TABLE")
        if_exists = False
        if self.is_kw("IF") and self.is_kw("EXISTS", k=1):
            self.advance()
            self.advance()
            if_exists = True
        names = [self.multipart()]
        while self.accept_op(","):
            names.append(self.multipart())
        return A.DropTable(names, if_exists, line=line)

    def alter(self):
        line = self.tok.line
        self.expect_kw("ALTER")
        if self.accept_kw("TABLE"):
            parts = self.multipart()
            if self.accept_kw("ADD"):
                cols, pk_cols, pk_name, uniques = self.table_elements(line)
                return A.AlterTableAdd(parts, cols, pk_cols, pk_name, uniques=uniques, line=line)
            if self.accept_kw("DROP"):
                if self.accept_kw("CONSTRAINT"):
                    if_exists = False
                    if self.is_kw("IF") and self.is_kw("EXISTS", k=1):
                        self.advance()
                        self.advance()
                        if_exists = True
                    return A.AlterTableDropConstraint(parts, self.name(), if_exists, line=line)
                self.expect_kw("COLUMN")
                if_exists = False
                if self.is_kw("IF") and self.is_kw("EXISTS", k=1):
                    self.advance()
                    self.advance()
                    if_exists = True
                cols = [self.name()]
                while self.accept_op(","):
                    self.accept_kw("COLUMN")
                    cols.append(self.name())
                return A.AlterTableDrop(parts, cols, if_exists, line=line)
            if self.is_kw("ALTER") and self.is_kw("COLUMN", k=1):
                self.advance()
                self.advance()
                return A.AlterColumn(parts, self.column_def(), line=line)
            raise self.error()
        if self.accept_kw("DATABASE"):
            if self.tok.kind == IDENT and self.tok.value.upper() == "CURRENT":
                self.advance()
                db = None
            else:
                db = self.name()
            self.expect_kw("SET")
            opt = self.any_name().upper()
            if opt not in ("ALLOW_SNAPSHOT_ISOLATION", "READ_COMMITTED_SNAPSHOT"):
                raise self.error()
            val = self.expect_kw("ON", "OFF")
            if self.accept_kw("WITH"):
                self.any_name()
                if self.accept_kw("IMMEDIATE"):
                    pass
            return A.AlterDatabaseSet(db, opt, val == "ON", line=line)
        if self.is_kw("ROLE") or (self.is_kw("SERVER") and self.is_kw("ROLE", k=1)):
            server = bool(self.accept_kw("SERVER"))
            self.advance()
            role = self.name()
            self.expect_kw("ADD")
            if not self.is_kw("MEMBER"):
                raise self.error()
            self.advance()
            return A.AlterRoleAdd(role, self.name(), server, line=line)
        raise self.error()

    # ------------------------------------------------------------ SET
    def set_statement(self):
        line = self.tok.line
        self.expect_kw("SET")
        if self.tok.kind == VAR:
            name = self.advance().value
            op = self.advance()
            if op.kind != OP or op.value not in ("=", "+=", "-=", "*=", "/="):
                raise self.error(op)
            return A.SetVar(name, op.value, self.expr(), line=line)
        if self.accept_kw("TRANSACTION"):
            if not self.is_kw("ISOLATION"):
                raise self.error()
            self.advance()
            if not self.is_kw("LEVEL"):
                raise self.error()
            self.advance()
            words = [self.any_name().upper()]
            if words[0] in ("READ", "REPEATABLE"):
                words.append(self.any_name().upper())
            level = " ".join(words)
            if level not in ISOLATION_LEVELS:
                raise self.error(self.toks[self.i - 1])
            return A.SetIsolation(level, line=line)
        if self.is_kw("IDENTITY_INSERT"):
            self.advance()
            parts = self.multipart()
            on = self.expect_kw("ON", "OFF") == "ON"
            return A.SetIdentityInsert(parts, on, line=line)
        names = [self.any_name().upper()]
        while self.accept_op(","):
            names.append(self.any_name().upper())
        t = self.tok
        if self.accept_kw("ON", "OFF"):
            value = t.value.upper()
        elif t.kind in (INT, STRING, NSTRING, QIDENT, IDENT):
            if t.kind == OP:
                raise self.error()
            self.advance()
            value = t.value
        elif t.kind == OP and t.value == "-":
            self.advance()
            n = self.advance()
            if n.kind != INT:
                raise self.error(n)
            value = "-" + n.value
        else:
            raise self.error()
        return A.SetOption(names, value, line=line)

    def declare(self):
        line = self.tok.line
        self.expect_kw("DECLARE")
        decls = []
        while True:
            t = self.tok
            if t.kind != VAR:
                raise self.error()
            self.advance()
            self.accept_kw("AS")
            if self.is_kw("TABLE", "CURSOR"):
                raise self.error()
            typ = self.data_type()
            init = None
            if self.accept_op("="):
                init = self.expr()
            decls.append((t.value, typ, init))
            if not self.accept_op(","):
                break
        return A.Declare(decls, line=line)

    # ------------------------------------------------------------ EXEC
    def exec_statement(self, implicit=False):
        line = self.tok.line
        if not implicit:
            self.advance()
        if self.is_op("("):
            raise self.error()
        if self.tok.kind == VAR and self.is_op("=", k=1):
            raise self.error()
        proc = self.multipart()
        args = []
        if not (self.tok.kind == EOF or self.is_op(";") or self.starts_statement()):
            while True:
                name = None
                if self.tok.kind == VAR and self.is_op("=", k=1):
                    name = self.advance().value
                    self.advance()
                if self.accept_kw("DEFAULT"):
                    e = "DEFAULT"
                elif self.tok.kind == IDENT and not self.is_kw(*RESERVED) and not self.is_op("(", k=1) \
                        and not self.is_op(".", k=1):
                    # EXEC p abc: a bare word is a character string
                    e = A.Literal(self.advance().value, T.nvarchar(128))
                else:
                    e = self.additive()
                out = bool(self.accept_kw("OUTPUT") or (self.tok.kind == IDENT and self.tok.value.upper() == "OUT"
                                                        and self.advance()))
                args.append((name, e, out))
                if not self.accept_op(","):
                    break
        return A.Exec(proc, args, line=line)

    def starts_statement(self):
        return self.is_kw("SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "ALTER", "EXEC",
                          "EXECUTE", "SET", "DECLARE", "BEGIN", "COMMIT", "ROLLBACK", "USE", "TRUNCATE",
                          "GRANT", "DENY", "REVOKE", "SAVE", "END", "PRINT", "IF", "ELSE", "WAITFOR", "RAISERROR",
                          "THROW", "WHILE", "BREAK", "CONTINUE", "RECONFIGURE")

    def grant(self):
        line = self.tok.line
        self.expect_kw("GRANT")
        perm = self.any_name().upper()
        if perm not in ("SELECT", "VIEW"):
            raise self.error(self.toks[self.i - 1])
        if perm == "VIEW":
            perm += " " + self.any_name().upper() + " " + self.any_name().upper()
            self.expect_kw("TO")
            if perm == "VIEW ANY DATABASE":
                return A.ServerPermission("GRANT", perm, self.any_name(), line=line)
            return A.Grant(perm, None, self.name(), line=line)
        target = self.grant_target()
        self.expect_kw("TO")
        return A.Grant(perm, target, self.name(), line=line)


    def grant_target(self):
        """ON obj | ON OBJECT::obj | ON SCHEMA::s of GRANT and REVOKE."""
        self.expect_kw("ON")
        if self.is_kw("SCHEMA") and self.is_op("::", k=1):
            self.advance()
            self.advance()
            return ("SCHEMA", self.name())
        if self.tok.kind == IDENT and self.tok.value.upper() == "OBJECT" and self.is_op("::", k=1):
            self.advance()
            self.advance()
        return self.multipart()

    def revoke_select(self, line):
        """REVOKE SELECT ON obj | SCHEMA::s FROM | TO principal: takes back
        a GRANT SELECT (page "REVOKE Object Permissions (Transact-SQL)")."""
        self.advance()
        target = self.grant_target()
        if not self.accept_kw("FROM"):
            self.expect_kw("TO")
        return A.Revoke("SELECT", target, self.name(), line=line)

    def deny_or_revoke(self, kw):
        """DENY VIEW ANY DATABASE TO p / REVOKE VIEW ANY DATABASE FROM|TO p:
        the only server permission the stand-in models (it decides who sees
        the rows of sys.database_recovery_status); and REVOKE SELECT."""
        line = self.tok.line
        self.advance()
        start = self.tok
        if kw == "REVOKE" and self.tok.kind == IDENT and self.tok.value.upper() == "SELECT":
            return self.revoke_select(line)
        perm = " ".join(self.any_name().upper() for _ in range(3))
        if perm != "VIEW ANY DATABASE":
            raise self.error(start)
        if kw == "REVOKE" and self.is_kw("FROM"):
            self.advance()
        else:
            self.expect_kw("TO")
        return A.ServerPermission(kw, perm, self.any_name(), line=line)


def parse_batch(text: str):
    return Parser(text).parse_batch()


def parse_expression(text: str):
    p = Parser(text)
    e = p.expr()
    if p.tok.kind != EOF:
        raise p.error()
    return e
