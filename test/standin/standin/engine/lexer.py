"""T-SQL tokenizer.

Produces a flat list of Token objects.  Identifiers keep their exact text
(bracketed and double-quoted identifiers are unquoted, with `]]`/`""`
undoubled); keywords are recognised by the parser, case-insensitively, from
plain identifiers only, so `[select]` is always a name.
"""

from __future__ import annotations

import re

from ..results import SqlError

# Kinds
IDENT = "ident"        # plain identifier (may be a keyword)
QIDENT = "qident"      # [bracketed] or "quoted" identifier (never a keyword)
VAR = "var"            # @name or @@name
STRING = "string"      # '...'
NSTRING = "nstring"    # N'...'
BINARY = "binary"      # 0x...
INT = "int"
DECIMAL = "decimal"
FLOAT = "float"
OP = "op"
EOF = "eof"

# Reserved words of T-SQL that SQL Server reports with Msg 156 (a subset that
# covers what can plausibly appear in our batches).
RESERVED = {
    "ADD", "ALL", "ALTER", "AND", "ANY", "AS", "ASC", "BACKUP", "BEGIN", "BETWEEN",
    "BREAK", "BY", "CASCADE", "CASE", "CHECK", "CLUSTERED", "COLLATE", "COLUMN",
    "COMMIT", "CONSTRAINT", "CONTINUE", "CONVERT", "CREATE", "CROSS", "CURRENT",
    "CURSOR", "DATABASE", "DECLARE", "DEFAULT", "DELETE", "DENY", "DESC", "DISTINCT",
    "DROP", "ELSE", "END", "ESCAPE", "EXCEPT", "EXEC", "EXECUTE", "EXISTS",
    "FETCH", "FOR", "FOREIGN", "FROM", "FULL", "FUNCTION", "GOTO", "GRANT",
    "GROUP", "HAVING", "IDENTITY", "IF", "IN", "INDEX", "INNER", "INSERT",
    "INTERSECT", "INTO", "IS", "JOIN", "KEY", "LEFT", "LIKE", "NOT", "NULL",
    "OF", "OFF", "ON", "OPTION", "OR", "ORDER", "OUTER", "OVER", "PERCENT",
    "PRIMARY", "PROC", "PROCEDURE", "RETURN", "REVOKE", "RIGHT", "ROLLBACK",
    "SAVE", "SCHEMA", "SELECT", "SET", "TABLE", "THEN", "TO", "TOP", "TRAN",
    "TRANSACTION", "TRUNCATE", "UNION", "UNIQUE", "UPDATE", "USE", "VALUES",
    "VIEW", "WHEN", "WHERE", "WHILE", "WITH", "NONCLUSTERED", "REFERENCES",
    "USER", "IDENTITY_INSERT", "NOCHECK", "WAITFOR",
    # statements that follow another without a ';' ("SELECT 1 PRINT 'x'" is two
    # statements, not a column alias): reserved in SQL Server's list
    # (MicrosoftDocs/sql-docs docs/t-sql/language-elements/reserved-keywords-transact-sql.md)
    "PRINT", "KILL", "RAISERROR",
}


class Token:
    __slots__ = ("kind", "text", "value", "line", "pos")

    def __init__(self, kind, text, value, line, pos):
        self.kind = kind
        self.text = text      # source text (for error messages)
        self.value = value    # decoded value
        self.line = line
        self.pos = pos

    def is_kw(self, *words):
        return self.kind == IDENT and self.value.upper() in words

    def __repr__(self):
        return "Token(%s,%r,l%d)" % (self.kind, self.value, self.line)


_TWO_CHAR_OPS = ("<>", "!=", "<=", ">=", "!<", "!>", "+=", "-=", "*=", "/=", "::")
_ONE_CHAR_OPS = set("(),.;=<>+-*/%&|^~!")


def _ident_char(c):
    return c.isalnum() or c in "_@#$" or ord(c) > 127


# Runs of characters matched at C speed (a window batch of mssql_cdc names
# 200 change tables: tens of kilobytes of text per request).  Each is the
# same set as the per-character test it replaces: \s is str.isspace();
# an identifier character is an ASCII letter or digit, _@#$, or any
# character above 127 (_ident_char).
_SPACES = re.compile(r"[^\S\n]+")
_IDENT_RUN = re.compile("[A-Za-z0-9_@#$\u0080-\U0010ffff]*")
_HEX_RUN = re.compile("[0-9a-fA-F]*")


def tokenize(sql: str):
    toks = []
    i, n, line = 0, len(sql), 1
    while i < n:
        c = sql[i]
        if c == "\n":
            line += 1
            i += 1
            continue
        if c.isspace():
            i = _SPACES.match(sql, i).end()
            continue
        start, sline = i, line
        if c == "-" and sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j
            continue
        if c == "/" and sql.startswith("/*", i):
            depth, i = 1, i + 2          # T-SQL block comments nest
            while i < n and depth:
                if sql.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif sql.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    if sql[i] == "\n":
                        line += 1
                    i += 1
            if depth:
                raise SqlError(113, 15, 1, "Missing end comment mark '*/'.", sline)
            continue
        if c in "nN" and i + 1 < n and sql[i + 1] == "'":
            val, i, line = _read_quoted(sql, i + 1, "'", line)
            toks.append(Token(NSTRING, sql[start:i], val, sline, start))
            continue
        if c == "'":
            val, i, line = _read_quoted(sql, i, "'", line)
            toks.append(Token(STRING, sql[start:i], val, sline, start))
            continue
        if c == "[":
            val, i, line = _read_quoted(sql, i, "]", line, close_only=True)
            toks.append(Token(QIDENT, sql[start:i], val, sline, start))
            continue
        if c == '"':
            val, i, line = _read_quoted(sql, i, '"', line)
            toks.append(Token(QIDENT, sql[start:i], val, sline, start))
            continue
        if c == "0" and i + 1 < n and sql[i + 1] in "xX":
            j = _HEX_RUN.match(sql, i + 2).end()
            hexs = sql[i + 2:j]
            if len(hexs) % 2:
                hexs = "0" + hexs
            toks.append(Token(BINARY, sql[i:j], bytes.fromhex(hexs), sline, start))
            i = j
            continue
        if c.isdigit() or (c == "." and i + 1 < n and sql[i + 1].isdigit()):
            j = i
            while j < n and sql[j].isdigit():
                j += 1
            kind = INT
            if j < n and sql[j] == ".":
                kind = DECIMAL
                j += 1
                while j < n and sql[j].isdigit():
                    j += 1
            if j < n and sql[j] in "eE" and (j + 1 < n and (sql[j + 1].isdigit() or
                                                        (sql[j + 1] in "+-" and j + 2 < n and sql[j + 2].isdigit()))):
                kind = FLOAT
                j += 2
                while j < n and sql[j].isdigit():
                    j += 1
            text = sql[i:j]
            toks.append(Token(kind, text, text, sline, start))
            i = j
            continue
        if c == "@":
            j = _IDENT_RUN.match(sql, i + 1).end()
            toks.append(Token(VAR, sql[i:j], sql[i:j], sline, start))
            i = j
            continue
        if c.isalpha() or c in "_#" or ord(c) > 127:
            j = _IDENT_RUN.match(sql, i + 1).end()
            toks.append(Token(IDENT, sql[i:j], sql[i:j], sline, start))
            i = j
            continue
        two = sql[i:i + 2]
        if two in _TWO_CHAR_OPS:
            toks.append(Token(OP, two, two, sline, start))
            i += 2
            continue
        if c in _ONE_CHAR_OPS:
            toks.append(Token(OP, c, c, sline, start))
            i += 1
            continue
        raise SqlError(102, 15, 1, "Incorrect syntax near '%s'." % c, sline)
    toks.append(Token(EOF, "", None, line, n))
    return toks


def _read_quoted(sql, i, close, line, close_only=False):
    """Read a quoted token starting at sql[i] (the opening quote)."""
    n = len(sql)
    j = i + 1
    out = []
    while True:
        k = sql.find(close, j)
        if k < 0:
            seg = sql[i:]
            if close == "'":
                raise SqlError(105, 15, 1, "Unclosed quotation mark after the character string '%s'."
                               % sql[i + 1:], line)
            raise SqlError(105, 15, 1, "Unclosed quotation mark after the character string '%s'."
                           % seg[1:], line)
        out.append(sql[j:k])
        line += sql.count("\n", j, k)
        if k + 1 < n and sql[k + 1] == close:
            out.append(close)
            j = k + 2
            continue
        return "".join(out), k + 1, line
