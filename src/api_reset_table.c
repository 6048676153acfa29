/*-------------------------------------------------------------------------
 *
 * api_reset_table.c
 *		mssql_cdc.reset_table(server, source_table, start_at): move a table
 *		to a point CDC still keeps, backwards (read again) or forwards
 *		(skip), as pg_replication_origin_advance() moves a subscription.
 *
 * In ONE transaction: the table's progress row is locked (a window running
 * for it ends first), the staging rows of changes at or after the point are
 * deleted, and the checkpoint is set to just before the point.  The worker
 * then reads the changes from the point on again, so every change is in the
 * staging table exactly once.  Snapshot rows stay: they are the table's
 * state at their L0, whichever changes are replayed around them.  The
 * checkpoint guard (catalog_guard.c) allows the backward move because
 * reset_at changes in the same update.
 *
 * IDENTIFICATION
 *		src/api_reset_table.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"

#include "api_common.h"
#include "catalog.h"
#include "options.h"
#include "source_name.h"
#include "source_schema.h"
#include "staging_partitions.h"
#include "start_point.h"
#include "tds_session.h"

PG_FUNCTION_INFO_V1(mssql_cdc_reset_table);

typedef struct ResetTarget
{
	char	   *source_schema;
	char	   *source_table;
	char	   *capture_instance;	/* NULL: the table's current one */
	char	   *staging_schema;
	char	   *staging_table;
} ResetTarget;

static void
read_target(int32 table_id, ResetTarget *t)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1];
	MemoryContext caller_cxt = CurrentMemoryContext;
	MemoryContext spi_cxt;
	HeapTuple	tuple;
	TupleDesc	desc;

	args[0] = Int32GetDatum(table_id);
	if (SPI_execute_with_args("SELECT source_schema, source_table, capture_instance,"
							  " staging_schema, staging_table"
							  " FROM mssql_cdc.tables WHERE table_id OPERATOR(pg_catalog.=) $1",
							  1, types, args, NULL, false, 0) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "could not read mssql_cdc.tables");
	tuple = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	spi_cxt = MemoryContextSwitchTo(caller_cxt);
	t->source_schema = pstrdup(SPI_getvalue(tuple, desc, 1));
	t->source_table = pstrdup(SPI_getvalue(tuple, desc, 2));
	t->capture_instance = SPI_getvalue(tuple, desc, 3);
	if (t->capture_instance)
		t->capture_instance = pstrdup(t->capture_instance);
	t->staging_schema = pstrdup(SPI_getvalue(tuple, desc, 4));
	t->staging_table = pstrdup(SPI_getvalue(tuple, desc, 5));
	MemoryContextSwitchTo(spi_cxt);
}

/* The checkpoint for the point, found on SQL Server with run_as's login */
static void
resolve_on_source(const char *server_name, Oid run_as_oid, const ResetTarget *t,
				  const StartPoint *point, MssqlLsn *checkpoint)
{
	ForeignServer *server = mssql_cdc_get_server_by_name(server_name);
	MssqlServerOptions *opts = mssql_cdc_get_server_options(server->serverid, run_as_oid);
	TdsSession *volatile session = tds_session_open(opts);

	PG_TRY();
	{
		MssqlSourceTable *src = source_schema_describe(session, t->source_schema,
													   t->source_table, t->capture_instance);

		start_point_resolve(session, src->capture_instance->name, point, checkpoint);
	}
	PG_FINALLY();
	{
		tds_session_close(session);
	}
	PG_END_TRY();
}

/*
 * Delete the staging rows of changes after the checkpoint, as run_as (the
 * owner of the staging table, like the worker's inserts).  Returns how many.
 */
static uint64
delete_after(const ResetTarget *t, Oid run_as_oid, const char *checkpoint_text)
{
	Oid			save_userid;
	int			save_sec_context;
	Oid			types[1] = {TEXTOID};
	Datum		args[1];
	uint64		deleted;
	char	   *sql;

	sql = psprintf("DELETE FROM %s WHERE _cdc_lsn OPERATOR(mssql_cdc.>) $1::mssql_cdc.lsn"
				   " AND _cdc_op OPERATOR(pg_catalog.<>) 'snapshot'",
				   quote_qualified_identifier(t->staging_schema, t->staging_table));
	args[0] = CStringGetTextDatum(checkpoint_text);
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(run_as_oid, save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(sql, 1, types, args, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not delete from staging table %s",
			 quote_qualified_identifier(t->staging_schema, t->staging_table));
	deleted = SPI_processed;
	SPI_finish();
	SetUserIdAndSecContext(save_userid, save_sec_context);
	return deleted;
}

/* mssql_cdc.reset_table(server name, source_table text, start_at text) → bigint */
Datum
mssql_cdc_reset_table(PG_FUNCTION_ARGS)
{
	Oid			caller = GetUserId();
	char	   *server_name;
	char	   *run_as;
	Oid			run_as_oid;
	int32		table_id;
	ResetTarget target;
	StartPoint	point;
	MssqlLsn	checkpoint;
	char		checkpoint_text[MSSQL_LSN_TEXT_SIZE];
	CatalogOwnerScope scope;
	uint64		deleted;

	api_require_argument(fcinfo, 2, "start_at");
	start_point_parse(text_to_cstring(PG_GETARG_TEXT_PP(2)), &point);

	table_id = api_begin_table_change(fcinfo, caller, &scope, &server_name, &run_as);
	read_target(table_id, &target);
	api_end_catalog_write(&scope);
	run_as_oid = get_role_oid(run_as, false);

	/* every local check passed: now SQL Server's (the server row stays locked) */
	resolve_on_source(server_name, run_as_oid, &target, &point, &checkpoint);
	mssql_lsn_format(&checkpoint, checkpoint_text);

	/* first the lock, so no window of the worker commits rows after the delete */
	api_begin_catalog_write(&scope);
	(void) api_lock_table_for_change(table_id);
	{
		MssqlLsn	lowest;
		MssqlLsn	from;

		/* changes below the oldest partition could not be staged again */
		(void) mssql_lsn_increment(&checkpoint, &from);
		if (staging_partitions_lowest_lsn(table_id, &lowest) && mssql_lsn_cmp(&from, &lowest) < 0)
		{
			char		lowest_text[MSSQL_LSN_TEXT_SIZE];

			mssql_lsn_format(&lowest, lowest_text);
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("start_at \"%s\" is older than the staging table's oldest partition",
							point.input),
					 errdetail("Retention dropped the partitions of changes before LSN %s.", lowest_text),
					 errhint("Give a start_at at or after LSN %s.", lowest_text)));
		}
	}
	api_end_catalog_write(&scope);

	deleted = delete_after(&target, run_as_oid, checkpoint_text);

	api_begin_catalog_write(&scope);
	{
		Oid			types[2] = {INT4OID, TEXTOID};
		Datum		args[2];

		args[0] = Int32GetDatum(table_id);
		args[1] = CStringGetTextDatum(checkpoint_text);
		/* upsert: after a restore the progress row is absent */
		if (SPI_execute_with_args("INSERT INTO mssql_cdc.table_state AS s"
								  " (table_id, phase, checkpoint_lsn, reset_at)"
								  " VALUES ($1, 'streaming', $2::mssql_cdc.lsn, pg_catalog.clock_timestamp())"
								  " ON CONFLICT (table_id) DO UPDATE SET"
								  " phase = 'streaming', checkpoint_lsn = EXCLUDED.checkpoint_lsn,"
								  " reset_at = EXCLUDED.reset_at, last_commit_time = NULL,"
								  " last_error = NULL, last_error_at = NULL, consecutive_failures = 0,"
								  " condition = NULL, hint = NULL, warning = NULL, warning_hint = NULL,"
								  " updated_at = pg_catalog.now()",
								  2, types, args, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not update mssql_cdc.table_state");
	}
	api_end_catalog_write(&scope);

	ereport(NOTICE,
			(errmsg("table %s of server \"%s\" streams from the first change after LSN %s",
					mssql_display_name(target.source_schema, target.source_table),
					server_name, checkpoint_text),
			 errdetail("%llu staging rows of later changes were removed; they are read again.",
					   (unsigned long long) deleted)));
	PG_RETURN_INT64((int64) deleted);
}
