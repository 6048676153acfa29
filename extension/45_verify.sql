
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
