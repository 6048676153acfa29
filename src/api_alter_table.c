/*-------------------------------------------------------------------------
 *
 * api_alter_table.c
 *		mssql_cdc.alter_table(server, source_table, ...): change the settings
 *		of a captured table while it is live.
 *
 * Each named argument is one setting; NULL (the default) leaves it as it
 * is.  Every value is checked before anything is written, SQL Server's part
 * (a snapshot_filter) with the credentials the worker uses, and then the
 * settings change in one statement together with tables.settings_version.
 * The change takes effect at a window boundary: api_lock_table_for_change
 * waits for a window or chunk that is running for the table, and one that
 * was planned with the old settings is skipped (table_settings.h).
 *
 * IDENTIFICATION
 *		src/api_alter_table.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "foreign/foreign.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "api_common.h"
#include "catalog.h"
#include "column_selection_alter.h"
#include "mirror.h"
#include "options.h"
#include "source_name.h"
#include "snapshot_filter.h"
#include "tds_session.h"

PG_FUNCTION_INFO_V1(mssql_cdc_alter_table);

/* Arguments of alter_table after server and source_table */
#define ARG_ON_RETENTION_OVERRUN	2
#define ARG_SNAPSHOT_FILTER			3
#define ARG_PARTITION_INTERVAL		4
#define ARG_RETENTION				5
#define ARG_INCLUDE_COLUMNS			6
#define ARG_EXCLUDE_COLUMNS			7
#define ARG_UPDATE_BEFORE			8
#define ARG_MIRROR					9
#define ARG_MIRROR_TABLE			10
#define ARG_CHANGELOG				11
/* table_id and at most one SQL argument per setting */
#define ALTER_TABLE_NARGS			12

/* The table's current settings that the checks depend on */
typedef struct TableRow
{
	char	   *source_schema;
	char	   *source_table;
	char	   *capture_instance;	/* NULL: the current one */
	char	   *staging_schema;
	char	   *staging_table;
	MssqlSnapshotMode mode;
	bool		partitioned;
} TableRow;

/*
 * Read inside the write scope; the strings go to caller_cxt, the function's
 * own context (SPI's, current inside the scope, is gone at SPI_finish).
 */
static void
read_table_row(int32 table_id, TableRow *row, MemoryContext caller_cxt)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1];
	MemoryContext spi_cxt;

	args[0] = Int32GetDatum(table_id);
	if (SPI_execute_with_args("SELECT source_schema, source_table, snapshot_mode,"
							  " partition_interval IS NOT NULL, capture_instance,"
							  " staging_schema, staging_table"
							  " FROM mssql_cdc.tables WHERE table_id OPERATOR(pg_catalog.=) $1",
							  1, types, args, NULL, false, 0) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "could not read mssql_cdc.tables");
	spi_cxt = MemoryContextSwitchTo(caller_cxt);
	row->source_schema = pstrdup(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
	row->source_table = pstrdup(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2));
	if (!catalog_snapshot_mode_from_name(SPI_getvalue(SPI_tuptable->vals[0],
													  SPI_tuptable->tupdesc, 3), &row->mode))
		elog(ERROR, "unexpected snapshot_mode in mssql_cdc.tables");
	row->partitioned = strcmp(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4), "t") == 0;
	row->capture_instance = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5);
	row->staging_schema = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 6);
	row->staging_table = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 7);
	MemoryContextSwitchTo(spi_cxt);
}

static char *
display_name(const TableRow *row)
{
	return mssql_display_name(row->source_schema, row->source_table);
}

/* Ask SQL Server, as the role the worker runs as, to parse the filter. */
static void
validate_filter_remotely(const char *server_name, Oid run_as_oid, const TableRow *row,
						 const char *filter)
{
	ForeignServer *server = mssql_cdc_get_server_by_name(server_name);
	MssqlServerOptions *opts = mssql_cdc_get_server_options(server->serverid, run_as_oid);
	TdsSession *volatile session = tds_session_open(opts);

	PG_TRY();
	{
		snapshot_filter_validate(session, row->source_schema, row->source_table, filter);
	}
	PG_FINALLY();
	{
		tds_session_close(session);
	}
	PG_END_TRY();
}

/*
 * mssql_cdc.alter_table(server name, source_table text,
 *                       on_retention_overrun text, snapshot_filter text,
 *                       partition_interval interval, retention interval,
 *                       include_columns text[], exclude_columns text[],
 *                       update_before boolean) → void
 */
Datum
mssql_cdc_alter_table(PG_FUNCTION_ARGS)
{
	Oid			caller = GetUserId();
	MemoryContext fn_cxt = CurrentMemoryContext;
	char	   *server_name;
	char	   *run_as;
	int32		table_id;
	TableRow	row;
	CatalogOwnerScope scope;
	StringInfoData set;
	Oid			types[ALTER_TABLE_NARGS];
	Datum		args[ALTER_TABLE_NARGS];
	char		nulls[ALTER_TABLE_NARGS];
	int			nargs = 1;
	char	   *filter = NULL;
	bool		filter_given = !PG_ARGISNULL(ARG_SNAPSHOT_FILTER);
	ColumnSelection selection;
	bool		selection_given;
	MssqlSourceTable *src = NULL;
	MirrorAlter mirror;
	MirrorAlterTarget mirror_target;
	int			i;

	for (i = ARG_ON_RETENTION_OVERRUN; i < PG_NARGS(); i++)
		if (!PG_ARGISNULL(i))
			break;
	if (i >= PG_NARGS())
	{
		/* say which arguments exist rather than do nothing silently */
		(void) api_begin_table_change(fcinfo, caller, &scope, &server_name, NULL);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("alter_table needs a setting to change"),
				 errhint("Name one or more of: on_retention_overrun, snapshot_filter, partition_interval, retention, include_columns, exclude_columns, update_before, mirror, mirror_table, changelog.")));
	}
	/* argument checks that need no catalog: both lists, NULL elements ... */
	column_selection_from_args(fcinfo, ARG_INCLUDE_COLUMNS, ARG_EXCLUDE_COLUMNS, &selection, NULL);
	selection_given = !PG_ARGISNULL(ARG_INCLUDE_COLUMNS) || !PG_ARGISNULL(ARG_EXCLUDE_COLUMNS);
	mirror_alter_from_args(fcinfo, ARG_MIRROR, ARG_MIRROR_TABLE, ARG_CHANGELOG, &mirror);
	if (selection_given && mirror.mirror_given)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the column selection and the mirror cannot change in one alter_table call"),
				 errhint("Change the column selection first, then the mirror.")));

	table_id = api_begin_table_change(fcinfo, caller, &scope, &server_name, &run_as);
	/* used after the write scope ends (SPI_finish frees SPI's memory) */
	run_as = MemoryContextStrdup(fn_cxt, run_as);
	read_table_row(table_id, &row, fn_cxt);
	/* the same for the statement and its arguments built below */
	MemoryContextSwitchTo(fn_cxt);

	memset(nulls, ' ', sizeof(nulls));
	initStringInfo(&set);
	types[0] = INT4OID;
	args[0] = Int32GetDatum(table_id);

	if (!PG_ARGISNULL(ARG_ON_RETENTION_OVERRUN))
	{
		MssqlOverrunPolicy policy =
			api_parse_overrun_policy(text_to_cstring(PG_GETARG_TEXT_PP(ARG_ON_RETENTION_OVERRUN)),
									 row.mode);

		types[nargs] = TEXTOID;
		args[nargs++] = CStringGetTextDatum(catalog_overrun_policy_name(policy));
		appendStringInfo(&set, ", on_retention_overrun = $%d", nargs);
	}
	if (filter_given)
	{
		/* '' removes the filter: the next snapshot copies every row */
		filter = text_to_cstring(PG_GETARG_TEXT_PP(ARG_SNAPSHOT_FILTER));
		if (filter[0] != '\0')
			api_check_snapshot_filter(filter, row.mode);
		types[nargs] = TEXTOID;
		args[nargs] = filter[0] != '\0' ? CStringGetTextDatum(filter) : (Datum) 0;
		nulls[nargs] = filter[0] != '\0' ? ' ' : 'n';
		nargs++;
		appendStringInfo(&set, ", snapshot_filter = $%d", nargs);
	}
	if (!PG_ARGISNULL(ARG_PARTITION_INTERVAL) || !PG_ARGISNULL(ARG_RETENTION))
	{
		Interval   *partition_interval = PG_ARGISNULL(ARG_PARTITION_INTERVAL) ? NULL :
			PG_GETARG_INTERVAL_P(ARG_PARTITION_INTERVAL);
		Interval   *retention = PG_ARGISNULL(ARG_RETENTION) ? NULL :
			PG_GETARG_INTERVAL_P(ARG_RETENTION);
		Interval	zero;

		/* retention => '0' keeps every partition again */
		memset(&zero, 0, sizeof(zero));
		if (retention != NULL &&
			DatumGetBool(DirectFunctionCall2(interval_eq, IntervalPGetDatum(retention),
											 IntervalPGetDatum(&zero))))
			retention = NULL;
		if (partition_interval != NULL && !row.partitioned)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("the staging table of %s is not partitioned", display_name(&row)),
					 errdetail("A staging table is made partitioned when the table is added."),
					 errhint("Add the table again with partition_interval, into a new staging table.")));
		if (retention != NULL && !row.partitioned)
			api_check_partitioning(NULL, retention, false);
		api_check_partitioning(partition_interval, retention, true);
		if (partition_interval != NULL)
		{
			types[nargs] = INTERVALOID;
			args[nargs++] = IntervalPGetDatum(partition_interval);
			appendStringInfo(&set, ", partition_interval = $%d", nargs);
		}
		if (!PG_ARGISNULL(ARG_RETENTION))
		{
			types[nargs] = INTERVALOID;
			args[nargs] = retention ? IntervalPGetDatum(retention) : (Datum) 0;
			nulls[nargs] = retention ? ' ' : 'n';
			nargs++;
			appendStringInfo(&set, ", retention = $%d", nargs);
		}
	}
	if (selection_given)
	{
		/* '{}' drops the selection: every captured column again */
		types[nargs] = TEXTARRAYOID;
		args[nargs] = selection.include ? column_selection_array(selection.include) : (Datum) 0;
		nulls[nargs] = selection.include ? ' ' : 'n';
		nargs++;
		appendStringInfo(&set, ", include_columns = $%d", nargs);
		types[nargs] = TEXTARRAYOID;
		args[nargs] = selection.exclude ? column_selection_array(selection.exclude) : (Datum) 0;
		nulls[nargs] = selection.exclude ? ' ' : 'n';
		nargs++;
		appendStringInfo(&set, ", exclude_columns = $%d", nargs);
	}
	if (!PG_ARGISNULL(ARG_UPDATE_BEFORE))
	{
		types[nargs] = BOOLOID;
		args[nargs++] = BoolGetDatum(PG_GETARG_BOOL(ARG_UPDATE_BEFORE));
		appendStringInfo(&set, ", update_before = $%d", nargs);
	}
	api_end_catalog_write(&scope);

	/* every local check passed: now SQL Server's (the server row stays locked) */
	mirror_target.display = display_name(&row);
	mirror_target.source_schema = row.source_schema;
	mirror_target.source_table = row.source_table;
	mirror_target.capture_instance = row.capture_instance;
	mirror_target.staging_schema = row.staging_schema;
	mirror_target.staging_table = row.staging_table;
	mirror_target.mode = row.mode;
	mirror_alter_prepare(&mirror, table_id, server_name, get_role_oid(run_as, false),
						 &mirror_target);
	if (filter != NULL && filter[0] != '\0')
		validate_filter_remotely(server_name, get_role_oid(run_as, false), &row, filter);
	if (selection_given)
	{
		src = column_selection_describe(server_name, get_role_oid(run_as, false),
										row.source_schema, row.source_table,
										row.capture_instance, &selection);
		/* names as SQL Server spells them */
		for (i = 1; i < nargs; i++)
			if (types[i] == TEXTARRAYOID && nulls[i] != 'n')
				args[i] = column_selection_array(selection.include ? selection.include :
												 selection.exclude);
	}

	api_begin_catalog_write(&scope);
	(void) api_lock_table_for_change(table_id);
	if (src != NULL)
	{
		(void) column_selection_extend_staging(src, row.staging_schema, row.staging_table,
											   get_role_oid(run_as, false));
		mirror_extend_columns(table_id, src, get_role_oid(run_as, false));
	}
	if (set.len > 0 &&
		(SPI_execute_with_args(psprintf("UPDATE mssql_cdc.tables SET %s"
										" WHERE table_id OPERATOR(pg_catalog.=) $1",
										set.data + 2),
							   nargs, types, args, nulls, false, 0) != SPI_OK_UPDATE ||
		 SPI_processed != 1))
		elog(ERROR, "could not update mssql_cdc.tables");
	mirror_alter_commit(&mirror, table_id, get_role_oid(run_as, false));
	api_end_catalog_write(&scope);
	mirror_alter_finish(&mirror, fcinfo);
	PG_RETURN_VOID();
}
