-- SQL API: argument validation, catalog effects, and the checkpoint guard.
--
-- pg_regress has no SQL Server, and add_table asks SQL Server about the
-- source only after every local check has passed.  So here every error path
-- of add_table is tested for real; one call shows that validation passed by
-- reaching the connection step; and the tables the other functions act on
-- are registered directly with regress_helpers.register_table()
-- (sql/02a_test_helpers.sql).  add_table's success path (source described,
-- staging table created, catalog rows written) is covered against the SQL
-- Server stand-in by t/030_streaming.pl.
\set SHOW_CONTEXT never

CREATE SERVER erp FOREIGN DATA WRAPPER mssql_cdc OPTIONS (host '127.0.0.1', port '1', database 'erp');
CREATE USER MAPPING FOR CURRENT_USER SERVER erp OPTIONS (username 'cdc', password 'x');
CREATE SERVER nomap FOREIGN DATA WRAPPER mssql_cdc OPTIONS (database 'erp');
CREATE FOREIGN DATA WRAPPER other_fdw;
CREATE SERVER other FOREIGN DATA WRAPPER other_fdw;
CREATE SCHEMA staging;

-- A call that passes every local check goes on to SQL Server (port 1 on
-- loopback: refused at once).  Terse: the DETAIL carries the OS's wording.
-- An aborted call leaves nothing behind: no server row, no staging table.
\set VERBOSITY terse
SELECT mssql_cdc.add_table('erp', 'dbo.orders');
\set VERBOSITY default
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS servers FROM mssql_cdc.servers;
SELECT to_regclass('public.erp_dbo_orders') AS staging_table;

-- The captured tables the rest of this test works on, as add_table would
-- have recorded them (the server row is created paused: no worker runs).
SELECT regress_helpers.register_table('erp', 'dbo', 'orders', current_user,
                                      'public', 'erp_dbo_orders') AS orders_id \gset
SELECT regress_helpers.register_table('erp', 'dbo', 'customers', current_user,
                                      'public', 'erp_dbo_customers', 'never') > 0 AS registered;
SELECT regress_helpers.register_table('erp', 'my schema', 'odd]name', current_user,
                                      'public', 'erp_my_schema_odd_name') > 0 AS registered;
SELECT regress_helpers.register_table('erp', 'Sales', 'Order Lines', current_user,
                                      'public', 'erp_sales_order_lines', 'initial',
                                      'Sales_OrderLines_v2') > 0 AS registered;
SELECT regress_helpers.register_table('erp', 'dbo', 'Ünïcode_Tab$1', current_user,
                                      'public', 'erp_dbo__n_code_tab_1') > 0 AS registered;
SELECT regress_helpers.register_table('erp', 'dbo', 'invoices', current_user,
                                      'staging', 'invoice_changes') > 0 AS registered;
SELECT regress_helpers.register_table('erp', 'dbo', 'payments', current_user,
                                      'staging', 'payment_changes') > 0 AS registered;

-- Source names in SQL Server syntax parse to the names stored in the
-- catalog (a bare name means dbo): each of these finds its table captured.
SELECT mssql_cdc.add_table('erp', 'customers', snapshot_mode => 'never');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', '[my schema].[odd]]name]');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', '"Sales"."Order Lines"', capture_instance => 'Sales_OrderLines_v2');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', 'dbo.Ünïcode_Tab$1');
\echo :LAST_ERROR_SQLSTATE

-- The default staging name is derived from server, schema and table
-- (lower case ASCII, anything else becomes _); a taken name shows it.
CREATE TABLE public.erp_my_schema_other_name (id integer);
SELECT mssql_cdc.add_table('erp', '[my schema].[other name]');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE public.erp_dbo__n_code_new_2 (id integer);
SELECT mssql_cdc.add_table('erp', 'dbo.Ünïcode_New$2');
\echo :LAST_ERROR_SQLSTATE
DROP TABLE public.erp_my_schema_other_name, public.erp_dbo__n_code_new_2;
-- A default name longer than 63 bytes is cut and ends in _ and a hash of
-- the names it came from.
CREATE TABLE public.erp_dbo_longxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx_e8600b85 (id integer);
SELECT mssql_cdc.add_table('erp', 'dbo.Long' || repeat('x', 76));
\echo :LAST_ERROR_SQLSTATE
DROP TABLE public.erp_dbo_longxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx_e8600b85;

-- An unqualified staging name goes to the first schema on the search path.
SET search_path = staging, public;
SELECT mssql_cdc.add_table('erp', 'dbo.refunds', 'payment_changes');
\echo :LAST_ERROR_SQLSTATE
RESET search_path;
SELECT source_schema, source_table, capture_instance, staging_schema, staging_table, snapshot_mode
  FROM mssql_cdc.tables ORDER BY table_id;

-- NULL where a value is required.
SELECT mssql_cdc.add_table(NULL, 'dbo.t');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', 'dbo.t', NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.remove_table(NULL, 'dbo.t');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.remove_table('erp', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.pause(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.resume(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.resnapshot('erp', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM mssql_cdc.check_server(NULL);
\echo :LAST_ERROR_SQLSTATE

-- Unknown server, server of another wrapper.
SELECT mssql_cdc.add_table('nosuch', 'dbo.t');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('other', 'dbo.t');
\echo :LAST_ERROR_SQLSTATE

-- Malformed source names.
SELECT mssql_cdc.add_table('erp', '');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', 'erp.dbo.t');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', 'dbo.');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', '.t');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', '[dbo.t');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', 'dbo.[]');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', 'dbo.my table');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', '[a]b');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', '1abc');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', 'dbo."t');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', 'dbo.' || repeat('x', 129));
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.remove_table('erp', 'dbo..t');
\echo :LAST_ERROR_SQLSTATE

-- Snapshot mode and capture instance.
SELECT mssql_cdc.add_table('erp', 'dbo.t', snapshot_mode => 'full');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', 'dbo.t', snapshot_mode => 'Initial');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', 'dbo.t', capture_instance => '');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', 'dbo.t', capture_instance => repeat('c', 101));
\echo :LAST_ERROR_SQLSTATE

-- Retention-overrun policy: error (default) or resnapshot; resnapshot needs
-- a snapshot to take again, so not with snapshot_mode 'never'.
SELECT mssql_cdc.add_table('erp', 'dbo.t', on_retention_overrun => 'skip');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', 'dbo.t', on_retention_overrun => 'Error');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', 'dbo.t', on_retention_overrun => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', 'dbo.t', snapshot_mode => 'never', on_retention_overrun => 'resnapshot');
\echo :LAST_ERROR_SQLSTATE

-- A mirror is filled by the initial copy (doc/mirror.md): not with
-- snapshot_mode 'never' or start_at, which skip it.
SELECT mssql_cdc.add_table('erp', 'dbo.t', snapshot_mode => 'never', mirror => true);
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', 'dbo.t', start_at => '0x00000001000000010001', mirror_table => 'staging.t_mirror');
\echo :LAST_ERROR_SQLSTATE

-- Duplicates: the same source table, a staging name in use.
SELECT mssql_cdc.add_table('erp', 'dbo.orders');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', '[dbo].[orders]');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', 'dbo.t', 'staging.invoice_changes');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE staging.taken (id integer);
SELECT mssql_cdc.add_table('erp', 'dbo.t', 'staging.taken');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', 'dbo.t', 'nosuchschema.t');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', 'dbo.t', 'otherdb.staging.t');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', 'dbo.t', 'pg_temp.t');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', 'dbo.t', 'staging."unterminated');
\echo :LAST_ERROR_SQLSTATE
-- A mirror table cannot take the staging table's name; changelog => false
-- needs a mirror.
SELECT mssql_cdc.add_table('erp', 'dbo.t', 'staging.t', mirror_table => 'staging.t');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', 'dbo.t', changelog => false);
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('erp', 'dbo.t', mirror => NULL);
\echo :LAST_ERROR_SQLSTATE

-- Nothing was added by the failed calls.
SELECT count(*) AS captured_tables FROM mssql_cdc.tables;

-- remove_table, pause, resume, resnapshot on things that are not captured.
SELECT mssql_cdc.remove_table('erp', 'dbo.nosuch');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.remove_table('erp', 'DBO.ORDERS');  -- names match exactly
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.remove_table('nosuch', 'dbo.orders');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.remove_table('nomap', 'dbo.orders');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.pause('nomap');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.resume('other');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.resnapshot('erp', 'dbo.nosuch');
\echo :LAST_ERROR_SQLSTATE

-- pause/resume are idempotent: repeating one is a NOTICE, not an error.
SELECT mssql_cdc.pause('erp');
SELECT paused FROM mssql_cdc.servers WHERE server_name = 'erp';
BEGIN;
SELECT mssql_cdc.resume('erp');
SELECT paused FROM mssql_cdc.servers WHERE server_name = 'erp';
SELECT mssql_cdc.resume('erp');
ROLLBACK;
SELECT paused FROM mssql_cdc.servers WHERE server_name = 'erp';

-- Checkpoints never move backwards (invariant 5).
UPDATE mssql_cdc.table_state SET phase = 'streaming', checkpoint_lsn = '0x0000002A000001F00003',
       rows_applied = 10, snapshot_rows = 5, snapshot_last_key = '{42}'
 WHERE table_id = :orders_id;
UPDATE mssql_cdc.table_state SET checkpoint_lsn = '0x0000002A000001F00003' WHERE table_id = :orders_id; -- same: fine
UPDATE mssql_cdc.table_state SET checkpoint_lsn = '0x0000002A000001F00004' WHERE table_id = :orders_id; -- forward: fine
UPDATE mssql_cdc.table_state SET checkpoint_lsn = '0x0000002A000001F00003' WHERE table_id = :orders_id;
\echo :LAST_ERROR_SQLSTATE
UPDATE mssql_cdc.table_state SET checkpoint_lsn = '0x00000000000000000000', phase = 'pending' WHERE table_id = :orders_id;
\echo :LAST_ERROR_SQLSTATE
UPDATE mssql_cdc.table_state SET checkpoint_lsn = NULL WHERE table_id = :orders_id;
\echo :LAST_ERROR_SQLSTATE
SELECT phase, checkpoint_lsn FROM mssql_cdc.table_state WHERE table_id = :orders_id;

-- set_table_option changes the retention-overrun policy of a captured
-- table; bad values change nothing.
SELECT source_table, on_retention_overrun FROM mssql_cdc.tables
 WHERE source_table IN ('orders', 'customers') ORDER BY source_table;
SELECT mssql_cdc.set_table_option('erp', 'dbo.orders', 'on_retention_overrun', 'resnapshot');
SELECT mssql_cdc.set_table_option('erp', 'dbo.orders', 'on_retention_overrun', 'ignore');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.set_table_option('erp', 'dbo.orders', 'on_retention_overrun', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.set_table_option('erp', 'dbo.orders', 'retention', 'error');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.set_table_option('erp', 'dbo.customers', 'on_retention_overrun', 'resnapshot');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.set_table_option('erp', 'dbo.nosuch', 'on_retention_overrun', 'error');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.set_table_option('nosuch', 'dbo.orders', 'on_retention_overrun', 'error');
\echo :LAST_ERROR_SQLSTATE
SELECT source_table, on_retention_overrun FROM mssql_cdc.tables
 WHERE source_table IN ('orders', 'customers') ORDER BY source_table;

-- resnapshot is the one way back: progress reset to pending and recorded,
-- the table's condition and warnings cleared.
UPDATE mssql_cdc.table_state SET condition = 'retention_overrun', hint = 'h',
       warning = 'snapshot_isolation_off', warning_hint = 'w'
 WHERE table_id = :orders_id;
SELECT mssql_cdc.resnapshot('erp', 'dbo.orders');
SELECT condition, hint, warning, warning_hint FROM mssql_cdc.table_state WHERE table_id = :orders_id;
SELECT phase, checkpoint_lsn, snapshot_lsn, snapshot_last_key, snapshot_rows, rows_applied,
       resnapshot_requested_at IS NOT NULL AS requested
  FROM mssql_cdc.table_state WHERE table_id = :orders_id;
-- after a restore the progress row is missing; resnapshot recreates it
DELETE FROM mssql_cdc.table_state WHERE table_id = :orders_id;
SELECT mssql_cdc.resnapshot('erp', 'orders');
SELECT phase, resnapshot_requested_at IS NOT NULL AS requested
  FROM mssql_cdc.table_state WHERE table_id = :orders_id;

-- remove_table keeps existing staging data (NOTICE) and removes the server row
-- with its last table.
CREATE TABLE staging.invoice_changes (id integer);  -- as if the worker had made it
SELECT mssql_cdc.remove_table('erp', 'dbo.invoices');
SELECT mssql_cdc.remove_table('erp', 'dbo.payments');
SELECT mssql_cdc.remove_table('erp', 'dbo.customers');
SELECT mssql_cdc.remove_table('erp', '[my schema].[odd]]name]');
SELECT mssql_cdc.remove_table('erp', '[Sales].[Order Lines]');
SELECT mssql_cdc.remove_table('erp', 'dbo.Ünïcode_Tab$1');
SELECT server_name, paused FROM mssql_cdc.servers;
SELECT mssql_cdc.remove_table('erp', 'dbo.orders');
SELECT count(*) AS servers FROM mssql_cdc.servers;
SELECT count(*) AS tables FROM mssql_cdc.tables;
SELECT count(*) AS states FROM mssql_cdc.table_state;
-- the server row cannot be deleted under its tables
BEGIN;
SELECT regress_helpers.register_table('erp', 'dbo', 'orders', current_user,
                                      'public', 'erp_dbo_orders') > 0 AS registered;
DELETE FROM mssql_cdc.servers;
ROLLBACK;

-- The catalog names servers, so dropping a foreign server leaves its rows;
-- remove_table still cleans them up.
CREATE SERVER gone FOREIGN DATA WRAPPER mssql_cdc OPTIONS (database 'x');
CREATE USER MAPPING FOR CURRENT_USER SERVER gone OPTIONS (username 'u', password 'p');
SELECT regress_helpers.register_table('gone', 'dbo', 't', current_user,
                                      'public', 'gone_dbo_t') > 0 AS registered;
DROP USER MAPPING FOR CURRENT_USER SERVER gone;
DROP SERVER gone;
SELECT mssql_cdc.resume('gone');
\echo :LAST_ERROR_SQLSTATE
-- pause still works for it (rolled back: no launcher sees it running)
BEGIN;
UPDATE mssql_cdc.servers SET paused = false WHERE server_name = 'gone';
SELECT mssql_cdc.pause('gone');
SELECT paused FROM mssql_cdc.servers WHERE server_name = 'gone';
ROLLBACK;
SELECT mssql_cdc.remove_table('gone', 'dbo.t');
SELECT count(*) AS servers FROM mssql_cdc.servers;

DROP TABLE staging.taken, staging.invoice_changes;
DROP SCHEMA staging;
DROP USER MAPPING FOR CURRENT_USER SERVER erp;
DROP SERVER erp, nomap, other;
DROP FOREIGN DATA WRAPPER other_fdw;
