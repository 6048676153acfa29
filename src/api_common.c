/*-------------------------------------------------------------------------
 *
 * api_common.c
 *		What the SQL API functions share: argument checks, the run_as rule,
 *		the catalog write scope and the lookups made inside it (see
 *		include/api_common.h; the security model is described in src/api.c).
 *
 * IDENTIFICATION
 *		src/api_common.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "api_common.h"
#include "catalog.h"
#include "options.h"
#include "snapshot_filter.h"
#include "source_name.h"

/*
 * Switch to the extension owner and connect SPI.  An error before
 * api_end_catalog_write() is fine: transaction abort restores the user id.
 */
void
api_begin_catalog_write(CatalogOwnerScope *scope)
{
	catalog_become_owner(scope);
	SPI_connect();
}

void
api_end_catalog_write(CatalogOwnerScope *scope)
{
	SPI_finish();
	catalog_restore_user(scope);
}

void
api_require_argument(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"%s\" must not be NULL", argname)));
}

void
api_parse_source_table(const char *input, char **schema, char **table)
{
	char	   *problem = mssql_parse_qualified_name(input, schema, table);

	if (problem)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("invalid SQL Server table name \"%s\"", input),
				 errdetail("%s", problem),
				 errhint("Write the name as SQL Server does: dbo.orders, or [my schema].[my table]; a name without schema means dbo.")));
}

/* Changes to a server in use need the privileges of the role it runs as. */
void
api_check_run_as(Oid caller, const char *server_name, const char *run_as)
{
	Oid			run_as_oid = get_role_oid(run_as, true);

	if (superuser_arg(caller))
		return;
	if (!OidIsValid(run_as_oid))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("server \"%s\" runs as role \"%s\", which no longer exists",
						server_name, run_as),
				 errhint("A superuser must change mssql_cdc.servers.run_as or remove the server's tables.")));
	if (!has_privs_of_role(caller, run_as_oid))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to change server \"%s\"", server_name),
				 errdetail("Capture from this server runs as role \"%s\".", run_as),
				 errhint("Ask a member of role \"%s\" or a superuser.", run_as)));
}

/* ---- small SPI helpers (inside a catalog write scope) ---- */

Datum
api_name_datum(const char *s)
{
	return DirectFunctionCall1(namein, CStringGetDatum(s));
}

/* Locks and reads the server row; returns run_as or NULL if absent. */
char *
api_lock_server_row(const char *server_name, bool *paused)
{
	Oid			types[1] = {NAMEOID};
	Datum		args[1];

	args[0] = api_name_datum(server_name);
	if (SPI_execute_with_args("SELECT run_as, paused FROM mssql_cdc.servers"
							  " WHERE server_name OPERATOR(pg_catalog.=) $1 FOR UPDATE",
							  1, types, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read mssql_cdc.servers");
	if (SPI_processed == 0)
		return NULL;
	if (paused)
	{
		bool		isnull;

		*paused = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
											 SPI_tuptable->tupdesc, 2, &isnull));
	}
	return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
}

/* table_id of a captured table, or 0 */
int32
api_find_captured_table(const char *server_name, const char *schema, const char *table)
{
	Oid			types[3] = {NAMEOID, TEXTOID, TEXTOID};
	Datum		args[3];
	bool		isnull;

	args[0] = api_name_datum(server_name);
	args[1] = CStringGetTextDatum(schema);
	args[2] = CStringGetTextDatum(table);
	if (SPI_execute_with_args("SELECT table_id FROM mssql_cdc.tables"
							  " WHERE server_name OPERATOR(pg_catalog.=) $1"
							  " AND source_schema OPERATOR(pg_catalog.=) $2"
							  " AND source_table OPERATOR(pg_catalog.=) $3",
							  3, types, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read mssql_cdc.tables");
	if (SPI_processed == 0)
		return 0;
	return DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
									   SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * Reports an unknown server for the functions that change an existing one:
 * first whether the foreign server exists at all, then that it has nothing
 * captured.
 */
void
api_report_server_not_in_use(const char *server_name)
{
	(void) mssql_cdc_get_server_by_name(server_name);
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("server \"%s\" has no captured tables", server_name),
			 errhint("Start capturing with mssql_cdc.add_table().")));
}

void
api_report_table_not_captured(const char *server_name, const char *schema, const char *table)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("table %s of server \"%s\" is not captured",
					mssql_display_name(schema, table), server_name),
			 errhint("Names must match mssql_cdc.tables exactly, including case.")));
}

/*
 * The on_retention_overrun policy named by the user, checked against the
 * table's snapshot mode: a 'never' table has no snapshot to take again, so
 * 'resnapshot' would silently skip the removed changes.
 */
MssqlOverrunPolicy
api_parse_overrun_policy(const char *name, MssqlSnapshotMode mode)
{
	MssqlOverrunPolicy policy;

	if (!catalog_overrun_policy_from_name(name, &policy))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid on_retention_overrun \"%s\"", name),
				 errhint("Valid values are: error (stop the table until mssql_cdc.resnapshot() is called), "
						 "resnapshot (copy the table again by itself).")));
	if (policy == MSSQL_OVERRUN_RESNAPSHOT && mode == MSSQL_SNAPSHOT_NEVER)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("on_retention_overrun 'resnapshot' needs snapshot_mode 'initial'"),
				 errdetail("A table captured with snapshot_mode 'never' has no snapshot to copy again; "
						   "changes removed by CDC cleanup would be skipped."),
				 errhint("Use on_retention_overrun 'error', or add the table with snapshot_mode 'initial'.")));
	return policy;
}

/* The common start of the functions on one captured table (api_common.h) */
int32
api_begin_table_change(FunctionCallInfo fcinfo, Oid caller, CatalogOwnerScope *scope,
					   char **server_name_out, char **run_as_out)
{
	char	   *server_name;
	char	   *source_schema;
	char	   *source_table;
	char	   *run_as;
	int32		table_id;

	api_require_argument(fcinfo, 0, "server");
	api_require_argument(fcinfo, 1, "source_table");
	server_name = NameStr(*PG_GETARG_NAME(0));
	api_parse_source_table(text_to_cstring(PG_GETARG_TEXT_PP(1)), &source_schema, &source_table);

	api_begin_catalog_write(scope);

	run_as = api_lock_server_row(server_name, NULL);
	if (run_as == NULL)
		api_report_server_not_in_use(server_name);
	api_check_run_as(caller, server_name, run_as);

	table_id = api_find_captured_table(server_name, source_schema, source_table);
	if (table_id == 0)
		api_report_table_not_captured(server_name, source_schema, source_table);
	*server_name_out = server_name;
	if (run_as_out)
		*run_as_out = run_as;
	return table_id;
}

bool
api_lock_table_for_change(int32 table_id)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1];
	bool		found;

	args[0] = Int32GetDatum(table_id);
	if (SPI_execute_with_args("SELECT 1 FROM mssql_cdc.table_state"
							  " WHERE table_id OPERATOR(pg_catalog.=) $1 FOR UPDATE",
							  1, types, args, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not lock mssql_cdc.table_state");
	found = SPI_processed == 1;
	if (SPI_execute_with_args("UPDATE mssql_cdc.tables"
							  " SET settings_version = settings_version OPERATOR(pg_catalog.+) 1"
							  " WHERE table_id OPERATOR(pg_catalog.=) $1",
							  1, types, args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not update mssql_cdc.tables");
	return found;
}

void
api_check_snapshot_filter(const char *filter, MssqlSnapshotMode mode)
{
	snapshot_filter_check_syntax(filter);
	if (mode == MSSQL_SNAPSHOT_NEVER)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("snapshot_filter needs snapshot_mode 'initial'"),
				 errdetail("A table captured with snapshot_mode 'never' is never copied, so there is nothing to filter."),
				 errhint("Add the table with snapshot_mode 'initial', or leave snapshot_filter out.")));
}

void
api_check_mirror_start(bool mirror, MssqlSnapshotMode mode, bool start_at)
{
	/* alter_table refuses a mirror for a 'never' table for the same reason */
	if (!mirror || (mode != MSSQL_SNAPSHOT_NEVER && !start_at))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 mode == MSSQL_SNAPSHOT_NEVER ?
			 errmsg("a mirror table needs snapshot_mode 'initial'") :
			 errmsg("a mirror table cannot be combined with start_at"),
			 errdetail("A mirror holds the source table's current rows and is filled by the initial copy; without it the mirror would hold only the rows changed from now on."),
			 mode == MSSQL_SNAPSHOT_NEVER ?
			 errhint("Add the table with snapshot_mode 'initial' (the default), or keep a changelog only (mirror => false).") :
			 errhint("Leave start_at out, or keep a changelog only (mirror => false).")));
}

/* at least one second: partitions are closed and dropped between windows */
static void
check_interval(Interval *value, const char *what)
{
	Interval	second;

	memset(&second, 0, sizeof(second));
	second.time = USECS_PER_SEC;
	if (DatumGetInt32(DirectFunctionCall2(interval_cmp, IntervalPGetDatum(value),
										  IntervalPGetDatum(&second))) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be at least 1 second", what),
				 errhint("Typical values are '1 day' for partition_interval and '7 days' for retention.")));
}

void
api_check_partitioning(Interval *partition_interval, Interval *retention, bool partitioned)
{
	if (partition_interval != NULL)
		check_interval(partition_interval, "partition_interval");
	if (retention != NULL)
	{
		check_interval(retention, "retention");
		if (!partitioned && partition_interval == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("retention needs a partitioned staging table"),
					 errdetail("Retention drops whole partitions; it never deletes rows one by one."),
					 errhint("Add the table with partition_interval, e.g. partition_interval => '1 day'.")));
	}
}
