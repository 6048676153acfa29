
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
