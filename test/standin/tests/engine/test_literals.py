"""Literals and conversions that depend on the session or the collation, as
SQL Server reads them: SET LANGUAGE / SET DATEFORMAT / the login's language
for numeric date strings, ISO 8601 and CONVERT styles that do not depend on
them, non-Unicode literals through the database code page, columns in the
code page of their collation; and the conversions of the issue: '' as
datetime, decimal(38,38) as text, xml normalised, float style 3,
sp_configure / RECONFIGURE."""

from __future__ import annotations

import datetime

from .support import EngineTest, EnvChange, Message


def dt(*a):
    return datetime.datetime(*a)


class DateFormatTest(EngineTest):
    def as_datetime(self, literal, session=None, typ="datetime"):
        v = self.scalar("SELECT CAST(%s AS %s)" % (literal, typ), session)
        return v

    def ymd(self, v):
        from standin.engine.values import temporal_parts
        d, _, _ = temporal_parts(v)
        return d.isoformat()

    def test_us_english_default(self):
        self.assertEqual(self.scalar("SELECT @@LANGUAGE"), "us_english")
        self.assertEqual(self.ymd(self.as_datetime("'2020-01-13 10:00:00'")), "2020-01-13")
        self.assertEqual(self.ymd(self.as_datetime("'01/13/2020'")), "2020-01-13")

    def test_set_language_british(self):
        items = self.ok("SET LANGUAGE british")
        self.assertEqual([i for i in items if isinstance(i, EnvChange)][0].new, "British")
        self.assertIn("Changed language setting to British.",
                      [i.message for i in items if isinstance(i, Message)])
        self.assertEqual(self.scalar("SELECT @@LANGUAGE"), "British")
        # yyyy-mm-dd hh:mi:ss is read y-d-m for datetime and smalldatetime under dmy
        self.error("SELECT CAST('2020-01-13 10:00:00' AS datetime)", 242)
        self.error("SELECT CAST('2020-01-13 10:00' AS smalldatetime)", 242)
        self.assertEqual(self.ymd(self.as_datetime("'2020-02-01 10:00:00'")), "2020-01-02")
        self.assertEqual(self.ymd(self.as_datetime("'13/01/2020'")), "2020-01-13")
        # ... but not for date, datetime2 and datetimeoffset
        self.assertEqual(self.ymd(self.as_datetime("'2020-01-13 10:00:00'", typ="datetime2(7)")), "2020-01-13")
        self.assertEqual(self.ymd(self.as_datetime("'2020-01-13'", typ="date")), "2020-01-13")
        self.assertEqual(self.ymd(self.as_datetime("'2020-01-13 10:00:00 +01:00'", typ="datetimeoffset")),
                         "2020-01-13")

    def test_language_independent_forms(self):
        self.ok("SET LANGUAGE Deutsch")
        self.assertEqual(self.scalar("SELECT @@LANGUAGE"), "Deutsch")
        for lit in ("'2020-01-13T10:00:00'", "'2020-01-13T10:00:00.997'", "'20200113 10:00:00'", "'20200113'",
                    "CONVERT(datetime, N'2020-01-13 10:00:00.997', 121)",
                    "CONVERT(datetime, '2020-01-13 10:00:00', 120)"):
            self.assertEqual(self.ymd(self.as_datetime(lit)), "2020-01-13", lit)
        self.assertEqual(self.ymd(self.scalar("SELECT CONVERT(smalldatetime, N'2020-01-13 10:00:00.000', 121)")),
                         "2020-01-13")
        self.assertEqual(self.ymd(self.scalar("SELECT CONVERT(datetime, '13/01/2020', 103)")), "2020-01-13")
        self.assertEqual(self.ymd(self.scalar("SELECT CONVERT(datetime, '01/13/2020', 101)")), "2020-01-13")

    def test_set_dateformat_ydm_and_others(self):
        self.ok("SET DATEFORMAT ydm")
        self.assertEqual(self.ymd(self.as_datetime("'2020-13-01'")), "2020-01-13")
        self.assertEqual(self.ymd(self.as_datetime("'2020-01-13'", typ="date")), "2020-01-13")
        self.ok("SET DATEFORMAT ymd")
        self.assertEqual(self.ymd(self.as_datetime("'2020-01-13'")), "2020-01-13")
        self.ok("SET DATEFORMAT mdy")
        self.assertEqual(self.ymd(self.as_datetime("'01-13-20'")), "2020-01-13")
        self.ok("SET DATEFORMAT dmy")
        self.assertEqual(self.ymd(self.as_datetime("'13.01.1950'")), "1950-01-13")
        self.error("SET DATEFORMAT xyz", 2741)
        self.error("SET LANGUAGE klingon", 2740)

    def test_login_language(self):
        self.ok("CREATE LOGIN brit WITH PASSWORD = 'pw', DEFAULT_LANGUAGE = British; CREATE USER brit FOR LOGIN brit")
        s = self.engine.login("brit", "pw", "cdcdb")
        self.assertEqual(self.scalar("SELECT @@LANGUAGE", s), "British")
        self.error("SELECT CAST('2020-01-13 10:00:00' AS datetime)", 242, s)
        # the LOGIN7 language (freetds.conf `language`) wins
        s2 = self.engine.login("sa", "Passw0rd!", "cdcdb", language="Deutsch")
        self.assertEqual(self.scalar("SELECT @@LANGUAGE, @@DATEFIRST", s2), "Deutsch")
        self.assertEqual(self.rows("SELECT @@DATEFIRST", s2), [(1,)])
        self.error("CREATE LOGIN x WITH PASSWORD = 'pw', DEFAULT_LANGUAGE = klingon", 15005)

    def test_empty_string(self):
        for typ in ("datetime", "smalldatetime", "date", "datetime2(7)"):
            self.assertEqual(self.ymd(self.as_datetime("''", typ=typ)), "1900-01-01", typ)
        self.assertEqual(self.rows("SELECT CONVERT(varchar(30), CAST('' AS datetime), 121)"),
                         [("1900-01-01 00:00:00.000",)])


class CodePageTest(EngineTest):
    def setUp(self):
        super().setUp()
        self.ok("CREATE TABLE dbo.k (id int PRIMARY KEY, "
                "cyr varchar(20) COLLATE Cyrillic_General_CI_AS, grk varchar(20) COLLATE Greek_CI_AS, "
                "lat varchar(20), u8 varchar(40) COLLATE Latin1_General_100_CI_AS_SC_UTF8)")

    def test_columns_store_their_code_page(self):
        self.ok("INSERT dbo.k VALUES (1, N'Жук', N'Ωμέγα', N'Жук', N'Жук Ωμέγα 日本')")
        self.assertEqual(self.rows("SELECT cyr, grk, lat, u8 FROM dbo.k"),
                         [("Жук", "Ωμέγα", "???", "Жук Ωμέγα 日本")])
        # a Greek character has no place in code page 1251
        self.ok("INSERT dbo.k (id, cyr) VALUES (2, N'Жω')")
        self.assertEqual(self.scalar("SELECT cyr FROM dbo.k WHERE id = 2"), "Ж?")

    def test_non_unicode_literal_uses_the_database_code_page(self):
        self.ok("INSERT dbo.k (id, cyr) VALUES (3, 'Жук')")
        self.assertEqual(self.scalar("SELECT cyr FROM dbo.k WHERE id = 3"), "???")
        self.ok("INSERT dbo.k (id, cyr) VALUES (4, N'Жук')")
        # the varchar literal never matches, the Unicode one does
        self.assertEqual(self.rows("SELECT id FROM dbo.k WHERE cyr = 'Жук'"), [(3,)])
        self.assertEqual(self.rows("SELECT id FROM dbo.k WHERE cyr = N'Жук'"), [(4,)])
        # N'' COLLATE x cast to varchar converts through x's code page
        self.assertEqual(self.rows("SELECT id FROM dbo.k WHERE cyr = "
                                   "CAST(N'Жук' COLLATE Cyrillic_General_CI_AS AS varchar(8000))"), [(4,)])
        self.assertEqual(self.scalar("SELECT CAST(N'Жук' AS varchar(10))"), "???")
        # case-insensitive in the collation
        self.assertEqual(self.rows("SELECT id FROM dbo.k WHERE cyr = N'жук'"), [(4,)])

    def test_catalog_shows_the_collation(self):
        rows = self.rows("SELECT COLUMN_NAME, COLLATION_NAME, CHARACTER_SET_NAME FROM INFORMATION_SCHEMA.COLUMNS "
                         "WHERE TABLE_NAME = 'k' AND COLUMN_NAME <> 'id' ORDER BY ORDINAL_POSITION")
        self.assertEqual(rows, [("cyr", "Cyrillic_General_CI_AS", "cp1251"), ("grk", "Greek_CI_AS", "cp1253"),
                                ("lat", "SQL_Latin1_General_CP1_CI_AS", "iso_1"),
                                ("u8", "Latin1_General_100_CI_AS_SC_UTF8", "UTF8")])
        self.error("CREATE TABLE dbo.bad (c varchar(5) COLLATE Klingon_CI_AS)", 448)
        self.error("SELECT 1 COLLATE Latin1_General_CI_AS", 447)

    def test_datalength_in_the_code_page(self):
        self.ok("INSERT dbo.k (id, cyr, u8) VALUES (5, N'Жук', N'Жук')")
        self.assertEqual(self.rows("SELECT DATALENGTH(cyr), DATALENGTH(u8) FROM dbo.k WHERE id = 5"), [(3, 6)])


class ConversionTest(EngineTest):
    def test_decimal_38_38_as_text(self):
        self.assertEqual(self.scalar("SELECT CAST(CAST(0.00000000000000000000000000000000000001 AS decimal(38,38)) "
                                     "AS varchar(50))"), "0.00000000000000000000000000000000000001")
        self.assertEqual(self.scalar("SELECT CAST(CAST(0 AS decimal(38,38)) AS varchar(50))"),
                         "0." + "0" * 38)
        self.assertEqual(self.scalar("SELECT CAST(CAST(12.5 AS decimal(10,3)) AS nvarchar(20))"), "12.500")

    def test_xml_is_normalised(self):
        self.ok("CREATE TABLE dbo.x (id int PRIMARY KEY, x xml)")
        self.ok("INSERT dbo.x VALUES (1, N'<?xml version=\"1.0\"?><a  k=''1''><b/> <c>t &amp; &#233;</c>"
                "<![CDATA[<d>]]><!--n--></a>')")
        self.assertEqual(self.scalar("SELECT CAST(x AS nvarchar(max)) FROM dbo.x"),
                         "<a k=\"1\"><b /><c>t &amp; é</c>&lt;d&gt;<!--n--></a>")
        self.assertEqual(self.scalar("SELECT CAST(CAST(N'<b/>' AS xml) AS nvarchar(20))"), "<b />")
        self.error("SELECT CAST(N'<a><b></a>' AS xml)", 9400)

    def test_float_style_3(self):
        self.assertEqual(self.scalar("SELECT CONVERT(nvarchar(40), CAST(0.1 AS float), 3)"), "0.10000000000000001")
        self.assertEqual(self.scalar("SELECT CONVERT(nvarchar(40), CAST(1 AS float), 3)"), "1.0000000000000000")
        v = self.scalar("SELECT CONVERT(nvarchar(40), CAST(123456789.123456789 AS float), 3)")
        self.assertEqual(float(v), 123456789.123456789)
        self.assertEqual(len(v.replace(".", "").lstrip("0")), 17)


class ConfigureTest(EngineTest):
    def test_sp_configure_and_reconfigure(self):
        rows = self.rows("EXEC sp_configure 'max text repl size'")
        self.assertEqual(rows, [("max text repl size (B)", -1, 2147483647, 65536, 65536)])
        items = self.ok("EXEC sp_configure 'max text repl size', -1")
        self.assertIn("Configuration option 'max text repl size (B)' changed from 65536 to -1. Run the "
                      "RECONFIGURE statement to install.", [i.message for i in items if isinstance(i, Message)])
        self.assertEqual(self.rows("EXEC sp_configure 'max text repl size'"),
                         [("max text repl size (B)", -1, 2147483647, -1, 65536)])
        self.ok("RECONFIGURE")
        self.assertEqual(self.rows("EXEC sp_configure 'max text repl size'")[0][3:], (-1, -1))
        # advanced options only after 'show advanced options'
        self.error("EXEC sp_configure 'Agent XPs'", 15123)
        self.ok("EXEC sp_configure 'show advanced options', 1; RECONFIGURE WITH OVERRIDE")
        self.assertEqual(self.rows("EXEC sp_configure 'Agent XPs'"), [("Agent XPs", 0, 1, 1, 1)])
        self.error("EXEC sp_configure 'show advanced options', 7", 15129)
        self.error("EXEC sp_configure 'o'", 15028)
        names = [r[0] for r in self.rows("EXEC sp_configure")]
        self.assertEqual(names, sorted(names, key=str.lower))
        # changing needs ALTER SETTINGS (sysadmin); looking does not
        reader = self.session("reader")
        self.ok("EXEC sp_configure 'max text repl size'", reader)
        self.error("EXEC sp_configure 'max text repl size', 0", 15247, reader)
        self.error("RECONFIGURE", 15247, reader)
