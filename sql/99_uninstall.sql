-- Uninstall: servers on the wrapper block DROP EXTENSION; afterwards nothing is left.
CREATE SERVER leftover FOREIGN DATA WRAPPER mssql_cdc OPTIONS (database 'erp');
DROP EXTENSION mssql_cdc;
DROP SERVER leftover;
DROP EXTENSION mssql_cdc;

-- The schema that CREATE EXTENSION made stays, empty (DROP SCHEMA fails if anything is left in it).
DROP SCHEMA mssql_cdc;
SELECT count(*) AS schemas FROM pg_catalog.pg_namespace WHERE nspname = 'mssql_cdc';
SELECT count(*) AS wrappers FROM pg_catalog.pg_foreign_data_wrapper WHERE fdwname = 'mssql_cdc';
SELECT count(*) AS types FROM pg_catalog.pg_type WHERE typname = 'lsn';

-- and it installs again cleanly
CREATE EXTENSION mssql_cdc;
SELECT count(*) AS tables FROM mssql_cdc.tables;
DROP EXTENSION mssql_cdc;
