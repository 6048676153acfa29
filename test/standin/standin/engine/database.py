"""Databases, schemas and principals (the engine's catalog state)."""

from __future__ import annotations

import uuid

from ..results import SqlError
from .lsn import LsnCounter


class Schema:
    __slots__ = ("schema_id", "name")

    def __init__(self, schema_id, name):
        self.schema_id = schema_id
        self.name = name


class User:
    """A database principal: a user mapped to a login, or a role."""

    def __init__(self, name, login=None, is_role=False, principal_id=5):
        self.name = name
        self.login = login
        self.is_role = is_role
        self.principal_id = principal_id
        self.roles = set()              # lower-case role names
        self.grants = set()             # ('SELECT', object_id) / ('SELECT_SCHEMA', schema_id) / ('VIEW DATABASE STATE', None)


class Database:
    def __init__(self, engine, name, database_id):
        self.engine = engine
        self.name = name
        self.database_id = database_id
        self.schemas = {}               # lower name -> Schema
        self.tables = {}                # (schema lower, name lower) -> Table
        self.by_id = {}                 # object_id -> Table
        self.allow_snapshot = False
        self.is_cdc_enabled = False
        self.rowversion = 2000          # per-database rowversion counter
        self.lsn = LsnCounter()
        self.users = {}                 # lower name -> User (users and roles)
        self.cdc = None                 # CdcState once sp_cdc_enable_db ran
        # identity (sys.database_recovery_status); a restore starts a new recovery fork
        self.database_guid = uuid.uuid4()
        self.family_guid = uuid.uuid4()
        self.recovery_fork_guid = uuid.uuid4()
        self.first_recovery_fork_guid = self.recovery_fork_guid
        self.fork_point_lsn = None      # int LSN of the current fork point
        # committed row changes of user tables, for the `restore` control:
        # [(commit_lsn, [(table, key, before, after, schema_version)])]
        self.journal = []
        self.next_principal = 5
        for sid, sname in ((1, "dbo"), (2, "guest"), (3, "INFORMATION_SCHEMA"), (4, "sys")):
            self.schemas[sname.lower()] = Schema(sid, sname)
        self.next_schema_id = 5
        for role in ("public", "db_owner", "db_datareader", "db_datawriter"):
            self.add_principal(role, is_role=True)
        self.add_principal("dbo", login="sa")

    def add_principal(self, name, login=None, is_role=False):
        pid = {"public": 0, "dbo": 1, "db_owner": 16384, "db_datareader": 16390,
               "db_datawriter": 16391}.get(name, None)
        if pid is None:
            pid = self.next_principal
            self.next_principal += 1
        u = User(name, login, is_role, pid)
        self.users[name.lower()] = u
        return u

    def user_for_login(self, login_name):
        low = login_name.lower()
        for u in self.users.values():
            if not u.is_role and u.login is not None and u.login.lower() == low:
                return u
        return None

    def add_schema(self, name):
        low = name.lower()
        if low in self.schemas:
            raise SqlError(2714, 16, 6, "There is already an object named '%s' in the database." % name)
        s = Schema(self.next_schema_id, name)
        self.next_schema_id += 1
        self.schemas[low] = s
        return s

    def find_table(self, schema_name, name):
        return self.tables.get((schema_name.lower(), name.lower()))

    def next_rowversion(self):
        self.rowversion += 1
        return self.rowversion.to_bytes(8, "big")
