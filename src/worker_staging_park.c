/*-------------------------------------------------------------------------
 *
 * worker_staging_park.c
 *		One broken staging table does not stop its source, nor does a change
 *		whose value PostgreSQL cannot hold (unsupported_value).  Before a
 *		table's rows are written in a window, its staging table's shape is
 *		checked (doc/type-mapping.md: columns, types, primary key); a window
 *		whose write fails for one table is rolled back as a whole (invariant
 *		6), the failure counts for that table, and after
 *		mssql_cdc.table_failures_before_park failures in a row the table is
 *		parked in phase 'error' with its condition.  The next window then
 *		commits the source's other tables without it.
 *
 * The parked table's checkpoint stays where the failed windows started, so
 * nothing is lost: once the user fixed the staging table,
 * mssql_cdc.resume(server, table) puts it back to 'streaming' and it
 * catches up in windows of its own (a retention overrun meanwhile follows
 * its policy at its first window, as for a paused table).  A bad value is
 * not fixed that way (the change stays in the change table): the user
 * corrects the source row and calls resnapshot().
 *
 * Counting across the worker's restarts uses table_state.consecutive_failures
 * (reset by every window the table commits); the failure must be the same
 * kind (a staging condition or a bad value) when the bound is reached, so
 * a flaky source never parks a table.
 *
 * IDENTIFICATION
 *		src/worker_staging_park.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "apply.h"
#include "error_condition.h"
#include "mssql_cdc.h"
#include "staging.h"

#include "worker_internal.h"

/* The table whose rows the current window is writing (worker_window.c) */
bool		worker_ctx_window_table = false;
MssqlLsn	worker_ctx_window_checkpoint;

/*
 * Raise when the staging table no longer has the shape the worker writes
 * (a column dropped or of another type, the primary key gone, a NOT NULL
 * column without default).  Errors of the check are reported as a
 * changed staging table (SQLSTATE 42P16, condition staging_table_changed)
 * with the check's own message and hint.
 */
void
worker_check_staging_shape(const MssqlCdcTable *table, const MssqlSourceTable *src)
{
	MemoryContext old = CurrentMemoryContext;

	PG_TRY();
	{
		staging_check_table(table->staging_schema, table->staging_table,
							src->columns, src->ncolumns);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(old);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_UNDEFINED_TABLE &&
			edata->sqlerrcode != ERRCODE_UNDEFINED_COLUMN)
		{
			FlushErrorState();
			edata->sqlerrcode = ERRCODE_INVALID_TABLE_DEFINITION;
			ReThrowError(edata);
		}
		PG_RE_THROW();
	}
	PG_END_TRY();
}

static bool
is_staging_condition(const char *condition)
{
	return strcmp(condition, COND_STAGING_TABLE_MISSING) == 0 ||
		strcmp(condition, COND_STAGING_TABLE_CHANGED) == 0 ||
		strcmp(condition, COND_STAGING_PERMISSION_DENIED) == 0 ||
		strcmp(condition, COND_STAGING_CONSTRAINT) == 0;
}

/*
 * A change whose value PostgreSQL cannot hold (a NUL character) fails every
 * window that reads it: it stays in SQL Server's change table whatever the
 * source row becomes, so retrying never helps and would hold up the
 * source's other tables for good.  It parks like a staging failure, but
 * resume() leaves it parked (it would read the same change again;
 * api_table_pause.c continues staging_* tables only): the way on is a new
 * copy.
 */
static bool
is_value_condition(const char *condition)
{
	return strcmp(condition, COND_UNSUPPORTED_VALUE) == 0;
}

/*
 * In the error transaction, after the failure was counted: park the table
 * whose rows failed in a window (its staging write, or a value of its
 * changes), once it failed often enough.  in_window and checkpoint are what
 * the failed window saw (the context is cleared by then).  Returns the hint
 * to record for the table: the parking hint when it was parked, else NULL.
 */
char *
worker_park_failing_table(int32 table_id, bool in_window, const MssqlLsn *checkpoint,
						  const char *condition, const char *hint, const char *message)
{
	bool		value = is_value_condition(condition);
	char	   *park_hint;

	if (table_id <= 0 || !in_window || !(value || is_staging_condition(condition)))
		return NULL;
	/* the hint of a bad value already says what to do (error_condition.c) */
	park_hint = psprintf("%s The table was parked after %d failed windows in a row "
						 "(mssql_cdc.table_failures_before_park); the other tables of the source stream on and "
						 "its checkpoint stays.%s",
						 hint ? hint : "", mssql_cdc_table_failures_before_park,
						 value ? "" :
						 "  After fixing the staging table, call mssql_cdc.resume(server, source_table) for it: "
						 "it catches up from its checkpoint.");
	if (!apply_park_failing_table(table_id, checkpoint, mssql_cdc_table_failures_before_park,
								  condition, park_hint))
		return NULL;
	ereport(WARNING,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("mssql_cdc: table %d of source \"%s\" stopped: %s %d windows in a row: %s",
					table_id, worker_server_name,
					value ? "a value of its changes failed" : "its staging table refused",
					mssql_cdc_table_failures_before_park, message),
			 errhint("%s", park_hint)));
	return park_hint;
}
