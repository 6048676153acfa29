-- The status view: its shape, and what it shows for each table state.
\set SHOW_CONTEXT never

SELECT a.attnum, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) AS type
  FROM pg_catalog.pg_attribute a
 WHERE a.attrelid = 'mssql_cdc.status'::regclass AND a.attnum > 0
 ORDER BY a.attnum;

CREATE SERVER wms FOREIGN DATA WRAPPER mssql_cdc OPTIONS (host '127.0.0.1', port '1', database 'wms');
CREATE USER MAPPING FOR CURRENT_USER SERVER wms OPTIONS (username 'cdc', password 'x');

-- Everything happens inside one transaction: the launcher never sees these
-- tables, so no worker changes the rows under the test.  pg_regress has no
-- SQL Server for add_table to check the sources on, so the tables are
-- registered as add_table would record them (sql/02a_test_helpers.sql),
-- with the server running (not paused).
BEGIN;
SELECT regress_helpers.register_table('wms', 'dbo', 'stock', current_user,
                                      'public', 'wms_dbo_stock', paused => false) AS stock_id \gset
SELECT regress_helpers.register_table('wms', 'inv', 'bin locations', current_user,
                                      'public', 'bins', paused => false) AS bins_id \gset
SELECT regress_helpers.register_table('wms', 'dbo', 'moves', current_user,
                                      'public', 'wms_dbo_moves', 'never', paused => false) AS moves_id \gset

-- Freshly added: pending (streaming from the start position for 'never'),
-- nothing applied, nothing live.
SELECT * FROM mssql_cdc.status ORDER BY source_table;

-- A table in the middle of its snapshot ...
UPDATE mssql_cdc.table_state
   SET phase = 'snapshotting', snapshot_lsn = '0x000000100000002000AA', snapshot_rows = 1234,
       snapshot_total_estimate = 10000, snapshot_started_at = '2026-01-01 00:00:00+00'
 WHERE table_id = :stock_id;
-- ... one streaming after its snapshot ...
UPDATE mssql_cdc.table_state
   SET phase = 'streaming', checkpoint_lsn = '0x000000100000003000BB', snapshot_rows = 50,
       snapshot_total_estimate = 40, snapshot_started_at = '2026-01-01 00:00:00+00',
       rows_applied = 70, transactions_applied = 7, last_commit_time = '2026-01-01 00:05:00+00'
 WHERE table_id = :bins_id;
-- ... and one whose last unit failed.
UPDATE mssql_cdc.table_state
   SET phase = 'streaming', checkpoint_lsn = '0x000000100000003000BB',
       last_error = 'could not read changes of capture instance dbo_moves',
       last_error_at = '2026-01-01 00:06:00+00', consecutive_failures = 2
 WHERE table_id = :moves_id;
SELECT source_table, state, checkpoint_lsn, rows_applied, transactions_applied,
       snapshot_rows, snapshot_total_estimate, snapshot_percent, last_error, last_error_at
  FROM mssql_cdc.status ORDER BY source_table;

-- A snapshot estimate can be exceeded; the percentage stops at 100.
UPDATE mssql_cdc.table_state SET snapshot_rows = 12000 WHERE table_id = :stock_id;
SELECT source_table, snapshot_percent FROM mssql_cdc.status WHERE source_table = 'dbo.stock';

-- The rate: rows copied per second since the snapshot started, only while
-- snapshotting (120 rows/s here; rounded, as a little time passes).
UPDATE mssql_cdc.table_state SET snapshot_started_at = pg_catalog.now() - interval '100 seconds'
 WHERE table_id = :stock_id;
SELECT source_table, state, round(snapshot_rows_per_second) AS rows_per_second
  FROM mssql_cdc.status ORDER BY source_table;

-- A server-level failure newer than the table's is the one shown, for every table.
UPDATE mssql_cdc.servers
   SET last_error = 'could not connect to server "wms"', last_error_at = '2026-01-01 00:07:00+00',
       consecutive_failures = 1
 WHERE server_name = 'wms';
SELECT source_table, state, last_error, last_error_at FROM mssql_cdc.status ORDER BY source_table;

-- condition and hint: the problem that is active now and what to do.
-- The server-level failure (newer) is the one shown while it is retried.
UPDATE mssql_cdc.servers
   SET condition = 'connection_refused', hint = 'Check the host and port options of server "wms".'
 WHERE server_name = 'wms';
UPDATE mssql_cdc.table_state
   SET condition = 'staging_constraint_violation', hint = 'Drop or relax the constraint.'
 WHERE table_id = :moves_id;
SELECT source_table, state, condition, hint FROM mssql_cdc.status ORDER BY source_table;
-- Once the server's next unit succeeded (failures reset) the table's own,
-- still failing, unit is shown; the others have no condition any more.
UPDATE mssql_cdc.servers SET consecutive_failures = 0 WHERE server_name = 'wms';
SELECT source_table, state, condition, hint FROM mssql_cdc.status ORDER BY source_table;
-- A table's success clears its condition too (last_error stays as history).
UPDATE mssql_cdc.table_state SET consecutive_failures = 0 WHERE table_id = :moves_id;
SELECT source_table, state, last_error IS NOT NULL AS has_last_error, condition, hint
  FROM mssql_cdc.status ORDER BY source_table;
-- A parked table (phase error) shows its condition without a failure count.
UPDATE mssql_cdc.table_state
   SET phase = 'error', condition = 'retention_overrun', hint = 'Call mssql_cdc.resnapshot().'
 WHERE table_id = :bins_id;
SELECT source_table, state, condition, hint FROM mssql_cdc.status ORDER BY source_table;
-- The parked table's own error goes with its condition and hint, also when
-- the server failed later (a lost connection retried since): message and
-- hint must not come from two different failures.  The other tables show
-- the server's failure.
UPDATE mssql_cdc.table_state
   SET last_error = 'the source database went back in time', last_error_at = '2026-01-01 00:06:30+00'
 WHERE table_id = :bins_id;
UPDATE mssql_cdc.servers SET consecutive_failures = 1 WHERE server_name = 'wms';
SELECT source_table, state, last_error, last_error_at, condition FROM mssql_cdc.status ORDER BY source_table;
UPDATE mssql_cdc.servers SET consecutive_failures = 0 WHERE server_name = 'wms';
UPDATE mssql_cdc.table_state SET phase = 'streaming', condition = NULL, hint = NULL
 WHERE table_id = :bins_id;
-- A server warning (the worker sets and clears it) shows on every table
-- without turning it into state error ...
UPDATE mssql_cdc.servers SET warning = 'capture_job_stalled', warning_hint = 'Start the capture job.'
 WHERE server_name = 'wms';
SELECT source_table, state, condition, hint FROM mssql_cdc.status ORDER BY source_table;
UPDATE mssql_cdc.servers SET warning = NULL, warning_hint = NULL WHERE server_name = 'wms';
-- ... and a table warning shows only while the table is pending or
-- snapshotting (the snapshot it explains).
UPDATE mssql_cdc.table_state SET warning = 'snapshot_isolation_off', warning_hint = 'ALLOW_SNAPSHOT_ISOLATION ON.'
 WHERE table_id IN (:stock_id, :bins_id);
SELECT source_table, state, condition, hint FROM mssql_cdc.status ORDER BY source_table;

-- A streaming table behind the most advanced checkpoint of the source's
-- streaming tables is catching up to it (a snapshot in progress is not
-- streaming yet) ...
UPDATE mssql_cdc.table_state SET checkpoint_lsn = '0x000000100000004000DD' WHERE table_id = :bins_id;
SELECT source_table, state, checkpoint_lsn, catching_up, catching_up_to
  FROM mssql_cdc.status ORDER BY source_table;
-- ... and a paused table neither catches up nor leads.
SELECT mssql_cdc.pause('wms', 'dbo.moves');
SELECT source_table, state, catching_up, catching_up_to FROM mssql_cdc.status ORDER BY source_table;
SELECT mssql_cdc.resume('wms', 'dbo.moves');
UPDATE mssql_cdc.table_state SET phase = 'snapshotting' WHERE table_id = :bins_id;
SELECT source_table, state, catching_up, catching_up_to FROM mssql_cdc.status ORDER BY source_table;

-- Paused wins over every other state, and shows no condition.
UPDATE mssql_cdc.servers SET consecutive_failures = 3 WHERE server_name = 'wms';
SELECT mssql_cdc.pause('wms');
SELECT source_table, state, condition, hint FROM mssql_cdc.status ORDER BY source_table;
ROLLBACK;

SELECT count(*) AS rows_after_rollback FROM mssql_cdc.status;

DROP USER MAPPING FOR CURRENT_USER SERVER wms;
DROP SERVER wms;
