-- The SQL Server -> PostgreSQL type-mapping policy (src/type_map.c,
-- doc/type-mapping.md): every rule, the edge facets, the errors, and that
-- every type text it produces is what PostgreSQL itself prints for the type.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS mssql_cdc;
RESET client_min_messages;

-- The policy table (scripts/check-type-doc compares it with the doc); the
-- long sql_variant expression on its own lines, one WHEN a line.
SELECT sqlserver_type, postgres_type,
       CASE WHEN length(select_expression) > 40 THEN '(below)' ELSE select_expression END AS select_expression,
       notes
  FROM mssql_cdc.type_mappings();
SELECT regexp_split_to_table(select_expression, ' (?=WHEN|ELSE)') AS sql_variant_expression
  FROM mssql_cdc.type_mappings() WHERE sqlserver_type = 'sql_variant';

-- Every rule through map_type, with facets as INFORMATION_SCHEMA.COLUMNS
-- reports them (max_length -1 = (max)).
CREATE TEMP TABLE cases (n serial, sqlserver_type text, max_length int,
	numeric_precision int, numeric_scale int, datetime_precision int);
INSERT INTO cases (sqlserver_type, max_length, numeric_precision, numeric_scale, datetime_precision) VALUES
	('bit', NULL, NULL, NULL, NULL),
	('tinyint', NULL, 3, 0, NULL),
	('smallint', NULL, 5, 0, NULL),
	('int', NULL, 10, 0, NULL),
	('bigint', NULL, 19, 0, NULL),
	('decimal', NULL, 10, 3, NULL),
	('decimal', NULL, 1, 0, NULL),
	('decimal', NULL, 38, 38, NULL),
	('decimal', NULL, 38, 0, NULL),
	('numeric', NULL, 18, 4, NULL),
	('decimal', NULL, NULL, NULL, NULL),
	('numeric', NULL, 12, NULL, NULL),
	('money', NULL, 19, 4, NULL),
	('smallmoney', NULL, 10, 4, NULL),
	('real', NULL, 24, NULL, NULL),
	('float', NULL, 1, NULL, NULL),
	('float', NULL, 24, NULL, NULL),
	('float', NULL, 25, NULL, NULL),
	('float', NULL, 53, NULL, NULL),
	('float', NULL, NULL, NULL, NULL),
	('date', NULL, NULL, NULL, 0),
	('time', NULL, NULL, NULL, 0),
	('time', NULL, NULL, NULL, 3),
	('time', NULL, NULL, NULL, 6),
	('time', NULL, NULL, NULL, 7),
	('time', NULL, NULL, NULL, NULL),
	('datetime', NULL, NULL, NULL, 3),
	('smalldatetime', NULL, NULL, NULL, 0),
	('datetime2', NULL, NULL, NULL, 0),
	('datetime2', NULL, NULL, NULL, 6),
	('datetime2', NULL, NULL, NULL, 7),
	('datetime2', NULL, NULL, NULL, NULL),
	('datetimeoffset', NULL, NULL, NULL, 0),
	('datetimeoffset', NULL, NULL, NULL, 7),
	('char', 1, NULL, NULL, NULL),
	('char', 8000, NULL, NULL, NULL),
	('nchar', 10, NULL, NULL, NULL),
	('varchar', 30, NULL, NULL, NULL),
	('varchar', 8000, NULL, NULL, NULL),
	('varchar', -1, NULL, NULL, NULL),
	('nvarchar', 1, NULL, NULL, NULL),
	('nvarchar', 4000, NULL, NULL, NULL),
	('nvarchar', -1, NULL, NULL, NULL),
	('text', 2147483647, NULL, NULL, NULL),
	('ntext', 1073741823, NULL, NULL, NULL),
	('binary', 4, NULL, NULL, NULL),
	('varbinary', 8000, NULL, NULL, NULL),
	('varbinary', -1, NULL, NULL, NULL),
	('image', 2147483647, NULL, NULL, NULL),
	('timestamp', NULL, NULL, NULL, NULL),
	('rowversion', NULL, NULL, NULL, NULL),
	('uniqueidentifier', NULL, NULL, NULL, NULL),
	('xml', -1, NULL, NULL, NULL),
	('sql_variant', NULL, NULL, NULL, NULL),
	('hierarchyid', 892, NULL, NULL, NULL),
	('geometry', -1, NULL, NULL, NULL),
	('geography', -1, NULL, NULL, NULL),
	-- type names are case-insensitive, as on SQL Server
	('NVarChar', 12, NULL, NULL, NULL),
	('DATETIME2', NULL, NULL, NULL, 2);

SELECT sqlserver_type, max_length AS len, numeric_precision AS p, numeric_scale AS s,
	   datetime_precision AS dp,
	   mssql_cdc.map_type(sqlserver_type, max_length, numeric_precision, numeric_scale,
						  datetime_precision) AS postgres_type
  FROM cases ORDER BY n;

-- Every produced type is valid and spelled exactly as PostgreSQL prints it
-- (staging_check_table compares catalog types with these texts).
DO $$
DECLARE
	cols text;
BEGIN
	SELECT string_agg(format('c%s %s', n,
			 mssql_cdc.map_type(sqlserver_type, max_length, numeric_precision,
								numeric_scale, datetime_precision)), ', ' ORDER BY n)
	  INTO cols FROM cases;
	EXECUTE format('CREATE TEMP TABLE mapped (%s)', cols);
END
$$;
SELECT c.n, c.sqlserver_type,
	   mssql_cdc.map_type(c.sqlserver_type, c.max_length, c.numeric_precision,
						  c.numeric_scale, c.datetime_precision) AS mapped,
	   format_type(a.atttypid, a.atttypmod) AS catalog
  FROM cases c
  JOIN pg_attribute a ON a.attrelid = 'mapped'::regclass AND a.attname = 'c' || c.n
 WHERE mssql_cdc.map_type(c.sqlserver_type, c.max_length, c.numeric_precision,
						  c.numeric_scale, c.datetime_precision)
	   IS DISTINCT FROM format_type(a.atttypid, a.atttypmod);

-- Named arguments, and the defaults SQL Server's own DDL applies
SELECT mssql_cdc.map_type('datetime2') AS datetime2_default,
	   mssql_cdc.map_type('decimal', numeric_precision => 9) AS decimal_9,
	   mssql_cdc.map_type('float') AS float_default,
	   mssql_cdc.map_type('varchar', max_length => -1) AS varchar_max,
	   mssql_cdc.map_type(NULL) AS null_type;

-- Unsupported types: a clear error naming the type
SELECT mssql_cdc.map_type('cursor');
SELECT mssql_cdc.map_type('table');
SELECT mssql_cdc.map_type('dbo.my_alias_type');
SELECT mssql_cdc.map_type('');

-- Impossible facets
SELECT mssql_cdc.map_type('decimal', NULL, 39, 0);
SELECT mssql_cdc.map_type('decimal', NULL, 0, 0);
SELECT mssql_cdc.map_type('numeric', NULL, 10, 11);
SELECT mssql_cdc.map_type('numeric', NULL, 10, -1);
SELECT mssql_cdc.map_type('float', NULL, 54);
SELECT mssql_cdc.map_type('float', NULL, 0);
SELECT mssql_cdc.map_type('time', datetime_precision => 8);
SELECT mssql_cdc.map_type('datetimeoffset', datetime_precision => -1);
SELECT mssql_cdc.map_type('varchar');
SELECT mssql_cdc.map_type('nchar', 0);
SELECT mssql_cdc.map_type('char', -1);
SELECT mssql_cdc.map_type('binary', -1);

-- The pure functions are for everyone; the ones that log in to SQL Server
-- are granted by an administrator (like check_server).
SELECT p.oid::regprocedure AS function,
	   has_function_privilege('mssql_cdc_regress_user', p.oid, 'EXECUTE') AS public_may_execute
  FROM pg_proc p
 WHERE p.pronamespace = 'mssql_cdc'::regnamespace
   AND p.proname IN ('map_type', 'type_mappings', 'describe_source', 'staging_ddl')
 ORDER BY 1::text;

-- The operation enum sorts as SQL Server's __$operation, snapshot first
SELECT enum_range(NULL::mssql_cdc.operation);

-- describe_source checks its arguments and the caller's access before it
-- connects anywhere
SELECT * FROM mssql_cdc.describe_source('nosuchserver', 'dbo.t');
SELECT * FROM mssql_cdc.describe_source('nosuchserver', 'dbo.[unclosed');
CREATE SERVER type_map_src FOREIGN DATA WRAPPER mssql_cdc
	OPTIONS (host '127.0.0.1', port '1', database 'cdcdb');
GRANT EXECUTE ON FUNCTION mssql_cdc.describe_source(name, text, text),
	mssql_cdc.staging_ddl(name, text, text, text) TO mssql_cdc_regress_user;
SET ROLE mssql_cdc_regress_user;
SELECT * FROM mssql_cdc.describe_source('type_map_src', 'dbo.t');
RESET ROLE;
GRANT USAGE ON FOREIGN SERVER type_map_src TO mssql_cdc_regress_user;
SET ROLE mssql_cdc_regress_user;
SELECT * FROM mssql_cdc.describe_source('type_map_src', 'dbo.t');
SELECT mssql_cdc.staging_ddl('type_map_src', 'dbo.t');
RESET ROLE;
REVOKE EXECUTE ON FUNCTION mssql_cdc.describe_source(name, text, text),
	mssql_cdc.staging_ddl(name, text, text, text) FROM mssql_cdc_regress_user;
DROP SERVER type_map_src;
