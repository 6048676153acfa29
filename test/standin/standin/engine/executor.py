"""Batch and statement execution: error continuation rules, transactions,
SET options, variables, EXEC and sp_executesql."""

from __future__ import annotations

import logging
import time

from ..results import (Done, EnvChange, Message, ResultSet, ReturnStatus, ReturnValue,
                       RowCount, SqlError)
from ..sqltypes import SqlType
from . import ast as A
from . import languages
from . import values as V
from .expressions import Compiler, Scope
from .parser import Parser, parse_batch
from .session import Ctx
from .transactions import Txn

statement_log = logging.getLogger("standin.statements")

# Errors after which SQL Server stops the whole batch and rolls back the open
# transaction ("batch abortion"); every error does that under XACT_ABORT ON.
BATCH_ABORTING = {245, 241, 242, 8114, 8169, 529, 3960, 1205, 266, 3617}


class BatchAbort(Exception):
    pass


def _descriptor(txn):
    return txn.tran_id.to_bytes(8, "little")


class Executor:
    def __init__(self, engine):
        self.engine = engine

    # ================================================================ batch
    def run_batch(self, session, sql, line_offset=0):
        try:
            stmts = parse_batch(sql)
            _check_batch_rules(stmts)
        except SqlError as e:
            statement_log.info("spid %s batch rejected: %s", session.spid, e.message)
            yield e
            return
        session.vars = {}          # variables are batch-scoped
        yield from self.run_statements(session, stmts)

    def run_statements(self, session, stmts, loop=None):
        """Run statements; `loop` (a one-element list) receives 'break' or
        'continue' when a BREAK/CONTINUE ends the enclosing WHILE body."""
        for st in stmts:
            if session.cancelled:
                return
            if isinstance(st, (A.Break, A.Continue)):
                if loop is None:
                    yield SqlError(135, 15, 1, "Cannot use a %s statement outside the scope of a WHILE "
                                   "statement." % ("BREAK" if isinstance(st, A.Break) else "CONTINUE"), st.line)
                    return
                loop[0] = "break" if isinstance(st, A.Break) else "continue"
                return
            if isinstance(st, A.While):
                while not session.cancelled:
                    try:
                        cond = self._condition(session, st)
                    except SqlError as e:
                        session.last_error = e.number
                        yield e
                        return
                    if cond is not True:
                        break
                    signal = [None]
                    yield from self.run_statements(session, [st.body], signal)
                    if signal[0] == "break":
                        break
                continue
            if isinstance(st, A.Block):
                signal = loop if loop is not None else None
                yield from self.run_statements(session, st.statements, signal)
                if loop is not None and loop[0] is not None:
                    return
                continue
            if isinstance(st, A.If):
                try:
                    with self.engine.lock:
                        ctx = Ctx(self.engine, session, st.line)
                        ctx.txn = session.txn
                        cond = Compiler(ctx, Scope([]), st.line).compile(st.cond)[0](())
                except SqlError as e:
                    session.last_error = e.number
                    yield e
                    continue
                branch = st.then if cond is True else st.else_
                if branch is not None:
                    yield from self.run_statements(session, [branch], loop)
                    if loop is not None and loop[0] is not None:
                        return
                continue
            if isinstance(st, A.WaitFor):
                try:
                    delay = self._delay_seconds(session, st)
                except SqlError as e:
                    yield e
                    return
                deadline = time.monotonic() + delay
                while not session.cancelled and time.monotonic() < deadline:
                    time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
                continue
            if isinstance(st, A.Print) and isinstance(st.expr, A.Literal):
                # PRINT of a constant touches no data: it does not wait for the
                # engine lock (a long statement of another session holds it;
                # SQL Server would not block a PRINT either)
                v = st.expr.value
                yield Message(0, 1, 0, "" if v is None else V.value_to_str(v, st.expr.type), st.line)
                continue
            try:
                items = self.run_statement(session, st)
            except SqlError as e:
                session.last_error = e.number
                yield e
                abort = e.number in BATCH_ABORTING or session.xact_abort or e.severity >= 20 or \
                    getattr(e, "batch_abort", False)
                # batch abortion also rolls back the open transaction (as SQL Server does)
                if abort and session.txn is not None and e.number != 3617:
                    self._rollback_all(session, notify=True)
                    yield from self._drain_env(session)
                if abort:
                    return
                continue
            session.last_error = 0
            for it in items:
                yield it

    # ================================================================ statements
    def run_statement(self, session, st):
        eng = self.engine
        statement_log.info("spid %s line %s: %s", session.spid, getattr(st, "line", "?"), type(st).__name__)
        with eng.lock:
            ctx = Ctx(eng, session, getattr(st, "line", 1) or 1)
            handler = getattr(self, "s_" + type(st).__name__)
            if type(st).__name__ in NO_TXN:
                return handler(ctx, st)
            auto = session.txn is None
            txn = session.txn
            if auto:
                txn = Txn(session, False, None, eng.now_ts())
            ctx.txn = txn
            mark = txn.mark()
            try:
                out = handler(ctx, st)
            except BaseException as e:
                # any failure (also an engine bug) undoes the statement, so no
                # half-written rows stay locked by a transaction nobody owns
                if isinstance(e, SqlError) and (not e.line or e.line == 1):
                    e.line = ctx.line
                txn.rollback_to(mark)
                if auto:
                    eng.end_txn(txn, commit=False)
                eng.cond.notify_all()
                raise
            if auto:
                eng.end_txn(txn, commit=True)
            return out

    def _rows_with_count(self, session, rows):
        n = 0
        try:
            for r in rows:
                n += 1
                yield r
        finally:
            session.rowcount = n

    def s_Select(self, ctx, st):
        from .query import execute_select
        res = execute_select(ctx, st)
        if res is None:
            return [Done()]
        if self._fmtonly(ctx):
            # metadata only, as SQL Server answers it: freebcp's queryout asks
            # for the column formats this way and loops on rows it did not expect
            return [ResultSet(res.columns, iter(()))]
        rows = res.rows
        if res.lazy:
            # a blocking Sort with its cost: it runs, and waits, outside the
            # engine lock, so other sessions are not held up by it
            return [ResultSet(res.columns, self._rows_with_count(ctx.session, rows))]
        # Pull the first row now: errors such as 313/3952/245 must come before
        # any metadata is sent, as in SQL Server.
        first = []
        for r in rows:
            first.append(r)
            break
        import itertools
        it = itertools.chain(first, rows)
        return [ResultSet(res.columns, self._rows_with_count(ctx.session, it))]

    def _dml_done(self, ctx, n):
        ctx.session.rowcount = n
        return [Done()] if ctx.session.nocount else [RowCount(n)]

    @staticmethod
    def _fmtonly(ctx):
        """SET FMTONLY ON: "no rows are processed" - DML must not change data."""
        return ctx.session.options.get("FMTONLY") == "ON"

    def s_Insert(self, ctx, st):
        from .dml import execute_insert
        if self._fmtonly(ctx):
            return [Done()]
        return self._dml_done(ctx, execute_insert(ctx, st))

    def s_Update(self, ctx, st):
        from .dml import execute_update
        if self._fmtonly(ctx):
            return [Done()]
        return self._dml_done(ctx, execute_update(ctx, st))

    def s_Delete(self, ctx, st):
        from .dml import execute_delete
        if self._fmtonly(ctx):
            return [Done()]
        return self._dml_done(ctx, execute_delete(ctx, st))

    def s_CreateTable(self, ctx, st):
        from .ddl import create_table
        create_table(ctx, st)
        return [Done()]

    def s_DropTable(self, ctx, st):
        from .ddl import drop_table
        drop_table(ctx, st)
        return [Done()]

    def s_AlterTableAdd(self, ctx, st):
        from .ddl import alter_add
        alter_add(ctx, st)
        return [Done()]

    def s_AlterTableDrop(self, ctx, st):
        from .ddl import alter_drop
        alter_drop(ctx, st)
        return [Done()]

    def s_AlterTableDropConstraint(self, ctx, st):
        from .ddl import alter_drop_constraint
        alter_drop_constraint(ctx, st)
        return [Done()]

    def s_AlterColumn(self, ctx, st):
        from .ddl import alter_column
        alter_column(ctx, st)
        return [Done()]

    def s_Truncate(self, ctx, st):
        from .ddl import truncate
        truncate(ctx, st)
        return [Done()]

    def s_CreateIndex(self, ctx, st):
        table = self.engine.resolve_table(ctx, st.table, st.line, for_ddl=True)
        for c in st.columns:
            if table.column_index(c) < 0:
                raise SqlError(1911, 16, 1, "Column name '%s' does not exist in the target table or view." % c,
                               st.line)
        if st.unique:
            from .unique import add_unique
            if st.clustered and table.pk:
                from .dml import pk_constraint_name
                raise SqlError(1902, 16, 3, "Cannot create more than one clustered index on table '%s'. Drop "
                               "the existing clustered index '%s' before creating another."
                               % (table.full_name, pk_constraint_name(table)), st.line)
            add_unique(self.engine, table, st.name, st.columns, False, st.line)
        return [Done()]

    def s_CreateSchema(self, ctx, st):
        from .ddl import create_schema
        create_schema(ctx, st)
        return [Done()]

    # ---------------------------------------------------------------- variables
    def s_Declare(self, ctx, st):
        for name, typ, init in st.decls:
            if name.lower() in ctx.session.vars:
                raise SqlError(134, 15, 1, "The variable name '%s' has already been declared. Variable names "
                               "must be unique within a query batch or stored procedure." % name, st.line)
            var = [typ, None]
            if init is not None:
                fn, t = Compiler(ctx, Scope([]), st.line).compile(init)
                var[1] = V.convert(fn(()), t, typ, explicit=True)   # variables truncate silently
            ctx.session.vars[name.lower()] = var
        return []

    def s_SetVar(self, ctx, st):
        var = ctx.lookup_var(st.name, st.line)
        expr = st.expr
        if st.op != "=":
            expr = A.Binary(st.op[0], A.Var(st.name), expr)
        fn, t = Compiler(ctx, Scope([]), st.line).compile(expr)
        var[1] = V.convert(fn(()), t, var[0], explicit=True)
        return []

    def _condition(self, session, st):
        with self.engine.lock:
            ctx = Ctx(self.engine, session, st.line)
            ctx.txn = session.txn
            return Compiler(ctx, Scope([]), st.line).compile(st.cond)[0](())

    def _delay_seconds(self, session, st):
        with self.engine.lock:
            ctx = Ctx(self.engine, session, st.line)
            fn, t = Compiler(ctx, Scope([]), st.line).compile(st.delay)
            v = V.convert(fn(()), t, SqlType("time", scale=3))
        return 0.0 if v is None else v.ticks / 1e7

    def s_RaiseError(self, ctx, st):
        comp = Compiler(ctx, Scope([]), st.line)
        msg = comp.compile(st.message)
        text = V.value_to_str(msg[0](()), msg[1]) if msg[0](()) is not None else ""
        state = comp.compile(st.state)[0](()) or 1
        if st.number is not None:                      # THROW: severity 16, ends the batch
            number = comp.compile(st.number)[0](())
            if number is None or number < 50000:
                raise SqlError(35100, 16, 10, "Error number %s in the THROW statement is outside the valid "
                               "range. Specify an error number in the valid range of 50000 to 2147483647."
                               % number, st.line)
            err = SqlError(number, 16, state, text, st.line)
            err.batch_abort = True
            raise err
        severity = comp.compile(st.severity)[0](())
        if severity is not None and severity <= 10:
            return [Message(50000, state, severity, text, st.line)]
        raise SqlError(50000, severity or 16, state, text, st.line)

    def s_Print(self, ctx, st):
        fn, t = Compiler(ctx, Scope([]), st.line).compile(st.expr)
        v = fn(())
        return [Message(0, 1, 0, "" if v is None else V.value_to_str(v, t), st.line)]

    # ---------------------------------------------------------------- SET
    def s_SetOption(self, ctx, st):
        s = ctx.session
        val = st.value
        out = []
        for name in st.name:
            if name == "NOCOUNT":
                s.nocount = val == "ON"
            elif name == "XACT_ABORT":
                s.xact_abort = val == "ON"
            elif name == "LOCK_TIMEOUT":
                try:
                    s.lock_timeout_ms = int(val)
                except ValueError:
                    raise SqlError(102, 15, 1, "Incorrect syntax near '%s'." % val, st.line)
            elif name == "LANGUAGE":
                old = s.language
                new = languages.set_language(s, val, st.line)
                out.append(EnvChange("language", new=new, old=old))
                out.append(Message(5703, 1, 0, "Changed language setting to %s." % new, st.line))
            elif name == "DATEFORMAT":
                languages.set_dateformat(s, val, st.line)
            elif name in KNOWN_SET_OPTIONS:
                s.options[name] = val
            else:
                raise SqlError(195, 15, 5, "'%s' is not a recognized SET option." % name, st.line)
        return out

    def s_SetIsolation(self, ctx, st):
        ctx.session.isolation = st.level
        return []

    def s_SetIdentityInsert(self, ctx, st):
        table = self.engine.resolve_table(ctx, st.parts, st.line, for_ddl=True)
        if not any(c.identity for c in table.columns):
            raise SqlError(8106, 16, 1, "Table '%s' does not have the identity property. Cannot perform SET "
                           "operation." % table.full_name, st.line)
        s = ctx.session
        if st.on:
            if s.identity_insert is not None and s.identity_insert is not table:
                raise SqlError(8107, 16, 1, "IDENTITY_INSERT is already ON for table '%s.%s.%s'. Cannot perform "
                               "SET operation for table '%s'." % (s.identity_insert.db.name,
                                                                 s.identity_insert.schema.name,
                                                                 s.identity_insert.name, table.full_name), st.line)
            s.identity_insert = table
        elif s.identity_insert is table:
            s.identity_insert = None
        return []

    # ---------------------------------------------------------------- transactions
    def s_BeginTran(self, ctx, st):
        s = ctx.session
        eng = self.engine
        if s.txn is None:
            s.txn = Txn(s, True, None, eng.now_ts())
            s.trancount = 1
            return [EnvChange("begin_tran", new=_descriptor(s.txn))]
        s.trancount += 1
        return []

    def s_CommitTran(self, ctx, st):
        s = ctx.session
        if s.txn is None:
            raise SqlError(3902, 16, 1, "The COMMIT TRANSACTION request has no corresponding BEGIN TRANSACTION.",
                           st.line)
        s.trancount -= 1
        if s.trancount > 0:
            return []
        txn = s.txn
        s.txn = None
        self.engine.end_txn(txn, commit=True)
        return [EnvChange("commit_tran", old=_descriptor(txn))]

    def s_RollbackTran(self, ctx, st):
        s = ctx.session
        if s.txn is None:
            raise SqlError(3903, 16, 1, "The ROLLBACK TRANSACTION request has no corresponding BEGIN "
                           "TRANSACTION.", st.line)
        if st.name and st.name.lower() in s.txn.savepoints:
            s.txn.rollback_to(s.txn.savepoints[st.name.lower()])
            self.engine.cond.notify_all()
            return []
        txn = s.txn
        self._rollback_all(s)
        return [EnvChange("rollback_tran", old=_descriptor(txn))]

    def s_SaveTran(self, ctx, st):
        s = ctx.session
        if s.txn is None:
            raise SqlError(628, 16, 0, "Cannot issue SAVE TRANSACTION when there is no active transaction.",
                           st.line)
        ctx.touch(ctx.db, user_table=False)
        s.txn.savepoints[st.name.lower()] = s.txn.mark()
        return []

    def _rollback_all(self, session, notify=False):
        txn = session.txn
        if txn is None:
            return
        session.txn = None
        session.trancount = 0
        with self.engine.lock:
            self.engine.end_txn(txn, commit=False)
        if notify:
            session._pending_env = EnvChange("rollback_tran", old=_descriptor(txn))

    def _drain_env(self, session):
        env = getattr(session, "_pending_env", None)
        if env is not None:
            session._pending_env = None
            yield env

    # ---------------------------------------------------------------- databases
    def s_Use(self, ctx, st):
        eng = self.engine
        db = eng.databases.get(st.database.lower())
        if db is None:
            raise SqlError(911, 16, 1, "Database '%s' does not exist. Make sure that the name is entered "
                           "correctly." % st.database, st.line)
        if not eng.security.can_open(ctx.session.login, db):
            raise SqlError(916, 14, 2, "The server principal \"%s\" is not able to access the database \"%s\" "
                           "under the current security context." % (ctx.session.login.name, db.name), st.line)
        old = ctx.session.database
        ctx.session.database = db.name
        return [EnvChange("database", new=db.name, old=old),
                Message(5701, 1, 0, "Changed database context to '%s'." % db.name, st.line)]

    def s_AlterDatabaseSet(self, ctx, st):
        db = ctx.resolve_database(st.database, st.line) if st.database else ctx.db
        if not self.engine.security.is_dbo(ctx.session, db):
            raise SqlError(5011, 14, 9, "User does not have permission to alter database '%s', the database "
                           "does not exist, or the database is not in a state that allows access checks."
                           % db.name, st.line)
        if st.option == "ALLOW_SNAPSHOT_ISOLATION":
            db.allow_snapshot = st.value
        return []

    # ---------------------------------------------------------------- sessions
    def s_Kill(self, ctx, st):
        """KILL session_id (ENGINE.md, "KILL"): ends another session's
        connection through the protocol layer's engine.kill_session hook."""
        s = ctx.session
        if not s.login.sysadmin:
            raise SqlError(6102, 14, 1, "User does not have permission to use the KILL statement.", st.line)
        if s.txn is not None:
            raise SqlError(6115, 16, 1, "KILL command cannot be used inside user transactions.", st.line)
        if st.session_id == s.spid:
            raise SqlError(6104, 16, 1, "Cannot use KILL to kill your own process.", st.line)
        kill = getattr(self.engine, "kill_session", None)
        if kill is None or not kill(st.session_id):
            raise SqlError(6106, 16, 2, "Process ID %d is not an active process ID." % st.session_id, st.line)
        return []

    # ---------------------------------------------------------------- security
    def s_CreateLogin(self, ctx, st):
        if not ctx.session.login.sysadmin:
            raise SqlError(15247, 16, 1, "User does not have permission to perform this action.", st.line)
        if st.default_language is not None and languages.find_language(st.default_language) is None:
            raise SqlError(15005, 16, 1, "'%s' is not a valid official language name." % st.default_language,
                           st.line)
        self.engine.security.add_login(st.name, st.password, default_language=st.default_language)
        return []

    def s_CreateUser(self, ctx, st):
        eng = self.engine
        if not eng.security.is_dbo(ctx.session, ctx.db):
            raise SqlError(15247, 16, 1, "User does not have permission to perform this action.", st.line)
        if st.login.lower() not in eng.security.logins:
            raise SqlError(15007, 16, 1, "'%s' is not a valid login or you do not have permission." % st.login,
                           st.line)
        if st.name.lower() in ctx.db.users or ctx.db.user_for_login(st.login):
            raise SqlError(15023, 16, 1, "User, group, or role '%s' already exists in the current database."
                           % st.name, st.line)
        ctx.db.add_principal(st.name, login=st.login)
        return []

    def s_CreateRole(self, ctx, st):
        if not self.engine.security.is_dbo(ctx.session, ctx.db):
            raise SqlError(15247, 16, 1, "User does not have permission to perform this action.", st.line)
        if st.name.lower() in ctx.db.users:
            raise SqlError(15023, 16, 1, "User, group, or role '%s' already exists in the current database."
                           % st.name, st.line)
        ctx.db.add_principal(st.name, is_role=True)
        return []

    def s_AlterRoleAdd(self, ctx, st):
        eng = self.engine
        if st.server:
            if not ctx.session.login.sysadmin:
                raise SqlError(15247, 16, 1, "User does not have permission to perform this action.", st.line)
            login = eng.security.logins.get(st.member.lower())
            if login is None or st.role.lower() != "sysadmin":
                raise SqlError(15151, 16, 1, "Cannot alter the server role '%s', because it does not exist or "
                               "you do not have permission." % st.role, st.line)
            login.sysadmin = True
            return []
        if not eng.security.is_dbo(ctx.session, ctx.db):
            raise SqlError(15151, 16, 1, "Cannot alter the role '%s', because it does not exist or you do not "
                           "have permission." % st.role, st.line)
        role = ctx.db.users.get(st.role.lower())
        member = ctx.db.users.get(st.member.lower())
        if role is None or not role.is_role:
            raise SqlError(15151, 16, 1, "Cannot alter the role '%s', because it does not exist or you do not "
                           "have permission." % st.role, st.line)
        if member is None:
            raise SqlError(15151, 16, 1, "Cannot add the principal '%s', because it does not exist or you do "
                           "not have permission." % st.member, st.line)
        member.roles.add(role.name.lower())
        return []

    def _permission_entries(self, ctx, st):
        """The principal of a GRANT/REVOKE and the grant entries it names."""
        eng = self.engine
        if not eng.security.is_dbo(ctx.session, ctx.db):
            raise SqlError(15247, 16, 1, "User does not have permission to perform this action.", st.line)
        principal = ctx.db.users.get(st.principal.lower())
        if principal is None:
            raise SqlError(15151, 16, 1, "Cannot find the user '%s', because it does not exist or you do not "
                           "have permission." % st.principal, st.line)
        if st.permission.startswith("VIEW"):
            return principal, [("VIEW DATABASE STATE", None)]
        if isinstance(st.target, tuple):
            s = ctx.db.schemas.get(st.target[1].lower())
            if s is None:
                raise SqlError(15151, 16, 1, "Cannot find the schema '%s', because it does not exist or you do "
                               "not have permission." % st.target[1], st.line)
            return principal, [("SELECT_SCHEMA", s.schema_id)]
        obj = eng.find_object(ctx, st.target)
        if obj is not None:
            return principal, [("SELECT", obj.object_id)]
        named = eng.find_named_object(ctx, st.target)
        if named is None:
            raise SqlError(15151, 16, 1, "Cannot find the object '%s', because it does not exist or you do "
                           "not have permission." % st.target[-1], st.line)
        return principal, [("SELECT_NAME", named)]

    def s_Grant(self, ctx, st):
        principal, entries = self._permission_entries(ctx, st)
        principal.grants.update(entries)
        return []

    def s_Revoke(self, ctx, st):
        """Takes back what GRANT gave; a permission never granted is no error."""
        principal, entries = self._permission_entries(ctx, st)
        principal.grants.difference_update(entries)
        return []

    def s_Reconfigure(self, ctx, st):
        from .procedures import reconfigure
        reconfigure(ctx, st.line)
        return []

    def s_ServerPermission(self, ctx, st):
        sec = self.engine.security
        if not ctx.session.login.sysadmin:
            raise SqlError(15247, 16, 1, "User does not have permission to perform this action.", st.line)
        name = st.principal.lower()
        if name != "public" and name not in sec.logins:
            raise SqlError(15151, 16, 1, "Cannot find the login '%s', because it does not exist or you do not "
                           "have permission." % st.principal, st.line)
        sec.set_server_permission(name, st.permission, st.action)
        return []

    # ---------------------------------------------------------------- EXEC
    def s_Exec(self, ctx, st):
        from .procedures import find_proc, bind_args
        name = st.proc[-1].lower()
        if len(st.proc) >= 3 and st.proc[-3]:
            db = ctx.resolve_database(st.proc[-3], st.line)
            if db is not ctx.db:
                saved = ctx.session.database
                ctx.session.database = db.name
                try:
                    return self.s_Exec(Ctx(self.engine, ctx.session, ctx.line), A.Exec(st.proc[-2:], st.args,
                                                                                         line=st.line))
                finally:
                    ctx.session.database = saved
        comp = Compiler(ctx, Scope([]), st.line)
        args = []
        for pname, e, out in st.args:
            if e == "DEFAULT":
                args.append((pname, "DEFAULT", None, out))
                continue
            fn, t = comp.compile(e)
            args.append((pname, fn(()), t, out))
        if name == "sp_executesql":
            return list(self.exec_sql(ctx.session, args, st.line, nested=True))
        if name == "sp_describe_first_result_set" and (len(st.proc) < 2 or (st.proc[-2] or "").lower() in ("sys", "dbo", "")):
            from .describe import describe_first_result_set
            return describe_first_result_set(self, ctx.session, args, st.line)
        p = find_proc(st.proc, st.line)
        bound = bind_args(p, args, st.line)
        items, status = p.fn(ctx, bound, st.line)
        # OUTPUT parameters: ("output", "@param", value) items go back into the caller's variables
        for item in items:
            if isinstance(item, tuple):
                _, pname, value = item
                for aname, e, out in st.args:
                    if out and aname and aname.lower() == pname.lower() and isinstance(e, A.Var):
                        var = ctx.lookup_var(e.name, st.line)
                        var[1] = value
        out = [i for i in items if not isinstance(i, tuple)]
        return out + [ReturnStatus(status)]

    def exec_sql(self, session, args, line=1, nested=False):
        """sp_executesql: args = [(name|None, value, type, output)]."""
        if not args:
            raise SqlError(201, 16, 4, "Procedure or function 'sp_executesql' expects parameter '@statement', "
                           "which was not supplied.", line)
        stmt_text = args[0][1]
        decl_text = args[1][1] if len(args) > 1 else None
        values = args[2:]
        if stmt_text is None:
            return []
        decls = parse_param_decls(decl_text or "")
        scope = {}
        for name, typ, out in decls:
            scope[name.lower()] = [typ, None]
        pos = 0
        outputs = []
        for pname, v, t, is_out in values:
            if pname is None:
                if pos >= len(decls):
                    raise SqlError(8144, 16, 2, "Procedure or function  has too many arguments specified.", line)
                dname, typ, dout = decls[pos]
                pos += 1
            else:
                match = [d for d in decls if d[0].lower() == pname.lower()]
                if not match:
                    raise SqlError(8145, 16, 2, "%s is not a parameter for procedure ." % pname, line)
                dname, typ, dout = match[0]
            if v != "DEFAULT":
                scope[dname.lower()][1] = V.convert(v, t, typ) if t is not None and v is not None else v
            if is_out:
                outputs.append((dname, typ))
        saved = session.vars
        session.vars = scope
        try:
            stmts = parse_batch(stmt_text)
            _check_batch_rules(stmts)
            gen = self.run_statements(session, stmts)
            if nested:
                return self._nested(gen, session, saved, outputs, scope)
            return self._nested(gen, session, saved, outputs, scope)
        except SqlError:
            session.vars = saved
            raise

    def _nested(self, gen, session, saved, outputs, scope):
        items = []
        try:
            for it in gen:
                if isinstance(it, ResultSet):
                    it = ResultSet(it.columns, list(it.rows))
                items.append(it)
        finally:
            session.vars = saved
        items.append(ReturnStatus(0))
        for i, (name, typ) in enumerate(outputs):
            items.append(ReturnValue(i, name, typ, scope[name.lower()][1]))
        return items


NO_TXN = {"BeginTran", "CommitTran", "RollbackTran", "SaveTran", "SetOption", "SetIsolation", "Declare", "Reconfigure",
          "SetVar", "Use", "CreateLogin", "Print", "SetIdentityInsert", "AlterDatabaseSet", "RaiseError",
          "Kill"}

KNOWN_SET_OPTIONS = {"ANSI_NULLS", "ANSI_NULL_DFLT_ON", "ANSI_NULL_DFLT_OFF", "ANSI_PADDING", "ANSI_WARNINGS",
                     "ANSI_DEFAULTS", "ARITHABORT", "ARITHIGNORE", "CONCAT_NULL_YIELDS_NULL", "CURSOR_CLOSE_ON_COMMIT",
                     "DATEFIRST", "DATEFORMAT", "DEADLOCK_PRIORITY", "FMTONLY", "IMPLICIT_TRANSACTIONS",
                     "LANGUAGE", "NUMERIC_ROUNDABORT", "QUOTED_IDENTIFIER", "TEXTSIZE", "STATISTICS",
                     "ROWCOUNT", "NOEXEC", "PARSEONLY", "SHOWPLAN_ALL", "SHOWPLAN_XML", "SHOWPLAN_TEXT",
                     "QUERY_GOVERNOR_COST_LIMIT", "CONTEXT_INFO", "FORCEPLAN", "NO_BROWSETABLE"}


def parse_param_decls(text):
    """'@p1 int, @p2 nvarchar(10) OUTPUT' -> [(name, SqlType, output)]."""
    p = Parser(text)
    out = []
    from .lexer import EOF, VAR
    if p.tok.kind == EOF:
        return out
    while True:
        t = p.tok
        if t.kind != VAR:
            raise p.error()
        p.advance()
        p.accept_kw("AS")
        typ = p.data_type()
        is_out = False
        if p.tok.kind == "ident" and p.tok.value.upper() in ("OUTPUT", "OUT"):
            p.advance()
            is_out = True
        if p.accept_op("="):
            p.expr()
        out.append((t.value, typ, is_out))
        if not p.accept_op(","):
            break
    if p.tok.kind != EOF:
        raise p.error()
    return out


def _check_batch_rules(stmts):
    for i, st in enumerate(stmts):
        if isinstance(st, A.CreateSchema) and i > 0:
            raise SqlError(111, 15, 1, "'CREATE SCHEMA' must be the first statement in a query batch.", st.line)
