-- mssql_cdc 0.1 -> 0.2 (ALTER EXTENSION mssql_cdc UPDATE TO '0.2').
--
-- Must leave a 0.1 installation exactly as a fresh CREATE EXTENSION of 0.2
-- would make it (t/012_upgrade.pl compares the two catalogs), with every
-- staging table, checkpoint and row in place.  Each change of the 0.2 cycle
-- adds its own section below, in the same commit as the extension/*.sql
-- change it mirrors.
\echo Use "ALTER EXTENSION mssql_cdc UPDATE TO '0.2'" to load this file. \quit

-- check_server(): also checks every object the worker reads (issue 12,
-- permissions); the function is unchanged, its comment says so.
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
