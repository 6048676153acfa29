-- mssql_cdc 0.1, frozen: the install script of the released version 0.1
-- (generated then from extension/*.sql).  Kept so that installations of
-- 0.1 can be reproduced and upgraded with ALTER EXTENSION mssql_cdc UPDATE
-- (mssql_cdc--0.1--0.2.sql).  Never edit.
\echo Use "CREATE EXTENSION mssql_cdc" to load this file. \quit

-- Everyone may see the schema (the lsn type, the status view, the function
-- signatures); what each object allows is granted per object below.
GRANT USAGE ON SCHEMA mssql_cdc TO PUBLIC;

-- ---------------------------------------------------------------------------
-- mssql_cdc.lsn: SQL Server's binary(10) log sequence number.
-- Ordered as unsigned big-endian bytes (memcmp), shown as 0x + 20 hex digits.
-- ---------------------------------------------------------------------------

CREATE TYPE mssql_cdc.lsn;

CREATE FUNCTION mssql_cdc.lsn_in(pg_catalog.cstring) RETURNS mssql_cdc.lsn
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_in' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION mssql_cdc.lsn_out(mssql_cdc.lsn) RETURNS pg_catalog.cstring
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_out' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION mssql_cdc.lsn_recv(pg_catalog.internal) RETURNS mssql_cdc.lsn
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_recv' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION mssql_cdc.lsn_send(mssql_cdc.lsn) RETURNS pg_catalog.bytea
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_send' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE TYPE mssql_cdc.lsn (
	INPUT = mssql_cdc.lsn_in,
	OUTPUT = mssql_cdc.lsn_out,
	RECEIVE = mssql_cdc.lsn_recv,
	SEND = mssql_cdc.lsn_send,
	INTERNALLENGTH = 10,
	ALIGNMENT = char,
	STORAGE = plain
);
COMMENT ON TYPE mssql_cdc.lsn IS 'SQL Server log sequence number (binary(10)), e.g. 0x0000002A000001F00003';

CREATE FUNCTION mssql_cdc.lsn_eq(mssql_cdc.lsn, mssql_cdc.lsn) RETURNS boolean
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_eq' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION mssql_cdc.lsn_ne(mssql_cdc.lsn, mssql_cdc.lsn) RETURNS boolean
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_ne' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION mssql_cdc.lsn_lt(mssql_cdc.lsn, mssql_cdc.lsn) RETURNS boolean
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_lt' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION mssql_cdc.lsn_le(mssql_cdc.lsn, mssql_cdc.lsn) RETURNS boolean
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_le' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION mssql_cdc.lsn_gt(mssql_cdc.lsn, mssql_cdc.lsn) RETURNS boolean
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_gt' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION mssql_cdc.lsn_ge(mssql_cdc.lsn, mssql_cdc.lsn) RETURNS boolean
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_ge' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION mssql_cdc.lsn_cmp(mssql_cdc.lsn, mssql_cdc.lsn) RETURNS integer
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_btree_cmp' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION mssql_cdc.lsn_hash(mssql_cdc.lsn) RETURNS integer
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_hash' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION mssql_cdc.lsn_hash_extended(mssql_cdc.lsn, bigint) RETURNS bigint
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_hash_extended' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

CREATE OPERATOR mssql_cdc.= (
	LEFTARG = mssql_cdc.lsn, RIGHTARG = mssql_cdc.lsn, PROCEDURE = mssql_cdc.lsn_eq,
	COMMUTATOR = OPERATOR(mssql_cdc.=), NEGATOR = OPERATOR(mssql_cdc.<>),
	RESTRICT = pg_catalog.eqsel, JOIN = pg_catalog.eqjoinsel, HASHES, MERGES);
CREATE OPERATOR mssql_cdc.<> (
	LEFTARG = mssql_cdc.lsn, RIGHTARG = mssql_cdc.lsn, PROCEDURE = mssql_cdc.lsn_ne,
	COMMUTATOR = OPERATOR(mssql_cdc.<>), NEGATOR = OPERATOR(mssql_cdc.=),
	RESTRICT = pg_catalog.neqsel, JOIN = pg_catalog.neqjoinsel);
CREATE OPERATOR mssql_cdc.< (
	LEFTARG = mssql_cdc.lsn, RIGHTARG = mssql_cdc.lsn, PROCEDURE = mssql_cdc.lsn_lt,
	COMMUTATOR = OPERATOR(mssql_cdc.>), NEGATOR = OPERATOR(mssql_cdc.>=),
	RESTRICT = pg_catalog.scalarltsel, JOIN = pg_catalog.scalarltjoinsel);
CREATE OPERATOR mssql_cdc.<= (
	LEFTARG = mssql_cdc.lsn, RIGHTARG = mssql_cdc.lsn, PROCEDURE = mssql_cdc.lsn_le,
	COMMUTATOR = OPERATOR(mssql_cdc.>=), NEGATOR = OPERATOR(mssql_cdc.>),
	RESTRICT = pg_catalog.scalarlesel, JOIN = pg_catalog.scalarlejoinsel);
CREATE OPERATOR mssql_cdc.> (
	LEFTARG = mssql_cdc.lsn, RIGHTARG = mssql_cdc.lsn, PROCEDURE = mssql_cdc.lsn_gt,
	COMMUTATOR = OPERATOR(mssql_cdc.<), NEGATOR = OPERATOR(mssql_cdc.<=),
	RESTRICT = pg_catalog.scalargtsel, JOIN = pg_catalog.scalargtjoinsel);
CREATE OPERATOR mssql_cdc.>= (
	LEFTARG = mssql_cdc.lsn, RIGHTARG = mssql_cdc.lsn, PROCEDURE = mssql_cdc.lsn_ge,
	COMMUTATOR = OPERATOR(mssql_cdc.<=), NEGATOR = OPERATOR(mssql_cdc.<),
	RESTRICT = pg_catalog.scalargesel, JOIN = pg_catalog.scalargejoinsel);

CREATE OPERATOR CLASS mssql_cdc.lsn_ops
	DEFAULT FOR TYPE mssql_cdc.lsn USING btree AS
		OPERATOR 1 mssql_cdc.<,
		OPERATOR 2 mssql_cdc.<=,
		OPERATOR 3 mssql_cdc.=,
		OPERATOR 4 mssql_cdc.>=,
		OPERATOR 5 mssql_cdc.>,
		FUNCTION 1 mssql_cdc.lsn_cmp(mssql_cdc.lsn, mssql_cdc.lsn);

CREATE OPERATOR CLASS mssql_cdc.lsn_hash_ops
	DEFAULT FOR TYPE mssql_cdc.lsn USING hash AS
		OPERATOR 1 mssql_cdc.=,
		FUNCTION 1 mssql_cdc.lsn_hash(mssql_cdc.lsn),
		FUNCTION 2 mssql_cdc.lsn_hash_extended(mssql_cdc.lsn, bigint);

-- min()/max(), e.g. the newest checkpoint of a server
CREATE FUNCTION mssql_cdc.lsn_larger(mssql_cdc.lsn, mssql_cdc.lsn) RETURNS mssql_cdc.lsn
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_larger' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION mssql_cdc.lsn_smaller(mssql_cdc.lsn, mssql_cdc.lsn) RETURNS mssql_cdc.lsn
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_smaller' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE AGGREGATE mssql_cdc.max(mssql_cdc.lsn) (
	SFUNC = mssql_cdc.lsn_larger, STYPE = mssql_cdc.lsn,
	COMBINEFUNC = mssql_cdc.lsn_larger, SORTOP = OPERATOR(mssql_cdc.>), PARALLEL = SAFE);
CREATE AGGREGATE mssql_cdc.min(mssql_cdc.lsn) (
	SFUNC = mssql_cdc.lsn_smaller, STYPE = mssql_cdc.lsn,
	COMBINEFUNC = mssql_cdc.lsn_smaller, SORTOP = OPERATOR(mssql_cdc.<), PARALLEL = SAFE);

CREATE FUNCTION mssql_cdc.lsn_to_bytea(mssql_cdc.lsn) RETURNS pg_catalog.bytea
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_to_bytea' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION mssql_cdc.lsn_from_bytea(pg_catalog.bytea) RETURNS mssql_cdc.lsn
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_from_bytea' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE CAST (mssql_cdc.lsn AS pg_catalog.bytea)
	WITH FUNCTION mssql_cdc.lsn_to_bytea(mssql_cdc.lsn);
CREATE CAST (pg_catalog.bytea AS mssql_cdc.lsn)
	WITH FUNCTION mssql_cdc.lsn_from_bytea(pg_catalog.bytea);

CREATE FUNCTION mssql_cdc.lsn_increment(mssql_cdc.lsn) RETURNS mssql_cdc.lsn
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_increment' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION mssql_cdc.lsn_increment(mssql_cdc.lsn) IS
	'The next LSN (like sys.fn_cdc_increment_lsn): 80-bit +1 with carry';

-- ---------------------------------------------------------------------------
-- The foreign-data wrapper: it only stores connection details (no handler).
-- Servers carry host/port/database/...; credentials live in user mappings.
-- ---------------------------------------------------------------------------

CREATE FUNCTION mssql_cdc.validator(pg_catalog.text[], pg_catalog.oid) RETURNS void
	AS 'MODULE_PATHNAME', 'mssql_cdc_validator' LANGUAGE C STRICT;

CREATE FOREIGN DATA WRAPPER mssql_cdc VALIDATOR mssql_cdc.validator;
COMMENT ON FOREIGN DATA WRAPPER mssql_cdc IS
	'Connection details of SQL Server sources captured by mssql_cdc (no foreign tables)';

-- ---------------------------------------------------------------------------
-- Catalog.  Plain tables in schema mssql_cdc.  Configuration (servers,
-- tables) is dumped by pg_dump; progress (table_state) and the error log are
-- deliberately NOT dumped: a restored checkpoint would claim that rows are in
-- the staging tables that may not be there (or are there twice), so after a
-- restore every table starts again from a snapshot (a missing table_state
-- row means "pending").  Roles other than the extension owner get no table
-- privileges; the SQL API writes these tables as the extension owner (see
-- src/api.c) and mssql_cdc.status is the read interface.
-- ---------------------------------------------------------------------------

-- One row per foreign server that has at least one captured table.
CREATE TABLE mssql_cdc.servers (
	server_name name PRIMARY KEY,			-- pg_foreign_server.srvname (names survive dump/restore, OIDs do not)
	run_as name NOT NULL,					-- role the worker runs as: whoever added the first table
	paused boolean NOT NULL DEFAULT false,
	created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	last_error text,						-- last connection-level failure (written by the worker)
	last_error_at timestamptz,
	consecutive_failures integer NOT NULL DEFAULT 0,
	-- what last_error means and what to do (src/error_condition.c); shown by
	-- mssql_cdc.status only while consecutive_failures > 0
	condition text,
	hint text,
	-- a problem that does not stop the worker (e.g. capture_job_stalled), set
	-- and cleared by the worker itself; shown while it is set
	warning text,
	warning_hint text
);

-- One row per captured SQL Server table.
CREATE TABLE mssql_cdc.tables (
	table_id serial PRIMARY KEY,
	-- RESTRICT: a server row disappears only with its last table (remove_table)
	server_name name NOT NULL REFERENCES mssql_cdc.servers (server_name)
		ON UPDATE CASCADE ON DELETE RESTRICT,
	source_schema text NOT NULL,			-- as SQL Server spells it (no brackets)
	source_table text NOT NULL,
	capture_instance text,					-- NULL: the table's current capture instance at start
	staging_schema name NOT NULL,
	staging_table name NOT NULL,
	snapshot_mode text NOT NULL DEFAULT 'initial'
		CHECK (snapshot_mode OPERATOR(pg_catalog.=) ANY (ARRAY['initial', 'never']::pg_catalog.text[])),
	-- what the worker does when CDC cleanup removed changes it still needed:
	-- 'error' parks the table for the user, 'resnapshot' copies it again
	on_retention_overrun text NOT NULL DEFAULT 'error'
		CHECK (on_retention_overrun OPERATOR(pg_catalog.=) ANY (ARRAY['error', 'resnapshot']::pg_catalog.text[])),
	created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	UNIQUE (server_name, source_schema, source_table),
	UNIQUE (staging_schema, staging_table)
);

-- Progress of one table, written by the worker in the same transaction as
-- the staging rows it describes (invariant 1).
CREATE TABLE mssql_cdc.table_state (
	table_id integer PRIMARY KEY REFERENCES mssql_cdc.tables (table_id) ON DELETE CASCADE,
	phase text NOT NULL DEFAULT 'pending'
		CHECK (phase OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'snapshotting', 'streaming', 'error']::pg_catalog.text[])),
	checkpoint_lsn mssql_cdc.lsn,			-- last fully applied commit LSN; NULL until streaming
	snapshot_lsn mssql_cdc.lsn,				-- source max LSN recorded before the snapshot read (L0)
	snapshot_last_key text[],				-- primary key of the last copied row (text forms), to resume
	snapshot_rows bigint NOT NULL DEFAULT 0,
	snapshot_total_estimate bigint,
	snapshot_started_at timestamptz,
	rows_applied bigint NOT NULL DEFAULT 0,
	transactions_applied bigint NOT NULL DEFAULT 0,
	last_commit_time timestamptz,			-- source commit time of checkpoint_lsn
	resnapshot_requested_at timestamptz,	-- set by mssql_cdc.resnapshot()
	last_error text,
	last_error_at timestamptz,
	consecutive_failures integer NOT NULL DEFAULT 0,
	-- what last_error means and what to do (src/error_condition.c); shown by
	-- mssql_cdc.status while phase = 'error' or consecutive_failures > 0
	condition text,
	hint text,
	-- a problem that does not stop the table (a retention overrun being
	-- re-snapshotted, snapshot chunks read without SNAPSHOT isolation); shown
	-- while the table is pending or snapshotting
	warning text,
	warning_hint text,
	updated_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);

-- Invariant 5: progress never goes backwards.  The only way back is an
-- explicit re-snapshot, which clears the checkpoint and sets phase 'pending'.
CREATE FUNCTION mssql_cdc.table_state_guard() RETURNS trigger
	AS 'MODULE_PATHNAME', 'mssql_cdc_table_state_guard' LANGUAGE C;
CREATE TRIGGER table_state_checkpoint_never_backwards
	BEFORE UPDATE OF checkpoint_lsn ON mssql_cdc.table_state
	FOR EACH ROW EXECUTE FUNCTION mssql_cdc.table_state_guard();

-- Error log, written by the worker in its own short transaction.  Bounded:
-- after each insert the worker keeps only the newest
-- MSSQL_CDC_ERRORS_KEPT_PER_SERVER rows of that server (include/catalog.h).
CREATE TABLE mssql_cdc.errors (
	error_id bigserial PRIMARY KEY,
	server_name name NOT NULL,
	table_id integer REFERENCES mssql_cdc.tables (table_id) ON DELETE SET NULL,
	occurred_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	sqlstate character(5),
	message text NOT NULL,
	detail text,
	hint text,
	remote_error_number integer,			-- SQL Server Msg number, when the error came from there
	condition text							-- short machine-readable class (doc/troubleshooting.md)
);
CREATE INDEX errors_server_name_error_id_idx ON mssql_cdc.errors (server_name, error_id);

REVOKE ALL ON mssql_cdc.servers, mssql_cdc.tables, mssql_cdc.table_state, mssql_cdc.errors FROM PUBLIC;

SELECT pg_catalog.pg_extension_config_dump('mssql_cdc.servers', '');
SELECT pg_catalog.pg_extension_config_dump('mssql_cdc.tables', '');
SELECT pg_catalog.pg_extension_config_dump('mssql_cdc.tables_table_id_seq', '');

-- ---------------------------------------------------------------------------
-- Schema evolution: one row per capture-instance switch of a table
-- (src/capture_instance_switch.c, doc/schema-evolution.md).  Written by the
-- worker in the same transaction as the first window read from the new
-- capture instance, together with the new staging columns and the new
-- mssql_cdc.tables.capture_instance, so a row here means the switch is
-- complete.  Like table_state it is progress, not configuration, and is not
-- dumped.  Readable by the extension owner and pg_monitor.
-- ---------------------------------------------------------------------------

CREATE TABLE mssql_cdc.capture_instance_switches (
	switch_id bigserial PRIMARY KEY,
	table_id integer NOT NULL REFERENCES mssql_cdc.tables (table_id) ON DELETE CASCADE,
	old_capture_instance text,				-- the instance read before the switch
	new_capture_instance text NOT NULL,
	-- first commit LSN read from the new instance; everything below it came
	-- from the old one.  NULL when a new snapshot adopted the instance.
	switch_lsn mssql_cdc.lsn,
	new_start_lsn mssql_cdc.lsn,			-- start_lsn of the new instance on SQL Server
	columns_added text[] NOT NULL DEFAULT '{}',			-- staging columns the switch added
	columns_not_captured text[] NOT NULL DEFAULT '{}',	-- kept in staging, NULL from the switch on
	switched_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE INDEX capture_instance_switches_table_id_idx
	ON mssql_cdc.capture_instance_switches (table_id, switch_id);

COMMENT ON TABLE mssql_cdc.capture_instance_switches IS
	'Capture-instance switches of captured tables (schema evolution): old and new instance, switch LSN, staging columns added';

REVOKE ALL ON mssql_cdc.capture_instance_switches FROM PUBLIC;
GRANT SELECT ON mssql_cdc.capture_instance_switches TO pg_monitor;

-- ---------------------------------------------------------------------------
-- Staging (changelog) tables and the type-mapping policy
-- (src/type_map.c, src/source_schema.c, src/staging.c, doc/type-mapping.md)
-- ---------------------------------------------------------------------------

-- The kind of change a staging row records.  Enum order is sort order and
-- follows SQL Server's __$operation (1 delete < 2 insert < 3 update before
-- < 4 update after), with snapshot rows first.
CREATE TYPE mssql_cdc.operation AS ENUM
	('snapshot', 'delete', 'insert', 'update_before', 'update_after');
COMMENT ON TYPE mssql_cdc.operation IS
	'Kind of change in a staging table row (_cdc_op): snapshot copy or SQL Server __$operation 1..4';

-- The PostgreSQL type a SQL Server column gets; facets as
-- INFORMATION_SCHEMA.COLUMNS reports them (max_length -1 = (max)).
CREATE FUNCTION mssql_cdc.map_type(
	sqlserver_type pg_catalog.text,
	max_length pg_catalog.int4 DEFAULT NULL,
	numeric_precision pg_catalog.int4 DEFAULT NULL,
	numeric_scale pg_catalog.int4 DEFAULT NULL,
	datetime_precision pg_catalog.int4 DEFAULT NULL)
RETURNS pg_catalog.text
	AS 'MODULE_PATHNAME', 'mssql_cdc_map_type'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION mssql_cdc.map_type(pg_catalog.text, pg_catalog.int4, pg_catalog.int4, pg_catalog.int4, pg_catalog.int4) IS
	'PostgreSQL type of a SQL Server column type, e.g. map_type(''datetime2'', datetime_precision => 7)';

-- The whole policy, one row per rule (doc/type-mapping.md shows it).
CREATE FUNCTION mssql_cdc.type_mappings()
RETURNS TABLE(sqlserver_type pg_catalog.text, postgres_type pg_catalog.text,
			  select_expression pg_catalog.text, notes pg_catalog.text)
	AS 'MODULE_PATHNAME', 'mssql_cdc_type_mappings'
	LANGUAGE C IMMUTABLE PARALLEL SAFE ROWS 40;
COMMENT ON FUNCTION mssql_cdc.type_mappings() IS
	'The SQL Server to PostgreSQL type-mapping policy; select_expression is how the column is read on SQL Server ([c] = the column)';

GRANT EXECUTE ON FUNCTION mssql_cdc.map_type(pg_catalog.text, pg_catalog.int4, pg_catalog.int4, pg_catalog.int4, pg_catalog.int4) TO PUBLIC;
GRANT EXECUTE ON FUNCTION mssql_cdc.type_mappings() TO PUBLIC;

-- Dry run of add_table: connects as the caller's user mapping and shows
-- every source column, the staging column and type it would get (NULL:
-- not staged, e.g. computed or not captured) and how it is read.
CREATE FUNCTION mssql_cdc.describe_source(
	server name,
	source_table pg_catalog.text,
	capture_instance pg_catalog.text DEFAULT NULL)
RETURNS TABLE(column_name pg_catalog.text, staging_column pg_catalog.text,
			  sqlserver_type pg_catalog.text, postgres_type pg_catalog.text,
			  nullable pg_catalog.bool, key_ordinal pg_catalog.int4,
			  captured pg_catalog.bool, select_expression pg_catalog.text)
	AS 'MODULE_PATHNAME', 'mssql_cdc_describe_source'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION mssql_cdc.describe_source(name, pg_catalog.text, pg_catalog.text) IS
	'Show how a SQL Server table (e.g. ''dbo.orders'') would be staged: columns, types, key, capture';

-- The exact statements add_table would run to create the staging table.
CREATE FUNCTION mssql_cdc.staging_ddl(
	server name,
	source_table pg_catalog.text,
	staging_table pg_catalog.text DEFAULT NULL,
	capture_instance pg_catalog.text DEFAULT NULL)
RETURNS pg_catalog.text
	AS 'MODULE_PATHNAME', 'mssql_cdc_staging_ddl'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION mssql_cdc.staging_ddl(name, pg_catalog.text, pg_catalog.text, pg_catalog.text) IS
	'The CREATE TABLE (and COMMENT) that add_table would run for a SQL Server table';

-- They log in with stored credentials: like check_server, granted by an
-- administrator (the caller also needs USAGE on the server and a user mapping).
REVOKE ALL ON FUNCTION mssql_cdc.describe_source(name, pg_catalog.text, pg_catalog.text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mssql_cdc.staging_ddl(name, pg_catalog.text, pg_catalog.text, pg_catalog.text) FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- SQL API.  C functions (src/api.c); none is SECURITY DEFINER.  EXECUTE is
-- revoked from PUBLIC: an administrator grants it to the roles that may
-- manage capture.  The functions check server USAGE, user mappings and the
-- server's run_as role themselves and then write the catalog as the
-- extension owner.
-- ---------------------------------------------------------------------------

CREATE FUNCTION mssql_cdc.add_table(
	server name,
	source_table text,
	staging_table text DEFAULT NULL,
	snapshot_mode text DEFAULT 'initial',
	capture_instance text DEFAULT NULL,
	on_retention_overrun text DEFAULT 'error')
RETURNS integer
AS 'MODULE_PATHNAME', 'mssql_cdc_add_table'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION mssql_cdc.add_table(name, text, text, text, text, text) IS
	'Start capturing a SQL Server table (e.g. ''dbo.orders'') of a mssql_cdc server; returns its table_id';

CREATE FUNCTION mssql_cdc.remove_table(server name, source_table text)
RETURNS void
AS 'MODULE_PATHNAME', 'mssql_cdc_remove_table'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION mssql_cdc.remove_table(name, text) IS
	'Stop capturing a SQL Server table; its staging table is kept';

CREATE FUNCTION mssql_cdc.pause(server name)
RETURNS void
AS 'MODULE_PATHNAME', 'mssql_cdc_pause'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION mssql_cdc.pause(name) IS
	'Stop the worker of a server until mssql_cdc.resume(); progress is kept';

CREATE FUNCTION mssql_cdc.resume(server name)
RETURNS void
AS 'MODULE_PATHNAME', 'mssql_cdc_resume'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION mssql_cdc.resume(name) IS
	'Restart capture of a paused server from its checkpoints';

CREATE FUNCTION mssql_cdc.resnapshot(server name, source_table text)
RETURNS void
AS 'MODULE_PATHNAME', 'mssql_cdc_resnapshot'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION mssql_cdc.resnapshot(name, text) IS
	'Discard a table''s progress and copy it again from a new snapshot';

REVOKE ALL ON FUNCTION mssql_cdc.add_table(name, text, text, text, text, text) FROM PUBLIC;
CREATE FUNCTION mssql_cdc.set_table_option(server name, source_table text, option text, value text)
RETURNS void
AS 'MODULE_PATHNAME', 'mssql_cdc_set_table_option'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION mssql_cdc.set_table_option(name, text, text, text) IS
	'Change a setting of a captured table (on_retention_overrun: error | resnapshot)';

REVOKE ALL ON FUNCTION mssql_cdc.remove_table(name, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mssql_cdc.set_table_option(name, text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mssql_cdc.pause(name) FROM PUBLIC;
REVOKE ALL ON FUNCTION mssql_cdc.resume(name) FROM PUBLIC;
REVOKE ALL ON FUNCTION mssql_cdc.resnapshot(name, text) FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- Remote diagnostics (src/remote_check.c, doc/connecting.md)
-- ---------------------------------------------------------------------------

-- Connects to the SQL Server of a foreign server as the caller's user
-- mapping and reports one row per prerequisite of capturing from it.  A
-- failed login is an error; everything after it is a row.
CREATE FUNCTION mssql_cdc.check_server(server pg_catalog.text)
RETURNS TABLE(check_name pg_catalog.text, ok pg_catalog.bool, detail pg_catalog.text)
	AS 'MODULE_PATHNAME', 'mssql_cdc_check_server'
	LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION mssql_cdc.check_server(pg_catalog.text) IS
	'Log in to a SQL Server source and check its CDC prerequisites (connect, database, cdc_enabled, snapshot_isolation, max_lsn, capture_instances)';

-- Opens network connections with stored credentials: superusers decide who
-- may (they also need USAGE on the server and a user mapping).
REVOKE ALL ON FUNCTION mssql_cdc.check_server(pg_catalog.text) FROM PUBLIC;
-- ---------------------------------------------------------------------------
-- Runtime state from shared memory (src/worker_state.c).
-- Live facts only the running server knows; the catalog tables hold what
-- survives a restart.  The status view joins worker_state() by server name.
-- ---------------------------------------------------------------------------

CREATE FUNCTION mssql_cdc.worker_state(
	OUT server_name name,
	OUT pid integer,
	OUT phase text,
	OUT source_max_lsn mssql_cdc.lsn,
	OUT source_max_lsn_time timestamptz,
	OUT last_poll_at timestamptz,
	OUT consecutive_failures integer,
	OUT next_attempt_at timestamptz,
	OUT lag_base_lsn mssql_cdc.lsn,
	OUT lag_transactions bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'mssql_cdc_worker_state'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION mssql_cdc.worker_state() IS
'One row per source that has a worker slot: its process (NULL pid when none runs), phase '
'(starting, connecting, snapshotting, streaming, idle, stopping, backoff, stopped), the '
'source''s max LSN and its time as last seen, the last poll, the retry schedule, and how many '
'source transactions committed after lag_base_lsn (the streaming checkpoint) are not applied yet';

CREATE FUNCTION mssql_cdc.launcher_pid()
RETURNS integer
AS 'MODULE_PATHNAME', 'mssql_cdc_launcher_pid'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION mssql_cdc.launcher_pid() IS
'Process ID of the mssql_cdc launcher, NULL while none runs';

-- Hand edits of the source catalog wake the launcher at commit, like the
-- API functions do (an aborted edit wakes nothing).  Only the columns that
-- decide which sources run are watched, so the workers' own bookkeeping
-- (last_error, consecutive_failures) does not trigger a reconciliation.
CREATE FUNCTION mssql_cdc.catalog_changed_trigger()
RETURNS trigger
AS 'MODULE_PATHNAME', 'mssql_cdc_catalog_changed_trigger'
LANGUAGE C;

CREATE TRIGGER servers_wake_launcher
	AFTER INSERT OR DELETE OR UPDATE OF server_name, run_as, paused
	ON mssql_cdc.servers
	FOR EACH STATEMENT EXECUTE FUNCTION mssql_cdc.catalog_changed_trigger();
CREATE TRIGGER servers_truncate_wake_launcher
	AFTER TRUNCATE ON mssql_cdc.servers
	FOR EACH STATEMENT EXECUTE FUNCTION mssql_cdc.catalog_changed_trigger();
CREATE TRIGGER tables_wake_launcher
	AFTER INSERT OR DELETE OR UPDATE OF server_name
	ON mssql_cdc.tables
	FOR EACH STATEMENT EXECUTE FUNCTION mssql_cdc.catalog_changed_trigger();
CREATE TRIGGER tables_truncate_wake_launcher
	AFTER TRUNCATE ON mssql_cdc.tables
	FOR EACH STATEMENT EXECUTE FUNCTION mssql_cdc.catalog_changed_trigger();

REVOKE ALL ON FUNCTION mssql_cdc.catalog_changed_trigger() FROM PUBLIC;

-- The launcher serves exactly one database.  Installed anywhere else the
-- extension accepts configuration but never captures anything, which is
-- worth saying at once rather than leaving users to wonder.
DO $$
BEGIN
	IF pg_catalog.current_database()::pg_catalog.text
		OPERATOR(pg_catalog.<>) pg_catalog.current_setting('mssql_cdc.database') THEN
		RAISE WARNING 'mssql_cdc is being installed in database "%", but its launcher serves database "%"',
			pg_catalog.current_database(), pg_catalog.current_setting('mssql_cdc.database')
			USING HINT = 'Nothing will be captured from this database. Drop the extension here, '
				'or set mssql_cdc.database to this database and restart the server.';
	END IF;
END
$$;

-- ---------------------------------------------------------------------------
-- mssql_cdc.status: one row per captured table.  Catalog columns are
-- durable; source_max_lsn, lag_seconds and worker_pid come from the live
-- mssql_cdc.worker_state() (NULL while no worker has reported).
-- Granted to pg_monitor, not PUBLIC: errors can name hosts and databases.
-- ---------------------------------------------------------------------------

CREATE VIEW mssql_cdc.status AS
SELECT
	t.server_name AS server,
	CASE WHEN t.source_schema OPERATOR(pg_catalog.~) '^[A-Za-z_][A-Za-z0-9_@#$]*$'
		THEN t.source_schema
		ELSE '[' OPERATOR(pg_catalog.||) pg_catalog.replace(t.source_schema, ']', ']]') OPERATOR(pg_catalog.||) ']'
	END OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||)
	CASE WHEN t.source_table OPERATOR(pg_catalog.~) '^[A-Za-z_][A-Za-z0-9_@#$]*$'
		THEN t.source_table
		ELSE '[' OPERATOR(pg_catalog.||) pg_catalog.replace(t.source_table, ']', ']]') OPERATOR(pg_catalog.||) ']'
	END AS source_table,
	pg_catalog.quote_ident(t.staging_schema) OPERATOR(pg_catalog.||) '.'
		OPERATOR(pg_catalog.||) pg_catalog.quote_ident(t.staging_table) AS staging_table,
	CASE
		WHEN sv.paused THEN 'paused'
		WHEN ts.phase OPERATOR(pg_catalog.=) 'error'
			OR ts.consecutive_failures OPERATOR(pg_catalog.>) 0
			OR sv.consecutive_failures OPERATOR(pg_catalog.>) 0
			OR w.consecutive_failures OPERATOR(pg_catalog.>) 0 THEN 'error'
		ELSE coalesce(ts.phase, 'pending')
	END AS state,
	ts.checkpoint_lsn,
	w.source_max_lsn,
	CASE
		WHEN ts.checkpoint_lsn IS NULL OR w.source_max_lsn IS NULL THEN NULL
		WHEN ts.checkpoint_lsn OPERATOR(mssql_cdc.>=) w.source_max_lsn THEN 0::double precision
		ELSE pg_catalog.date_part('epoch', w.source_max_lsn_time OPERATOR(pg_catalog.-) ts.last_commit_time)
	END AS lag_seconds,
	CASE
		WHEN ts.checkpoint_lsn IS NULL OR w.source_max_lsn IS NULL THEN NULL
		WHEN ts.checkpoint_lsn OPERATOR(mssql_cdc.>=) w.source_max_lsn THEN 0::bigint
		-- counted by the worker for the checkpoint the tables share
		WHEN ts.checkpoint_lsn OPERATOR(mssql_cdc.=) w.lag_base_lsn THEN w.lag_transactions
		ELSE NULL
	END AS lag_transactions,
	coalesce(ts.rows_applied, 0) AS rows_applied,
	coalesce(ts.transactions_applied, 0) AS transactions_applied,
	coalesce(ts.snapshot_rows, 0) AS snapshot_rows,
	ts.snapshot_total_estimate,
	CASE
		WHEN ts.phase OPERATOR(pg_catalog.=) 'streaming' AND ts.snapshot_started_at IS NOT NULL
			THEN 100::numeric(4,1)
		WHEN ts.phase OPERATOR(pg_catalog.=) 'snapshotting'
			AND ts.snapshot_total_estimate OPERATOR(pg_catalog.>) 0
			-- the estimate comes from SQL Server statistics and can be exceeded
			THEN least(100::numeric,
				100::numeric OPERATOR(pg_catalog.*) ts.snapshot_rows
				OPERATOR(pg_catalog./) ts.snapshot_total_estimate)::numeric(4,1)
		ELSE NULL
	END AS snapshot_percent,
	-- average since the snapshot (or its resumption's original start) began
	CASE
		WHEN ts.phase OPERATOR(pg_catalog.=) 'snapshotting' AND ts.snapshot_started_at IS NOT NULL
			THEN round((ts.snapshot_rows::numeric OPERATOR(pg_catalog./)
				greatest(pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-) ts.snapshot_started_at)::numeric,
						 0.001))::numeric, 1)
		ELSE NULL
	END AS snapshot_rows_per_second,
	CASE WHEN sv.last_error_at IS NOT NULL
			AND (ts.last_error_at IS NULL OR sv.last_error_at OPERATOR(pg_catalog.>) ts.last_error_at)
		THEN sv.last_error ELSE ts.last_error
	END AS last_error,
	greatest(ts.last_error_at, sv.last_error_at) AS last_error_at,
	-- The problem that is active now (doc/troubleshooting.md), chosen once
	-- below in active.problem: condition and hint come from the same place.
	CASE active.problem
		WHEN 'table' THEN ts.condition
		WHEN 'server' THEN sv.condition
		WHEN 'server_warning' THEN sv.warning
		WHEN 'table_warning' THEN ts.warning
	END AS condition,
	CASE active.problem
		WHEN 'table' THEN ts.hint
		WHEN 'server' THEN sv.hint
		WHEN 'server_warning' THEN sv.warning_hint
		WHEN 'table_warning' THEN ts.warning_hint
	END AS hint,
	w.pid AS worker_pid
FROM mssql_cdc.tables t
JOIN mssql_cdc.servers sv ON sv.server_name OPERATOR(pg_catalog.=) t.server_name
LEFT JOIN mssql_cdc.table_state ts ON ts.table_id OPERATOR(pg_catalog.=) t.table_id
LEFT JOIN mssql_cdc.worker_state() w ON w.server_name OPERATOR(pg_catalog.=) t.server_name
-- the failure being retried or that parked the table (the newer one, as for
-- last_error), else a warning; none while paused or once the next unit
-- succeeded
CROSS JOIN LATERAL (SELECT
	CASE
		WHEN sv.paused THEN NULL
		WHEN ts.phase OPERATOR(pg_catalog.=) 'error' THEN 'table'
		WHEN sv.consecutive_failures OPERATOR(pg_catalog.>) 0
			AND (ts.consecutive_failures IS NULL OR ts.consecutive_failures OPERATOR(pg_catalog.=) 0
				OR ts.last_error_at IS NULL OR sv.last_error_at OPERATOR(pg_catalog.>) ts.last_error_at)
			THEN 'server'
		WHEN ts.consecutive_failures OPERATOR(pg_catalog.>) 0 THEN 'table'
		WHEN sv.warning IS NOT NULL THEN 'server_warning'
		WHEN ts.phase OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'snapshotting']::pg_catalog.text[])
			THEN 'table_warning'
	END AS problem) active;

COMMENT ON VIEW mssql_cdc.status IS
	'One row per captured table: state, checkpoint, lag, counters, last error, active condition with a hint, and worker pid';

REVOKE ALL ON mssql_cdc.status FROM PUBLIC;
GRANT SELECT ON mssql_cdc.status TO pg_monitor;
