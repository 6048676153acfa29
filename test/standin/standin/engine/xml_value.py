"""The xml type's stored form.

SQL Server parses a string converted to xml and keeps the parsed document,
so what reads back is a serialization, not the text that went in ("Create
Instances of XML Data", "Define the Serialization of XML Data"): an empty
element reads <b />, the XML declaration is gone, entity and character
references are resolved (only & < > and, in attribute values, " are
escaped again), CDATA sections become text, insignificant whitespace (text
nodes of blanks only) is dropped unless xml:space="preserve" asks to keep
it or CONVERT style 1 is used, comments and processing instructions stay.
Untyped xml may be a fragment: several top-level elements and text.
"""

from __future__ import annotations

import re
import xml.parsers.expat

from ..results import SqlError

_DECL = re.compile(r"^\s*<\?xml\s[^?]*\?>", re.S)
_WRAP = "mssql-standin-fragment"


def _text(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _attr(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")


def normalize(value: str, style=None) -> str:
    """The serialization SQL Server returns for xml parsed from value; Msg
    9400-style error for text that is not well-formed."""
    text = _DECL.sub("", value, count=1)
    keep_space = style in (1, 3)
    out = []
    stack = []                 # [name, has_content, preserve]
    pending = []               # text of the current run

    def flush():
        if not pending:
            return
        t = "".join(pending)
        pending.clear()
        preserve = keep_space or (stack and stack[-1][2])
        if t.strip() == "" and not preserve:
            return
        close_start()
        out.append(_text(t))

    def close_start():
        if stack and not stack[-1][1]:
            out.append(">")
            stack[-1][1] = True

    def start(name, attrs):
        flush()
        close_start()
        if name == _WRAP:
            stack.append([name, True, False])
            return
        out.append("<" + name)
        for i in range(0, len(attrs), 2):
            out.append(' %s="%s"' % (attrs[i], _attr(attrs[i + 1])))
        preserve = stack[-1][2] if stack else False
        for i in range(0, len(attrs), 2):
            if attrs[i] == "xml:space":
                preserve = attrs[i + 1] == "preserve"
        stack.append([name, False, preserve])

    def end(name):
        flush()
        top = stack.pop()
        if name == _WRAP:
            return
        out.append(" />" if not top[1] else "</%s>" % name)

    def chars(data):
        pending.append(data)

    def comment(data):
        flush()
        close_start()
        out.append("<!--%s-->" % data)

    def pi(target, data):
        flush()
        close_start()
        out.append("<?%s %s?>" % (target, data) if data else "<?%s?>" % target)

    p = xml.parsers.expat.ParserCreate()
    p.ordered_attributes = True
    p.StartElementHandler = start
    p.EndElementHandler = end
    p.CharacterDataHandler = chars
    p.CommentHandler = comment
    p.ProcessingInstructionHandler = pi
    try:
        p.Parse("<%s>%s</%s>" % (_WRAP, text, _WRAP), True)
    except xml.parsers.expat.ExpatError as exc:
        col = exc.offset - len(_WRAP) - 1 if exc.lineno == 1 else exc.offset
        raise SqlError(9400, 16, 1, "XML parsing: line %d, character %d, %s"
                       % (exc.lineno, max(col, 1), xml.parsers.expat.ErrorString(exc.code)))
    return "".join(out)
