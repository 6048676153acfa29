-- mssql_cdc 0.1 -> 0.2 (ALTER EXTENSION mssql_cdc UPDATE TO '0.2').
--
-- Must leave a 0.1 installation exactly as a fresh CREATE EXTENSION of 0.2
-- would make it (t/012_upgrade.pl compares the two catalogs), with every
-- staging table, checkpoint and row in place.  Each change of the 0.2 cycle
-- adds its own section below, in the same commit as the extension/*.sql
-- change it mirrors.
\echo Use "ALTER EXTENSION mssql_cdc UPDATE TO '0.2'" to load this file. \quit

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
