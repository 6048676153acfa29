
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

REVOKE ALL ON FUNCTION mssql_cdc.add_table(name, text, text, text, text, text, text, text, interval, interval, text[], text[], boolean, boolean, text, boolean) FROM PUBLIC;
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

-- Operator controls (0.2): per-table settings, pause/resume of one table,
-- a move to a point CDC still keeps.
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
