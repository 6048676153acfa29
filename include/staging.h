/*-------------------------------------------------------------------------
 *
 * staging.h
 *		Staging (changelog) tables: their names, their DDL, their creation
 *		and the check that an existing one still has the expected shape.
 *
 * A staging table holds the staged source columns (captured, not
 * computed; see source_column_is_staged) in source order, with the mapped
 * types of type_map.h, followed by the metadata columns
 *
 *		_cdc_lsn mssql_cdc.lsn NOT NULL				commit LSN
 *		_cdc_seqval mssql_cdc.lsn NOT NULL			__$seqval / snapshot row counter
 *		_cdc_op mssql_cdc.operation NOT NULL
 *		_cdc_commit_time timestamptz
 *		_cdc_update_mask bytea
 *		_cdc_command_id integer NOT NULL			__$command_id; 0 for snapshot rows,
 *													the function path and rows of 0.1
 *		PRIMARY KEY (_cdc_lsn, _cdc_command_id, _cdc_seqval, _cdc_op)
 *
 * The key is execution order inside a source transaction (doc/streaming.md);
 * the upgrade from 0.1 adds _cdc_command_id last (mssql_cdc--0.1--0.2.sql).
 *
 * Column names starting with "_cdc_" are reserved for metadata.
 *
 * IDENTIFICATION
 *		include/staging.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_STAGING_H
#define MSSQL_CDC_STAGING_H

#include "postgres.h"

#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "storage/lockdefs.h"
#include "utils/relcache.h"

#include "type_map.h"

#define STAGING_METADATA_PREFIX		"_cdc_"

/*
 * The canonical default staging table name (no schema): "<server>_<schema>_
 * <table>" lower-cased, every character other than a-z, 0-9 and _ replaced
 * by _.  A name longer than NAMEDATALEN - 1 bytes is cut and ends in "_" and
 * 8 hex digits of a hash of the exact server, schema and table names, so
 * long names that share a prefix stay distinct and the result is the same
 * on every run and platform.
 */
extern char *staging_default_name(const char *server_name, const char *source_schema,
								  const char *source_table);

/*
 * Staging column name of a source column: the same name, or for a name
 * longer than NAMEDATALEN - 1 bytes its first characters + "_" + 8 hex
 * digits of a hash of the full name (PostgreSQL would silently truncate).
 */
extern char *staging_column_name(const char *source_name);

/* The staging column name of a source column (pg_name, else the rule above) */
extern const char *staging_column_of(const MssqlColumn *col);

/*
 * Run DDL text (SPI, one or more utility statements) with search_path
 * pg_catalog, as the current user; what names it in the error.
 */
extern void staging_execute_ddl(const char *ddl, const char *what);

/*
 * "    name type[ NOT NULL],\n" for every staged column of cols (mapped
 * types; only key columns NOT NULL), as staging and mirror tables have them.
 */
extern void staging_append_column_defs(StringInfo ddl, const MssqlColumn *cols, int ncols);

/*
 * The SQL that creates the staging table: CREATE TABLE with the primary key,
 * then COMMENT ON TABLE naming the source (source_label, e.g.
 * 'dbo.orders of server "erp", capture instance dbo_orders').  Only staged
 * columns of cols are used.  partition_by, when not NULL, makes it a
 * partitioned table ("RANGE (_cdc_lsn)", see staging_partitions.h).  Raises for a reserved or duplicate column name
 * and for unsupported types.
 */
extern char *staging_build_ddl(const char *staging_schema, const char *staging_table,
							   const char *source_label,
							   const MssqlColumn *cols, int ncols,
							   const char *partition_by);

/*
 * Create the staging table in the current transaction (SPI), owned by the
 * current user.  ERRCODE_DUPLICATE_TABLE if the relation exists.
 */
extern void staging_create_table(const char *staging_schema, const char *staging_table,
								 const char *source_label,
								 const MssqlColumn *cols, int ncols,
								 const char *partition_by);

/*
 * Verify that an existing staging table still has every expected column
 * with its type (user-added columns are tolerated if the worker's inserts
 * can leave them out: nullable or with a default) and its primary key.
 * Raises ERRCODE_UNDEFINED_TABLE, ERRCODE_UNDEFINED_COLUMN or
 * ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE with a hint.
 */
/*
 * The staging table by name, opened with lockmode; a clear error (undefined
 * table, with a hint) when it was dropped or renamed.
 */
extern Relation staging_open(const char *staging_schema, const char *staging_table,
							 LOCKMODE lockmode);

extern void staging_check_table(const char *staging_schema, const char *staging_table,
								const MssqlColumn *cols, int ncols);

/*
 * How a staging table differs from the staged columns of a (new) capture
 * instance: what a capture-instance switch must add, what stays behind
 * (NULL from then on), and what it must refuse.
 */
typedef struct StagingDiff
{
	List	   *missing;		/* const MssqlColumn *: staged, no staging column yet */
	List	   *not_captured;	/* char *: staging source columns the instance lacks */
	const MssqlColumn *conflict;	/* first column whose mapped type differs, or NULL */
	char	   *conflict_staging_type;	/* its staging column's type */
	char	   *conflict_new_type;	/* the type the policy maps it to now */
	const MssqlColumn *reserved;	/* a missing column with a reserved _cdc_ name */
} StagingDiff;

/* Compare (in a transaction); ERRCODE_UNDEFINED_TABLE when it is gone. */
extern void staging_compare(const char *staging_schema, const char *staging_table,
							const MssqlColumn *cols, int ncols, StagingDiff *diff);

/* ALTER TABLE ... ADD COLUMN for columns (const MssqlColumn *), as text */
extern char *staging_add_columns_ddl(const char *staging_schema, const char *staging_table,
									 List *columns);

/*
 * Add the columns (nullable, with the policy's types) in the current
 * transaction, as run_as: the role that owns the staging table.
 */
extern void staging_add_columns(const char *staging_schema, const char *staging_table,
								List *columns, Oid run_as);

#endif							/* MSSQL_CDC_STAGING_H */
