"""Transactions: undo log, commit/rollback, snapshots and LSN bookkeeping."""

from __future__ import annotations

import itertools

from .storage import RowVersion

_tran_ids = itertools.count(0x3A98)


class ChangeRecord:
    """One logged row change of a CDC-tracked table, kept until capture."""

    __slots__ = ("table", "op", "seqval", "command_id", "before", "after", "changed",
                 "column_ids")

    def __init__(self, table, op, seqval, command_id, before, after, changed, column_ids):
        self.table = table            # Table object
        self.op = op                  # 'I', 'D', 'U'
        self.seqval = seqval          # int LSN of the row operation
        self.command_id = command_id
        self.before = before          # full row tuple before (D, U)
        self.after = after            # full row tuple after (I, U)
        self.changed = changed        # set of column_ids changed (U)
        self.column_ids = column_ids  # column_id per position of before/after


class CommittedTxn:
    """A committed transaction waiting for the capture job; begin_time and
    end_time are the local datetimes of lsn_time_mapping (as at commit)."""

    __slots__ = ("commit_lsn", "begin_lsn", "begin_time", "end_time", "tran_id", "records")

    def __init__(self, commit_lsn, begin_lsn, begin_time, end_time, tran_id, records):
        self.commit_lsn = commit_lsn
        self.begin_lsn = begin_lsn
        self.begin_time = begin_time
        self.end_time = end_time
        self.tran_id = tran_id
        self.records = records


class Txn:
    """A user transaction (explicit BEGIN TRAN or one autocommit statement)."""

    def __init__(self, session, explicit, isolation, begin_time):
        self.session = session
        self.explicit = explicit
        self.isolation = isolation
        self.snap = None              # snapshot seq for SNAPSHOT isolation (fixed at first access)
        self.undo = []                # (kind, table, key, version)
        self.records = {}             # db -> [ChangeRecord]
        self.begin_lsn = {}           # db -> first LSN written
        self.command_id = 0
        self.tran_id = next(_tran_ids)
        self.begin_time = begin_time
        self.savepoints = {}
        self.doomed = False
        self.waiting_for = None       # Txn whose row lock this one waits for (deadlock detection)
        self.finished = False         # committed or rolled back (lazy result rows may outlive it)

    def __repr__(self):
        return "Txn(%d)" % self.tran_id

    def mark(self):
        return (len(self.undo), {db: len(r) for db, r in self.records.items()}, self.command_id)

    # --- write operations (caller checked conflicts) -----------------------
    def insert(self, table, key, values):
        prev = table.rows.get(key)
        rv = RowVersion(values, self, prev)
        table.rows[key] = rv
        if prev is None:
            table.add_key(key)
        self.undo.append(("ins", table, key, rv))
        return rv

    def delete(self, table, key, rv):
        rv.xmax = self
        self.undo.append(("del", table, key, rv))

    def update(self, table, key, old, values):
        old.xmax = self
        rv = RowVersion(values, self, old)
        table.rows[key] = rv
        self.undo.append(("upd", table, key, rv))
        return rv

    def rollback_to(self, mark):
        undo_len, rec_lens, command_id = mark
        undo = self.undo
        while len(undo) > undo_len:
            kind, table, key, rv = undo.pop()
            if kind == "del":
                rv.xmax = None
            else:
                prev = rv.prev
                if prev is None:
                    table.rows.pop(key, None)
                    table.remove_key(key)
                else:
                    table.rows[key] = prev
                    if kind == "upd":
                        prev.xmax = None
        for db, recs in self.records.items():
            del recs[rec_lens.get(db, 0):]
        self.command_id = command_id

    def finish_commit(self, seq):
        """Stamp every version this transaction wrote with commit seq."""
        touched = []
        for kind, table, key, rv in self.undo:
            if kind == "del":
                if rv.xmax is self:
                    rv.xmax = seq
            else:
                if rv.xmin is self:
                    rv.xmin = seq
                if kind == "upd" and rv.prev is not None and rv.prev.xmax is self:
                    rv.prev.xmax = seq
                if rv.xmax is self:
                    rv.xmax = seq
            touched.append((table, key))
        self.undo = []
        return touched
