"""The server's clock and time zone.

SQL Server reports local time: GETDATE(), SYSDATETIME(), and
cdc.lsn_time_mapping's tran_begin_time/tran_end_time ("local time at
commit"), in the time zone of the host (Windows registry zones; page
"sys.time_zone_info", MicrosoftDocs/sql-docs
docs/relational-databases/system-catalog-views/sys-time-zone-info-transact-sql.md).
A zone with daylight-saving time changes its UTC offset twice a year, so a
client that reads an offset once and keeps it is wrong for half a year.

The stand-in's clock is the real clock plus a settable shift (the `clock`
control puts the server just before a DST transition, and time then runs on
normally), in a zone that is either a Windows zone name mapped to its IANA
rules (Python's zoneinfo) or a fixed offset (EngineConfig.utc_offset_minutes;
such a zone is named like Windows' fixed zones, "UTC-05").

AT TIME ZONE (page "AT TIME ZONE", docs/t-sql/queries/at-time-zone-transact-sql.md):
a local time in the spring gap is converted "with the offset after the DST
change" (02:01 -> 03:01 +02:00: the instant 02:01 - the offset before), a
time in the autumn overlap "with the offset before the clock change" (the
first, daylight-saving occurrence).
"""

from __future__ import annotations

import datetime
import time
import zoneinfo

# The zones the stand-in knows (sys.time_zone_info lists these): Windows
# name -> IANA zone.  A few with DST in each hemisphere and a few without.
WINDOWS_ZONES = {
    "UTC": "UTC",
    "GMT Standard Time": "Europe/London",
    "W. Europe Standard Time": "Europe/Berlin",
    "Central European Standard Time": "Europe/Warsaw",
    "Romance Standard Time": "Europe/Paris",
    "Eastern Standard Time": "America/New_York",
    "Central Standard Time": "America/Chicago",
    "Pacific Standard Time": "America/Los_Angeles",
    "AUS Eastern Standard Time": "Australia/Sydney",
    "India Standard Time": "Asia/Kolkata",
    "Tokyo Standard Time": "Asia/Tokyo",
}

UTC = datetime.timezone.utc
_WINDOWS_BY_LOWER = {win.lower(): (win, iana) for win, iana in WINDOWS_ZONES.items()}
# IANA zones with one UTC offset for all time: AT TIME ZONE needs no rules
# for them (a change query converts every row's commit time to UTC)
_CONSTANT_OFFSETS = {"UTC": 0}
_NAMED = {}                       # lower Windows name -> Zone (zones are never changed)


def fixed_zone_name(minutes):
    if minutes == 0:
        return "UTC"
    sign = "+" if minutes > 0 else "-"
    h, m = divmod(abs(minutes), 60)
    return "UTC%s%02d" % (sign, h) + (":%02d" % m if m else "")


class Zone:
    """A time zone: Windows name, and rules (zoneinfo) or a fixed offset."""

    def __init__(self, name, tz=None, fixed_minutes=None):
        self.name = name
        self.tz = tz
        self.fixed = fixed_minutes
        # the offset at every instant, or None when the rules say when
        self.constant_offset = fixed_minutes if tz is None else _CONSTANT_OFFSETS.get(tz.key)

    @classmethod
    def named(cls, name):
        """The zone of a Windows name (case-insensitive), or None.  Looked up
        once per name: AT TIME ZONE asks for every row."""
        low = name.lower()
        zone = _NAMED.get(low)
        if zone is None:
            hit = _WINDOWS_BY_LOWER.get(low)
            if hit is None:
                return None
            zone = _NAMED[low] = cls(hit[0], zoneinfo.ZoneInfo(hit[1]))
        return zone

    @classmethod
    def fixed_offset(cls, minutes):
        return cls(fixed_zone_name(minutes), None, minutes)

    def offset_at(self, ts):
        """UTC offset in minutes at the instant ts (unix seconds)."""
        if self.tz is None:
            return self.fixed
        d = datetime.datetime.fromtimestamp(ts, UTC).astimezone(self.tz)
        return int(d.utcoffset().total_seconds()) // 60

    def is_dst_at(self, ts):
        if self.tz is None:
            return False
        d = datetime.datetime.fromtimestamp(ts, UTC).astimezone(self.tz)
        return bool(d.dst())

    def local_at(self, ts):
        """The naive local wall-clock time at the instant ts."""
        return (datetime.datetime.fromtimestamp(ts, UTC) +
                datetime.timedelta(minutes=self.offset_at(ts))).replace(tzinfo=None)

    def offset_of_local(self, local):
        """AT TIME ZONE's offset (minutes) for a naive local time: in the
        spring gap the offset before the change (so the instant is the local
        time minus it; SQL Server then shows that instant with the offset
        after the change), in the autumn overlap the first, daylight-saving
        occurrence's."""
        if self.tz is None:
            return self.fixed
        # fold=0 is the earlier mapping: the offset before a transition
        return int(local.replace(tzinfo=self.tz, fold=0).utcoffset().total_seconds()) // 60


class ServerClock:
    """Real time shifted by a settable amount, in a zone."""

    def __init__(self, zone):
        self.zone = zone
        self.shift = 0.0

    def now(self):
        return time.time() + self.shift

    def set_utc(self, when):
        """Make now() be `when` (an aware datetime) and run on from there."""
        self.shift = when.timestamp() - time.time()

    def offset_minutes(self):
        return self.zone.offset_at(self.now())

    def describe(self):
        ts = self.now()
        return {"zone": self.zone.name,
                "utc": datetime.datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds"),
                "local": self.zone.local_at(ts).isoformat(timespec="milliseconds"),
                "offset_minutes": self.zone.offset_at(ts), "shift_seconds": round(self.shift, 3)}
