"""sp_prepare / sp_execute / sp_prepexec / sp_unprepare handled in the
protocol layer: they only bind a handle to (parameter declaration,
statement text) and run it as sp_executesql, so the engine needs to know
only sp_executesql.  tedious prepare()/execute() and ct-lib ct_dynamic use
them."""

from __future__ import annotations

import itertools
from typing import Dict, List, Tuple

from ..results import ReturnStatus, ReturnValue, RpcParam, SqlError
from ..sqltypes import DEFAULT_COLLATION, MAX, SqlType

PREPARED_PROCS = ("sp_prepare", "sp_execute", "sp_prepexec", "sp_unprepare")
_NTEXT = SqlType("nvarchar", length=MAX, collation=DEFAULT_COLLATION)


def _bare(name: str) -> str:
    name = name.lower()
    for prefix in ("sys.", "dbo.", "master.."):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name


def is_prepared_proc(name: str) -> bool:
    return _bare(name) in PREPARED_PROCS


class PreparedStatements:
    """Per-connection handle table."""

    def __init__(self):
        self._handles: Dict[int, Tuple[str, str]] = {}
        self._next = itertools.count(1)

    def run(self, engine, session, name: str, params: List[RpcParam]):
        proc = _bare(name)
        if proc == "sp_unprepare":
            if params:
                self._handles.pop(params[0].value, None)
            yield ReturnStatus(0)
            return
        if proc == "sp_execute":
            if not params or params[0].value not in self._handles:
                yield SqlError(8179, 16, 2, "Could not find prepared statement with handle %s."
                               % (params[0].value if params else "NULL"))
                return
            decl, stmt = self._handles[params[0].value]
            yield from self._execute(engine, session, decl, stmt, params[1:])
            return
        # sp_prepare(@handle OUTPUT, @params, @stmt, @options)
        # sp_prepexec(@handle OUTPUT, @params, @stmt, values...)
        if len(params) < 3:
            yield SqlError(201, 16, 4, "Procedure or function '%s' expects parameter '@stmt', "
                           "which was not supplied." % proc)
            return
        handle = next(self._next)
        decl = params[1].value or ""
        stmt = params[2].value or ""
        self._handles[handle] = (decl, stmt)
        handle_param = params[0]
        if proc == "sp_prepexec":
            for item in self._execute(engine, session, decl, stmt, params[3:]):
                if isinstance(item, ReturnStatus):
                    continue
                yield item
        yield ReturnStatus(0)
        yield ReturnValue(0, handle_param.name or "@handle", SqlType("int"), handle)

    @staticmethod
    def _execute(engine, session, decl: str, stmt: str, values: List[RpcParam]):
        call = [RpcParam("@stmt", _NTEXT, stmt), RpcParam("@params", _NTEXT, decl)] + list(values)
        return engine.execute_rpc(session, "sp_executesql", call)
