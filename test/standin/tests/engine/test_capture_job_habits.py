"""The capture job's habits that matter to a reader's diagnosis: the last
capture instance dropped empties cdc.lsn_time_mapping (max LSN NULL); idle
cycles write dummy mapping rows every cycle, never, or at most every N
seconds (UNCONFIRMED cadence, engine option dummy_rows); every scan session
shows in sys.dm_cdc_log_scan_sessions, with the aggregate row 0 ending at the
latest one, and empty sessions as rows or folded (option empty_scans)."""

from __future__ import annotations

import time

from .support import EngineTest


class CaptureBase(EngineTest):
    def setUp(self):
        super().setUp()
        self.ok("CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY)")
        self.ok("CREATE TABLE dbo.items (id int NOT NULL PRIMARY KEY)")
        self.ok("EXEC sys.sp_cdc_enable_db")
        self.ok("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL")
        self.capture()

    def max_lsn(self):
        return self.scalar("SELECT sys.fn_cdc_get_max_lsn()")

    def set_options(self, **opts):
        return self.engine.control("capture_options", opts)


class LastInstanceDroppedTest(CaptureBase):
    def test_mapping_emptied_with_the_last_instance(self):
        self.ok("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'items', @role_name = NULL")
        self.ok("INSERT orders VALUES (1); INSERT items VALUES (1)")
        self.capture()
        self.ok("EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'orders', "
                "@capture_instance = N'dbo_orders'")
        # another instance is left: the mapping stays
        self.assertIsNotNone(self.max_lsn())
        self.assertGreater(self.scalar("SELECT COUNT(*) FROM cdc.lsn_time_mapping"), 0)
        self.ok("EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'items', "
                "@capture_instance = N'all'")
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM cdc.lsn_time_mapping"), 0)
        self.assertIsNone(self.max_lsn())
        # the job has no table to scan: it stays empty
        self.capture()
        self.capture()
        self.assertIsNone(self.max_lsn())
        # the database is still enabled, with no capture instance
        self.assertEqual(self.scalar("SELECT is_cdc_enabled FROM sys.databases WHERE name = DB_NAME()"), True)
        self.assertEqual(self.rows("EXEC sys.sp_cdc_help_change_data_capture"), [])


class DummyRowCadenceTest(CaptureBase):
    def test_every_idle_cycle_by_default(self):
        a = self.max_lsn()
        self.capture()
        b = self.max_lsn()
        self.assertGreater(b, a)
        self.assertEqual(self.scalar("SELECT tran_id FROM cdc.lsn_time_mapping WHERE start_lsn = 0x%s" % b.hex()),
                         bytes(10))

    def test_never(self):
        self.assertEqual(self.set_options(dummy_rows="never"), {"dummy_rows": "never", "empty_scans": "rows"})
        a = self.max_lsn()
        for _ in range(3):
            self.capture()
        self.assertEqual(self.max_lsn(), a)
        # a real transaction still moves it
        self.ok("INSERT orders VALUES (7)")
        self.capture()
        self.assertGreater(self.max_lsn(), a)

    def test_at_most_every_n_seconds(self):
        self.set_options(dummy_rows=0.3)
        self.capture()                       # the first idle cycle in this mode writes one
        a = self.max_lsn()
        self.capture()
        self.assertEqual(self.max_lsn(), a)
        time.sleep(0.35)
        self.capture()
        self.assertGreater(self.max_lsn(), a)

    def test_new_instance_gets_its_start_in_any_mode(self):
        self.set_options(dummy_rows="never")
        self.ok("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'items', @role_name = NULL")
        self.capture()
        start = self.scalar("SELECT sys.fn_cdc_get_min_lsn(N'dbo_items')")
        self.assertIsNotNone(start)
        self.assertLessEqual(start, self.max_lsn())

    def test_bad_option(self):
        with self.assertRaises(ValueError):
            self.set_options(dummy_rows="sometimes")
        with self.assertRaises(ValueError):
            self.set_options(empty_scans="squash")


class ScanSessionsTest(CaptureBase):
    def sessions(self):
        self.ok("GRANT VIEW DATABASE STATE TO reader")
        return self.rows("SELECT session_id, scan_phase, tran_count, empty_scan_count, end_time "
                         "FROM sys.dm_cdc_log_scan_sessions ORDER BY session_id", self.session("reader"))

    def test_rows_and_aggregate(self):
        self.ok("INSERT orders VALUES (1)")
        self.capture()
        self.capture()
        rows = self.sessions()
        self.assertEqual(rows[0][:2], (0, "Aggregate"))
        self.assertEqual(rows[0][2], 1)
        self.assertEqual(rows[0][4], max(r[4] for r in rows[1:]))
        # the session that published the insert, then an empty one
        self.assertEqual([r[2:4] for r in rows[-2:]], [(1, 0), (0, 1)])

    def test_folded_empty_sessions(self):
        self.set_options(empty_scans="fold")
        self.capture()
        before = self.sessions()
        time.sleep(0.02)
        self.capture()
        self.capture()
        after = self.sessions()
        self.assertEqual(len(after), len(before))
        self.assertEqual(after[-1][3], before[-1][3] + 2)
        self.assertEqual(after[-1][4], before[-1][4])     # the folded row keeps its end_time
        self.assertGreater(after[0][4], before[0][4])     # the aggregate moves


class DateDiffTest(EngineTest):
    """DATEDIFF counts datepart boundaries crossed (page "DATEDIFF (Transact-SQL)"),
    the arithmetic a reader uses to age the scan sessions by the server's clock."""

    def test_boundaries(self):
        self.assertEqual(self.rows(
            "SELECT DATEDIFF(second, '2020-01-01T00:00:00.900', '2020-01-01T00:00:01.100'), "
            "DATEDIFF(day, '2020-01-01', '2020-03-01'), DATEDIFF(ms, '2020-01-01T00:00:00', '2020-01-01T00:00:02'), "
            "DATEDIFF(year, '2020-12-31', '2021-01-01'), DATEDIFF(month, '2020-01-31', '2020-02-01'), "
            "DATEDIFF(minute, '2020-01-01T10:00:59', '2020-01-01T09:59:00'), DATEDIFF(second, NULL, GETDATE())"),
            [(1, 60, 2000, 1, 1, -1, None)])
        self.error("SELECT DATEDIFF(fortnight, GETDATE(), GETDATE())", 155)

    def test_scan_session_age(self):
        self.ok("EXEC sys.sp_cdc_enable_db")
        self.ok("CREATE TABLE dbo.o (id int NOT NULL PRIMARY KEY)")
        self.ok("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'o', @role_name = NULL")
        self.assertIsNone(self.scalar("SELECT DATEDIFF(second, MAX(end_time), GETDATE()) FROM sys.dm_cdc_log_scan_sessions"))
        self.capture()
        self.assertIn(self.scalar("SELECT DATEDIFF(second, MAX(end_time), GETDATE()) FROM sys.dm_cdc_log_scan_sessions"),
                      (0, 1))
