/*-------------------------------------------------------------------------
 *
 * column_selection_alter.c
 *		A new column selection for a live table (alter_table; see
 *		include/column_selection_alter.h).
 *
 * A column the new selection leaves out keeps its staging column, NULL in
 * the rows staged from then on (its past values stay: drop the column if
 * they must go).  A column it adds gets a staging column at once, in the
 * transaction that stores the selection; rows staged before have NULL
 * there, and resnapshot() fills it for every row.
 *
 * IDENTIFICATION
 *		src/column_selection_alter.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "foreign/foreign.h"

#include "column_selection_alter.h"
#include "options.h"
#include "source_name.h"
#include "staging.h"
#include "tds_session.h"

MssqlSourceTable *
column_selection_describe(const char *server_name, Oid run_as_oid, const char *schema,
						  const char *table, const char *capture_instance,
						  ColumnSelection *sel)
{
	ForeignServer *server = mssql_cdc_get_server_by_name(server_name);
	MssqlServerOptions *opts = mssql_cdc_get_server_options(server->serverid, run_as_oid);
	TdsSession *volatile session = tds_session_open(opts);
	MssqlSourceTable *volatile src = NULL;

	PG_TRY();
	{
		src = source_schema_describe(session, schema, table, capture_instance);
	}
	PG_FINALLY();
	{
		tds_session_close(session);
	}
	PG_END_TRY();
	column_selection_check(src, sel);
	column_selection_apply(src, sel);
	return src;
}

int
column_selection_extend_staging(const MssqlSourceTable *src, const char *staging_schema,
								const char *staging_table, Oid run_as_oid)
{
	StagingDiff diff;

	staging_compare(staging_schema, staging_table, src->columns, src->ncolumns, &diff);
	if (diff.conflict != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column %s of table %s cannot be staged again: its staging column has type %s, the column maps to %s now",
						tds_quote_ident(diff.conflict->name),
						mssql_display_name(src->schema, src->table),
						diff.conflict_staging_type, diff.conflict_new_type),
				 errhint("Leave the column out, or drop its staging column first.")));
	if (diff.reserved != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_RESERVED_NAME),
				 errmsg("column %s of table %s cannot be staged: names starting with \"%s\" are reserved for metadata",
						tds_quote_ident(diff.reserved->name),
						mssql_display_name(src->schema, src->table), STAGING_METADATA_PREFIX)));
	staging_add_columns(staging_schema, staging_table, diff.missing, run_as_oid);
	return list_length(diff.missing);
}
