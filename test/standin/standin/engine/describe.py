"""sys.sp_describe_first_result_set: the metadata of the first result set of
a batch, found by static analysis (parse and bind), with no row processed.

Microsoft: docs/relational-databases/system-stored-procedures/
sp-describe-first-result-set-transact-sql.md ("Raises an error if the Database
Engine cannot determine the metadata for the first query ... by performing a
static analysis"; "Validity is determined by parsing and analyzing the
Transact-SQL batch"; one row per result column).  The stand-in binds the
first SELECT of the batch the way SET FMTONLY ON runs it (no row evaluated,
compile errors such as 207/208 raised) and returns the documented columns
up to `scale`; control-flow analysis (IF/WHILE paths) is not modelled: the
first SELECT in statement order is described."""

from __future__ import annotations

from ..results import ResultSet, ReturnStatus, SqlError
from ..sqltypes import Column, SqlType
from . import ast as A
from . import types as T

RESULT_COLUMNS = [
    ("is_hidden", SqlType("bit"), False), ("column_ordinal", SqlType("int"), False),
    ("name", T.SYSNAME_TYPE, True), ("is_nullable", SqlType("bit"), False),
    ("system_type_id", SqlType("int"), False), ("system_type_name", T.nvarchar(256), True),
    ("max_length", SqlType("smallint"), False), ("precision", SqlType("tinyint"), False),
    ("scale", SqlType("tinyint"), False),
]

CLR_TYPES = {"hierarchyid", "geometry", "geography"}


def _first_select(stmts):
    for st in stmts:
        if isinstance(st, A.Block):
            found = _first_select(st.statements)
            if found is not None:
                return found
        elif isinstance(st, A.Select) and not st.assign:
            return st
    return None


def _max_length(t: SqlType) -> int:
    if t.name in ("nchar", "nvarchar"):
        return -1 if t.is_max() else 2 * (t.length or 1)
    if t.name in ("char", "varchar", "binary", "varbinary"):
        return -1 if t.is_max() else (t.length or 1)
    if t.name in ("decimal", "numeric"):
        # storage bytes by precision (page "decimal and numeric")
        return 5 if t.precision <= 9 else 9 if t.precision <= 19 else 13 if t.precision <= 28 else 17
    return T.SYSTEM_TYPES.get(t.name, (0, 0, 0, 0))[1]


def _row(ordinal, col: Column):
    t = col.type
    type_id, _, precision, scale = T.SYSTEM_TYPES.get(t.name, (0, 0, 0, 0))
    if t.name in ("decimal", "numeric"):
        precision, scale = t.precision, t.scale
    elif t.name in ("time", "datetime2", "datetimeoffset"):
        scale = t.scale if t.scale is not None else scale
    return (False, ordinal, col.name or None, bool(col.nullable), type_id,
            None if t.name in CLR_TYPES else t.sql(), _max_length(t), precision or 0, scale or 0)


def describe_first_result_set(executor, session, args, line):
    """args: [(name|None, value, type, output)] as EXEC evaluated them."""
    tsql = None
    for pname, value, _, _ in args:
        if pname is None or pname.lower() == "@tsql":
            tsql = value
            break
    if tsql is None:
        raise SqlError(201, 16, 4, "Procedure or function 'sp_describe_first_result_set' expects parameter "
                       "'@tsql', which was not supplied.", line)
    from .executor import _check_batch_rules
    from .parser import parse_batch
    stmts = parse_batch(tsql)
    _check_batch_rules(stmts)
    columns = []
    first = _first_select(stmts)
    if first is not None:
        saved = session.options.get("FMTONLY")
        session.options["FMTONLY"] = "ON"
        try:
            for item in executor.run_statements(session, [first]):
                if isinstance(item, SqlError):
                    raise item
                if isinstance(item, ResultSet):
                    columns = item.columns
                    break
        finally:
            if saved is None:
                session.options.pop("FMTONLY", None)
            else:
                session.options["FMTONLY"] = saved
    rows = [_row(i + 1, c) for i, c in enumerate(columns)]
    return [ResultSet([Column(n, t, nullable) for n, t, nullable in RESULT_COLUMNS], rows), ReturnStatus(0)]
