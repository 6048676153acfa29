
-- ---------------------------------------------------------------------------
-- Staging (changelog) tables and the type-mapping policy
-- (src/type_map.c, src/source_schema.c, src/staging.c, doc/type-mapping.md)
-- ---------------------------------------------------------------------------

-- The kind of change a staging row records.  Enum order is sort order and
-- follows SQL Server's __$operation (1 delete < 2 insert < 3 update before
-- < 4 update after), with snapshot rows first.
CREATE TYPE mssql_cdc.operation AS ENUM
	('snapshot', 'delete', 'insert', 'update_before', 'update_after');
COMMENT ON TYPE mssql_cdc.operation IS
	'Kind of change in a staging table row (_cdc_op): snapshot copy or SQL Server __$operation 1..4';

-- The PostgreSQL type a SQL Server column gets; facets as
-- INFORMATION_SCHEMA.COLUMNS reports them (max_length -1 = (max)).
CREATE FUNCTION mssql_cdc.map_type(
	sqlserver_type pg_catalog.text,
	max_length pg_catalog.int4 DEFAULT NULL,
	numeric_precision pg_catalog.int4 DEFAULT NULL,
	numeric_scale pg_catalog.int4 DEFAULT NULL,
	datetime_precision pg_catalog.int4 DEFAULT NULL)
RETURNS pg_catalog.text
	AS 'MODULE_PATHNAME', 'mssql_cdc_map_type'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION mssql_cdc.map_type(pg_catalog.text, pg_catalog.int4, pg_catalog.int4, pg_catalog.int4, pg_catalog.int4) IS
	'PostgreSQL type of a SQL Server column type, e.g. map_type(''datetime2'', datetime_precision => 7)';

-- The whole policy, one row per rule (doc/type-mapping.md shows it).
CREATE FUNCTION mssql_cdc.type_mappings()
RETURNS TABLE(sqlserver_type pg_catalog.text, postgres_type pg_catalog.text,
			  select_expression pg_catalog.text, notes pg_catalog.text)
	AS 'MODULE_PATHNAME', 'mssql_cdc_type_mappings'
	LANGUAGE C IMMUTABLE PARALLEL SAFE ROWS 40;
COMMENT ON FUNCTION mssql_cdc.type_mappings() IS
	'The SQL Server to PostgreSQL type-mapping policy; select_expression is how the column is read on SQL Server ([c] = the column)';

GRANT EXECUTE ON FUNCTION mssql_cdc.map_type(pg_catalog.text, pg_catalog.int4, pg_catalog.int4, pg_catalog.int4, pg_catalog.int4) TO PUBLIC;
GRANT EXECUTE ON FUNCTION mssql_cdc.type_mappings() TO PUBLIC;

-- Dry run of add_table: connects as the caller's user mapping and shows
-- every source column, the staging column and type it would get (NULL:
-- not staged, e.g. computed or not captured) and how it is read.  For a
-- table already captured, excluded says that its column selection
-- (include_columns / exclude_columns) leaves the column out.
CREATE FUNCTION mssql_cdc.describe_source(
	server name,
	source_table pg_catalog.text,
	capture_instance pg_catalog.text DEFAULT NULL)
RETURNS TABLE(column_name pg_catalog.text, staging_column pg_catalog.text,
			  sqlserver_type pg_catalog.text, postgres_type pg_catalog.text,
			  nullable pg_catalog.bool, key_ordinal pg_catalog.int4,
			  captured pg_catalog.bool, select_expression pg_catalog.text,
			  excluded pg_catalog.bool)
	AS 'MODULE_PATHNAME', 'mssql_cdc_describe_source'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION mssql_cdc.describe_source(name, pg_catalog.text, pg_catalog.text) IS
	'Show how a SQL Server table (e.g. ''dbo.orders'') would be staged: columns, types, key, capture';

-- The exact statements add_table would run to create the staging table.
CREATE FUNCTION mssql_cdc.staging_ddl(
	server name,
	source_table pg_catalog.text,
	staging_table pg_catalog.text DEFAULT NULL,
	capture_instance pg_catalog.text DEFAULT NULL)
RETURNS pg_catalog.text
	AS 'MODULE_PATHNAME', 'mssql_cdc_staging_ddl'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION mssql_cdc.staging_ddl(name, pg_catalog.text, pg_catalog.text, pg_catalog.text) IS
	'The CREATE TABLE (and COMMENT) that add_table would run for a SQL Server table';

-- They log in with stored credentials: like check_server, granted by an
-- administrator (the caller also needs USAGE on the server and a user mapping).
REVOKE ALL ON FUNCTION mssql_cdc.describe_source(name, pg_catalog.text, pg_catalog.text) FROM PUBLIC;
REVOKE ALL ON FUNCTION mssql_cdc.staging_ddl(name, pg_catalog.text, pg_catalog.text, pg_catalog.text) FROM PUBLIC;
