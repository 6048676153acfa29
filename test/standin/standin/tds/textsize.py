"""SET TEXTSIZE: SQL Server truncates varchar(max), nvarchar(max),
varbinary(max), text, ntext and image values in result sets to TEXTSIZE
bytes.  A client that forgets to raise it silently gets truncated LOBs,
so the stand-in does the same (when the session set it; the default is
unlimited, as ODBC/OLE DB clients get)."""

from __future__ import annotations

from ..results import CachedRow
from ..sqltypes import MAX
from .collation import codec_for

DEFAULT_TEXTSIZE = 4096          # what SET TEXTSIZE 0 restores
UNLIMITED = 2147483647


def session_textsize(session, default=None):
    """The session's TEXTSIZE in bytes, or None when unlimited.  `default`
    applies while the session has not set it (run-standin --default-textsize;
    None = unlimited)."""
    options = getattr(session, "options", None)
    if not isinstance(options, dict) or "TEXTSIZE" not in options:
        return default
    try:
        size = int(str(options["TEXTSIZE"]).strip())
    except ValueError:
        return None
    if size <= 0:
        size = DEFAULT_TEXTSIZE
    return None if size >= UNLIMITED else size


def _truncator(sqltype, limit):
    name = sqltype.name
    if name in ("nvarchar", "ntext") and (name == "ntext" or sqltype.length == MAX):
        units = limit // 2

        def cut(v):
            raw = v.encode("utf-16-le")
            if len(raw) <= limit:
                return v
            # never split a surrogate pair in half
            return raw[:2 * units].decode("utf-16-le", errors="ignore")
        return cut
    if name in ("varchar", "text") and (name == "text" or sqltype.length == MAX):
        codec = codec_for(sqltype.collation)

        def cut(v):
            raw = v.encode(codec, errors="replace")
            return v if len(raw) <= limit else raw[:limit].decode(codec, errors="ignore")
        return cut
    if name == "image" or (name == "varbinary" and sqltype.length == MAX):
        return lambda v: v[:limit]
    return None


def truncating_rows(columns, rows, limit):
    """rows with LOB values cut to `limit` bytes, or rows unchanged when no
    column is affected.  Truncated rows are plain tuples: cached encodings
    of full values must not be reused."""
    cuts = [(i, f) for i, f in ((i, _truncator(c.type, limit)) for i, c in enumerate(columns)) if f]
    if not cuts:
        return rows

    def gen():
        for row in rows:
            values = list(row.values if row.__class__ is CachedRow else row)
            for i, cut in cuts:
                if values[i] is not None:
                    values[i] = cut(values[i])
            yield tuple(values)
    return gen()
