"""The CLR types' serializations: hierarchyid (ToString / Parse) and
geometry/geography (STAsText / STGeomFromText), so `col.ToString()`,
`col.STAsText()`, `CAST('/1/2/' AS hierarchyid)` and
`geometry::STGeomFromText('POINT (1 2)', 0)` work on stored bytes.

hierarchyid: each number of a level is a bit pattern chosen by its range;
the 'x' bits carry (value - range minimum), the last bit is 1 when a '/'
follows and 0 when a '.' follows; the bit string is zero-padded to a byte.
geometry/geography: [MS-SSCLRT] v1 serialization (SRID, version, flags,
points, figures, shapes); geography stores (latitude, longitude)."""

from __future__ import annotations

import re
import struct

from ..results import SqlError

# (min, max, pattern) — patterns from public analyses of the format
_POSITIVE = [
    (0, 3, "01xxT"),
    (4, 7, "100xxT"),
    (8, 15, "101xxxT"),
    (16, 79, "110xx0x1xxxT"),
    (80, 1103, "1110xxx0xxx0x1xxxT"),
    (1104, 5199, "11110xxxxx0xxx0x1xxxT"),
    (5200, 4294972495, "111110xxxxxxxxxxxxxxxxxxxxx0xxxxxx0xxx0x1xxxT"),
    (4294972496, 281479271683151, "111111xxxxxxxxxxxxxx0xxxxxxxxxxxxxxxxxxxxx0xxxxxx0xxx0x1xxxT"),
]
_NEGATIVE = [
    (-8, -1, "00111xxxT"),
    (-72, -9, "0010xx0x1xxxT"),
    (-4168, -73, "000110xxxxx0xxx0x1xxxT"),
    (-4294971464, -4169, "000101xxxxxxxxxxxxxxxxxxxxx0xxxxxx0xxx0x1xxxT"),
    (-281479271682120, -4294971465, "000100xxxxxxxxxxxxxx0xxxxxxxxxxxxxxxxxxxxx0xxxxxx0xxx0x1xxxT"),
]
_PATTERNS = [(lo, hi, p, p[:p.index("x")]) for lo, hi, p in _POSITIVE + _NEGATIVE]


def _bad_hierarchyid(text):
    return SqlError(6522, 16, 2, "A .NET Framework error occurred during execution of user-defined routine or "
                    "aggregate \"hierarchyid\": Microsoft.SqlServer.Types.HierarchyIdException: 24001: "
                    "SqlHierarchyId.Parse failed because the input string '%s' is not a valid string "
                    "representation of a SqlHierarchyId node." % text)


def hierarchyid_parse(text: str) -> bytes:
    t = text.strip()
    if t == "/":
        return b""
    if not (t.startswith("/") and t.endswith("/")):
        raise _bad_hierarchyid(text)
    bits = []
    for level in t[1:-1].split("/"):
        nums = level.split(".")
        for k, num in enumerate(nums):
            if not re.fullmatch(r"-?\d+", num):
                raise _bad_hierarchyid(text)
            v = int(num)
            pat = next((p for lo, hi, p, _ in _PATTERNS if lo <= v <= hi), None)
            if pat is None:
                raise _bad_hierarchyid(text)
            lo = next(lo for lo, hi, p, _ in _PATTERNS if p == pat)
            n_x = pat.count("x")
            payload = format(v - lo, "0%db" % n_x) if n_x else ""
            it = iter(payload)
            for c in pat:
                if c == "x":
                    bits.append(next(it))
                elif c == "T":
                    bits.append("1" if k == len(nums) - 1 else "0")
                else:
                    bits.append(c)
    s = "".join(bits)
    s += "0" * (-len(s) % 8)
    return int(s, 2).to_bytes(len(s) // 8, "big") if s else b""


def hierarchyid_to_string(data: bytes) -> str:
    bits = "".join(format(b, "08b") for b in data)
    pos = 0
    levels, current = [], []
    while pos < len(bits) and "1" in bits[pos:]:
        match = None
        for lo, hi, pat, prefix in _PATTERNS:
            if bits.startswith(prefix, pos) and pos + len(pat) <= len(bits):
                match = (lo, pat)
                break
        if match is None:
            raise SqlError(6522, 16, 2, "A .NET Framework error occurred during execution of user-defined routine "
                           "or aggregate \"hierarchyid\": the value is not a valid hierarchyid.")
        lo, pat = match
        xs = "".join(bits[pos + i] for i, c in enumerate(pat) if c == "x")
        terminal = bits[pos + len(pat) - 1] == "1"
        current.append(str(lo + (int(xs, 2) if xs else 0)))
        pos += len(pat)
        if terminal:
            levels.append(".".join(current))
            current = []
    return "/" + "".join(l + "/" for l in levels)


# ------------------------------------------------------------------ spatial

_SHAPE_NAMES = {1: "POINT", 2: "LINESTRING", 3: "POLYGON", 4: "MULTIPOINT", 5: "MULTILINESTRING",
                6: "MULTIPOLYGON", 7: "GEOMETRYCOLLECTION"}
_SHAPE_IDS = {v: k for k, v in _SHAPE_NAMES.items()}


def _num(v):
    s = "%.15g" % v
    return "0" if s == "-0" else s


def spatial_to_wkt(data: bytes, geography: bool) -> str:
    if len(data) < 6:
        raise SqlError(6522, 16, 2, "A .NET Framework error occurred during execution of user-defined routine or "
                       "aggregate \"%s\": invalid serialization." % ("geography" if geography else "geometry"))
    props = data[5]
    has_z, has_m = props & 1, props & 2
    off = 6

    def pt(i, pts):
        a, b = pts[i]
        return "%s %s" % ((_num(b), _num(a)) if geography else (_num(a), _num(b)))
    if props & 0x08:                       # single point
        a, b = struct.unpack_from("<dd", data, off)
        return "POINT (%s)" % pt(0, [(a, b)])
    if props & 0x10:                       # single line segment
        a, b, c, d = struct.unpack_from("<dddd", data, off)
        pts = [(a, b), (c, d)]
        return "LINESTRING (%s, %s)" % (pt(0, pts), pt(1, pts))
    (npts,) = struct.unpack_from("<i", data, off)
    off += 4
    pts = [struct.unpack_from("<dd", data, off + 16 * i) for i in range(npts)]
    off += 16 * npts + (8 * npts if has_z else 0) + (8 * npts if has_m else 0)
    (nfig,) = struct.unpack_from("<i", data, off)
    off += 4
    figs = [struct.unpack_from("<Bi", data, off + 5 * i) for i in range(nfig)]
    off += 5 * nfig
    (nshapes,) = struct.unpack_from("<i", data, off)
    off += 4
    shapes = [struct.unpack_from("<iiB", data, off + 9 * i) for i in range(nshapes)]

    def fig_points(f):
        start = figs[f][1]
        end = figs[f + 1][1] if f + 1 < nfig else npts
        return "(" + ", ".join(pt(i, pts) for i in range(start, end)) + ")"

    def shape_figs(s):
        start = shapes[s][1]
        if start < 0:
            return []
        nxt = next((shapes[k][1] for k in range(s + 1, nshapes) if shapes[k][1] >= 0), nfig)
        return list(range(start, nxt))

    def render(s):
        kind = shapes[s][2]
        name = _SHAPE_NAMES.get(kind, "GEOMETRYCOLLECTION")
        children = [k for k in range(nshapes) if shapes[k][0] == s]
        if kind in (1, 2):
            fs = shape_figs(s)
            return name + (" EMPTY" if not fs else " " + fig_points(fs[0]))
        if kind == 3:
            fs = shape_figs(s)
            return name + (" EMPTY" if not fs else " (" + ", ".join(fig_points(f) for f in fs) + ")")
        if not children:
            return name + " EMPTY"
        if kind == 7:
            return name + " (" + ", ".join(render(c) for c in children) + ")"
        return name + " (" + ", ".join(render(c)[len(_SHAPE_NAMES[shapes[c][2]]) + 1:] for c in children) + ")"
    return render(0) if nshapes else "GEOMETRYCOLLECTION EMPTY"


def _spatial_tree(data: bytes, geography: bool):
    """The [MS-SSCLRT] serialization as a tree of (kind, payload): payload is a
    list of (x, y) points for kinds 1/2 (x = longitude for geography), a list
    of rings for 3, a list of child trees for 4..7."""
    if len(data) < 6:
        raise SqlError(6522, 16, 2, "A .NET Framework error occurred during execution of user-defined routine or "
                       "aggregate \"%s\": invalid serialization." % ("geography" if geography else "geometry"))
    props = data[5]
    has_z, has_m = props & 1, props & 2
    off = 6

    def xy(p):
        return (p[1], p[0]) if geography else p
    if props & 0x08:
        return (1, [xy(struct.unpack_from("<dd", data, off))])
    if props & 0x10:
        a, b, c, d = struct.unpack_from("<dddd", data, off)
        return (2, [xy((a, b)), xy((c, d))])
    (npts,) = struct.unpack_from("<i", data, off)
    off += 4
    pts = [xy(struct.unpack_from("<dd", data, off + 16 * i)) for i in range(npts)]
    off += 16 * npts + (8 * npts if has_z else 0) + (8 * npts if has_m else 0)
    (nfig,) = struct.unpack_from("<i", data, off)
    off += 4
    figs = [struct.unpack_from("<Bi", data, off + 5 * i)[1] for i in range(nfig)]
    off += 5 * nfig
    (nshapes,) = struct.unpack_from("<i", data, off)
    off += 4
    shapes = [struct.unpack_from("<iiB", data, off + 9 * i) for i in range(nshapes)]

    def fig_points(f):
        return pts[figs[f]:figs[f + 1] if f + 1 < nfig else npts]

    def shape_figs(s):
        start = shapes[s][1]
        if start < 0:
            return []
        nxt = next((shapes[k][1] for k in range(s + 1, nshapes) if shapes[k][1] >= 0), nfig)
        return list(range(start, nxt))

    def build(s):
        kind = shapes[s][2]
        if kind in (1, 2):
            fs = shape_figs(s)
            return (kind, fig_points(fs[0]) if fs else [])
        if kind == 3:
            return (3, [fig_points(f) for f in shape_figs(s)])
        return (kind, [build(c) for c in range(nshapes) if shapes[c][0] == s])
    return build(0) if nshapes else (7, [])


def _wkb(tree, e) -> bytes:
    kind, payload = tree
    out = struct.pack(e + "BI", 1 if e == "<" else 0, kind)
    if kind == 1:
        x, y = payload[0] if payload else (float("nan"), float("nan"))
        return out + struct.pack(e + "dd", x, y)
    if kind == 2:
        return out + struct.pack(e + "I", len(payload)) + b"".join(struct.pack(e + "dd", *p) for p in payload)
    if kind == 3:
        return out + struct.pack(e + "I", len(payload)) + b"".join(
            struct.pack(e + "I", len(r)) + b"".join(struct.pack(e + "dd", *p) for p in r) for r in payload)
    return out + struct.pack(e + "I", len(payload)) + b"".join(_wkb(c, e) for c in payload)


def spatial_to_wkb(data: bytes, geography: bool, big_endian: bool = False) -> bytes:
    """STAsBinary(): OGC well-known binary, 2D (Z and M are not returned),
    x = longitude and y = latitude for geography.  Little-endian unless the
    engine option wkb_big_endian asks for the other byte order (ENGINE.md:
    the pages do not say which one SQL Server writes)."""
    return _wkb(_spatial_tree(data, geography), ">" if big_endian else "<")


_TOKEN = re.compile(r"\s*([A-Za-z]+|\(|\)|,|[-+0-9.eE]+)")


def wkt_to_spatial(text: str, srid: int, geography: bool) -> bytes:
    toks = [t for t in _TOKEN.findall(text)]
    pos = [0]
    pts, figs, shapes = [], [], []

    def bad():
        return SqlError(6522, 16, 1, "A .NET Framework error occurred during execution of user-defined routine "
                        "or aggregate \"%s\": System.FormatException: 24114: The label %s in the input well-known "
                        "text (WKT) is not valid." % ("geography" if geography else "geometry", text[:40]))

    def nxt():
        if pos[0] >= len(toks):
            raise bad()
        pos[0] += 1
        return toks[pos[0] - 1]

    def expect(t):
        if nxt() != t:
            raise bad()

    def coords():
        expect("(")
        out = []
        while True:
            x, y = float(nxt()), float(nxt())
            out.append((y, x) if geography else (x, y))
            t = nxt()
            if t == ")":
                return out
            if t != ",":
                raise bad()

    def figure(points, attr):
        figs.append((attr, len(pts)))
        pts.extend(points)

    def shape(parent):
        name = nxt().upper()
        kind = _SHAPE_IDS.get(name)
        if kind is None:
            raise bad()
        me = len(shapes)
        shapes.append([parent, len(figs), kind])
        if pos[0] < len(toks) and toks[pos[0]].upper() == "EMPTY":
            pos[0] += 1
            shapes[me][1] = -1
            return
        if kind in (1, 2):
            figure(coords(), 1)
        elif kind == 3:
            expect("(")
            while True:
                figure(coords(), 2 if len(figs) == shapes[me][1] else 0)   # exterior ring first
                t = nxt()
                if t == ")":
                    break
                if t != ",":
                    raise bad()
        else:
            expect("(")
            child = {4: "POINT", 5: "LINESTRING", 6: "POLYGON"}.get(kind)
            while True:
                if child is not None:
                    toks.insert(pos[0], child)
                shape(me)
                t = nxt()
                if t == ")":
                    break
                if t != ",":
                    raise bad()
    shape(-1)
    if pos[0] != len(toks):
        raise bad()
    out = struct.pack("<iBB", srid, 1, 0x04)
    if len(shapes) == 1 and shapes[0][2] == 1 and len(pts) == 1:
        return struct.pack("<iBB", srid, 1, 0x0C) + struct.pack("<dd", *pts[0])
    out += struct.pack("<i", len(pts)) + b"".join(struct.pack("<dd", *p) for p in pts)
    out += struct.pack("<i", len(figs)) + b"".join(struct.pack("<Bi", a, o) for a, o in figs)
    out += struct.pack("<i", len(shapes)) + b"".join(struct.pack("<iiB", *s) for s in shapes)
    return out
