"""How CDC records deferred ("split") updates, and the direct change-table
read (ENGINE.md "CDC model"): an update of a primary-key column or of a
unique index's column is a delete (1) + insert (2); a multi-row statement
records all deletes, then all inserts, in __$command_id order; __$seqval is
shared by a row's delete and insert ('shared'), follows execution order
('ascending') or puts the insert first ('inverted', KB3030352).  Reading
cdc.<ci>_CT ordered by its clustered key, joined to cdc.lsn_time_mapping,
streams: it visits the window's rows only."""

from unittest import mock

from standin.engine import storage

from .support import LOGINS, Engine, EngineConfig, EngineTest

DIRECT = ("SELECT ct.__$operation, ct.id, ct.ref, ct.__$command_id, ct.__$seqval, m.tran_end_time "
          "FROM cdc.[dbo_t_CT] AS ct WITH (NOLOCK) "
          "LEFT OUTER JOIN cdc.lsn_time_mapping AS m ON m.start_lsn = ct.[__$start_lsn] "
          "WHERE ct.[__$start_lsn] >= 0x%s AND ct.[__$start_lsn] <= 0x%s "
          "ORDER BY ct.[__$start_lsn], ct.[__$command_id], ct.[__$seqval], ct.[__$operation]")


def ranks(values):
    """Each value's rank among the distinct values (0 = smallest)."""
    order = sorted(set(values))
    return [order.index(v) for v in values]


class SplitUpdateTest(EngineTest):
    options = {}

    def setUp(self):
        self.engine = Engine(EngineConfig(databases=["cdcdb"], logins=dict(LOGINS), capture_interval=3600),
                             **self.options)
        self.s = self.engine.login("sa", "Passw0rd!", "cdcdb", "test", "host")
        self.ok("CREATE TABLE t (id int PRIMARY KEY, ref varchar(10) NOT NULL, v int, CONSTRAINT uq_t_ref UNIQUE (ref))")
        self.ok("INSERT t VALUES (1, 'A', 0), (2, 'B', 0), (3, 'C', 0)")
        self.enable_cdc("t")
        self.capture()

    def last_txn(self, sql):
        """Run sql as one transaction; its change rows in clustered order as
        (op, id, ref, command rank, seqval rank), and in seqval order."""
        before = self.scalar("SELECT sys.fn_cdc_get_max_lsn()")
        self.ok(sql)
        self.assertEqual(self.capture(), 1)
        frm = self.scalar("SELECT sys.fn_cdc_increment_lsn(0x%s)" % before.hex())
        to = self.scalar("SELECT sys.fn_cdc_get_max_lsn()")
        rows = self.rows(DIRECT % (frm.hex(), to.hex()))
        self.assertTrue(all(r[5] is not None for r in rows), "every row has its commit time")
        shaped = list(zip([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
                          ranks([r[3] for r in rows]), ranks([r[4] for r in rows])))
        by_seqval = self.rows("SELECT __$operation, id, ref FROM cdc.fn_cdc_get_all_changes_dbo_t(0x%s, 0x%s, "
                              "N'all update old') ORDER BY __$start_lsn, __$seqval, __$operation"
                              % (frm.hex(), to.hex()))
        return shaped, by_seqval

    def test_plain_update_is_3_4(self):
        shaped, _ = self.last_txn("UPDATE t SET v = 1 WHERE id = 1")
        self.assertEqual(shaped, [(3, 1, "A", 0, 0), (4, 1, "A", 0, 0)])


class SharedSeqvalTest(SplitUpdateTest):
    def test_unique_column_update_is_delete_insert(self):
        shaped, by_seqval = self.last_txn("UPDATE t SET ref = 'Z' WHERE id = 1")
        self.assertEqual(shaped, [(1, 1, "A", 0, 0), (2, 1, "Z", 1, 0)])      # one seqval, two commands
        self.assertEqual(by_seqval, [(1, 1, "A"), (2, 1, "Z")])

    def test_multi_row_swap_all_deletes_then_all_inserts(self):
        shaped, by_seqval = self.last_txn(
            "UPDATE t SET ref = CASE ref WHEN 'A' THEN 'B' WHEN 'B' THEN 'A' END WHERE id IN (1, 2)")
        self.assertEqual(shaped, [(1, 1, "A", 0, 0), (1, 2, "B", 1, 1), (2, 1, "B", 2, 0), (2, 2, "A", 3, 1)])
        # by seqval the rows interleave: inserting (1, 'B') while (2, 'B') still exists
        self.assertEqual(by_seqval, [(1, 1, "A"), (2, 1, "B"), (1, 2, "B"), (2, 2, "A")])

    def test_key_shift(self):
        shaped, by_seqval = self.last_txn("UPDATE t SET id = id + 1")
        self.assertEqual([s[:3] for s in shaped], [(1, 1, "A"), (1, 2, "B"), (1, 3, "C"),
                                                   (2, 2, "A"), (2, 3, "B"), (2, 4, "C")])
        self.assertEqual([s[3] for s in shaped], [0, 1, 2, 3, 4, 5])
        self.assertEqual([s[4] for s in shaped], [0, 1, 2, 0, 1, 2])
        self.assertEqual(by_seqval[:2], [(1, 1, "A"), (2, 2, "A")])          # insert 2 before delete 2

    def test_mixed_transaction_keeps_execution_order(self):
        shaped, _ = self.last_txn("BEGIN TRAN; UPDATE t SET v = 5 WHERE id = 3; UPDATE t SET ref = 'Q' WHERE id = 3; "
                                  "DELETE FROM t WHERE id = 2; COMMIT")
        self.assertEqual([s[:4] for s in shaped], [(3, 3, "C", 0), (4, 3, "C", 0), (1, 3, "C", 1), (2, 3, "Q", 2),
                                                   (1, 2, "B", 3)])


class AscendingSeqvalTest(SplitUpdateTest):
    options = {"split_update_seqval": "ascending"}

    def test_seqval_follows_execution_order(self):
        shaped, by_seqval = self.last_txn(
            "UPDATE t SET ref = CASE ref WHEN 'A' THEN 'B' WHEN 'B' THEN 'A' END WHERE id IN (1, 2)")
        self.assertEqual([s[3] for s in shaped], [0, 1, 2, 3])
        self.assertEqual([s[4] for s in shaped], [0, 1, 2, 3])
        self.assertEqual(by_seqval, [(1, 1, "A"), (1, 2, "B"), (2, 1, "B"), (2, 2, "A")])


class InvertedSeqvalTest(SplitUpdateTest):
    options = {"split_update_seqval": "inverted"}

    def test_insert_sorts_before_its_delete_by_seqval(self):
        shaped, by_seqval = self.last_txn("UPDATE t SET ref = 'Z' WHERE id = 1")
        self.assertEqual(shaped, [(1, 1, "A", 0, 1), (2, 1, "Z", 1, 0)])
        self.assertEqual(by_seqval, [(2, 1, "Z"), (1, 1, "A")])             # the KB3030352 shape


class InPlaceUniqueTest(SplitUpdateTest):
    options = {"unique_update": "in_place"}

    def test_unique_column_update_is_3_4(self):
        shaped, _ = self.last_txn("UPDATE t SET ref = 'Z' WHERE id = 1")
        self.assertEqual([s[:3] for s in shaped], [(3, 1, "A"), (4, 1, "Z")])
        shaped, _ = self.last_txn("UPDATE t SET id = 7 WHERE id = 1")       # the key still splits
        self.assertEqual([s[:3] for s in shaped], [(1, 1, "Z"), (2, 7, "Z")])


class InPlaceKeysTest(SplitUpdateTest):
    options = {"unique_update": "in_place_keys"}

    def test_primary_key_update_is_3_4(self):
        shaped, _ = self.last_txn("UPDATE t SET id = 7 WHERE id = 1")
        self.assertEqual([s[:3] for s in shaped], [(3, 1, "A"), (4, 7, "A")])
        self.assertEqual(self.rows("SELECT id FROM t ORDER BY id"), [(2,), (3,), (7,)])

    def test_key_shift_is_3_4_pairs(self):
        shaped, _ = self.last_txn("UPDATE t SET id = id + 1")
        self.assertEqual(sorted(s[0] for s in shaped), [3, 3, 3, 4, 4, 4])
        self.assertEqual(self.rows("SELECT id FROM t ORDER BY id"), [(2,), (3,), (4,)])


class BadOptionTest(EngineTest):
    def test_unknown_shape_is_refused(self):
        with self.assertRaises(ValueError):
            Engine(EngineConfig(databases=["cdcdb"]), split_update_seqval="sideways")


class DirectReadStreamsTest(EngineTest):
    def test_join_streams_and_visits_the_window_only(self):
        self.ok("CREATE TABLE t (id int PRIMARY KEY, ref varchar(10), v int)")
        self.enable_cdc("t")
        self.capture()
        for i in range(40):
            self.ok("INSERT t VALUES (%d, 'r%d', 0)" % (i, i))
        self.capture()
        lsns = [r[0] for r in self.rows("SELECT start_lsn FROM cdc.lsn_time_mapping WHERE tran_id <> 0x00 "
                                        "ORDER BY start_lsn")]
        frm, to = lsns[10], lsns[12]
        visits = []
        real = storage.visible

        def counting(rv, snap, txn):
            visits.append(rv)
            return real(rv, snap, txn)
        with mock.patch("standin.engine.query.visible", counting):
            rows = self.rows(DIRECT % (frm.hex(), to.hex()))
        self.assertEqual([r[1] for r in rows], [10, 11, 12])
        self.assertTrue(all(r[5] is not None for r in rows))
        # three CT rows, one lookup each in lsn_time_mapping, and the CT key after the window
        self.assertLessEqual(len(visits), 8)
        # sorted by seqval instead: the same rows (a sort, not a stream)
        alt = self.rows(DIRECT.replace("ct.[__$command_id], ct.[__$seqval]", "ct.[__$seqval]")
                        % (frm.hex(), to.hex()))
        self.assertEqual([r[1] for r in alt], [10, 11, 12])
