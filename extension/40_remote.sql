
-- ---------------------------------------------------------------------------
-- Remote diagnostics (src/remote_check.c, doc/connecting.md)
-- ---------------------------------------------------------------------------

-- Connects to the SQL Server of a foreign server as the caller's user
-- mapping and reports one row per prerequisite of capturing from it.  A
-- failed login is an error; everything after it is a row.
CREATE FUNCTION mssql_cdc.check_server(server pg_catalog.text)
RETURNS TABLE(check_name pg_catalog.text, ok pg_catalog.bool, detail pg_catalog.text)
	AS 'MODULE_PATHNAME', 'mssql_cdc_check_server'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION mssql_cdc.check_server(pg_catalog.text) IS
	'Log in to a SQL Server source and check its CDC prerequisites (connect, database, cdc_enabled, snapshot_isolation, max_lsn, capture_instances) and every object the worker reads, naming the GRANT each missing permission needs';

-- Opens network connections with stored credentials: superusers decide who
-- may (they also need USAGE on the server and a user mapping).
REVOKE ALL ON FUNCTION mssql_cdc.check_server(pg_catalog.text) FROM PUBLIC;
