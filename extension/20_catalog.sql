
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
	warning_hint text,
	-- The source's identity and a fingerprint of its history, to notice a
	-- source that went back in time (restore, failover that lost the tail,
	-- the server repointed at another copy; src/worker_timeline.c).
	-- sys.database_recovery_status of the source database at first contact
	-- (NULL while the login may not read it):
	source_database_guid uuid,
	source_recovery_fork_guid uuid,
	-- the last real transaction of cdc.lsn_time_mapping at or below
	-- fingerprint_window_end (the lead checkpoint when it was taken); its
	-- LSN NULL when there was none
	fingerprint_window_end mssql_cdc.lsn,
	fingerprint_lsn mssql_cdc.lsn,
	fingerprint_tran_id bytea,
	fingerprint_end_time timestamp,		-- tran_end_time, the source's local time
	-- most source transactions per window since a window's change query
	-- timed out (halved at each timeout, doubled back after many windows
	-- that ran at it; src/worker_window.c, doc/streaming.md "Large
	-- transactions"); NULL: only mssql_cdc.batch_max_transactions
	window_transactions integer CHECK (window_transactions > 0)
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
	UNIQUE (staging_schema, staging_table),
	-- operator controls (0.2, doc/sql-api.md): pause(server, table) / resume
	paused boolean NOT NULL DEFAULT false,
	-- T-SQL predicate that limits the initial copy (validated by SQL Server)
	snapshot_filter text,
	-- counted up by every settings change (alter_table, pause ...): a window
	-- or snapshot chunk applies only with the settings it was planned with
	settings_version bigint NOT NULL DEFAULT 1,
	-- partitioned staging table (staging_partitions.h): a new partition
	-- every partition_interval; closed partitions whose newest change is
	-- older than retention are dropped
	partition_interval interval,
	retention interval,
	-- geometry/geography staged as PostGIS types (PostGIS was installed when
	-- the table was added); kept, so a later CREATE EXTENSION postgis does
	-- not change an existing staging table's columns
	spatial_postgis boolean NOT NULL DEFAULT false,
	-- column selection (src/column_selection.c): at most one of the two;
	-- neither: every captured column.  Source column names as SQL Server
	-- spells them; key columns are never left out.
	include_columns text[],
	exclude_columns text[],
	-- stage update_before rows (the before-image of an update)
	update_before boolean NOT NULL DEFAULT true,
	CHECK (include_columns IS NULL OR exclude_columns IS NULL),
	-- mirror table (doc/mirror.md): the source table's current rows, changed
	-- in the window's transaction; NULL: none.  changelog false: a mirror
	-- only, no staging rows are written (mirror-only mode)
	mirror_schema name,
	mirror_table name,
	changelog boolean NOT NULL DEFAULT true,
	CHECK ((mirror_schema IS NULL) = (mirror_table IS NULL)),
	CHECK (changelog OR mirror_table IS NOT NULL),
	UNIQUE (mirror_schema, mirror_table)
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
	updated_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	-- set by mssql_cdc.reset_table(): the one other way a checkpoint may
	-- move back (the guard below allows it when this changes with it)
	reset_at timestamptz
);

-- The partitions of partitioned staging tables, oldest first.  Written by
-- add_table (the first one) and by the worker when it closes a partition,
-- opens the next and drops old ones, in the transactions of that DDL.
-- Dumped like the staging tables it describes.
CREATE TABLE mssql_cdc.staging_partitions (
	table_id integer NOT NULL REFERENCES mssql_cdc.tables (table_id) ON DELETE CASCADE,
	partition_number integer NOT NULL,		-- 1, 2, ... in LSN order
	partition_name name NOT NULL,			-- in the staging table's schema
	from_lsn mssql_cdc.lsn,					-- lower bound (inclusive); NULL: MINVALUE
	to_lsn mssql_cdc.lsn,					-- upper bound (exclusive); NULL: open (MAXVALUE)
	opened_at timestamptz NOT NULL,
	closed_at timestamptz,
	newest_commit_time timestamptz,			-- source commit time of its newest change, when closed
	PRIMARY KEY (table_id, partition_number),
	UNIQUE (table_id, partition_name)
);
REVOKE ALL ON mssql_cdc.staging_partitions FROM PUBLIC;
GRANT SELECT ON mssql_cdc.staging_partitions TO pg_monitor;
SELECT pg_catalog.pg_extension_config_dump('mssql_cdc.staging_partitions', '');

-- Invariant 5: progress never goes backwards.  The only ways back are an
-- explicit re-snapshot, which clears the checkpoint and sets phase 'pending',
-- and mssql_cdc.reset_table(), which sets reset_at in the same update (and
-- removes the staging rows after the new position in the same transaction).
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
