-- mssql_cdc 0.1 -> 0.2 (ALTER EXTENSION mssql_cdc UPDATE TO '0.2').
--
-- Must leave a 0.1 installation exactly as a fresh CREATE EXTENSION of 0.2
-- would make it (t/012_upgrade.pl compares the two catalogs), with every
-- staging table, checkpoint and row in place.  Each change of the 0.2 cycle
-- adds its own section below, in the same commit as the extension/*.sql
-- change it mirrors.
\echo Use "ALTER EXTENSION mssql_cdc UPDATE TO '0.2'" to load this file. \quit

-- ---------------------------------------------------------------------------
-- Operator controls (issue 18): per-table pause/resume, start_at,
-- reset_table, snapshot_filter, alter_table; partitioned staging tables with
-- retention; geometry/geography as PostGIS types.
-- ---------------------------------------------------------------------------
-- (defaults set after the columns are filled, so that the upgraded table has
-- no "missing values" that a fresh one does not: t/012_upgrade.pl)
ALTER TABLE mssql_cdc.tables
	ADD COLUMN paused boolean,
	ADD COLUMN snapshot_filter text,
	ADD COLUMN settings_version bigint,
	ADD COLUMN partition_interval interval,
	ADD COLUMN retention interval,
	ADD COLUMN spatial_postgis boolean;
-- 0.1 staged geometry/geography as text
UPDATE mssql_cdc.tables SET paused = false, settings_version = 1, spatial_postgis = false;
ALTER TABLE mssql_cdc.tables
	ALTER COLUMN paused SET DEFAULT false,
	ALTER COLUMN paused SET NOT NULL,
	ALTER COLUMN settings_version SET DEFAULT 1,
	ALTER COLUMN settings_version SET NOT NULL,
	ALTER COLUMN spatial_postgis SET DEFAULT false,
	ALTER COLUMN spatial_postgis SET NOT NULL;
ALTER TABLE mssql_cdc.table_state ADD COLUMN reset_at timestamptz;

-- column selection and optional before-images (issue 18 points 1 and 2);
-- 0.1 staged every captured column and update_before rows
ALTER TABLE mssql_cdc.tables
	ADD COLUMN include_columns text[],
	ADD COLUMN exclude_columns text[],
	ADD COLUMN update_before boolean;
UPDATE mssql_cdc.tables SET update_before = true;
ALTER TABLE mssql_cdc.tables
	ALTER COLUMN update_before SET DEFAULT true,
	ALTER COLUMN update_before SET NOT NULL,
	ADD CHECK (include_columns IS NULL OR exclude_columns IS NULL);

-- describe_source shows the column selection of a captured table: a new
-- result column, so a new function.  EXECUTE granted on the old one is
-- carried over.
SELECT pg_catalog.set_config('mssql_cdc_upgrade.describe_source_grantees',
	coalesce(pg_catalog.string_agg(pg_catalog.quote_ident(r.rolname), ','), ''), true)
  FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a, pg_catalog.pg_roles r
 WHERE p.oid = 'mssql_cdc.describe_source(name, pg_catalog.text, pg_catalog.text)'::pg_catalog.regprocedure
   AND a.privilege_type = 'EXECUTE' AND a.grantee = r.oid AND a.grantee <> p.proowner;
DROP FUNCTION mssql_cdc.describe_source(name, pg_catalog.text, pg_catalog.text);
CREATE FUNCTION mssql_cdc.describe_source(
	server name,
	source_table pg_catalog.text,
	capture_instance pg_catalog.text DEFAULT NULL)
RETURNS TABLE(column_name pg_catalog.text, staging_column pg_catalog.text,
			  sqlserver_type pg_catalog.text, postgres_type pg_catalog.text,
			  nullable pg_catalog.bool, key_ordinal pg_catalog.int4,
			  captured pg_catalog.bool, select_expression pg_catalog.text,
			  excluded pg_catalog.bool)
	AS 'MODULE_PATHNAME', 'mssql_cdc_describe_source'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION mssql_cdc.describe_source(name, pg_catalog.text, pg_catalog.text) IS
	'Show how a SQL Server table (e.g. ''dbo.orders'') would be staged: columns, types, key, capture';
REVOKE ALL ON FUNCTION mssql_cdc.describe_source(name, pg_catalog.text, pg_catalog.text) FROM PUBLIC;
DO $upgrade$
DECLARE
	grantee text;
BEGIN
	FOREACH grantee IN ARRAY pg_catalog.string_to_array(
		pg_catalog.current_setting('mssql_cdc_upgrade.describe_source_grantees'), ',')
	LOOP
		EXECUTE 'GRANT EXECUTE ON FUNCTION mssql_cdc.describe_source(name, pg_catalog.text, pg_catalog.text) TO '
			OPERATOR(pg_catalog.||) grantee;
	END LOOP;
END
$upgrade$;

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

-- add_table gets new arguments: a new signature.  EXECUTE granted on the
-- old one is carried over to the new one.
SELECT pg_catalog.set_config('mssql_cdc_upgrade.add_table_grantees',
	coalesce(pg_catalog.string_agg(pg_catalog.quote_ident(r.rolname), ','), ''), true)
  FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a, pg_catalog.pg_roles r
 WHERE p.oid = 'mssql_cdc.add_table(name, text, text, text, text, text)'::pg_catalog.regprocedure
   AND a.privilege_type = 'EXECUTE' AND a.grantee = r.oid AND a.grantee <> p.proowner;
DROP FUNCTION mssql_cdc.add_table(name, text, text, text, text, text);
CREATE FUNCTION mssql_cdc.add_table(
	server name,
	source_table text,
	staging_table text DEFAULT NULL,
	snapshot_mode text DEFAULT 'initial',
	capture_instance text DEFAULT NULL,
	on_retention_overrun text DEFAULT 'error',
	start_at text DEFAULT NULL,
	snapshot_filter text DEFAULT NULL,
	partition_interval interval DEFAULT NULL,
	retention interval DEFAULT NULL,
	include_columns text[] DEFAULT NULL,
	exclude_columns text[] DEFAULT NULL,
	update_before boolean DEFAULT true,
	mirror boolean DEFAULT false,
	mirror_table text DEFAULT NULL,
	changelog boolean DEFAULT true)
RETURNS integer
AS 'MODULE_PATHNAME', 'mssql_cdc_add_table'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION mssql_cdc.add_table(name, text, text, text, text, text, text, text, interval, interval, text[], text[], boolean, boolean, text, boolean) IS
	'Start capturing a SQL Server table (e.g. ''dbo.orders'') of a mssql_cdc server; returns its table_id';
REVOKE ALL ON FUNCTION mssql_cdc.add_table(name, text, text, text, text, text, text, text, interval, interval, text[], text[], boolean, boolean, text, boolean) FROM PUBLIC;
DO $upgrade$
DECLARE
	grantee text;
BEGIN
	FOREACH grantee IN ARRAY pg_catalog.string_to_array(
		pg_catalog.current_setting('mssql_cdc_upgrade.add_table_grantees'), ',')
	LOOP
		EXECUTE 'GRANT EXECUTE ON FUNCTION mssql_cdc.add_table(name, text, text, text, text, text, text, text, interval, interval, text[], text[], boolean, boolean, text, boolean) TO '
			OPERATOR(pg_catalog.||) grantee;
	END LOOP;
END
$upgrade$;

CREATE FUNCTION mssql_cdc.alter_table(
	server name,
	source_table text,
	on_retention_overrun text DEFAULT NULL,
	snapshot_filter text DEFAULT NULL,
	partition_interval interval DEFAULT NULL,
	retention interval DEFAULT NULL,
	include_columns text[] DEFAULT NULL,
	exclude_columns text[] DEFAULT NULL,
	update_before boolean DEFAULT NULL,
	mirror boolean DEFAULT NULL,
	mirror_table text DEFAULT NULL,
	changelog boolean DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'mssql_cdc_alter_table'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION mssql_cdc.alter_table(name, text, text, text, interval, interval, text[], text[], boolean, boolean, text, boolean) IS
	'Change settings of a captured table (NULL keeps a setting); effective at the next window';

CREATE FUNCTION mssql_cdc.pause(server name, source_table text)
RETURNS void
AS 'MODULE_PATHNAME', 'mssql_cdc_pause_table'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION mssql_cdc.pause(name, text) IS
	'Stop capturing one table until mssql_cdc.resume(server, table); the server''s other tables go on';

CREATE FUNCTION mssql_cdc.resume(server name, source_table text)
RETURNS void
AS 'MODULE_PATHNAME', 'mssql_cdc_resume_table'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION mssql_cdc.resume(name, text) IS
	'Restart capture of a paused table from its checkpoint';

CREATE FUNCTION mssql_cdc.reset_table(server name, source_table text, start_at text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'mssql_cdc_reset_table'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION mssql_cdc.reset_table(name, text, text) IS
	'Stream a table from an LSN or commit time CDC still keeps; removes its staging rows after that point; returns how many';

REVOKE ALL ON FUNCTION mssql_cdc.alter_table(name, text, text, text, interval, interval, text[], text[], boolean, boolean, text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION mssql_cdc.pause(name, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mssql_cdc.resume(name, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mssql_cdc.reset_table(name, text, text) FROM PUBLIC;

-- TLS (issue 17): worker_state() gets encrypted and certificate_validated
-- (how the worker's open connection to SQL Server is protected), and
-- mssql_cdc.status shows them as its last two columns.  A function's OUT
-- columns cannot be changed in place, and the view depends on it.  Round
-- trips (issue 16): it also gets requests_sent, windows, snapshot_chunks and
-- polls_ahead at the end (the view does not show them).
-- ---------------------------------------------------------------------------
DROP VIEW mssql_cdc.status;
DROP FUNCTION mssql_cdc.worker_state();

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
	OUT lag_transactions bigint,
	OUT encrypted boolean,
	OUT certificate_validated boolean,
	OUT requests_sent bigint,
	OUT windows bigint,
	OUT snapshot_chunks bigint,
	OUT polls_ahead bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'mssql_cdc_worker_state'
LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION mssql_cdc.worker_state() IS
'One row per source that has a worker slot: its process (NULL pid when none runs), phase '
'(starting, connecting, snapshotting, streaming, idle, stopping, backoff, stopped), the '
'source''s max LSN and its time as last seen, the last poll, the retry schedule, and how many '
'source transactions committed after lag_base_lsn (the streaming checkpoint) are not applied yet, '
'and whether the worker''s open connection is encrypted and SQL Server''s certificate was '
'validated (NULL while it has none), and the round trips of its current or last run: requests '
'sent to SQL Server, windows (polls), snapshot chunks, and the polls whose request was sent '
'ahead, during the snapshot chunk before them';

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
		WHEN sv.paused OR t.paused THEN 'paused'
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
	-- the failure that condition and hint describe while one is current
	-- (active.problem below), else the newer of the two
	CASE
		WHEN active.problem OPERATOR(pg_catalog.=) 'table' THEN ts.last_error
		WHEN active.problem OPERATOR(pg_catalog.=) 'server' THEN sv.last_error
		WHEN sv.last_error_at IS NOT NULL
			AND (ts.last_error_at IS NULL OR sv.last_error_at OPERATOR(pg_catalog.>) ts.last_error_at)
		THEN sv.last_error ELSE ts.last_error
	END AS last_error,
	CASE active.problem
		WHEN 'table' THEN ts.last_error_at
		WHEN 'server' THEN sv.last_error_at
		ELSE greatest(ts.last_error_at, sv.last_error_at)
	END AS last_error_at,
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
	w.pid AS worker_pid,
	w.encrypted,
	w.certificate_validated,
	-- behind the most advanced checkpoint of the source's streaming tables:
	-- it reads windows of its own until it meets them, and until then a
	-- source transaction that also changed a table ahead is applied there
	-- first (doc/streaming.md, "Tables that catch up")
	coalesce(behind.lsn IS NOT NULL, false) AS catching_up,
	behind.lsn AS catching_up_to
FROM mssql_cdc.tables t
JOIN mssql_cdc.servers sv ON sv.server_name OPERATOR(pg_catalog.=) t.server_name
LEFT JOIN mssql_cdc.table_state ts ON ts.table_id OPERATOR(pg_catalog.=) t.table_id
LEFT JOIN mssql_cdc.worker_state() w ON w.server_name OPERATOR(pg_catalog.=) t.server_name
-- the lead checkpoint of each source: of its streaming tables not paused
LEFT JOIN (SELECT lt.server_name, mssql_cdc.max(ls.checkpoint_lsn) AS lsn
	FROM mssql_cdc.tables lt
	JOIN mssql_cdc.table_state ls ON ls.table_id OPERATOR(pg_catalog.=) lt.table_id
	WHERE NOT lt.paused AND ls.phase OPERATOR(pg_catalog.=) 'streaming'
	GROUP BY lt.server_name) src_lead ON src_lead.server_name OPERATOR(pg_catalog.=) t.server_name
CROSS JOIN LATERAL (SELECT
	CASE WHEN NOT t.paused AND ts.phase OPERATOR(pg_catalog.=) 'streaming'
			AND ts.checkpoint_lsn OPERATOR(mssql_cdc.<) src_lead.lsn
		THEN src_lead.lsn
	END AS lsn) behind
-- the failure being retried or that parked the table (the newer one, as for
-- last_error), else a warning; none while paused or once the next unit
-- succeeded
CROSS JOIN LATERAL (SELECT
	CASE
		WHEN sv.paused OR t.paused THEN NULL
		WHEN ts.phase OPERATOR(pg_catalog.=) 'error' THEN 'table'
		WHEN sv.consecutive_failures OPERATOR(pg_catalog.>) 0
			AND (ts.consecutive_failures IS NULL OR ts.consecutive_failures OPERATOR(pg_catalog.=) 0
				OR ts.last_error_at IS NULL OR sv.last_error_at OPERATOR(pg_catalog.>) ts.last_error_at)
			THEN 'server'
		WHEN ts.consecutive_failures OPERATOR(pg_catalog.>) 0 THEN 'table'
		WHEN sv.warning IS NOT NULL THEN 'server_warning'
		WHEN ts.phase OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'snapshotting']::pg_catalog.text[])
			THEN 'table_warning'
		-- changes lost for good (worker_retention_gap.c): shown while it streams
		WHEN ts.warning OPERATOR(pg_catalog.=) 'retention_gap' THEN 'table_warning'
	END AS problem) active;

COMMENT ON VIEW mssql_cdc.status IS
	'One row per captured table: state, checkpoint, lag, counters, last error, active condition with a hint, worker pid, '
	'whether the worker''s connection to SQL Server is encrypted with a validated certificate, '
	'and whether the table is catching up to the checkpoint of the source''s other tables';

REVOKE ALL ON mssql_cdc.status FROM PUBLIC;
GRANT SELECT ON mssql_cdc.status TO pg_monitor;

-- check_server(): also checks every object the worker reads (issue 12,
-- permissions), as its comment says; and a NULL server is an error
-- (22004) like in every other API function, not an empty result.
ALTER FUNCTION mssql_cdc.check_server(pg_catalog.text) CALLED ON NULL INPUT;
COMMENT ON FUNCTION mssql_cdc.check_server(pg_catalog.text) IS
	'Log in to a SQL Server source and check its CDC prerequisites (connect, database, cdc_enabled, snapshot_isolation, max_lsn, capture_instances) and every object the worker reads, naming the GRANT each missing permission needs';

-- Source identity and history fingerprint (issue 12, point 3: a source that
-- went back in time; extension/20_catalog.sql, mssql_cdc.servers).
ALTER TABLE mssql_cdc.servers
	ADD COLUMN source_database_guid uuid,
	ADD COLUMN source_recovery_fork_guid uuid,
	ADD COLUMN fingerprint_window_end mssql_cdc.lsn,
	ADD COLUMN fingerprint_lsn mssql_cdc.lsn,
	ADD COLUMN fingerprint_tran_id bytea,
	ADD COLUMN fingerprint_end_time timestamp;

-- ---------------------------------------------------------------------------
-- Execution order inside a source transaction (issue 12, point 1;
-- doc/streaming.md "Order"): every staging table gets _cdc_command_id
-- (SQL Server's __$command_id; 0 for the rows 0.1 staged) as its last column
-- and the primary key (_cdc_lsn, _cdc_command_id, _cdc_seqval, _cdc_op),
-- the layout a 0.2 add_table creates.  Staging tables are not members of the
-- extension; the C helper finds them through mssql_cdc.tables
-- (src/staging_upgrade.c) and is gone again after the update.
-- ---------------------------------------------------------------------------
CREATE FUNCTION mssql_cdc.upgrade_staging_0_2() RETURNS pg_catalog.int8
	AS 'MODULE_PATHNAME', 'mssql_cdc_upgrade_staging_0_2'
	LANGUAGE C VOLATILE;
SELECT mssql_cdc.upgrade_staging_0_2();
DROP FUNCTION mssql_cdc.upgrade_staging_0_2();

-- mirror tables (issue 15, doc/mirror.md): 0.1 kept a changelog only
ALTER TABLE mssql_cdc.tables
	ADD COLUMN mirror_schema name,
	ADD COLUMN mirror_table name,
	ADD COLUMN changelog boolean;
UPDATE mssql_cdc.tables SET changelog = true;
ALTER TABLE mssql_cdc.tables
	ALTER COLUMN changelog SET DEFAULT true,
	ALTER COLUMN changelog SET NOT NULL,
	ADD CHECK ((mirror_schema IS NULL) = (mirror_table IS NULL)),
	ADD CHECK (changelog OR mirror_table IS NOT NULL),
	ADD UNIQUE (mirror_schema, mirror_table);

-- window size learned from query timeouts (issue 14, point 1;
-- doc/streaming.md "Large transactions")
ALTER TABLE mssql_cdc.servers
	ADD COLUMN window_transactions integer CHECK (window_transactions > 0);

-- ---------------------------------------------------------------------------
-- verify(): compare source tables with their mirrors (src/verify*.c,
-- doc/mirror.md "verify()")
-- ---------------------------------------------------------------------------

-- One row per run and table, committed after every chunk: the progress of a
-- running verify() is visible here from any session.
CREATE TABLE mssql_cdc.verify_runs (
	run_id bigint NOT NULL,
	table_id integer NOT NULL,
	server_name name NOT NULL,
	source_schema text NOT NULL,
	source_table text NOT NULL,
	mirror_schema name NOT NULL,
	mirror_table name NOT NULL,
	state text NOT NULL DEFAULT 'running'
		CHECK (state IN ('running', 'rechecking', 'done', 'failed')),
	pid integer NOT NULL DEFAULT pg_catalog.pg_backend_pid(),
	started_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	finished_at timestamptz,
	elapsed interval NOT NULL DEFAULT '0',
	chunks bigint NOT NULL DEFAULT 0,
	source_rows bigint NOT NULL DEFAULT 0,	-- rows read from SQL Server
	mirror_rows bigint NOT NULL DEFAULT 0,	-- rows read from the mirror
	candidates bigint NOT NULL DEFAULT 0,	-- keys that differed at first sight
	rechecked bigint NOT NULL DEFAULT 0,	-- of those, equal once re-checked
	missing bigint NOT NULL DEFAULT 0,		-- confirmed: at the source, not in the mirror
	extra bigint NOT NULL DEFAULT 0,		-- confirmed: in the mirror, not at the source
	different bigint NOT NULL DEFAULT 0,	-- confirmed: other values
	unconfirmed bigint NOT NULL DEFAULT 0,	-- could not be settled before recheck_timeout
	message text,
	PRIMARY KEY (run_id, table_id)
);

-- The keys of every confirmed (or unconfirmed) mismatch of a run.
CREATE TABLE mssql_cdc.verify_mismatches (
	run_id bigint NOT NULL,
	table_id integer NOT NULL,
	kind text NOT NULL CHECK (kind IN ('missing', 'extra', 'different', 'unconfirmed')),
	key jsonb NOT NULL,
	columns text[],							-- kind 'different': the columns that differ
	mirror_lsn mssql_cdc.lsn,				-- the mirror's checkpoint_lsn it was confirmed at
	found_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	FOREIGN KEY (run_id, table_id) REFERENCES mssql_cdc.verify_runs ON DELETE CASCADE
);
CREATE INDEX ON mssql_cdc.verify_mismatches (run_id, table_id);

CREATE SEQUENCE mssql_cdc.verify_run_id_seq;

REVOKE ALL ON mssql_cdc.verify_runs, mssql_cdc.verify_mismatches FROM PUBLIC;
REVOKE ALL ON SEQUENCE mssql_cdc.verify_run_id_seq FROM PUBLIC;
GRANT SELECT ON mssql_cdc.verify_runs, mssql_cdc.verify_mismatches TO pg_monitor;

-- The outputs are INOUT so that CALL can leave them out; their input is ignored.
CREATE PROCEDURE mssql_cdc.verify(
	server name,
	source_table text DEFAULT NULL,
	chunk_rows integer DEFAULT NULL,
	recheck_timeout interval DEFAULT '5 min',
	INOUT run_id bigint DEFAULT NULL,
	INOUT tables integer DEFAULT NULL,
	INOUT source_rows bigint DEFAULT NULL,
	INOUT mirror_rows bigint DEFAULT NULL,
	INOUT missing bigint DEFAULT NULL,
	INOUT extra bigint DEFAULT NULL,
	INOUT different bigint DEFAULT NULL,
	INOUT unconfirmed bigint DEFAULT NULL,
	INOUT elapsed interval DEFAULT NULL)
	AS 'MODULE_PATHNAME', 'mssql_cdc_verify'
	LANGUAGE C;
COMMENT ON PROCEDURE mssql_cdc.verify(name, text, integer, interval, bigint, integer, bigint, bigint, bigint, bigint, bigint, bigint, interval) IS
	'Compare captured SQL Server tables with their mirror tables chunk by chunk; results in mssql_cdc.verify_runs and mssql_cdc.verify_mismatches';

-- Opens network connections with stored credentials: superusers decide who
-- may (they also need USAGE on the server, a user mapping and SELECT on the mirror).
REVOKE ALL ON PROCEDURE mssql_cdc.verify(name, text, integer, interval, bigint, integer, bigint, bigint, bigint, bigint, bigint, bigint, interval) FROM PUBLIC;
