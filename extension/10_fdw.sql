
-- ---------------------------------------------------------------------------
-- The foreign-data wrapper: it only stores connection details (no handler).
-- Servers carry host/port/database/...; credentials live in user mappings.
-- ---------------------------------------------------------------------------

CREATE FUNCTION mssql_cdc.validator(pg_catalog.text[], pg_catalog.oid) RETURNS void
	AS 'MODULE_PATHNAME', 'mssql_cdc_validator' LANGUAGE C STRICT;

CREATE FOREIGN DATA WRAPPER mssql_cdc VALIDATOR mssql_cdc.validator;
COMMENT ON FOREIGN DATA WRAPPER mssql_cdc IS
	'Connection details of SQL Server sources captured by mssql_cdc (no foreign tables)';
