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
