"""Logins, database users, roles and the permission checks CDC depends on.

Principals are declared through EngineConfig.logins (name -> password; `sa`
is sysadmin, every other configured login gets a database user of the same
name in every configured database, with no permissions) and through T-SQL:
CREATE LOGIN / CREATE USER / CREATE ROLE / ALTER ROLE r ADD MEMBER u /
ALTER SERVER ROLE sysadmin ADD MEMBER l / GRANT SELECT ON obj|SCHEMA::s TO p.

Tests take SELECT away from a login with the engine control `deny_select`
(like DENY SELECT ON SCHEMA::dbo and SCHEMA::cdc TO the login's user): it
overrides every grant and role membership except sysadmin, as a DENY does.

What needs what (test/standin/ENGINE.md "Permissions" cites the pages):
the change tables cdc.<ci>_CT and cdc.lsn_time_mapping, cdc.captured_columns,
cdc.change_tables, cdc.index_columns and cdc.ddl_history are ordinary tables
of schema cdc: SELECT on the object or on SCHEMA::cdc (db_owner and
db_datareader have it).  The query functions follow the CDC security model:
SELECT on the source table plus membership in the gating role if there is
one.  sys.dm_cdc_log_scan_sessions needs VIEW DATABASE STATE.  Catalog
views and OBJECT_ID() show only objects the caller has some permission on
(metadata visibility).
"""

from __future__ import annotations

from ..results import SqlError


class Login:
    def __init__(self, name, password, sysadmin=False, default_language=None):
        self.name = name
        self.password = password
        self.sysadmin = sysadmin
        self.default_language = default_language      # CREATE LOGIN … DEFAULT_LANGUAGE


class Security:
    def __init__(self, engine):
        self.engine = engine
        self.logins = {}
        self.denied_select = set()      # lower-case login names (control deny_select)
        # server permissions: (login lower | "public", permission) -> "GRANT" | "DENY";
        # SQL Server grants VIEW ANY DATABASE to public by default
        self.server_permissions = {("public", "VIEW ANY DATABASE"): "GRANT"}

    def add_login(self, name, password, sysadmin=False, default_language=None):
        if name.lower() in self.logins:
            raise SqlError(15025, 16, 1, "The server principal '%s' already exists." % name)
        self.logins[name.lower()] = Login(name, password, sysadmin, default_language)

    def authenticate(self, user, password):
        login = self.logins.get((user or "").lower())
        if login is None or login.password != password:
            raise SqlError(18456, 14, 1, "Login failed for user '%s'." % user)
        return login

    # ---- server level
    def set_server_permission(self, principal, permission, action):
        key = (principal.lower(), permission)
        if action == "REVOKE":
            self.server_permissions.pop(key, None)
        else:
            self.server_permissions[key] = action

    def has_server_permission(self, login, permission):
        """sysadmin, or a GRANT to the login or to public with no DENY to either."""
        if login.sysadmin:
            return True
        mine = self.server_permissions.get((login.name.lower(), permission))
        public = self.server_permissions.get(("public", permission))
        if "DENY" in (mine, public):
            return False
        return "GRANT" in (mine, public)

    def sees_recovery_status(self, session, db):
        """Who sees a database's row of sys.database_recovery_status (page
        "sys.database_recovery_status"): master and tempdb for everybody;
        otherwise the database owner, or VIEW ANY DATABASE / ALTER ANY
        DATABASE (the stand-in's owner of every database is sa)."""
        login = session.login
        if db.name.lower() in ("master", "tempdb") or login.sysadmin or login.name.lower() == "sa":
            return True
        return (self.has_server_permission(login, "VIEW ANY DATABASE")
                or self.has_server_permission(login, "ALTER ANY DATABASE"))

    # ---- database level
    def db_user(self, session, db):
        if session.login.sysadmin:
            return db.users.get("dbo")
        return db.user_for_login(session.login.name)

    def user_name(self, session, db):
        u = self.db_user(session, db)
        return u.name if u else "guest"

    def can_open(self, login, db):
        return login.sysadmin or db.name.lower() == "master" or db.user_for_login(login.name) is not None

    def _roles_of(self, user, db):
        seen = set()
        todo = list(user.roles) + ["public"]
        while todo:
            r = todo.pop()
            if r in seen:
                continue
            seen.add(r)
            ru = db.users.get(r)
            if ru is not None:
                todo.extend(ru.roles)
        return seen

    def is_dbo(self, session, db):
        if session.login.sysadmin:
            return True
        u = db.user_for_login(session.login.name)
        return u is not None and "db_owner" in self._roles_of(u, db)

    def is_member(self, session, db, role):
        if session.login.sysadmin and role.lower() in ("db_owner", "public"):
            return True
        if self.is_dbo(session, db) and db.users.get(role.lower()) is not None:
            # db_owner members count as members of every role (IS_ROLEMEMBER semantics)
            return True
        u = db.user_for_login(session.login.name)
        return u is not None and role.lower() in self._roles_of(u, db)

    def _grants(self, session, db):
        u = db.user_for_login(session.login.name)
        if u is None:
            return set(), set()
        roles = self._roles_of(u, db)
        grants = set(u.grants)
        for r in roles:
            ru = db.users.get(r)
            if ru is not None:
                grants |= ru.grants
        return grants, roles

    def is_denied_select(self, session):
        return not session.login.sysadmin and session.login.name.lower() in self.denied_select

    def can_select(self, session, db, table):
        if self.is_denied_select(session):
            return False
        if self.is_dbo(session, db):
            return True
        grants, roles = self._grants(session, db)
        if "db_datareader" in roles:
            return True
        return ("SELECT", table.object_id) in grants or ("SELECT_SCHEMA", table.schema.schema_id) in grants

    def can_select_name(self, session, db, schema, name):
        """SELECT on a catalog table that the engine builds on demand
        (cdc.change_tables, cdc.captured_columns, cdc.index_columns,
        cdc.ddl_history): granted by name or through its schema."""
        if self.is_denied_select(session):
            return False
        if self.is_dbo(session, db):
            return True
        grants, roles = self._grants(session, db)
        if "db_datareader" in roles:
            return True
        s = db.schemas.get(schema.lower())
        return (("SELECT_NAME", "%s.%s" % (schema.lower(), name.lower())) in grants
                or (s is not None and ("SELECT_SCHEMA", s.schema_id) in grants))

    def can_see(self, session, db, table):
        """Metadata visibility: the caller sees an object in sys.tables,
        sys.columns, sys.objects, INFORMATION_SCHEMA and OBJECT_ID() only if
        it owns it or holds some permission on it ("Metadata Visibility
        Configuration").  A source table of a capture instance the caller
        may read through the gating role is visible through its SELECT."""
        if self.is_dbo(session, db):
            return True
        grants, roles = self._grants(session, db)
        if "db_datawriter" in roles:
            return True
        if self.is_denied_select(session):
            return False
        if "db_datareader" in roles:
            return True
        return (("SELECT", table.object_id) in grants
                or ("SELECT_SCHEMA", table.schema.schema_id) in grants)

    def can_see_function(self, session, db, ci):
        """The query function cdc.fn_cdc_get_all_changes_<ci>: SELECT on it
        goes to the gating role (sp_cdc_enable_table); schema cdc grants
        cover it too."""
        if self.can_read_ci(session, db, ci):
            return True
        return self.can_select_name(session, db, "cdc", "fn_cdc_get_all_changes_" + ci.name)

    def can_write(self, session, db, table):
        if self.is_dbo(session, db):
            return True
        grants, roles = self._grants(session, db)
        return "db_datawriter" in roles

    def can_view_state(self, session, db):
        if self.is_dbo(session, db):
            return True
        grants, _ = self._grants(session, db)
        return ("VIEW DATABASE STATE", None) in grants

    def can_read_ci(self, session, db, ci):
        """sysadmin/db_owner, or SELECT on all captured columns of the source
        table plus membership in the gating role if one is set."""
        if self.is_dbo(session, db):
            return True
        if not self.can_select(session, db, ci.source):
            return False
        if ci.role_name is not None:
            return self.is_member(session, db, ci.role_name)
        # @role_name = NULL: Microsoft's security model needs nothing more,
        # Debezium's documentation says only sysadmin/db_owner may read then
        # (UNCONFIRMED: engine option null_role_access "select" | "dbo_only",
        # where an explicit grant on the function or schema cdc still works)
        if self.engine.options.get("null_role_access", "select") == "dbo_only":
            return self.can_select_name(session, db, "cdc", "fn_cdc_get_all_changes_" + ci.name)
        return True

    def select_denied(self, db, table, what="SELECT"):
        return self.denied(db, table.schema.name, table.name, what)

    @staticmethod
    def denied(db, schema, name, what="SELECT"):
        return SqlError(229, 14, 5, "The %s permission was denied on the object '%s', database '%s', "
                        "schema '%s'." % (what, name, db.name, schema))
