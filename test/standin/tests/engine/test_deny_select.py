"""The deny_select control: a login loses SELECT on everything (like a DENY
that overrides its grants and role memberships) and gets it back."""

from __future__ import annotations

from .support import EngineTest

ZERO = bytes(10)


class DenySelectTest(EngineTest):
    def setUp(self):
        super().setUp()
        self.ok("CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, amount int)")
        self.ok("EXEC sys.sp_cdc_enable_db")
        self.ok("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', "
                "@role_name = NULL")
        self.ok("CREATE LOGIN r2 WITH PASSWORD = 'pw'; CREATE USER r2 FOR LOGIN r2; "
                "GRANT SELECT ON dbo.orders TO r2; GRANT SELECT ON SCHEMA::cdc TO r2")
        self.ok("INSERT orders (id, amount) VALUES (1, 10)")
        self.capture()
        self.r2 = self.engine.login("r2", "pw", "cdcdb")

    def changes_query(self):
        mn = self.scalar("SELECT sys.fn_cdc_get_min_lsn(N'dbo_orders')")
        mx = self.scalar("SELECT sys.fn_cdc_get_max_lsn()")
        return "SELECT id FROM cdc.fn_cdc_get_all_changes_dbo_orders(0x%s, 0x%s, N'all')" % (mn.hex(), mx.hex())

    def test_deny_and_allow_again(self):
        q = self.changes_query()
        self.assertEqual(self.rows(q, self.r2), [(1,)])
        self.assertEqual(self.engine.control("deny_select", {"login": "r2"}), {"denied_select": ["r2"]})
        self.error("SELECT * FROM dbo.orders", 229, self.r2)
        self.error(q, 229, self.r2)
        self.assertEqual(self.scalar("SELECT sys.fn_cdc_get_min_lsn(N'dbo_orders')", self.r2), ZERO)
        self.assertEqual(self.rows("EXEC sys.sp_cdc_help_change_data_capture", self.r2), [])
        # sysadmin is never denied
        self.assertEqual(self.rows(q), [(1,)])
        self.assertEqual(self.engine.control("deny_select", {"login": "r2", "on": "false"}), {"denied_select": []})
        self.assertEqual(self.rows(q, self.r2), [(1,)])
        self.assertEqual(self.rows("SELECT id FROM dbo.orders", self.r2), [(1,)])

    def test_unknown_login(self):
        with self.assertRaises(ValueError):
            self.engine.control("deny_select", {"login": "nosuch"})
