"""Row storage with multi-version rows.

A table keeps, per row key, the newest RowVersion; older versions hang off
`prev`.  A version's `xmin`/`xmax` is either the Txn that wrote it (still
uncommitted) or the integer commit sequence number at which that write
committed.  A reader with snapshot `snap` and own transaction `txn` sees the
newest version created by itself or committed at or before `snap` and not
deleted by itself or by a commit at or before `snap`.

Keys are SQL Server sort keys of the clustering columns (the primary key,
the internal CT ordering, or an insertion counter for heaps), so that the
sorted key list gives the clustered-index order used by ORDER BY <pk> and
keyset paging (bisect on the lower bound).
"""

from __future__ import annotations

import bisect

from ..sqltypes import SqlType
from . import values as V


class RowVersion:
    __slots__ = ("values", "xmin", "xmax", "prev", "cache")

    def __init__(self, values, xmin, prev=None):
        self.values = values
        self.xmin = xmin
        self.xmax = None
        self.prev = prev
        self.cache = None

    def cache_dict(self):
        c = self.cache
        if c is None:
            c = self.cache = {}
        return c


def visible(rv, snap, txn):
    """The version of a key visible to (snap, txn), or None."""
    while rv is not None:
        x = rv.xmin
        if x is txn or (x.__class__ is int and x <= snap):
            d = rv.xmax
            if d is None or (d is not txn and (d.__class__ is not int or d > snap)):
                return rv
            return None
        rv = rv.prev
    return None


class ColumnMeta:
    __slots__ = ("name", "type", "nullable", "identity", "default", "computed", "persisted",
                 "column_id", "is_rowversion")

    def __init__(self, name, type_: SqlType, nullable=True, identity=None, default=None,
                 computed=None, persisted=False, column_id=0):
        self.name = name
        self.type = type_
        self.nullable = nullable
        self.identity = identity          # (seed, increment) or None
        self.default = default            # AST expression or None
        self.computed = computed          # AST expression or None
        self.persisted = persisted
        self.column_id = column_id
        self.is_rowversion = type_ is not None and type_.name == "timestamp"


class Table:
    """A stored table (user table, change table or CDC system table)."""

    def __init__(self, db, schema, name, object_id, columns, pk=None, pk_name=None, cluster=None):
        self.db = db
        self.schema = schema              # Schema object
        self.name = name
        self.object_id = object_id
        self.columns = columns            # list of ColumnMeta
        self.next_column_id = max((c.column_id for c in columns), default=0) + 1
        self.pk = pk or []                # declared PK column positions
        self.pk_name = pk_name
        self.cluster = cluster if cluster is not None else list(self.pk)
        self.rows = {}                    # key -> newest RowVersion
        self.keys = []                    # sorted keys
        self.next_rowid = 1
        self.identity_current = None      # last identity value handed out
        self.capture_instances = []       # CDC capture instances on this table
        self.is_system = False            # CT / CDC metadata tables
        self.nolock_reads = False         # change tables: every read sees the newest rows (NOLOCK)
        self.schema_lock_waiters = 0      # sp_cdc_enable_table calls waiting for the table's writers
        self.equivalent_orders = []       # other column orders equal to the clustered order
        self.unique_indexes = []          # unique.UniqueIndex (UNIQUE constraints and indexes)
        self.create_date = None
        self.modify_date = None
        self._keyfns = None
        self.schema_version = 0
        self.refresh_keyfns()

    def refresh_keyfns(self):
        self._keyfns = [V.sort_key_fn(self.columns[i].type) for i in self.cluster]
        self.column_ids = tuple(c.column_id for c in self.columns)
        self.schema_version += 1

    @property
    def full_name(self):
        return "%s.%s" % (self.schema.name, self.name)

    def column_index(self, name):
        low = name.lower()
        for i, c in enumerate(self.columns):
            if c.name.lower() == low:
                return i
        return -1

    def key_of(self, values):
        if not self.cluster:
            k = self.next_rowid
            self.next_rowid += 1
            return k
        fns = self._keyfns
        if len(fns) == 1:
            return fns[0](values[self.cluster[0]])
        return tuple(f(values[i]) for f, i in zip(fns, self.cluster))

    def clustered_single(self):
        return len(self.cluster) == 1

    def add_key(self, key):
        keys = self.keys
        if not keys or keys[-1] < key:
            keys.append(key)
        else:
            bisect.insort(keys, key)

    def remove_key(self, key):
        keys = self.keys
        i = bisect.bisect_left(keys, key)
        if i < len(keys) and keys[i] == key:
            del keys[i]

    # bulk helpers used by system writers (capture job, fill_table)
    def insert_committed(self, values, seq):
        key = self.key_of(values)
        prev = self.rows.get(key)
        self.rows[key] = RowVersion(values, seq, prev)
        if prev is None:
            self.add_key(key)
        return key

    def delete_committed(self, key, seq):
        rv = self.rows.get(key)
        if rv is not None and rv.xmax is None:
            rv.xmax = seq
