"""The server's clock and time zone (engine/clock.py): the `clock` control,
the UTC offset changing across daylight-saving transitions, local times in
cdc.lsn_time_mapping as at commit, AT TIME ZONE in the spring gap and the
autumn overlap (the examples of Microsoft's page), CURRENT_TIMEZONE_ID(),
sys.time_zone_info, and date/time functions evaluated once per statement."""

import datetime

from .support import LOGINS, Engine, EngineConfig, EngineTest

BERLIN = "W. Europe Standard Time"
SPRING_2026 = "2026-03-29T01:00:00Z"      # Berlin: 02:00 local -> 03:00 (+01:00 -> +02:00)
AUTUMN_2026 = "2026-10-25T01:00:00Z"      # Berlin: 03:00 local -> 02:00 (+02:00 -> +01:00)


def at(iso, seconds):
    t = datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")) + datetime.timedelta(seconds=seconds)
    return t.isoformat()


class ClockTest(EngineTest):
    def clock(self, **args):
        return self.engine.control("clock", args)

    def offset_and_local(self):
        return self.rows("SELECT DATEPART(TZOFFSET, SYSDATETIMEOFFSET()), CONVERT(varchar(19), GETDATE(), 120), "
                         "CONVERT(varchar(19), SYSUTCDATETIME(), 120)")[0]

    def test_offset_follows_the_zone_rules(self):
        self.assertEqual(self.clock(zone=BERLIN, utc=at(SPRING_2026, -60))["offset_minutes"], 60)
        off, local, utc = self.offset_and_local()
        self.assertEqual((off, local[11:16], utc[11:16]), (60, "01:59", "00:59"))
        self.clock(utc=at(SPRING_2026, 60))
        off, local, utc = self.offset_and_local()
        self.assertEqual((off, local[11:16], utc[11:16]), (120, "03:01", "01:01"))
        self.clock(utc=at(AUTUMN_2026, -60))
        off, local, _ = self.offset_and_local()
        self.assertEqual((off, local[11:16]), (120, "02:59"))
        self.clock(utc=at(AUTUMN_2026, 60))
        off, local, _ = self.offset_and_local()
        self.assertEqual((off, local[11:16]), (60, "02:01"))          # the same wall-clock hour again
        d = self.clock(offset_minutes=-300)
        self.assertEqual((d["zone"], d["offset_minutes"]), ("UTC-05", -300))
        with self.assertRaises(ValueError):
            self.clock(zone="Europe/Berlin")                            # IANA names are not Windows names
        with self.assertRaises(ValueError):
            self.clock(utc="2026-01-01T00:00:00")                       # an instant needs its offset

    def test_lsn_time_mapping_keeps_local_time_at_commit(self):
        self.ok("CREATE TABLE t (id int PRIMARY KEY)")
        self.enable_cdc("t")
        self.capture()
        self.clock(zone=BERLIN, utc=at(SPRING_2026, -30))
        self.ok("INSERT t VALUES (1)")                                  # 01:59:30 local, +01:00
        self.clock(utc=at(SPRING_2026, 30))
        self.ok("INSERT t VALUES (2)")                                  # 03:00:30 local, +02:00
        self.assertEqual(self.capture(), 2)
        times = self.rows("SELECT CONVERT(varchar(19), tran_end_time, 120) FROM cdc.lsn_time_mapping "
                          "WHERE tran_id <> 0x00 ORDER BY start_lsn")
        self.assertEqual([r[0] for r in times[-2:]], ["2026-03-29 01:59:30", "2026-03-29 03:00:30"])
        # what the change query needs: local at commit -> the instant, through the zone
        inst = self.rows("SELECT CONVERT(varchar(40), tran_end_time AT TIME ZONE N'%s' AT TIME ZONE N'UTC', 120) "
                         "FROM cdc.lsn_time_mapping WHERE tran_id <> 0x00 ORDER BY start_lsn" % BERLIN)
        self.assertEqual([r[0][:19] for r in inst[-2:]], ["2026-03-29 00:59:30", "2026-03-29 01:00:30"])

    def test_at_time_zone_gap_and_overlap(self):
        # the examples of the page "AT TIME ZONE" (Central European Standard Time, 2015)
        cases = [("2015-03-29T01:01:00", "2015-03-29 01:01:00 +01:00"),
                 ("2015-03-29T02:01:00", "2015-03-29 03:01:00 +02:00"),     # the gap: moved ahead
                 ("2015-03-29T03:01:00", "2015-03-29 03:01:00 +02:00"),
                 ("2015-10-25T01:01:00", "2015-10-25 01:01:00 +02:00"),
                 ("2015-10-25T02:00:00", "2015-10-25 02:00:00 +02:00"),     # the overlap: offset before
                 ("2015-10-25T03:01:00", "2015-10-25 03:01:00 +01:00")]
        for local, want in cases:
            got = self.scalar("SELECT CONVERT(varchar(40), CONVERT(datetime2(0), '%s', 126) "
                              "AT TIME ZONE 'Central European Standard Time', 120)" % local)
            self.assertEqual(got, want, local)
        # an instant is converted, not reinterpreted: both halves of the overlap
        self.assertEqual(self.scalar("SELECT CONVERT(varchar(40), CAST('2015-10-25T00:30:00+00:00' AS "
                                     "datetimeoffset(0)) AT TIME ZONE N'%s', 120)" % BERLIN),
                         "2015-10-25 02:30:00 +02:00")
        self.assertEqual(self.scalar("SELECT CONVERT(varchar(40), CAST('2015-10-25T01:30:00+00:00' AS "
                                     "datetimeoffset(0)) AT TIME ZONE N'%s', 120)" % BERLIN),
                         "2015-10-25 02:30:00 +01:00")
        # chained, precision of the input, case-insensitive names
        self.assertEqual(self.scalar("SELECT CONVERT(varchar(40), CAST('2026-07-01 12:00:00.1234567' AS datetime2(7)) "
                                     "AT TIME ZONE 'pacific standard time' AT TIME ZONE 'UTC', 121)"),
                         "2026-07-01 19:00:00.1234567 +00:00")
        items = self.ok("SELECT CAST('2026-07-01 12:00:00' AS datetime) AT TIME ZONE 'UTC'")
        self.assertEqual(items[0].columns[0].type.sql(), "datetimeoffset(3)")
        self.assertIsNone(self.scalar("SELECT CAST(NULL AS datetime) AT TIME ZONE 'UTC'"))
        self.assertIsNone(self.scalar("SELECT SYSDATETIME() AT TIME ZONE CAST(NULL AS sysname)"))
        err, _ = self.error("SELECT SYSDATETIME() AT TIME ZONE 'Europe/Berlin'", 9820)
        self.assertEqual(err.message, "The time zone parameter 'Europe/Berlin' provided to AT TIME ZONE clause "
                                      "is invalid.")
        self.error("SELECT SYSDATETIME() AT TIME ZONE ' UTC'", 9820)        # spaces are significant
        self.error("SELECT 5 AT TIME ZONE 'UTC'", 8116)

    def test_current_timezone_id_and_time_zone_info(self):
        self.assertEqual(self.scalar("SELECT CURRENT_TIMEZONE_ID()"), "UTC")
        self.clock(zone=BERLIN, utc=at(SPRING_2026, 60))
        self.assertEqual(self.scalar("SELECT CURRENT_TIMEZONE_ID()"), BERLIN)
        rows = dict((r[0], r[1:]) for r in self.rows("SELECT name, current_utc_offset, is_currently_dst "
                                                     "FROM sys.time_zone_info"))
        self.assertEqual(rows[BERLIN], ("+02:00", True))
        self.assertEqual(rows["Pacific Standard Time"], ("-07:00", True))
        self.assertEqual(rows["India Standard Time"], ("+05:30", False))
        self.assertEqual(rows["UTC"], ("+00:00", False))

    def test_now_is_one_instant_per_statement(self):
        self.ok("CREATE TABLE n (id int PRIMARY KEY)")
        self.engine.control("fill_table", {"table": "n", "rows": 3000})
        values = {r[0] for r in self.rows("SELECT CONVERT(varchar(40), SYSDATETIMEOFFSET(), 121) FROM n")}
        self.assertEqual(len(values), 1)


class OlderServerTest(EngineTest):
    def setUp(self):
        self.engine = Engine(EngineConfig(databases=["cdcdb"], logins=dict(LOGINS), capture_interval=3600,
                                          time_zone="Pacific Standard Time"), current_timezone_id=False)
        self.s = self.engine.login("sa", "Passw0rd!", "cdcdb", "test", "host")

    def test_no_current_timezone_id_before_2022(self):
        err, _ = self.error("SELECT CURRENT_TIMEZONE_ID()", 195)
        self.assertEqual(err.message, "'CURRENT_TIMEZONE_ID' is not a recognized built-in function name.")
        # the zone itself is configured and AT TIME ZONE works (SQL Server 2016+)
        self.assertIn(self.scalar("SELECT DATEPART(TZOFFSET, SYSDATETIMEOFFSET())"), (-420, -480))
        self.assertEqual(self.scalar("SELECT COUNT(*) FROM sys.time_zone_info WHERE name = N'Pacific Standard Time'"),
                         1)

    def test_unknown_zone_is_refused(self):
        with self.assertRaises(ValueError):
            Engine(EngineConfig(databases=["cdcdb"], time_zone="Mars Standard Time"))
