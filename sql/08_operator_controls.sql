-- Operator controls (issue 18): alter_table, pause/resume of one table,
-- reset_table, add_table's start_at and snapshot_filter.  Every bad
-- argument is a clear error that changes nothing; what needs SQL Server
-- (the point of start_at, the parse of a filter) is asked only after every
-- local check passed, and is covered against the stand-in by
-- t/035_operator_controls.pl.
\set SHOW_CONTEXT never

CREATE SERVER pos FOREIGN DATA WRAPPER mssql_cdc OPTIONS (host '127.0.0.1', port '1', database 'pos');
CREATE USER MAPPING FOR CURRENT_USER SERVER pos OPTIONS (username 'cdc', password 'x');
SELECT regress_helpers.register_table('pos', 'dbo', 'sales', current_user,
                                      'public', 'pos_dbo_sales') AS sales_id \gset
SELECT regress_helpers.register_table('pos', 'dbo', 'tills', current_user,
                                      'public', 'pos_dbo_tills', 'never') AS tills_id \gset

-- what the failed calls below must leave alone
CREATE VIEW settings AS
SELECT source_table, on_retention_overrun, paused, snapshot_filter, settings_version
  FROM mssql_cdc.tables WHERE server_name = 'pos' ORDER BY table_id;
SELECT * FROM settings;

-- ---- alter_table ---------------------------------------------------------
SELECT mssql_cdc.alter_table(NULL, 'dbo.sales', on_retention_overrun => 'error');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.alter_table('pos', NULL, on_retention_overrun => 'error');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.alter_table('pos', 'dbo.sales');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.alter_table('nosuch', 'dbo.sales', on_retention_overrun => 'error');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.alter_table('pos', 'dbo.nosuch', on_retention_overrun => 'error');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', on_retention_overrun => 'skip');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.alter_table('pos', 'dbo.tills', on_retention_overrun => 'resnapshot');
\echo :LAST_ERROR_SQLSTATE
-- a filter is one condition: nothing that could end it or start another statement
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', snapshot_filter => 'region = 1; DROP TABLE dbo.sales');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', snapshot_filter => 'region = 1) OR (1 = 1');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', snapshot_filter => 'region = 1 -- and more');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', snapshot_filter => 'region = 1 /* x */');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', snapshot_filter => '(region = 1');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', snapshot_filter => 'name = N''it''''s');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', snapshot_filter => '[region = 1');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', snapshot_filter => '   ');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', snapshot_filter => repeat('x', 4001));
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.alter_table('pos', 'dbo.tills', snapshot_filter => 'region = 1');
\echo :LAST_ERROR_SQLSTATE
-- a well-formed filter goes on to SQL Server to be parsed (port 1: refused
-- at once); a bad policy in the same call is found first, without a login
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', on_retention_overrun => 'skip',
                             snapshot_filter => '[region] = N''EU;--'' AND (a > 1)');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', on_retention_overrun => 'resnapshot',
                             snapshot_filter => '[region] = N''EU;--'' AND (a > 1)');
\set VERBOSITY default
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM settings;

-- partitioning is chosen when a table is added; retention drops partitions
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', partition_interval => '1 day');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', retention => '7 days');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('pos', 'dbo.refunds', retention => '7 days');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('pos', 'dbo.refunds', partition_interval => '0');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('pos', 'dbo.refunds', partition_interval => '1 day', retention => '0.5 seconds');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('pos', 'dbo.refunds', partition_interval => '-1 day');
\echo :LAST_ERROR_SQLSTATE
-- a partitioned table (as add_table records it)
UPDATE mssql_cdc.tables SET partition_interval = '1 day' WHERE table_id = :tills_id;
SELECT mssql_cdc.alter_table('pos', 'dbo.tills', retention => '1 ms');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.alter_table('pos', 'dbo.tills', partition_interval => '1 hour', retention => '2 days');
SELECT source_table, partition_interval, retention FROM mssql_cdc.tables WHERE server_name = 'pos' ORDER BY table_id;
SELECT mssql_cdc.alter_table('pos', 'dbo.tills', retention => '0');  -- '0': keep every partition
SELECT source_table, partition_interval, retention FROM mssql_cdc.tables WHERE server_name = 'pos' ORDER BY table_id;
UPDATE mssql_cdc.tables SET partition_interval = NULL WHERE table_id = :tills_id;

-- settings that need no SQL Server change at once, and count the change
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', on_retention_overrun => 'resnapshot');
UPDATE mssql_cdc.tables SET snapshot_filter = 'region = 1' WHERE table_id = :sales_id;
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', snapshot_filter => '');  -- '' removes the filter
SELECT * FROM settings;
-- set_table_option (kept for 0.1 scripts) counts its change too
SELECT mssql_cdc.set_table_option('pos', 'dbo.sales', 'on_retention_overrun', 'error');
SELECT * FROM settings;

-- ---- column selection and before-images ------------------------------------
-- checked before any login (the names themselves are checked against the
-- capture instance on SQL Server: t/046_column_selection.pl)
SELECT mssql_cdc.add_table('pos', 'dbo.refunds', include_columns => '{id}', exclude_columns => '{ssn}');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('pos', 'dbo.refunds', exclude_columns => '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('pos', 'dbo.refunds', exclude_columns => ARRAY['ssn', NULL]);
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('pos', 'dbo.refunds', exclude_columns => '{ssn,""}');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('pos', 'dbo.refunds', include_columns => '{id,name,ID}');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('pos', 'dbo.refunds', exclude_columns => '{{a},{b}}');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('pos', 'dbo.refunds', update_before => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', include_columns => '{id}', exclude_columns => '{ssn}');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', exclude_columns => '{ssn,SSN}');
\echo :LAST_ERROR_SQLSTATE
-- a well-formed list goes on to SQL Server (port 1: refused at once)
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', exclude_columns => '{ssn}');
\echo :LAST_ERROR_SQLSTATE
SELECT source_table, include_columns, exclude_columns, update_before, settings_version
  FROM mssql_cdc.tables WHERE server_name = 'pos' ORDER BY table_id;
-- update_before needs no SQL Server: changed at once, and counted
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', update_before => false);
SELECT source_table, include_columns, exclude_columns, update_before, settings_version
  FROM mssql_cdc.tables WHERE server_name = 'pos' ORDER BY table_id;
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', update_before => true);

-- ---- pause / resume one table ----------------------------------------------
SELECT mssql_cdc.pause('pos', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.resume(NULL, 'dbo.sales');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.pause('pos', 'dbo.nosuch');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.pause('pos', 'dbo..sales');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.resume('nosuch', 'dbo.sales');
\echo :LAST_ERROR_SQLSTATE
UPDATE mssql_cdc.servers SET paused = false WHERE server_name = 'pos';
BEGIN;  -- inside one transaction: the launcher never starts a worker for it
SELECT mssql_cdc.pause('pos', 'dbo.sales');
SELECT mssql_cdc.pause('pos', 'sales');   -- again: a NOTICE, not an error
SELECT * FROM settings;
-- the status view says which table is paused; the server runs on
SELECT source_table, state FROM mssql_cdc.status WHERE server = 'pos' ORDER BY source_table;
SELECT mssql_cdc.resume('pos', 'dbo.sales');
SELECT mssql_cdc.resume('pos', 'dbo.sales');
SELECT source_table, state FROM mssql_cdc.status WHERE server = 'pos' ORDER BY source_table;
ROLLBACK;
UPDATE mssql_cdc.servers SET paused = true WHERE server_name = 'pos';
SELECT * FROM settings;

-- ---- reset_table and start_at ---------------------------------------------
SELECT mssql_cdc.reset_table('pos', 'dbo.sales', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.reset_table('pos', 'dbo.nosuch', '0x00000010000000100001');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.reset_table('pos', 'dbo.sales', 'yesterday-ish');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.reset_table('pos', 'dbo.sales', '0x0010');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.reset_table('pos', 'dbo.sales', '2999-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.reset_table('pos', 'dbo.sales', 'infinity');
\echo :LAST_ERROR_SQLSTATE
-- a point that parses goes on to SQL Server (refused at once)
\set VERBOSITY terse
SELECT mssql_cdc.reset_table('pos', 'dbo.tills', '0x00000010000000080001');
SELECT mssql_cdc.reset_table('pos', 'dbo.tills', '2020-01-01 00:00:00+00');
\set VERBOSITY default
\echo :LAST_ERROR_SQLSTATE
SELECT phase, checkpoint_lsn, reset_at FROM mssql_cdc.table_state WHERE table_id = :tills_id;

SELECT mssql_cdc.add_table('pos', 'dbo.refunds', start_at => 'soon');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('pos', 'dbo.refunds', start_at => '2999-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('pos', 'dbo.refunds', snapshot_filter => 'a = 1;');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('pos', 'dbo.refunds', snapshot_mode => 'never', snapshot_filter => 'a = 1');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
SELECT mssql_cdc.add_table('pos', 'dbo.refunds', snapshot_mode => 'never',
                           start_at => '0000002A:000001F0:0003');
SELECT mssql_cdc.add_table('pos', 'dbo.refunds', snapshot_filter => '[amount] > 0');
\set VERBOSITY default
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS tables FROM mssql_cdc.tables WHERE server_name = 'pos';
SELECT to_regclass('public.pos_dbo_refunds') AS staging_table;

-- The checkpoint guard lets a checkpoint move back only with reset_at
-- (what reset_table writes in the same update), or with a re-snapshot.
UPDATE mssql_cdc.table_state SET checkpoint_lsn = '0x00000010000000080001' WHERE table_id = :tills_id;
\echo :LAST_ERROR_SQLSTATE
UPDATE mssql_cdc.table_state SET checkpoint_lsn = '0x00000010000000080001', reset_at = now()
 WHERE table_id = :tills_id;
SELECT checkpoint_lsn, reset_at IS NOT NULL AS reset FROM mssql_cdc.table_state WHERE table_id = :tills_id;
-- the same reset_at again is no new reset
UPDATE mssql_cdc.table_state SET checkpoint_lsn = '0x00000010000000070001' WHERE table_id = :tills_id;
\echo :LAST_ERROR_SQLSTATE

-- ---- privileges -----------------------------------------------------------
-- Without EXECUTE (revoked from PUBLIC) none of them can be called ...
CREATE ROLE regress_ctl_carol;
SET ROLE regress_ctl_carol;
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', on_retention_overrun => 'error');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.pause('pos', 'dbo.sales');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.resume('pos', 'dbo.sales');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.reset_table('pos', 'dbo.sales', '0x00000010000000100001');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- ... and with it, only with the privileges of the server's run_as role.
GRANT EXECUTE ON FUNCTION mssql_cdc.alter_table(name, text, text, text, interval, interval, text[], text[], boolean, boolean, text, boolean),
  mssql_cdc.pause(name, text), mssql_cdc.resume(name, text),
  mssql_cdc.reset_table(name, text, text) TO regress_ctl_carol;
SET ROLE regress_ctl_carol;
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', on_retention_overrun => 'error');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', exclude_columns => '{ssn}', update_before => false);
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', update_before => false);
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.alter_table('pos', 'dbo.sales', exclude_columns => '{ssn}');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.pause('pos', 'dbo.sales');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.resume('pos', 'dbo.sales');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.reset_table('pos', 'dbo.sales', '0x00000010000000100001');
\echo :LAST_ERROR_SQLSTATE
SELECT current_user;
RESET ROLE;
SELECT * FROM settings;

-- clean up
REVOKE ALL ON FUNCTION mssql_cdc.alter_table(name, text, text, text, interval, interval, text[], text[], boolean, boolean, text, boolean),
  mssql_cdc.pause(name, text), mssql_cdc.resume(name, text),
  mssql_cdc.reset_table(name, text, text) FROM regress_ctl_carol;
DROP ROLE regress_ctl_carol;
DROP VIEW settings;
SELECT mssql_cdc.remove_table('pos', 'dbo.sales');
SELECT mssql_cdc.remove_table('pos', 'dbo.tills');
DROP USER MAPPING FOR CURRENT_USER SERVER pos;
DROP SERVER pos;
