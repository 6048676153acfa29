/*-------------------------------------------------------------------------
 *
 * source_schema.h
 *		Discovery of a SQL Server source table over a TDS session: its
 *		columns, primary key and CDC capture instance.
 *
 * add_table, describe_source/staging_ddl and the worker (before it
 * applies changes) all read a source through source_schema_describe, so
 * they agree on which columns are staged and how they are typed.
 *
 * IDENTIFICATION
 *		include/source_schema.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_SOURCE_SCHEMA_H
#define MSSQL_CDC_SOURCE_SCHEMA_H

#include "postgres.h"

#include "lsn.h"
#include "tds_session.h"
#include "type_map.h"

/* One row of sys.sp_cdc_help_change_data_capture for the table */
typedef struct MssqlCaptureInstance
{
	char	   *name;
	int32		change_table_id;	/* object_id of cdc.<name>_CT */
	bool		has_start_lsn;	/* false while the capture job has not started it */
	MssqlLsn	start_lsn;
	char	   *create_date;	/* ISO text, for ordering and messages */
} MssqlCaptureInstance;

/* A source table as discovered; everything palloc'd in the caller's context */
typedef struct MssqlSourceTable
{
	char	   *server_name;
	char	   *schema;			/* as SQL Server spells it */
	char	   *table;
	MssqlColumn *columns;		/* every source column, in ORDINAL_POSITION order */
	int			ncolumns;
	int			nkey;			/* primary key columns (0: the table has none) */
	MssqlCaptureInstance *instances;	/* every capture instance visible to the login */
	int			ninstances;
	const MssqlCaptureInstance *capture_instance;	/* the one used; points into instances */
} MssqlSourceTable;

/*
 * Read the table's columns, key and capture instance.  capture_instance
 * NULL picks one: the newest (by start_lsn) whose start_lsn is set, else
 * the newest by create_date.  Raises, naming the server and table:
 * ERRCODE_UNDEFINED_TABLE (no such table or not visible),
 * ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE (database or table without
 * CDC), ERRCODE_INSUFFICIENT_PRIVILEGE (table tracked, but no capture
 * instance visible to the login), ERRCODE_UNDEFINED_OBJECT (the requested
 * capture instance does not exist; the hint lists the existing ones).
 */
extern MssqlSourceTable *source_schema_describe(TdsSession *session,
												const char *schema,
												const char *table,
												const char *capture_instance);

/*
 * Run a batch and collect, as text, the named columns (names[0..ncols-1],
 * matched case-insensitively) of every row of every result set that has
 * them all; result sets without them are skipped.  Returns a List of
 * char *[ncols] (NULL for SQL NULL).
 */
extern List *source_schema_fetch_rows(TdsSession *session, const char *sql,
									  const char *const *names, int ncols);

/*
 * The same for the current result set only (*usable: it has them all;
 * otherwise its rows are not read), keeping at most max_rows rows (> 0;
 * the rest are read and dropped)
 */
extern List *source_schema_result_rows(TdsSession *session, const char *const *names,
									   int ncols, int max_rows, bool *usable);

/* Whether sys.tables lists the source table, and as tracked by CDC */
typedef enum SourceCdcTracking
{
	SOURCE_TABLE_NOT_FOUND,
	SOURCE_TABLE_NOT_TRACKED,
	SOURCE_TABLE_TRACKED
} SourceCdcTracking;

/*
 * sys.tables.is_tracked_by_cdc of schema.table: tells "CDC was disabled for
 * the table" from "the login may not see its capture instances" when none
 * is visible.
 */
extern SourceCdcTracking source_schema_cdc_tracking(TdsSession *session, const char *schema,
													const char *table);

/* A binary(10) column as text ("\x0000002A000001F00003") -> LSN; false for NULL */
extern bool source_schema_parse_binary_lsn(const char *text, MssqlLsn *lsn);

/* 'dbo.orders of server "erp"': names the source in staging table comments */
extern char *source_label(const MssqlSourceTable *src);

#endif							/* MSSQL_CDC_SOURCE_SCHEMA_H */
