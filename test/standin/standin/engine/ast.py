"""AST node classes produced by the parser.

Nodes are plain attribute bags: `Node(kind=..., **fields)` would be too
loose, so each kind is a small class with explicit fields.  Every statement
carries `line` (1-based line in the batch) for error messages.
"""


class Node:
    __slots__ = ()
    fields = ()

    def __init__(self, *args, **kw):
        for name, val in zip(self.fields, args):
            setattr(self, name, val)
        for name in self.fields[len(args):]:
            setattr(self, name, kw.pop(name, None))
        if kw:
            raise TypeError("unknown fields %r for %s" % (list(kw), type(self).__name__))

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__,
                           ", ".join("%s=%r" % (f, getattr(self, f)) for f in self.fields))


def node(name, *fields):
    return type(name, (Node,), {"__slots__": fields, "fields": fields})


# ---- expressions
Literal = node("Literal", "value", "type")
Collate = node("Collate", "expr", "collation")
Var = node("Var", "name")
GlobalVar = node("GlobalVar", "name")
ColRef = node("ColRef", "parts")                 # [..., column]
Star = node("Star", "qualifier")                 # qualifier: list of parts or None
Func = node("Func", "name", "args", "star", "distinct")   # name: list of parts
Cast = node("Cast", "expr", "type", "style", "is_convert")
Case = node("Case", "operand", "whens", "else_")
Unary = node("Unary", "op", "expr")
Binary = node("Binary", "op", "left", "right")
Compare = node("Compare", "op", "left", "right")
And = node("And", "left", "right")
Or = node("Or", "left", "right")
Not = node("Not", "expr")
IsNull = node("IsNull", "expr", "negated")
Between = node("Between", "expr", "low", "high", "negated")
InList = node("InList", "expr", "items", "negated")
Like = node("Like", "expr", "pattern", "negated")
Subquery = node("Subquery", "select")
Exists = node("Exists", "select")
Window = node("Window", "func", "partition_by", "order_by")   # ROW_NUMBER() OVER (...)
AtTimeZone = node("AtTimeZone", "expr", "zone")                # inputdate AT TIME ZONE timezone

# ---- sources
TableRef = node("TableRef", "parts", "alias", "hints")
FuncSource = node("FuncSource", "parts", "args", "alias")
Derived = node("Derived", "select", "alias")
Join = node("Join", "left", "right", "kind", "on")

# ---- statements
Select = node("Select", "items", "top", "top_percent", "distinct", "source", "where", "group_by",
              "having", "order_by", "offset", "fetch", "union_all", "assign", "ctes", "line")
Insert = node("Insert", "target", "columns", "rows", "select", "default_values", "line")
Update = node("Update", "target", "assignments", "where", "line")
Delete = node("Delete", "target", "where", "line")
ColumnDef = node("ColumnDef", "name", "type", "nullable", "default", "identity", "pk",
                 "computed", "persisted", "collation", "pk_name", "unique", "unique_name", "line")
CreateTable = node("CreateTable", "parts", "columns", "pk_columns", "pk_name", "uniques", "line")
DropTable = node("DropTable", "names", "if_exists", "line")
AlterTableAdd = node("AlterTableAdd", "parts", "columns", "pk_columns", "pk_name", "uniques", "line")
AlterTableDrop = node("AlterTableDrop", "parts", "columns", "if_exists", "line")
AlterTableDropConstraint = node("AlterTableDropConstraint", "parts", "name", "if_exists", "line")
AlterColumn = node("AlterColumn", "parts", "column", "line")
Truncate = node("Truncate", "parts", "line")
CreateSchema = node("CreateSchema", "name", "line")
Declare = node("Declare", "decls", "line")            # [(name, type, init)]
SetVar = node("SetVar", "name", "op", "expr", "line")
SetOption = node("SetOption", "name", "value", "line")
SetIsolation = node("SetIsolation", "level", "line")
SetIdentityInsert = node("SetIdentityInsert", "parts", "on", "line")
BeginTran = node("BeginTran", "name", "line")
CommitTran = node("CommitTran", "line")
RollbackTran = node("RollbackTran", "name", "line")
SaveTran = node("SaveTran", "name", "line")
Exec = node("Exec", "proc", "args", "line")           # args: [(name|None, expr, output)]
Use = node("Use", "database", "line")
AlterDatabaseSet = node("AlterDatabaseSet", "database", "option", "value", "line")
Reconfigure = node("Reconfigure", "override", "line")
CreateLogin = node("CreateLogin", "name", "password", "default_language", "line")
CreateUser = node("CreateUser", "name", "login", "line")
CreateRole = node("CreateRole", "name", "line")
AlterRoleAdd = node("AlterRoleAdd", "role", "member", "server", "line")
Grant = node("Grant", "permission", "target", "principal", "line")   # target: parts or ('SCHEMA', name)
Revoke = node("Revoke", "permission", "target", "principal", "line")
# GRANT / DENY / REVOKE of a server permission (VIEW ANY DATABASE) to a login or public
ServerPermission = node("ServerPermission", "action", "permission", "principal", "line")
Block = node("Block", "statements", "line")
Print = node("Print", "expr", "line")
CreateIndex = node("CreateIndex", "name", "table", "columns", "unique", "clustered", "line")   # non-unique: no effect
If = node("If", "cond", "then", "else_", "line")
While = node("While", "cond", "body", "line")
Break = node("Break", "line")
Continue = node("Continue", "line")
WaitFor = node("WaitFor", "delay", "line")
Kill = node("Kill", "session_id", "line")
RaiseError = node("RaiseError", "number", "message", "severity", "state", "line")   # RAISERROR / THROW
