-- Test helpers shared by the API tests that follow (03_api_args,
-- 04_privileges, 05_status); all test files run in one database, in order.
--
-- mssql_cdc.add_table() checks the source on SQL Server before it records
-- anything, and pg_regress has no SQL Server.  Tests that only need a table
-- to *be* captured (to exercise remove_table, pause, resume, resnapshot,
-- the run_as rules or the status view) therefore write the catalog rows the
-- way a successful add_table would, as a superuser, with this function.
-- add_table's success path itself is covered by t/030_streaming.pl.
CREATE SCHEMA regress_helpers;

-- Registers a captured table as add_table would after a successful check:
--  * the server row, if absent, runs as run_as and is created paused by
--    default, so the launcher of this test instance never starts a worker
--    that would try to reach the fake server and write errors into rows the
--    tests read;
--  * snapshot_mode 'initial' starts 'pending'; 'never' starts 'streaming'
--    from a fixed position standing in for the source's max LSN.
-- Returns the table_id, as add_table does.
CREATE FUNCTION regress_helpers.register_table(
	server name, src_schema text, src_table text, run_as name,
	staging_schema name, staging_table name, mode text DEFAULT 'initial',
	capture_instance text DEFAULT NULL, paused boolean DEFAULT true)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
	new_id integer;
BEGIN
	INSERT INTO mssql_cdc.servers (server_name, run_as, paused)
	VALUES (server, run_as, paused)
	ON CONFLICT (server_name) DO NOTHING;

	INSERT INTO mssql_cdc.tables (server_name, source_schema, source_table, capture_instance,
								  staging_schema, staging_table, snapshot_mode)
	VALUES (server, src_schema, src_table, capture_instance, staging_schema, staging_table, mode)
	RETURNING table_id INTO new_id;

	IF mode = 'never' THEN
		INSERT INTO mssql_cdc.table_state (table_id, phase, checkpoint_lsn)
		VALUES (new_id, 'streaming', '0x00000010000000100001');
	ELSE
		INSERT INTO mssql_cdc.table_state (table_id, phase) VALUES (new_id, 'pending');
	END IF;
	RETURN new_id;
END
$$;
