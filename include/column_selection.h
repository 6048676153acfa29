/*-------------------------------------------------------------------------
 *
 * column_selection.h
 *		Which captured columns of a table reach PostgreSQL: the per-table
 *		include_columns / exclude_columns of add_table and alter_table
 *		(doc/sql-api.md "Column selection").
 *
 * A table has at most one of the two lists (tables.include_columns,
 * tables.exclude_columns; neither: every captured column).  A column the
 * selection leaves out is marked MssqlColumn.excluded right after the
 * source is described, so source_column_is_staged() is false for it: it
 * gets no staging column, and it is in neither the snapshot SELECT nor the
 * change query (both read only the staged columns), so its values never
 * leave SQL Server.
 *
 * Across a capture-instance switch the lists are kept by name: with an
 * include list a column the new instance adds stays out; with an exclude
 * list it is staged (only the named columns are left out, as Debezium's
 * column.exclude.list does).  Key columns are never left out.
 *
 * IDENTIFICATION
 *		include/column_selection.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_COLUMN_SELECTION_H
#define MSSQL_CDC_COLUMN_SELECTION_H

#include "postgres.h"

#include "fmgr.h"
#include "nodes/pg_list.h"

#include "source_schema.h"

/* A table's column selection; both NIL: every captured column */
typedef struct ColumnSelection
{
	List	   *include;		/* char *, as SQL Server spells them, or NIL */
	List	   *exclude;		/* char *, or NIL */
} ColumnSelection;

/*
 * The include_columns / exclude_columns arguments (text[] at argno; NULL
 * leaves the list NIL).  Refuses NULL or empty elements, duplicates, and
 * both lists at once (22023).  *cleared (may be NULL) is set when a list
 * was given as '{}': for alter_table, "drop the selection"; add_table
 * refuses an empty list.
 */
extern void column_selection_from_args(FunctionCallInfo fcinfo, int include_argno,
									   int exclude_argno, ColumnSelection *sel,
									   bool *cleared);

/*
 * Check the selection against the described source (its capture
 * instance): every name is a column of the table (42703 otherwise, nothing
 * changed), an included one is captured and not computed, no key column is
 * excluded and an include list names every key column (42P10).  Names are
 * replaced by SQL Server's spelling.
 */
extern void column_selection_check(const MssqlSourceTable *src, ColumnSelection *sel);

/* Mark the columns the selection leaves out (MssqlColumn.excluded). */
extern void column_selection_apply(MssqlSourceTable *src, const ColumnSelection *sel);

/* A list of names (char *) as a text[] Datum (for the catalog) */
extern Datum column_selection_array(List *names);

/*
 * The selection of a captured table, read as the extension owner; false
 * when server/schema.table is not captured.
 */
extern bool column_selection_of_table(const char *server_name, const char *schema,
									  const char *table, ColumnSelection *sel);

#endif							/* MSSQL_CDC_COLUMN_SELECTION_H */
