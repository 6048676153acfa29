"""Session languages and date formats.

A session's language comes from the LOGIN7 record (FreeTDS sends the
`language` of freetds.conf, db-lib's DBSETNATLANG), else from the login's
DEFAULT_LANGUAGE, else from the server's `default language` (us_english);
SET LANGUAGE changes it and with it the date order, SET DATEFORMAT changes
only the date order ("SET LANGUAGE", "SET DATEFORMAT", "sp_helplanguage";
"SQL Server Language Support").  The date order decides how numeric date
strings are read (values.parse_temporal).

Conversions are pure functions without a session, so the session whose
statement is running is kept per thread: every connection has its own
thread, and the engine sets it at the start of each batch or RPC (the rows
of a result are produced later, on the same thread).
"""

from __future__ import annotations

import threading

from ..results import SqlError

# sys.syslanguages (a subset): name, alias, dateformat, datefirst
LANGUAGES = [
    ("us_english", "English", "mdy", 7),
    ("Deutsch", "German", "dmy", 1),
    ("Français", "French", "dmy", 1),
    ("British", "British English", "dmy", 1),
    ("Italiano", "Italian", "dmy", 1),
    ("Español", "Spanish", "dmy", 1),
    ("Nederlands", "Dutch", "dmy", 1),
    ("Polski", "Polish", "dmy", 1),
    ("русский", "Russian", "dmy", 1),
    ("Ελληνικά", "Greek", "dmy", 1),
    ("Svenska", "Swedish", "ymd", 1),
    ("Magyar", "Hungarian", "ymd", 1),
    ("日本語", "Japanese", "ymd", 7),
]

DATEFORMATS = ("mdy", "dmy", "ymd", "ydm", "myd", "dym")
DEFAULT_LANGUAGE = LANGUAGES[0]


def find_language(text):
    """The (name, alias, dateformat, datefirst) entry for an official name or
    alias (case-insensitive), or None."""
    low = (text or "").strip().lower()
    for entry in LANGUAGES:
        if low in (entry[0].lower(), entry[1].lower()):
            return entry
    return None


def set_language(session, text, line=1):
    """SET LANGUAGE: language and date order (2740 for an unknown name)."""
    entry = find_language(text)
    if entry is None:
        raise SqlError(2740, 16, 1, "SET LANGUAGE failed because '%s' is not an official language name or a "
                       "language alias on this SQL Server." % text, line)
    session.language = entry[0]
    session.dateformat = entry[2]
    session.datefirst = entry[3]
    return entry[0]


def set_dateformat(session, text, line=1):
    v = (text or "").strip().lower()
    if v not in DATEFORMATS:
        raise SqlError(2741, 16, 1, "SET DATEFORMAT date order '%s' is invalid." % text, line)
    session.dateformat = v


_current = threading.local()


def enter(session):
    """The session whose statements this thread runs now."""
    _current.session = session


def dateformat():
    s = getattr(_current, "session", None)
    return getattr(s, "dateformat", None) or DEFAULT_LANGUAGE[2]
