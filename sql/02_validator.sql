-- The FDW validator: which options go where, and what values they take.
\set SHOW_CONTEXT never

-- A complete, valid server and user mapping.
CREATE SERVER v_full FOREIGN DATA WRAPPER mssql_cdc OPTIONS (
  host '127.0.0.1', port '1433', database 'erp', tds_version '7.4', encryption 'off',
  login_timeout '5', query_timeout '60', application_name 'nightly copy', packet_size '4096');
CREATE USER MAPPING FOR CURRENT_USER SERVER v_full OPTIONS (username 'cdc_reader', password 'S3cret!');
-- host is only needed when a worker connects; database is needed now.
CREATE SERVER v_minimal FOREIGN DATA WRAPPER mssql_cdc OPTIONS (database 'erp');
-- an empty password is a legal SQL Server password
CREATE USER MAPPING FOR PUBLIC SERVER v_minimal OPTIONS (username 'sa', password '');
SELECT srvname, srvoptions FROM pg_catalog.pg_foreign_server WHERE srvname LIKE 'v\_%' ORDER BY 1;

-- database is required (also when ALTER SERVER would drop it).
CREATE SERVER v_bad FOREIGN DATA WRAPPER mssql_cdc OPTIONS (host 'sql1');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER v_bad FOREIGN DATA WRAPPER mssql_cdc;
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (DROP database);
\echo :LAST_ERROR_SQLSTATE

-- Unknown options name the valid ones for that object.
CREATE SERVER v_bad FOREIGN DATA WRAPPER mssql_cdc OPTIONS (database 'erp', servername 'sql1');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER v_bad FOREIGN DATA WRAPPER mssql_cdc OPTIONS (database 'erp', client_charset 'UTF-8');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER v_bad FOREIGN DATA WRAPPER mssql_cdc OPTIONS (database 'erp', "Port" '1433');
\echo :LAST_ERROR_SQLSTATE
ALTER USER MAPPING FOR CURRENT_USER SERVER v_full OPTIONS (ADD user 'sa');
\echo :LAST_ERROR_SQLSTATE
ALTER USER MAPPING FOR CURRENT_USER SERVER v_full OPTIONS (ADD host 'sql1');
\echo :LAST_ERROR_SQLSTATE

-- Credentials belong in a user mapping; the password value is never echoed.
CREATE SERVER v_bad FOREIGN DATA WRAPPER mssql_cdc OPTIONS (database 'erp', password 'TopSecret42');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER v_bad FOREIGN DATA WRAPPER mssql_cdc OPTIONS (database 'erp', username 'sa');
\echo :LAST_ERROR_SQLSTATE
ALTER USER MAPPING FOR CURRENT_USER SERVER v_full OPTIONS (ADD pwd 'TopSecret42');
\echo :LAST_ERROR_SQLSTATE

-- The wrapper itself takes no options.
ALTER FOREIGN DATA WRAPPER mssql_cdc OPTIONS (ADD host 'sql1');
\echo :LAST_ERROR_SQLSTATE

-- Malformed values.
ALTER SERVER v_full OPTIONS (SET port 'abc');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (SET port '0');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (SET port '65536');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (SET port '+1433');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (SET port ' 1433');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (SET port '99999999999999999999');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (SET port '65535');
ALTER SERVER v_full OPTIONS (SET tds_version '7.2');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (SET tds_version '5.0');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (SET tds_version 'auto');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (SET tds_version '8.0');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (SET tds_version '7.3');
ALTER SERVER v_full OPTIONS (SET encryption 'strict');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (SET encryption 'OFF');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (SET encryption 'require');
-- how change rows are read: the change table (default) or the function
ALTER SERVER v_full OPTIONS (ADD data_query_mode 'function');
ALTER SERVER v_full OPTIONS (SET data_query_mode 'direct');
ALTER SERVER v_full OPTIONS (SET data_query_mode 'table');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (SET data_query_mode 'DIRECT');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (DROP data_query_mode);
-- the server's Windows time zone, for commit times (checked at connect)
ALTER SERVER v_full OPTIONS (ADD server_time_zone 'W. Europe Standard Time');
ALTER SERVER v_full OPTIONS (SET server_time_zone '');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (DROP server_time_zone);
-- tables copied at once, each on a session of its own
ALTER SERVER v_full OPTIONS (ADD snapshot_connections '1');
ALTER SERVER v_full OPTIONS (SET snapshot_connections '16');
ALTER SERVER v_full OPTIONS (SET snapshot_connections '0');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (SET snapshot_connections '17');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (DROP snapshot_connections);
ALTER SERVER v_full OPTIONS (SET login_timeout '0');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (SET query_timeout '-5');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (SET query_timeout '30s');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (SET packet_size '511');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (SET packet_size '32768');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (SET host '');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (SET application_name '');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (SET database 'a123456789b123456789c123456789d123456789e123456789f123456789g123456789h123456789i123456789j123456789k123456789l123456789m123456789');
\echo :LAST_ERROR_SQLSTATE
ALTER USER MAPPING FOR CURRENT_USER SERVER v_full OPTIONS (SET username '');
\echo :LAST_ERROR_SQLSTATE
ALTER USER MAPPING FOR CURRENT_USER SERVER v_full OPTIONS (SET username 'a123456789b123456789c123456789d123456789e123456789f123456789g123456789h123456789i123456789j123456789k123456789l123456789m123456789');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_full OPTIONS (SET application_name 'a123456789b123456789c123456789d123456789e123456789f123456789g123456789h123456789i123456789j123456789k123456789l123456789m123456789');
\echo :LAST_ERROR_SQLSTATE
-- the limits count characters, as SQL Server's sysname does
ALTER USER MAPPING FOR CURRENT_USER SERVER v_full OPTIONS (SET username 'üüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüüü');
ALTER USER MAPPING FOR CURRENT_USER SERVER v_full OPTIONS (SET username 'cdc_reader');

-- Nothing above changed the stored options except the valid SETs.
SELECT srvoptions FROM pg_catalog.pg_foreign_server WHERE srvname = 'v_full';

-- Duplicates (core catches them in DDL; the validator too when called directly).
CREATE SERVER v_bad FOREIGN DATA WRAPPER mssql_cdc OPTIONS (database 'erp', port '1', port '2');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.validator(ARRAY['database=erp', 'port=1', 'port=2'], 'pg_catalog.pg_foreign_server'::regclass);
\echo :LAST_ERROR_SQLSTATE

-- Foreign tables cannot be built on this wrapper.
CREATE FOREIGN TABLE v_ft (id integer) SERVER v_full;
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.validator(ARRAY[]::text[], 'pg_catalog.pg_attribute'::regclass);
\echo :LAST_ERROR_SQLSTATE

-- TLS: certificate validation options.
CREATE SERVER v_tls FOREIGN DATA WRAPPER mssql_cdc OPTIONS (database 'erp',
  ca_file '/etc/ssl/certs/ca-certificates.crt', crl_file '/etc/ssl/crl.pem', check_host_name 'yes');
ALTER SERVER v_tls OPTIONS (SET ca_file 'system', SET check_host_name 'off');
ALTER SERVER v_tls OPTIONS (SET check_host_name 'maybe');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_tls OPTIONS (SET ca_file 'ca.pem');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_tls OPTIONS (SET crl_file 'system');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_tls OPTIONS (SET ca_file '/etc/ssl/my ca.pem');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_tls OPTIONS (SET ca_file '/etc/ssl/ca.pem#x');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_tls OPTIONS (SET ca_file '/a23456789/b23456789/c23456789/d23456789/e23456789/f23456789/g23456789/h23456789/i23456789/j23456789/k23456789/l23456789/m23456789/n23456789/o23456789/p23456789/q23456789/r23456789/s23456789/t23456789/u');
\echo :LAST_ERROR_SQLSTATE
-- trust_server_certificate 'true' contradicts every validation option
ALTER SERVER v_tls OPTIONS (ADD trust_server_certificate 'true');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_tls OPTIONS (DROP ca_file, DROP crl_file, DROP check_host_name, ADD trust_server_certificate 'true');
ALTER SERVER v_tls OPTIONS (SET trust_server_certificate 'sometimes');
\echo :LAST_ERROR_SQLSTATE
SELECT srvoptions FROM pg_catalog.pg_foreign_server WHERE srvname = 'v_tls';
-- naming a file the database server reads takes pg_read_server_files
CREATE ROLE regress_tls_owner;
GRANT USAGE ON FOREIGN DATA WRAPPER mssql_cdc TO regress_tls_owner;
SET ROLE regress_tls_owner;
CREATE SERVER v_tls_own FOREIGN DATA WRAPPER mssql_cdc OPTIONS (database 'erp', ca_file '/etc/passwd');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER v_tls_own FOREIGN DATA WRAPPER mssql_cdc OPTIONS (database 'erp', ca_file 'system');
ALTER SERVER v_tls_own OPTIONS (ADD crl_file '/etc/ssl/crl.pem');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT pg_read_server_files TO regress_tls_owner;
SET ROLE regress_tls_owner;
ALTER SERVER v_tls_own OPTIONS (SET ca_file '/etc/ssl/ca.pem');
-- once a path is set, every later change of the server's options needs the right too
RESET ROLE;
REVOKE pg_read_server_files FROM regress_tls_owner;
SET ROLE regress_tls_owner;
ALTER SERVER v_tls_own OPTIONS (ADD login_timeout '5');
\echo :LAST_ERROR_SQLSTATE
DROP SERVER v_tls_own;
RESET ROLE;
REVOKE USAGE ON FOREIGN DATA WRAPPER mssql_cdc FROM regress_tls_owner;
DROP ROLE regress_tls_owner;
DROP SERVER v_tls;

-- At use (check_server, the worker): a server without host, a mapping
-- without password, no mapping at all name the server and the role.
CREATE ROLE regress_v_user SUPERUSER;
CREATE SERVER v_use FOREIGN DATA WRAPPER mssql_cdc OPTIONS (database 'erp');
CREATE USER MAPPING FOR regress_v_user SERVER v_use OPTIONS (username 'cdc_reader');
SET ROLE regress_v_user;
SELECT * FROM mssql_cdc.check_server('v_use');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER v_use OPTIONS (ADD host '127.0.0.1', port '1');
SELECT * FROM mssql_cdc.check_server('v_use');
\echo :LAST_ERROR_SQLSTATE
DROP USER MAPPING FOR regress_v_user SERVER v_use;
SELECT * FROM mssql_cdc.check_server('v_use');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP SERVER v_use;
DROP ROLE regress_v_user;
DROP USER MAPPING FOR CURRENT_USER SERVER v_full;
DROP USER MAPPING FOR PUBLIC SERVER v_minimal;
DROP SERVER v_full, v_minimal;
