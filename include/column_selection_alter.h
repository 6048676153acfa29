/*-------------------------------------------------------------------------
 *
 * column_selection_alter.h
 *		alter_table's part of the column selection: check a new selection
 *		against the table's capture instance, and give the staging table the
 *		columns it now stages.
 *
 * IDENTIFICATION
 *		include/column_selection_alter.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_COLUMN_SELECTION_ALTER_H
#define MSSQL_CDC_COLUMN_SELECTION_ALTER_H

#include "postgres.h"

#include "column_selection.h"
#include "source_schema.h"

/*
 * Describe the source through capture_instance (NULL: the current one)
 * with run_as's credentials, check sel against it (unless both lists are
 * NIL: every captured column) and mark the columns it leaves out.
 */
extern MssqlSourceTable *column_selection_describe(const char *server_name, Oid run_as_oid,
												   const char *schema, const char *table,
												   const char *capture_instance,
												   ColumnSelection *sel);

/*
 * In the transaction that stores the selection, after the table's progress
 * row is locked: add the staging columns of columns the selection now
 * stages (nullable; rows staged before have NULL there), as run_as.
 * Refuses (nothing changed) when a staging column has another type than
 * the column maps to, or a new column has a reserved name.  Returns the
 * number of columns added.
 */
extern int	column_selection_extend_staging(const MssqlSourceTable *src,
											const char *staging_schema,
											const char *staging_table, Oid run_as_oid);

#endif							/* MSSQL_CDC_COLUMN_SELECTION_ALTER_H */
