-- Installation: what CREATE EXTENSION creates, and its security posture.
CREATE EXTENSION mssql_cdc;

-- Every member object of the extension (stable: names only, sorted).
SELECT pg_catalog.pg_describe_object(classid, objid, 0) AS object
  FROM pg_catalog.pg_depend
 WHERE refclassid = 'pg_catalog.pg_extension'::regclass
   AND refobjid = (SELECT oid FROM pg_catalog.pg_extension WHERE extname = 'mssql_cdc')
   AND deptype = 'e'
 ORDER BY 1;

-- pg_dump keeps the configuration, not the progress (see doc/sql-api.md).
SELECT unnest(extconfig)::regclass AS dumped_config
  FROM pg_catalog.pg_extension WHERE extname = 'mssql_cdc'
 ORDER BY 1;

-- No SECURITY DEFINER functions at all.
SELECT proname FROM pg_catalog.pg_proc
 WHERE pronamespace = 'mssql_cdc'::regnamespace AND prosecdef;

-- Mutating API functions, and those that log in to SQL Server with stored
-- credentials, are not executable by PUBLIC; the rest are.
SELECT p.oid::regprocedure AS function,
       pg_catalog.has_function_privilege('mssql_cdc_regress_user', p.oid, 'EXECUTE') AS public_may_execute
  FROM pg_catalog.pg_proc p
 WHERE p.pronamespace = 'mssql_cdc'::regnamespace
   AND p.proname IN ('add_table', 'remove_table', 'pause', 'resume', 'resnapshot', 'lsn_increment',
                     'alter_table', 'reset_table', 'set_table_option', 'check_server',
                     'describe_source', 'staging_ddl', 'verify', 'worker_state', 'launcher_pid')
 ORDER BY 1::text;

-- Catalog tables are private; the status view is for pg_monitor.
SELECT c.relname,
       pg_catalog.has_table_privilege('mssql_cdc_regress_user', c.oid, 'SELECT') AS regress_user_select,
       pg_catalog.has_table_privilege('pg_monitor', c.oid, 'SELECT') AS pg_monitor_select
  FROM pg_catalog.pg_class c
 WHERE c.relnamespace = 'mssql_cdc'::regnamespace AND c.relkind IN ('r', 'v')
 ORDER BY 1;

-- The wrapper has a validator and, on purpose, no handler.
SELECT fdwname, fdwhandler = 0 AS no_handler, fdwvalidator::regproc AS validator, fdwoptions
  FROM pg_catalog.pg_foreign_data_wrapper WHERE fdwname = 'mssql_cdc';
