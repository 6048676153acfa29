"""Change Data Capture model: capture instances, change tables, the capture
scan (whole transactions, atomically across all change tables), cleanup and
DDL history.  See /work/shared/reference/sqlserver-cdc.md §2-§5.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import time

from ..sqltypes import SqlType
from . import lsn as L
from . import types as T
from .storage import ColumnMeta, Table
from .transactions import CommittedTxn

BIN10 = T.LSN_TYPE


class CaptureInstance:
    def __init__(self, name, source, ct, captured, index_name, index_column_ids, role_name,
                 supports_net_changes, filegroup_name, create_date, enable_lsn, partition_switch):
        self.name = name
        self.source = source                  # source Table
        self.ct = ct                          # change Table
        self.captured = captured              # [(column_id, name, SqlType(ct), is_computed, lob_kind)]
        self.index_name = index_name
        self.index_column_ids = index_column_ids
        self.role_name = role_name
        self.supports_net_changes = supports_net_changes
        self.filegroup_name = filegroup_name
        self.create_date = create_date
        self.enable_lsn = enable_lsn          # int: changes with a higher seqval are captured
        self.start_lsn = None                 # bytes once the capture job established it
        self.partition_switch = partition_switch

    @property
    def object_id(self):
        return self.ct.object_id

    def mask_len(self):
        return (len(self.captured) + 7) // 8


def ct_type(t: SqlType) -> SqlType:
    """Change-table column type: rowversion -> binary(8); otherwise the source type."""
    if t.name == "timestamp":
        return SqlType("binary", length=8)
    return t


def lob_kind(t: SqlType):
    if t.name in T.LOB_OLD_TYPES:
        return "old"
    if T.is_max_lob(t):
        return "max"
    return None


class CdcState:
    """Per-database CDC metadata (exists after sys.sp_cdc_enable_db)."""

    def __init__(self, engine, db):
        self.engine = engine
        self.db = db
        self.instances = {}                   # lower name -> CaptureInstance
        self.log = collections.deque()        # CommittedTxn awaiting capture
        self.job_exists = False
        self.stopped = False                  # sp_cdc_stop_job
        self.job = {"maxtrans": engine.config.maxtrans, "maxscans": engine.config.maxscans,
                    "continuous": 1, "pollinginterval": 5, "retention": 4320, "threshold": 5000}
        self.ddl_history = []                 # dict rows
        self.scan_sessions = collections.deque(maxlen=200)
        self.next_scan_session = 1
        self.scans_started = None             # time of the first scan (aggregate row 0)
        self.last_scan_end = None             # end of the latest scan, empty or not
        self.scan_tran_total = 0
        self.last_dummy_at = None
        self.mapping = self._make_mapping()

    def _make_mapping(self):
        eng = self.engine
        db = self.db
        cdc_schema = db.schemas["cdc"]
        cols = [ColumnMeta("start_lsn", BIN10, False, column_id=1),
                ColumnMeta("tran_begin_time", T.DATETIME_TYPE, True, column_id=2),
                ColumnMeta("tran_end_time", T.DATETIME_TYPE, True, column_id=3),
                ColumnMeta("tran_id", T.varbinary(10), True, column_id=4),
                ColumnMeta("tran_begin_lsn", BIN10, True, column_id=5)]
        t = Table(db, cdc_schema, "lsn_time_mapping", eng.new_object_id(), cols, cluster=[0])
        t.is_system = True
        t.create_date = t.modify_date = eng.now_datetime()
        db.tables[("cdc", "lsn_time_mapping")] = t
        db.by_id[t.object_id] = t
        return t

    def max_lsn(self, snap=None):
        m = self.mapping
        from .storage import visible
        snap = self.engine.seq if snap is None else snap
        for k in reversed(m.keys):
            rv = visible(m.rows.get(k), snap, None)
            if rv is not None:
                return rv.values[0]
        return None


class Cdc:
    """Engine-wide CDC operations."""

    def __init__(self, engine):
        self.engine = engine

    # ---------------------------------------------------------------- enable/disable
    def enable_db(self, db):
        if db.is_cdc_enabled:
            return False
        if "cdc" not in db.schemas:
            db.add_schema("cdc")
        if "cdc" not in db.users:
            db.add_principal("cdc", login=None)
        db.is_cdc_enabled = True
        db.cdc = CdcState(self.engine, db)
        return True

    def disable_db(self, db):
        if not db.is_cdc_enabled:
            return
        for ci in list(db.cdc.instances.values()):
            self.drop_capture_instance(db, ci)
        m = db.cdc.mapping
        del db.tables[("cdc", "lsn_time_mapping")]
        del db.by_id[m.object_id]
        db.cdc = None
        db.is_cdc_enabled = False
        # SQL Server drops the cdc schema and user too, so that
        # sys.sp_cdc_enable_db works again afterwards (22906 otherwise)
        if not any(schema == "cdc" for schema, _ in db.tables):
            db.schemas.pop("cdc", None)
            db.users.pop("cdc", None)

    def create_capture_instance(self, db, table, name, captured_cols, index_name, index_cols, role_name,
                                supports_net, filegroup, allow_partition_switch):
        eng = self.engine
        cdc_schema = db.schemas["cdc"]
        cols = [ColumnMeta("__$start_lsn", BIN10, False, column_id=1),
                ColumnMeta("__$end_lsn", BIN10, True, column_id=2),
                ColumnMeta("__$seqval", BIN10, False, column_id=3),
                ColumnMeta("__$operation", T.INT_TYPE, False, column_id=4),
                ColumnMeta("__$update_mask", T.varbinary(128), True, column_id=5)]
        captured = []
        for c in captured_cols:
            ctt = ct_type(c.type)
            cols.append(ColumnMeta(c.name, ctt, True, column_id=len(cols) + 1))
            captured.append((c.column_id, c.name, ctt, c.computed is not None, lob_kind(c.type)))
        cols.append(ColumnMeta("__$command_id", T.INT_TYPE, True, column_id=len(cols) + 1))
        ct = Table(db, cdc_schema, name + "_CT", eng.new_object_id(), cols,
                   cluster=[0, len(cols) - 1, 2, 3])
        ct.is_system = True
        # read like cdc.fn_cdc_get_all_changes_<ci> reads it, WITH (NOLOCK)
        ct.nolock_reads = True
        # One command id has one seqval (3/4 share both), so (start_lsn, command_id,
        # operation) is the clustered order too.  Seqval order is not: a split
        # update's rows sort differently by seqval (dml.Writer.log_split), so an
        # ORDER BY __$start_lsn, __$seqval, __$operation is sorted, as on SQL Server.
        cid = len(cols) - 1
        ct.equivalent_orders = [[0, cid, 3]]
        ct.create_date = ct.modify_date = eng.now_datetime()
        db.tables[("cdc", ct.name.lower())] = ct
        db.by_id[ct.object_id] = ct
        enable_lsn = db.lsn.next_block()
        ci = CaptureInstance(name, table, ct, captured, index_name, [c.column_id for c in index_cols],
                             role_name, supports_net, filegroup, eng.now_datetime(), enable_lsn,
                             allow_partition_switch)
        db.cdc.instances[name.lower()] = ci
        table.capture_instances.append(ci)
        if role_name is not None and role_name.lower() not in db.users:
            db.add_principal(role_name, is_role=True)
        if not db.cdc.job_exists:
            db.cdc.job_exists = True
        return ci

    def drop_capture_instance(self, db, ci):
        del db.cdc.instances[ci.name.lower()]
        if ci in ci.source.capture_instances:
            ci.source.capture_instances.remove(ci)
        db.tables.pop(("cdc", ci.ct.name.lower()), None)
        db.by_id.pop(ci.ct.object_id, None)
        db.cdc.ddl_history = [h for h in db.cdc.ddl_history if h["object_id"] != ci.object_id]
        if not db.cdc.instances:
            self._empty_mapping(db)

    def _empty_mapping(self, db):
        """Disabling the last tracked table of a database empties
        cdc.lsn_time_mapping (error 22909 is the failure of exactly that
        cleanup), so sys.fn_cdc_get_max_lsn() is NULL afterwards."""
        eng = self.engine
        m = db.cdc.mapping
        seq = eng.next_seq()
        for k in m.keys:
            rv = m.rows[k]
            if rv.xmax is None:
                rv.xmax = seq
        eng.publish_seq(seq)
        eng.gc_table(m)

    def record_ddl(self, table, command, required_update):
        if not table.capture_instances:
            return
        db = table.db
        lsn = L.to_bytes(db.lsn.next_block())
        for ci in table.capture_instances:
            db.cdc.ddl_history.append({
                "source_object_id": table.object_id, "object_id": ci.object_id,
                "required_column_update": required_update, "ddl_command": command,
                "ddl_lsn": lsn, "ddl_time": self.engine.now_datetime()})

    # ---------------------------------------------------------------- commit hook
    def on_commit(self, db, txn, records, commit_lsn, end_time):
        if db.cdc is None or not records:
            return
        begin = txn.begin_lsn.get(db, commit_lsn)
        # lsn_time_mapping's times are local time as the log records them at
        # commit: a later change of the server's zone does not alter them
        eng = self.engine
        db.cdc.log.append(CommittedTxn(commit_lsn, begin, eng.datetime_at(txn.begin_time), eng.datetime_at(end_time),
                                       txn.tran_id, records))

    # ---------------------------------------------------------------- capture
    def capture_cycle(self, db, max_scans=None):
        """One capture-job cycle: up to maxscans scans of maxtrans transactions.
        Returns the number of source transactions published to change tables."""
        st = db.cdc
        if st is None or not st.job_exists:
            return 0
        maxtrans = st.job["maxtrans"]
        scans = st.job["maxscans"] if max_scans is None else max_scans
        published = 0
        for _ in range(scans):
            n, processed = self._scan(db, maxtrans)
            published += n
            if not st.log:
                break
        if published == 0 and self._dummy_due(db):
            self._dummy_row(db)
        self._establish_start_lsns(db)
        return published

    def _dummy_due(self, db):
        """Whether an idle cycle writes a dummy mapping row.  Microsoft says
        only that "in periods of inactivity, a dummy entry is added"; the
        cadence is UNCONFIRMED, so engine option dummy_rows chooses: "every"
        idle cycle (the default), "never", or at most one every N seconds.
        With no capture instance left nothing is written (the mapping was
        emptied with the last one).  A capture instance waiting for its
        start gets one row in any mode, so that its start_lsn is at or below
        the max LSN once established."""
        st = db.cdc
        if not st.instances:
            return False
        if any(ci.start_lsn is None for ci in st.instances.values()):
            return True
        mode = self.engine.options.get("dummy_rows", "every")
        if mode == "every":
            return True
        if mode == "never":
            return False
        now = time.time()
        if st.last_dummy_at is None or now - st.last_dummy_at >= float(mode):
            return True
        return False

    def _scan(self, db, maxtrans):
        """One scan: the next transactions (at most maxtrans) become visible
        in every change table and lsn_time_mapping at once.  All rows are
        computed first; a failure leaves the queue and the tables untouched."""
        st = db.cdc
        eng = self.engine
        start = eng.now_ts()
        batch = list(itertools.islice(st.log, maxtrans))
        writes = []                  # (table, values)
        published = 0
        first_lsn = last_lsn = None
        for txn in batch:
            rows = self._rows_for(db, txn)
            if rows:
                writes.extend(rows)
                published += 1
                if first_lsn is None:
                    first_lsn = txn.commit_lsn
                last_lsn = txn.commit_lsn
        seq = eng.next_seq()
        for table, values in writes:
            table.insert_committed(values, seq)
        for _ in batch:
            st.log.popleft()
        eng.publish_seq(seq)
        self._record_scan(st, start, eng.now_ts(), published, first_lsn, last_lsn)
        return published, len(batch)

    def _record_scan(self, st, start, end, published, first_lsn, last_lsn):
        """One log scan session for sys.dm_cdc_log_scan_sessions.  How
        consecutive empty sessions appear is UNCONFIRMED (the page only says
        empty_scan_count is the "number of consecutive sessions that
        contained no change data capture transactions"): engine option
        empty_scans "rows" gives each its own row, "fold" counts them in the
        row of the first one, whose end_time then stays put; the aggregate
        row 0 ends at the latest session either way."""
        if st.scans_started is None:
            st.scans_started = start
        st.last_scan_end = end
        st.scan_tran_total += published
        last = st.scan_sessions[-1] if st.scan_sessions else None
        if (published == 0 and last is not None and last["tran_count"] == 0
                and self.engine.options.get("empty_scans", "rows") == "fold"):
            last["empty_scan_count"] += 1
            return
        st.scan_sessions.append({
            "session_id": st.next_scan_session, "start_time": start, "end_time": end,
            "tran_count": published, "start_lsn": first_lsn, "end_lsn": last_lsn,
            "empty_scan_count": 0 if published else 1})
        st.next_scan_session += 1

    def _rows_for(self, db, txn):
        """CT rows and the lsn_time_mapping row of one source transaction."""
        out = []
        pos_cache = {}
        strict_op4 = self.engine.options.get("lob_op4_unchanged_null", False)
        start_b = L.to_bytes(txn.commit_lsn)
        for rec in txn.records:
            cis = rec.table.capture_instances
            if not cis:
                continue
            pos = pos_cache.get(id(rec.column_ids))
            if pos is None:
                pos = pos_cache[id(rec.column_ids)] = {cid: i for i, cid in enumerate(rec.column_ids)}
            seq_b = L.to_bytes(rec.seqval)
            for ci in cis:
                if rec.seqval <= ci.enable_lsn or ci.ct is None:
                    continue
                ct = ci.ct
                n = len(ci.captured)
                if rec.op == "I":
                    out.append((ct, self._ct_row(ci, pos, start_b, seq_b, 2, rec.after, None,
                                                 _full_mask(n), rec.command_id, strict_op4)))
                elif rec.op == "D":
                    out.append((ct, self._ct_row(ci, pos, start_b, seq_b, 1, rec.before, None,
                                                 _full_mask(n), rec.command_id, strict_op4)))
                else:
                    mask = _mask(ci, rec.changed)
                    out.append((ct, self._ct_row(ci, pos, start_b, seq_b, 3, rec.before, rec.changed,
                                                 mask, rec.command_id, strict_op4)))
                    out.append((ct, self._ct_row(ci, pos, start_b, seq_b, 4, rec.after, rec.changed,
                                                 mask, rec.command_id, strict_op4)))
        if out:
            out.append((db.cdc.mapping,
                        (start_b, txn.begin_time, txn.end_time,
                         txn.tran_id.to_bytes(10, "big"), L.to_bytes(txn.begin_lsn))))
        return out

    @staticmethod
    def _ct_row(ci, pos, start_b, seq_b, op, row, changed, mask, command_id, strict_op4):
        vals = [start_b, None, seq_b, op, mask]
        for cid, name, t, computed, lob in ci.captured:
            p = pos.get(cid)
            if p is None or computed:
                vals.append(None)
                continue
            v = row[p]
            if lob == "old" and op in (1, 3):
                v = None
            elif lob == "max":
                if op == 3 and cid not in changed:
                    v = None
                elif op == 4 and strict_op4 and cid not in changed:
                    v = None
            vals.append(v)
        vals.append(command_id)
        return tuple(vals)

    def _dummy_row(self, db):
        eng = self.engine
        seq = eng.next_seq()
        lsn = db.lsn.next_block()
        now = eng.now_datetime()
        db.cdc.mapping.insert_committed((L.to_bytes(lsn), now, now, bytes(10), bytes(10)), seq)
        eng.publish_seq(seq)
        db.cdc.last_dummy_at = time.time()

    def _establish_start_lsns(self, db):
        mx = db.cdc.max_lsn()
        if mx is None:
            return
        for ci in db.cdc.instances.values():
            if ci.start_lsn is None and L.from_bytes(mx) >= ci.enable_lsn:
                ci.start_lsn = L.to_bytes(ci.enable_lsn)

    # ---------------------------------------------------------------- cleanup
    def cleanup(self, db, ci, mark: bytes, threshold=5000, between=None):
        """Cleanup as SQL Server runs it (ENGINE.md, CDC model, cleanup): the
        low watermark (ci.start_lsn, what fn_cdc_get_min_lsn returns) is raised
        first, in a step of its own; then change rows below it, and mapping rows
        below every instance's mark, are deleted by statements of at most
        `threshold` rows, each committed on its own.  `between()` runs after the
        mark and after every statement: the caller holds the engine lock and lets
        readers run there, and since change tables are read with NOLOCK
        semantics (query.scan_table) a reader sees each batch as it commits.
        Validation (22964 / 22957) is done by the caller.  Returns the number of
        change rows deleted."""
        eng = self.engine
        threshold = max(1, int(threshold or 5000))
        between = between or (lambda: None)
        ci.start_lsn = mark
        between()
        deleted = self._delete_below(ci.ct, mark, lambda k: k[0], threshold, between)
        low = min((c.start_lsn for c in db.cdc.instances.values() if c.start_lsn is not None), default=mark)
        self._delete_below(db.cdc.mapping, low, lambda k: k, threshold, between)
        eng.gc_table(ci.ct)
        eng.gc_table(db.cdc.mapping)
        return deleted

    def _delete_below(self, table, bound, lsn_of, threshold, between):
        """Delete the rows of a CDC table whose key LSN is below bound, at most
        threshold per committed statement; resumes after the last key seen, so
        rows the capture job appends meanwhile do not disturb it."""
        eng = self.engine
        deleted = 0
        last = None
        while True:
            keys = table.keys
            i = 0 if last is None else bisect.bisect_right(keys, last)
            batch = []
            while i < len(keys) and len(batch) < threshold:
                k = keys[i]
                if lsn_of(k) >= bound:
                    break
                rv = table.rows.get(k)
                if rv is not None and rv.xmax is None:
                    batch.append(rv)
                last = k
                i += 1
            if not batch:
                return deleted
            seq = eng.next_seq()
            for rv in batch:
                rv.xmax = seq
            eng.publish_seq(seq)
            deleted += len(batch)
            between()


def _full_mask(n):
    return ((1 << n) - 1).to_bytes((n + 7) // 8, "big") if n else b""


def _mask(ci, changed):
    v = 0
    for i, (cid, *_rest) in enumerate(ci.captured):
        if changed and cid in changed:
            v |= 1 << i
    return v.to_bytes(ci.mask_len(), "big")
