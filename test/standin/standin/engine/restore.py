"""Point-in-time restore of a database (the `restore` control): what a CDC
reader sees after RESTORE DATABASE … WITH STOPATMARK/STOPAT, after an
asynchronous failover that lost the log's tail, or after a database snapshot
was reverted.  Everything committed after the restore LSN is gone: user table
rows (undone through the database's journal of committed row changes),
change-table rows, cdc.lsn_time_mapping rows, capture instances created
later, queued transactions the capture job had not published, DDL history.
New LSNs continue just above the restore LSN, so new transactions reuse the
LSN range of the lost history.  A restore starts a new recovery fork
(sys.database_recovery_status.recovery_fork_guid, fork_point_lsn; page
"sys.database_recovery_status"); whether the database_guid changes when a
database is restored over itself is not documented (the page says RESTORE
generates a new one "when you restore a database that does not yet exist"),
so it is a switch.  A failover keeps both GUIDs (new_fork=False).

Not modelled: DDL after the restore point (tables created or altered later
stay as they are; rows journaled under another table shape refuse the
restore), fill_table rows (not journaled), a cleanup mark above the restore
point (refused: the rows it removed cannot come back)."""

from __future__ import annotations

import collections
import uuid

from . import lsn as L


class RestoreError(ValueError):
    pass


def _open_writes(db):
    """Tables with rows written by a transaction that is still open."""
    busy = []
    for t in db.tables.values():
        for rv in t.rows.values():
            if rv.xmin.__class__ is not int or (rv.xmax is not None and rv.xmax.__class__ is not int):
                busy.append(t.full_name)
                break
    return busy


def restore(eng, db, lsn: int, new_fork=True, new_database_guid=False):
    """Take db back to what was committed at or below LSN `lsn` (caller holds
    the engine lock).  Returns a summary."""
    busy = _open_writes(db)
    if busy:
        # RESTORE needs exclusive access to the database
        raise RestoreError("Exclusive access could not be obtained because the database is in use "
                           "(open transactions wrote %s)." % ", ".join(sorted(busy)))
    bound = L.to_bytes(lsn)
    if db.cdc is not None:
        for ci in db.cdc.instances.values():
            if ci.enable_lsn <= lsn and ci.start_lsn is not None and ci.start_lsn > bound:
                raise RestoreError("capture instance %s was cleaned up past the restore point; the stand-in "
                                   "cannot bring its rows back" % ci.name)
    for commit_lsn, entries in db.journal:
        if commit_lsn > lsn:
            for table, _key, _before, _after, version in entries:
                if table.schema_version != version and db.tables.get(
                        (table.schema.name.lower(), table.name.lower())) is table:
                    raise RestoreError("table %s was altered after the restore point" % table.full_name)
    seq = eng.next_seq()
    undone = 0
    while db.journal and db.journal[-1][0] > lsn:
        _, entries = db.journal.pop()
        undone += 1
        for table, key, before, _after, _version in reversed(entries):
            if db.tables.get((table.schema.name.lower(), table.name.lower())) is not table:
                continue                  # dropped since: DDL is not undone
            head = table.rows.get(key)
            if head is not None and head.xmax is None:
                head.xmax = seq
            if before is not None:
                table.insert_committed(before, seq)
    dropped = []
    if db.cdc is not None:
        st = db.cdc
        for ci in list(st.instances.values()):
            if ci.enable_lsn > lsn:
                eng.cdc.drop_capture_instance(db, ci)
                dropped.append(ci.name)
                continue
            _delete_from(ci.ct, lambda k: k[0] > bound, seq)
        _delete_from(st.mapping, lambda k: k > bound, seq)
        st.log = collections.deque(t for t in st.log if t.commit_lsn <= lsn)
        st.ddl_history = [h for h in st.ddl_history if h["ddl_lsn"] <= bound]
    # the log ends at the restore point: new LSNs continue right above it
    db.lsn.value = lsn
    if new_fork:
        db.recovery_fork_guid = uuid.uuid4()
        db.fork_point_lsn = lsn
    if new_database_guid:
        db.database_guid = uuid.uuid4()
    eng.publish_seq(seq)
    for t in list(db.tables.values()):
        eng.gc_table(t)
    return {"database": db.name, "lsn": "0x" + bound.hex().upper(), "transactions_undone": undone,
            "capture_instances_dropped": dropped, "recovery_fork_guid": str(db.recovery_fork_guid),
            "database_guid": str(db.database_guid)}


def _delete_from(table, condition, seq):
    for k in table.keys:
        if condition(k):
            rv = table.rows[k]
            if rv.xmax is None:
                rv.xmax = seq


def numeric_lsn(lsn: int):
    """An LSN as SQL Server's numeric(25,0) form: VLF * 10^15 + block * 10^5 + slot."""
    b = L.to_bytes(lsn)
    vlf = int.from_bytes(b[:4], "big")
    block = int.from_bytes(b[4:8], "big")
    slot = int.from_bytes(b[8:], "big")
    return vlf * 10 ** 15 + block * 10 ** 5 + slot
