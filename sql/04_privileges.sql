-- Privileges: who may call the API, on which servers, and what it needs.
\set SHOW_CONTEXT never

CREATE ROLE regress_cdc_alice;
CREATE ROLE regress_cdc_bob;
CREATE ROLE regress_cdc_admin SUPERUSER;
CREATE SERVER crm FOREIGN DATA WRAPPER mssql_cdc OPTIONS (host '127.0.0.1', port '1', database 'crm');
CREATE SCHEMA cdc_staging;

-- Without EXECUTE (revoked from PUBLIC) nothing is possible, and the catalog is private.
SET ROLE mssql_cdc_regress_user;
SELECT mssql_cdc.add_table('crm', 'dbo.accounts');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.pause('crm');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM mssql_cdc.tables;
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM mssql_cdc.status;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

GRANT EXECUTE ON FUNCTION mssql_cdc.add_table(name, text, text, text, text, text, text, text, interval, interval, text[], text[], boolean, boolean, text, boolean),
  mssql_cdc.remove_table(name, text), mssql_cdc.pause(name), mssql_cdc.resume(name),
  mssql_cdc.resnapshot(name, text), mssql_cdc.set_table_option(name, text, text, text)
  TO regress_cdc_alice, regress_cdc_bob;

-- A non-superuser needs USAGE on the server ...
SET ROLE regress_cdc_alice;
SELECT mssql_cdc.add_table('crm', 'dbo.accounts', 'cdc_staging.accounts');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT USAGE ON FOREIGN SERVER crm TO regress_cdc_alice, regress_cdc_bob;

-- ... and a user mapping (own or PUBLIC) ...
SET ROLE regress_cdc_alice;
SELECT mssql_cdc.add_table('crm', 'dbo.accounts', 'cdc_staging.accounts');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
CREATE USER MAPPING FOR regress_cdc_alice SERVER crm OPTIONS (username 'alice', password 'a');

-- ... and the right to create the staging table, which the worker will do as that role.
SET ROLE regress_cdc_alice;
SELECT mssql_cdc.add_table('crm', 'dbo.accounts', 'cdc_staging.accounts');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.add_table('crm', 'dbo.accounts');  -- default schema public: no CREATE there in PG 15
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT USAGE, CREATE ON SCHEMA cdc_staging TO regress_cdc_alice;

-- Now alice passes every check, so add_table goes on to ask SQL Server,
-- which pg_regress does not have (port 1: refused at once; terse because
-- the DETAIL carries the OS's wording).  The success path is covered by
-- t/030_streaming.pl.
SET ROLE regress_cdc_alice;
\set VERBOSITY terse
SELECT mssql_cdc.add_table('crm', 'dbo.accounts', 'cdc_staging.accounts');
\set VERBOSITY default
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Had it reached SQL Server, crm would now run as alice, its first table
-- dbo.accounts; record that directly (sql/02a_test_helpers.sql), paused so
-- no worker starts.
SELECT regress_helpers.register_table('crm', 'dbo', 'accounts', 'regress_cdc_alice',
                                      'cdc_staging', 'accounts') > 0 AS registered;
SET ROLE regress_cdc_alice;
-- The catalog is still private to her (the API wrote it as the extension owner).
SELECT count(*) FROM mssql_cdc.tables;
\echo :LAST_ERROR_SQLSTATE
UPDATE mssql_cdc.table_state SET phase = 'streaming';
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT server_name, run_as, paused FROM mssql_cdc.servers;

-- bob has USAGE and (through PUBLIC) a user mapping, but crm runs as alice.
CREATE USER MAPPING FOR PUBLIC SERVER crm OPTIONS (username 'reader', password 'r');
SET ROLE regress_cdc_bob;
SELECT mssql_cdc.add_table('crm', 'dbo.contacts', 'cdc_staging.contacts');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.resume('crm');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.resnapshot('crm', 'dbo.accounts');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.set_table_option('crm', 'dbo.accounts', 'on_retention_overrun', 'resnapshot');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.remove_table('crm', 'dbo.accounts');
\echo :LAST_ERROR_SQLSTATE
-- a refusal while the catalog was open as the extension owner left no trace
SELECT current_user;
RESET ROLE;

-- With the privileges of alice, bob may change crm.
GRANT regress_cdc_alice TO regress_cdc_bob;
SET ROLE regress_cdc_bob;
\set VERBOSITY terse
SELECT mssql_cdc.add_table('crm', 'dbo.contacts', 'cdc_staging.contacts');  -- passes the run_as check
\set VERBOSITY default
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT regress_helpers.register_table('crm', 'dbo', 'contacts', 'regress_cdc_alice',
                                      'cdc_staging', 'contacts') > 0 AS registered;
SET ROLE regress_cdc_bob;
SELECT mssql_cdc.resnapshot('crm', 'dbo.contacts');
SELECT mssql_cdc.set_table_option('crm', 'dbo.contacts', 'on_retention_overrun', 'resnapshot');
SELECT mssql_cdc.pause('crm');
RESET ROLE;
SELECT t.source_table, t.staging_schema, t.staging_table, s.run_as
  FROM mssql_cdc.tables t JOIN mssql_cdc.servers s USING (server_name) ORDER BY t.table_id;

-- pg_monitor members read the status view.
SET ROLE regress_cdc_alice;
SELECT count(*) FROM mssql_cdc.status;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT pg_monitor TO regress_cdc_alice;
SET ROLE regress_cdc_alice;
SELECT server, source_table, staging_table, state FROM mssql_cdc.status ORDER BY source_table;
RESET ROLE;

-- A superuser may change any server, but the first table of a server still
-- needs a user mapping for the role that will run it.
CREATE SERVER crm2 FOREIGN DATA WRAPPER mssql_cdc OPTIONS (database 'crm');
SET ROLE regress_cdc_admin;
SELECT mssql_cdc.add_table('crm2', 'dbo.accounts');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.remove_table('crm', 'dbo.contacts');
RESET ROLE;

-- If the run_as role is dropped, only a superuser can change the server.
REVOKE regress_cdc_alice FROM regress_cdc_bob;
DROP USER MAPPING FOR regress_cdc_alice SERVER crm;
REVOKE ALL ON SCHEMA cdc_staging FROM regress_cdc_alice;
REVOKE ALL ON FOREIGN SERVER crm FROM regress_cdc_alice;
REVOKE ALL ON FUNCTION mssql_cdc.add_table(name, text, text, text, text, text, text, text, interval, interval, text[], text[], boolean, boolean, text, boolean),
  mssql_cdc.remove_table(name, text), mssql_cdc.pause(name), mssql_cdc.resume(name),
  mssql_cdc.resnapshot(name, text), mssql_cdc.set_table_option(name, text, text, text)
  FROM regress_cdc_alice;
REVOKE pg_monitor FROM regress_cdc_alice;
DROP ROLE regress_cdc_alice;
SET ROLE regress_cdc_bob;
SELECT mssql_cdc.resume('crm');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT mssql_cdc.remove_table('crm', 'dbo.accounts');
SELECT count(*) AS servers_left FROM mssql_cdc.servers;

-- clean up
DROP USER MAPPING FOR PUBLIC SERVER crm;
REVOKE ALL ON FOREIGN SERVER crm FROM regress_cdc_bob;
REVOKE ALL ON FUNCTION mssql_cdc.add_table(name, text, text, text, text, text, text, text, interval, interval, text[], text[], boolean, boolean, text, boolean),
  mssql_cdc.remove_table(name, text), mssql_cdc.pause(name), mssql_cdc.resume(name),
  mssql_cdc.resnapshot(name, text), mssql_cdc.set_table_option(name, text, text, text)
  FROM regress_cdc_bob;
DROP ROLE regress_cdc_bob, regress_cdc_admin;
DROP SERVER crm, crm2;
DROP SCHEMA cdc_staging;
