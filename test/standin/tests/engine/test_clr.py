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


class SpatialWkbTest(EngineTest):
    """STAsBinary() (OGC WKB, 2D, x = longitude for geography) and the STSrid
    property: MicrosoftDocs/sql-docs docs/t-sql/spatial-geometry/stasbinary-geometry-data-type.md,
    docs/t-sql/spatial-geography/stasbinary-geography-data-type.md, stsrid-geometry-data-type.md."""

    def test_wkb_of_each_shape(self):
        import struct
        pt = clr.wkt_to_spatial("POINT (1.5 -2)", 0, False)
        self.assertEqual(clr.spatial_to_wkb(pt, False), struct.pack("<BIdd", 1, 1, 1.5, -2.0))
        geo = clr.wkt_to_spatial("POINT (-122.3 47.6)", 4326, True)
        self.assertEqual(clr.spatial_to_wkb(geo, True), struct.pack("<BIdd", 1, 1, -122.3, 47.6))
        line = clr.wkt_to_spatial("LINESTRING (0 0, 1 1, 2 0)", 0, False)
        self.assertEqual(clr.spatial_to_wkb(line, False),
                         struct.pack("<BII", 1, 2, 3) + struct.pack("<dddddd", 0, 0, 1, 1, 2, 0))
        poly = clr.wkt_to_spatial("POLYGON ((0 0, 4 0, 4 4, 0 0), (1 1, 2 1, 2 2, 1 1))", 0, False)
        ring = lambda *c: struct.pack("<I", len(c) // 2) + struct.pack("<%dd" % len(c), *c)
        self.assertEqual(clr.spatial_to_wkb(poly, False),
                         struct.pack("<BII", 1, 3, 2) + ring(0, 0, 4, 0, 4, 4, 0, 0) + ring(1, 1, 2, 1, 2, 2, 1, 1))
        multi = clr.wkt_to_spatial("MULTIPOINT ((1 2), (3 4))", 0, False)
        self.assertEqual(clr.spatial_to_wkb(multi, False),
                         struct.pack("<BII", 1, 4, 2) + struct.pack("<BIdd", 1, 1, 1, 2) + struct.pack("<BIdd", 1, 1, 3, 4))
        coll = clr.wkt_to_spatial("GEOMETRYCOLLECTION (POINT (1 2), LINESTRING (0 0, 1 1))", 0, False)
        self.assertEqual(clr.spatial_to_wkb(coll, False),
                         struct.pack("<BII", 1, 7, 2) + struct.pack("<BIdd", 1, 1, 1, 2)
                         + struct.pack("<BII", 1, 2, 2) + struct.pack("<dddd", 0, 0, 1, 1))

    def test_sql_surface(self):
        self.ok("CREATE TABLE s (id int PRIMARY KEY, g geometry, gg geography)")
        self.ok("INSERT s VALUES (1, geometry::STGeomFromText('POINT (1 2)', 3857), "
                "geography::STGeomFromText('POINT (-122.3 47.6)', 4326)), (2, NULL, NULL)")
        self.assertEqual(self.rows("SELECT id, [g].STSrid, gg.STSrid, CONVERT(varchar(max), g.STAsBinary(), 2) "
                                   "FROM s ORDER BY id"),
                         [(1, 3857, 4326, "0101000000000000000000F03F0000000000000040"), (2, None, None, None)])
        self.error("SELECT g.NoSuchProperty FROM s", 4104)

    def test_big_endian_switch(self):
        import struct
        pt = clr.wkt_to_spatial("POINT (1.5 -2)", 0, False)
        self.assertEqual(clr.spatial_to_wkb(pt, False, True), struct.pack(">BIdd", 0, 1, 1.5, -2.0))
        self.ok("CREATE TABLE b (id int PRIMARY KEY, g geometry)")
        self.ok("INSERT b VALUES (1, geometry::STGeomFromText('POINT (1 2)', 0))")
        self.engine.control("wkb_byte_order", {"order": "big"})
        self.assertEqual(self.rows("SELECT CONVERT(varchar(max), g.STAsBinary(), 2) FROM b"),
                         [("00000000013FF00000000000004000000000000000",)])
        self.assertEqual(self.rows("SELECT CAST(3857 AS binary(1)), CAST(1 AS binary(2))"),
                         [(b"\x11", b"\x00\x01")])
