-- mssql_cdc.verify(): argument errors that need no SQL Server
-- (doc/mirror.md "verify()"; t/095_verify.pl runs it against the stand-in)
CALL mssql_cdc.verify(NULL);
CALL mssql_cdc.verify('nosuch', chunk_rows => 0);
CALL mssql_cdc.verify('nosuch', recheck_timeout => NULL);
CALL mssql_cdc.verify('nosuch', recheck_timeout => '-1 s');
CALL mssql_cdc.verify('nosuch');
-- a source table name is checked like in every API function; a server
-- without captured tables says so
CREATE SERVER vfy FOREIGN DATA WRAPPER mssql_cdc OPTIONS (host '127.0.0.1', port '1', database 'erp');
CREATE USER MAPPING FOR CURRENT_USER SERVER vfy OPTIONS (username 'cdc', password 'x');
CALL mssql_cdc.verify('vfy', 'erp.dbo.t');
CALL mssql_cdc.verify('vfy', 'dbo.t');
DROP USER MAPPING FOR CURRENT_USER SERVER vfy;
DROP SERVER vfy;
-- the result tables start empty and are readable by pg_monitor only
SELECT count(*) FROM mssql_cdc.verify_runs;
SELECT has_table_privilege('public', 'mssql_cdc.verify_runs', 'SELECT') AS public_reads_runs,
       has_table_privilege('pg_monitor', 'mssql_cdc.verify_mismatches', 'SELECT') AS monitor_reads_mismatches,
       has_function_privilege('public', 'mssql_cdc.verify(name,text,integer,interval,bigint,integer,bigint,bigint,bigint,bigint,bigint,bigint,interval)', 'EXECUTE') AS public_may_call;
