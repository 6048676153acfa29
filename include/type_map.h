/*-------------------------------------------------------------------------
 *
 * type_map.h
 *		The SQL Server -> PostgreSQL type-mapping policy (DESIGN.md "Type
 *		mapping", doc/type-mapping.md) and the description of one source
 *		column that discovery fills in.
 *
 * The policy lives in exactly one table in src/type_map.c.  Everything
 * else derives from it: mssql_type_to_pg (staging DDL, the worker),
 * mssql_cdc.map_type() and mssql_cdc.type_mappings() (users, the
 * documentation check in scripts/check-type-doc).
 *
 * IDENTIFICATION
 *		include/type_map.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_TYPE_MAP_H
#define MSSQL_CDC_TYPE_MAP_H

#include "postgres.h"

/* "not reported" for the numeric facets of MssqlColumn */
#define MSSQL_FACET_UNKNOWN		(-2)
/* CHARACTER_MAXIMUM_LENGTH of varchar(max), nvarchar(max), varbinary(max), xml */
#define MSSQL_LENGTH_MAX		(-1)

/*
 * One column of a SQL Server table as INFORMATION_SCHEMA.COLUMNS, sp_pkeys
 * and cdc.captured_columns describe it.  Strings are palloc'd.
 */
typedef struct MssqlColumn
{
	char	   *name;			/* as SQL Server spells it */
	char	   *pg_name;		/* staging column name (see staging_column_name) */
	int			ordinal;		/* 1-based ORDINAL_POSITION in the source table */
	char	   *type_name;		/* DATA_TYPE, lower case: "nvarchar", "datetime2" */
	int			max_length;		/* CHARACTER_MAXIMUM_LENGTH; MSSQL_LENGTH_MAX for (max) */
	int			precision;		/* NUMERIC_PRECISION */
	int			scale;			/* NUMERIC_SCALE */
	int			datetime_precision; /* DATETIME_PRECISION (fractional digits) */
	bool		nullable;
	bool		is_computed;	/* CDC delivers NULL for these: never staged */
	bool		is_key;			/* part of the primary key */
	int			key_ordinal;	/* 1-based position in the key, 0 if not a key column */
	bool		captured;		/* in the capture instance's column list */
	char	   *collation;		/* COLLATION_NAME of a character column, else NULL */
	/* geometry/geography land as PostGIS types (the table was added with PostGIS) */
	bool		spatial_postgis;
	/* left out by the table's column selection (column_selection.h) */
	bool		excluded;
} MssqlColumn;

/*
 * Whether PostGIS is installed in the current database: then add_table,
 * describe_source and map_type map geometry/geography to PostGIS types
 * (set MssqlColumn.spatial_postgis); a table keeps the choice it was added
 * with (tables.spatial_postgis).
 */
extern bool mssql_postgis_installed(void);

/* Set spatial_postgis on every column of cols */
extern void mssql_columns_set_postgis(MssqlColumn *cols, int ncols, bool postgis);

/*
 * The column goes into the staging table: captured, not computed and not
 * left out by the table's column selection.
 */
extern bool source_column_is_staged(const MssqlColumn *col);

/* Initialise a column with every facet unknown. */
extern void mssql_column_init(MssqlColumn *col);

/*
 * Apply the policy to one column.  Sets *pg_type_sql to the PostgreSQL type
 * as SQL text ("numeric(10,3)", "timestamp(6) without time zone") and
 * *select_expr to the T-SQL expression that reads the column in a snapshot
 * or change query ("[g].STAsText()"), or NULL when the plain quoted column
 * is read as is.  Both palloc'd.  An unsupported type or an impossible
 * facet raises ERRCODE_FEATURE_NOT_SUPPORTED / ERRCODE_INVALID_PARAMETER_VALUE
 * naming the column (col->name may be NULL for a bare type).
 */
extern void mssql_type_to_pg(const MssqlColumn *col, char **pg_type_sql,
							 char **select_expr);

/* The type as SQL Server DDL spells it: "nvarchar(max)", "decimal(10,3)" */
extern char *mssql_type_display(const MssqlColumn *col);

/* The select expression, never NULL: the conversion or just [name]. */
extern char *mssql_column_select_expr(const MssqlColumn *col);

/*
 * The same with the column qualified ("ct.[name]"), for a query that joins
 * another table whose column names could collide with the source's.
 */
extern char *mssql_column_select_expr_qualified(const MssqlColumn *col,
												const char *qualifier);

#endif							/* MSSQL_CDC_TYPE_MAP_H */
