"""T-SQL surface of the CLR types: instance methods (col.ToString(),
col.STAsText(), col.STAsBinary(), col.GetLevel(), col.STSrid()), the
property col.STSrid, and static methods
(geometry::STGeomFromText, geography::Point, hierarchyid::Parse ...)."""

from __future__ import annotations

import struct

from ..results import SqlError
from ..sqltypes import SqlType
from . import clr
from . import types as T
from . import values as V


def compile_instance_method(comp, e, method):
    """`<column>.Method()`; None when the qualifier is not a CLR-typed column."""
    try:
        col = comp.scope.resolve(e.name[:-1], comp.line)
    except SqlError:
        return None
    t = col.type
    if t.name not in ("hierarchyid", "geometry", "geography"):
        return None
    i = col.index
    if t.name == "hierarchyid" and method == "tostring":
        return (lambda row: None if row[i] is None else clr.hierarchyid_to_string(row[i])), T.nvarchar(4000)
    if t.name == "hierarchyid" and method == "getlevel":
        return (lambda row: None if row[i] is None else clr.hierarchyid_to_string(row[i]).count("/") - 1), \
            SqlType("smallint")
    geo = t.name == "geography"
    if t.name != "hierarchyid" and method in ("stastext", "astextzm", "tostring"):
        return (lambda row: None if row[i] is None else clr.spatial_to_wkt(row[i], geo)), T.nvarchar(-1)
    if t.name != "hierarchyid" and method == "stasbinary":
        big = bool(comp.ctx.engine.options.get("wkb_big_endian", False))
        return (lambda row: None if row[i] is None else clr.spatial_to_wkb(row[i], geo, big)), T.varbinary(-1)
    if t.name != "hierarchyid" and method == "stsrid":
        return (lambda row: None if row[i] is None else struct.unpack_from("<i", row[i])[0]), T.INT_TYPE
    raise comp.err(6506, 16, 10, "Could not find method '%s' for type '%s' in assembly 'Microsoft.SqlServer.Types'"
                   % (e.name[-1], t.name))


def compile_static_method(comp, e, type_name, method):
    args = [comp.compile(a) for a in e.args]
    t = SqlType(type_name)

    def arg(k, to):
        f, at = args[k]
        return lambda row: V.convert(f(row), at, to, explicit=True)
    if type_name == "hierarchyid":
        if method == "getroot" and not args:
            return (lambda row: b""), t
        if method == "parse" and len(args) == 1:
            s = arg(0, T.nvarchar(4000))
            return (lambda row: None if s(row) is None else clr.hierarchyid_parse(s(row))), t
    else:
        geo = type_name == "geography"
        default_srid = 4326 if geo else 0
        if method in ("stgeomfromtext", "stpointfromtext", "stlinefromtext", "stpolyfromtext", "parse") and \
                len(args) in (1, 2):
            w = arg(0, T.nvarchar(-1))
            sr = arg(1, T.INT_TYPE) if len(args) == 2 else (lambda row: default_srid)

            def run(row):
                text, srid = w(row), sr(row)
                if text is None or srid is None:
                    return None
                return clr.wkt_to_spatial(text, srid, geo)
            return run, t
        if method == "point" and len(args) == 3:
            a, b, sr = arg(0, T.FLOAT_TYPE), arg(1, T.FLOAT_TYPE), arg(2, T.INT_TYPE)

            def point(row):
                x, y, srid = a(row), b(row), sr(row)
                if x is None or y is None or srid is None:
                    return None
                # geometry::Point(x, y, srid); geography::Point(lat, long, srid): both store (first, second)
                return struct.pack("<iBB", srid, 1, 0x0C) + struct.pack("<dd", x, y)
            return point, t
    raise comp.err(6506, 16, 10, "Could not find method '%s' for type '%s' in assembly 'Microsoft.SqlServer.Types'"
                   % (e.name[-1], type_name))


# Properties of the spatial types, read without parentheses (`col.STSrid`)
SPATIAL_PROPERTIES = {"stsrid"}


def compile_property(comp, parts):
    """`<column>.Property` for a CLR-typed column; None when it is not one."""
    if len(parts) < 2 or parts[-1].lower() not in SPATIAL_PROPERTIES:
        return None
    try:
        col = comp.scope.resolve(parts[:-1], comp.line)
    except SqlError:
        return None
    if col.type.name not in ("geometry", "geography"):
        return None
    i = col.index
    return (lambda row: None if row[i] is None else struct.unpack_from("<i", row[i])[0]), T.INT_TYPE
