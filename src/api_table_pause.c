/*-------------------------------------------------------------------------
 *
 * api_table_pause.c
 *		mssql_cdc.pause(server, source_table) and resume(server,
 *		source_table): stop one table while the server's other tables
 *		stream on.
 *
 * A paused table keeps its checkpoint: the worker neither reads windows
 * nor copies snapshot chunks for it.  After resume it is behind the
 * others, catches up in windows of its own and joins theirs once it has
 * the same checkpoint (src/worker.c groups tables by checkpoint).  While it
 * lags, a source transaction that spans it and another table lands in the
 * other table first and in it later.  If CDC cleanup removed changes it
 * still needs while it was paused, its on_retention_overrun policy applies
 * at its first window after resume, as for a stopped worker.
 *
 * resume(server, table) also continues a table the worker parked because
 * its staging table refused its rows (src/worker_staging_park.c), from its
 * checkpoint, once the user fixed the staging table.
 *
 * IDENTIFICATION
 *		src/api_table_pause.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "api_common.h"
#include "catalog.h"
#include "source_name.h"

PG_FUNCTION_INFO_V1(mssql_cdc_pause_table);
PG_FUNCTION_INFO_V1(mssql_cdc_resume_table);

/*
 * A table the worker parked because its staging table refused its rows
 * (worker_staging_park.c: phase 'error', a staging_* condition) streams
 * again from its checkpoint, which the failed windows never moved.  Its
 * failure streak starts over: a staging table still broken is parked
 * again after mssql_cdc.table_failures_before_park windows.
 */
static bool
unpark_staging_table(int32 table_id)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1];
	const char *where = " WHERE table_id OPERATOR(pg_catalog.=) $1 AND phase OPERATOR(pg_catalog.=) 'error'"
		" AND checkpoint_lsn IS NOT NULL AND condition OPERATOR(pg_catalog.~) '^staging_'";

	args[0] = Int32GetDatum(table_id);
	if (SPI_execute_with_args(psprintf("SELECT 1 FROM mssql_cdc.table_state%s", where),
							  1, types, args, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read mssql_cdc.table_state");
	if (SPI_processed != 1)
		return false;
	(void) api_lock_table_for_change(table_id);
	if (SPI_execute_with_args(psprintf("UPDATE mssql_cdc.table_state SET phase = 'streaming',"
									   " condition = NULL, hint = NULL, consecutive_failures = 0,"
									   " updated_at = pg_catalog.now()%s", where),
							  1, types, args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not update mssql_cdc.table_state");
	return SPI_processed == 1;
}

/*
 * set tables.paused (resume also continues a table parked for its staging
 * table); repeating a call is a no-op with a NOTICE
 */
static void
set_table_paused(FunctionCallInfo fcinfo, bool pause)
{
	Oid			caller = GetUserId();
	char	   *server_name;
	char	   *schema;
	char	   *table;
	int32		table_id;
	bool		changed;
	CatalogOwnerScope scope;
	Oid			types[2] = {INT4OID, BOOLOID};
	Datum		args[2];

	table_id = api_begin_table_change(fcinfo, caller, &scope, &server_name, NULL);
	api_parse_source_table(text_to_cstring(PG_GETARG_TEXT_PP(1)), &schema, &table);

	args[0] = Int32GetDatum(table_id);
	args[1] = BoolGetDatum(pause);
	if (SPI_execute_with_args("SELECT 1 FROM mssql_cdc.tables"
							  " WHERE table_id OPERATOR(pg_catalog.=) $1"
							  " AND paused OPERATOR(pg_catalog.<>) $2",
							  2, types, args, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read mssql_cdc.tables");
	changed = SPI_processed == 1;
	if (changed)
	{
		/* after a window that is running for it: the next one sees the change */
		(void) api_lock_table_for_change(table_id);
		if (SPI_execute_with_args("UPDATE mssql_cdc.tables SET paused = $2"
								  " WHERE table_id OPERATOR(pg_catalog.=) $1",
								  2, types, args, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not update mssql_cdc.tables");
	}

	/* resume also continues a table parked for its staging table */
	if (!pause && unpark_staging_table(table_id))
		changed = true;

	api_end_catalog_write(&scope);

	if (!changed)
		ereport(NOTICE,
				(errmsg("table %s of server \"%s\" is already %s",
						mssql_display_name(schema, table), server_name,
						pause ? "paused" : "running")));
}

/* mssql_cdc.pause(server name, source_table text) → void */
Datum
mssql_cdc_pause_table(PG_FUNCTION_ARGS)
{
	set_table_paused(fcinfo, true);
	PG_RETURN_VOID();
}

/* mssql_cdc.resume(server name, source_table text) → void */
Datum
mssql_cdc_resume_table(PG_FUNCTION_ARGS)
{
	set_table_paused(fcinfo, false);
	PG_RETURN_VOID();
}
