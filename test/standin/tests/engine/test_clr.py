"""hierarchyid / geometry / geography: serializations and the method calls the worker selects."""

from .support import EngineTest
from standin.engine import clr


class ClrTypesTest(EngineTest):
    def test_hierarchyid_known_encodings(self):
        for text, hexs in [("/", ""), ("/1/", "58"), ("/0/", "48"), ("/1/2/", "5b40"), ("/-1/", "3f80")]:
            self.assertEqual(clr.hierarchyid_parse(text).hex(), hexs)
            self.assertEqual(clr.hierarchyid_to_string(bytes.fromhex(hexs)), text)
        for text in ["/1.2/3/", "/100/2000/70000/", "/-5000/5/", "/5199/5200/"]:
            self.assertEqual(clr.hierarchyid_to_string(clr.hierarchyid_parse(text)), text)
        # byte order is depth-first order
        ordered = ["/", "/1/", "/1/1/", "/1/2/", "/2/", "/10/"]
        self.assertEqual(sorted(ordered, key=clr.hierarchyid_parse), ordered)

    def test_geography_point_known_bytes(self):
        b = clr.wkt_to_spatial("POINT (-122.3 47.6)", 4326, True)
        self.assertEqual(b.hex().upper(), "E6100000010CCDCCCCCCCCCC47403333333333935EC0")
        self.assertEqual(clr.spatial_to_wkt(b, True), "POINT (-122.3 47.6)")

    def test_wkt_round_trips(self):
        for w in ["LINESTRING (1 2, 3 4.5, 5 6)", "POLYGON ((0 0, 10 0, 10 10, 0 0), (1 1, 2 1, 2 2, 1 1))",
                  "MULTIPOINT ((1 2), (3 4))", "MULTIPOLYGON (((0 0, 1 0, 1 1, 0 0)), ((5 5, 6 5, 6 6, 5 5)))",
                  "GEOMETRYCOLLECTION (POINT (1 2), LINESTRING (0 0, 1 1))"]:
            self.assertEqual(clr.spatial_to_wkt(clr.wkt_to_spatial(w, 0, False), False), w)

    def test_sql_surface_and_cdc(self):
        self.ok("CREATE TABLE c (id int PRIMARY KEY, h hierarchyid, g geometry, gg geography)")
        self.ok("EXEC sys.sp_cdc_enable_db")
        self.ok("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'c', @role_name = NULL")
        self.capture()
        self.ok("INSERT c VALUES (1, '/1/2/', geometry::STGeomFromText('LINESTRING (0 0, 1 1)', 0), "
                "geography::Point(47.6, -122.3, 4326)), (2, hierarchyid::Parse('/1/'), 'POINT (1 2)', NULL)")
        self.assertEqual(self.rows("SELECT id, [h].ToString(), [g].STAsText(), [gg].STAsText(), h.GetLevel() "
                                   "FROM c ORDER BY h"),
                         [(2, "/1/", "POINT (1 2)", None, 1), (1, "/1/2/", "LINESTRING (0 0, 1 1)",
                                                                "POINT (-122.3 47.6)", 2)])
        self.capture()
        mn, mx = self.lsn_window("dbo_c")
        rows = self.rows("SELECT __$operation, [h].ToString(), [g].STAsText() FROM cdc.[fn_cdc_get_all_changes_dbo_c]"
                         "(0x%s, 0x%s, N'all update old') ORDER BY __$start_lsn, __$seqval, __$operation"
                         % (mn.hex(), mx.hex()))
        self.assertEqual(rows, [(2, "/1/2/", "LINESTRING (0 0, 1 1)"), (2, "/1/", "POINT (1 2)")])
        # qualified by an alias (the direct change query joins another table): t.col.Method()
        rows = self.rows("SELECT x.__$operation, x.[h].ToString(), x.[g].STAsText(), x.gg.STSrid() "
                         "FROM cdc.[dbo_c_CT] AS x ORDER BY x.__$start_lsn, x.__$command_id")
        self.assertEqual(rows, [(2, "/1/2/", "LINESTRING (0 0, 1 1)", 4326), (2, "/1/", "POINT (1 2)", None)])
        self.error("SELECT CAST('1/2' AS hierarchyid)", 6522)
