"""UNIQUE constraints and unique indexes: definition, enforcement, errors.

SQL Server enforces a unique index on every row a statement writes, and an
UPDATE that moves key values through each other (`SET id = id + 1`, a swap
of two values) succeeds: the wide update plan (split, sort, collapse) checks
the index once the statement's rows are written, so duplicates that exist
only halfway through one statement are not errors.  The stand-in checks at
the end of each INSERT/UPDATE statement.  For uniqueness NULL equals NULL: a
unique column takes one NULL (page "Create unique indexes").

Errors (MicrosoftDocs/sql-docs, docs/relational-databases/errors-events/
database-engine-events-and-errors-2000-to-2999.md and 1000-to-1999):
2627 "Violation of UNIQUE KEY constraint …" for a constraint, 2601 "Cannot
insert duplicate key row in object … with unique index …" for an index,
1505 for CREATE UNIQUE INDEX / ADD CONSTRAINT over duplicate rows, 1913 for
an index name already used on the table, 2714 for a constraint name already
used in the database, 1919 for a column type that cannot be a key.
"""

from __future__ import annotations

from ..results import SqlError
from ..sqltypes import MAX
from . import values as V

KEYABLE_EXCLUDED = {"text", "ntext", "image", "xml", "sql_variant", "geometry", "geography"}
NULL_KEY = (0,)


class UniqueIndex:
    """One unique index of a table (a UNIQUE constraint owns one too)."""

    __slots__ = ("name", "columns", "is_constraint", "index_id", "object_id")

    def __init__(self, name, columns, is_constraint, index_id, object_id):
        self.name = name
        self.columns = columns            # ColumnMeta objects: survive DROP/ALTER COLUMN of others
        self.is_constraint = is_constraint
        self.index_id = index_id
        self.object_id = object_id        # of the constraint (sys.key_constraints), or None

    def positions(self, table):
        return [table.columns.index(c) for c in self.columns]


def default_constraint_name(table, names):
    h = (table.object_id * 2654435761 + sum(map(ord, "".join(names)))) & 0xFFFFFFFFFFFFFFFF
    return "UQ__%s__%016X" % (table.name[:8], h)


def _key_fn(table, ui):
    pos = ui.positions(table)
    fns = [V.sort_key_fn(table.columns[i].type) for i in pos]

    def key(values):
        return tuple(NULL_KEY if values[i] is None else (1, f(values[i])) for i, f in zip(pos, fns))
    return key


def _value_text(table, ui, values):
    out = []
    for i in ui.positions(table):
        v = values[i]
        out.append("<NULL>" if v is None else V.value_to_str(v, table.columns[i].type))
    return ", ".join(out)


def duplicate_error(table, ui, values, line):
    text = _value_text(table, ui, values)
    if ui.is_constraint:
        return SqlError(2627, 14, 1, "Violation of UNIQUE KEY constraint '%s'. Cannot insert duplicate key in "
                        "object '%s'. The duplicate key value is (%s)." % (ui.name, table.full_name, text), line)
    return SqlError(2601, 14, 1, "Cannot insert duplicate key row in object '%s' with unique index '%s'. The "
                    "duplicate key value is (%s)." % (table.full_name, ui.name, text), line)


def _live_rows(table):
    """The newest version of every key that is not deleted (committed or not:
    an uncommitted row of another transaction counts as present)."""
    rows = table.rows
    for k in table.keys:
        rv = rows.get(k)
        if rv is not None and rv.xmax is None:
            yield rv.values


def key_columns(table, col_names, line):
    """Positions of an index's key columns: 1911 for an unknown name, 1919
    for a type that cannot be a key (primary keys and unique indexes)."""
    idx = []
    for n in col_names:
        i = table.column_index(n)
        if i < 0:
            raise SqlError(1911, 16, 1, "Column name '%s' does not exist in the target table or view." % n, line)
        c = table.columns[i]
        if c.type.name in KEYABLE_EXCLUDED or c.type.length == MAX:
            raise SqlError(1919, 16, 1, "Column '%s' in table '%s' is of a type that is invalid for use as a "
                           "key column in an index." % (c.name, table.full_name), line)
        idx.append(i)
    return idx


def add_unique(eng, table, name, col_names, is_constraint, line):
    """CREATE UNIQUE INDEX / a UNIQUE constraint (CREATE or ALTER TABLE)."""
    cols = [table.columns[i] for i in key_columns(table, col_names, line)]
    if name is None:
        name = default_constraint_name(table, col_names)
    taken = [u.name.lower() for u in table.unique_indexes] + ([table.pk_name.lower()] if table.pk_name else [])
    if name.lower() in taken:
        if is_constraint:
            raise SqlError(2714, 16, 5, "There is already an object named '%s' in the database." % name, line)
        raise SqlError(1913, 16, 1, "The operation failed because an index or statistics with name '%s' already "
                       "exists on table '%s'." % (name, table.full_name), line)
    index_id = 2 + len(table.unique_indexes)
    ui = UniqueIndex(name, cols, is_constraint, index_id, eng.new_object_id() if is_constraint else None)
    key = _key_fn(table, ui)
    seen = set()
    for values in _live_rows(table):
        k = key(values)
        if k in seen:
            raise SqlError(1505, 16, 1, "The CREATE UNIQUE INDEX statement terminated because a duplicate key "
                           "was found for the object name '%s' and the index name '%s'. The duplicate key value "
                           "is (%s)." % (table.full_name, name, _value_text(table, ui, values)), line)
        seen.add(k)
    table.unique_indexes.append(ui)
    return ui


def check_statement(table, written, line):
    """At the end of an INSERT/UPDATE: no unique index may hold one of the
    written rows' keys twice."""
    if not table.unique_indexes or not written:
        return
    for ui in table.unique_indexes:
        key = _key_fn(table, ui)
        wanted = {}
        for values in written:
            wanted.setdefault(key(values), values)
        counts = {}
        for values in _live_rows(table):
            k = key(values)
            if k in wanted:
                counts[k] = counts.get(k, 0) + 1
                if counts[k] > 1:
                    raise duplicate_error(table, ui, wanted[k], line)


def key_change_detector(table):
    """fn(old, new) -> does that update change the key of a unique index?
    None for a table without unique indexes."""
    if not table.unique_indexes:
        return None
    keys = [_key_fn(table, ui) for ui in table.unique_indexes]

    def changed(old, new):
        return any(k(old) != k(new) for k in keys)
    return changed


def index_on_column(table, column):
    """Name of a unique index that depends on the column (5074), or None."""
    for ui in table.unique_indexes:
        if column in ui.columns:
            return ui.name
    return None
