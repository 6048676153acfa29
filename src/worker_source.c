/*-------------------------------------------------------------------------
 *
 * worker_source.c
 *		The source side of a table as the worker sees it: its description
 *		through a capture instance (once per connection), adopting a new
 *		capture instance before a snapshot, CDC disabled on the database,
 *		and parking a table that needs the user (retention overrun, a
 *		source gone).  Parking writes its own short transaction and never a
 *		position.
 *
 * IDENTIFICATION
 *		src/worker_source.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "apply.h"
#include "capture_instance_switch.h"
#include "catalog.h"
#include "column_selection.h"
#include "error_condition.h"
#include "source_schema.h"

#include "worker_internal.h"

/* Sources described on the current connection (reset on reconnect) */
typedef struct DescribedTable
{
	int32		table_id;
	MssqlSourceTable *src;
} DescribedTable;

static List *described_tables = NIL;

/*
 * Mark the columns the table's selection leaves out (they get no staging
 * column and are not read from SQL Server).  Applied to every description
 * the worker hands out, the cached ones too: alter_table may have changed
 * the selection since (the unit that reads the settings it was planned
 * with runs with them, table_settings.h).
 */
static void
apply_selection(const MssqlCdcTable *table, MssqlSourceTable *src)
{
	ColumnSelection sel;

	sel.include = table->include_columns;
	sel.exclude = table->exclude_columns;
	column_selection_apply(src, &sel);
}

/* A new connection describes every table again. */
void
worker_forget_described(void)
{
	described_tables = NIL;
}

/*
 * A separate short transaction that records why a table cannot continue
 * (it needs the user); the rest of the source goes on.  condition is the
 * status condition (include/error_condition.h).
 */
void
worker_park_table(const MssqlCdcTable *table, const char *condition,
						  const char *message, const char *hint)
{
	char	   *full = hint ? psprintf("%s %s", message, hint) : pstrdup(message);

	bool		parked;

	worker_begin_xact();
	/* a resnapshot()/resume committed since the worker read the table wins */
	parked = apply_set_table_error(table, full);
	if (parked)
	{
		catalog_set_table_condition(table->table_id, condition, hint);
		catalog_record_error_condition(worker_server_name, table->table_id, "55000", message, NULL, hint, 0,
									   condition);
	}
	worker_commit_xact();
	if (parked)
		ereport(WARNING,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("mssql_cdc: table %s.%s of source \"%s\" stopped: %s",
						table->source_schema, table->source_table, worker_server_name, message),
				 hint ? errhint("%s", hint) : 0));
	else
		ereport(LOG,
				(errmsg("mssql_cdc: table %s.%s of source \"%s\" is not stopped: it was changed (resnapshot, reset or resume) since the worker found: %s",
						table->source_schema, table->source_table, worker_server_name, message)));
}

/*
 * CDC cleanup removed changes the table still needs (invariant 5: never a
 * silent skip).  Policy 'error' parks the table for the user; 'resnapshot'
 * records the overrun (errors log, LOG line, status warning) and sends the
 * table back to 'pending', so its staging table gets a new snapshot set.
 */
void
worker_retention_overrun(const MssqlCdcTable *table, const char *message)
{
	const char *retention_hint = "raise the CDC retention (sys.sp_cdc_change_job @retention) so the worker can keep up.";
	char	   *hint;
	bool		restarted;

	/*
	 * a 'never' table has no snapshot to take: resnapshot() continues it
	 * from the oldest change kept (worker_retention_gap.c), never by itself
	 */
	if (table->snapshot_mode != MSSQL_SNAPSHOT_INITIAL)
	{
		worker_park_table(table, COND_RETENTION_OVERRUN, message,
						  psprintf("This table has nothing to take a snapshot of (snapshot_mode 'never'): "
								   "mssql_cdc.resnapshot() continues it from the oldest change CDC keeps and "
								   "records the lost LSN range as a retention_gap error; %s",
								   retention_hint));
		return;
	}
	if (table->on_retention_overrun != MSSQL_OVERRUN_RESNAPSHOT)
	{
		worker_park_table(table, COND_RETENTION_OVERRUN, message,
						  psprintf("Call mssql_cdc.resnapshot() for this table to copy it again, and %s",
								   retention_hint));
		return;
	}

	hint = psprintf("The table is copied again by a new snapshot (on_retention_overrun = 'resnapshot'); %s",
					retention_hint);
	worker_begin_xact();
	restarted = catalog_resnapshot_after_overrun(table->table_id, message, hint);
	if (restarted)
		catalog_record_error_condition(worker_server_name, table->table_id, "55000", message, NULL, hint, 0,
									   COND_RETENTION_OVERRUN);
	worker_commit_xact();
	if (restarted)
		ereport(LOG,
				(errmsg("mssql_cdc: table %s.%s of source \"%s\" is copied again: %s",
						table->source_schema, table->source_table, worker_server_name, message),
				 errhint("%s", hint)));
}

/*
 * The source table read through capture instance ci (allocated for the
 * connection).  NULL after parking the table in phase 'error' when the
 * source is gone or not readable any more: that needs the user, and
 * retrying would not help.
 */
MssqlSourceTable *
worker_describe_ci(const MssqlCdcTable *table, const char *ci)
{
	MssqlSourceTable *volatile src = NULL;
	MemoryContext old;
	ErrorData  *edata = NULL;

	old = MemoryContextSwitchTo(worker_connection_context);
	PG_TRY();
	{
		src = source_schema_describe(worker_session, table->source_schema, table->source_table, ci);
		/* the spatial mapping the staging table was created with */
		mssql_columns_set_postgis(src->columns, src->ncolumns, table->spatial_postgis);
		apply_selection(table, src);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(worker_iteration_context);
		edata = CopyErrorData();
		switch (edata->sqlerrcode)
		{
			case ERRCODE_INSUFFICIENT_PRIVILEGE:
				{
					const TdsRemoteError *remote = tds_session_last_error(worker_session);

					/*
					 * SQL Server refused a describe query (Msg 229 and
					 * friends): a GRANT fixes that, so fail the iteration
					 * and retry with backoff instead of parking the table.
					 */
					if (remote != NULL && remote->kind == TDS_ERROR_REMOTE)
						PG_RE_THROW();
				}
				/* FALLTHROUGH */
			case ERRCODE_UNDEFINED_TABLE:
			case ERRCODE_UNDEFINED_OBJECT:
			case ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE:
				FlushErrorState();
				break;
			default:
				PG_RE_THROW();
		}
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);

	if (edata != NULL)
	{
		const char *condition;

		switch (edata->sqlerrcode)
		{
			case ERRCODE_UNDEFINED_TABLE:
				condition = COND_SOURCE_TABLE_MISSING;
				/* the describe's hint is about a name typed in add_table */
				edata->hint = ci_hint_source_table_missing(table);
				break;
			case ERRCODE_UNDEFINED_OBJECT:
				condition = COND_CAPTURE_INSTANCE_MISSING;
				break;
			case ERRCODE_INSUFFICIENT_PRIVILEGE:
				condition = COND_PERMISSION_DENIED;
				break;
			default:
				condition = COND_SOURCE_UNAVAILABLE;
				break;
		}
		worker_park_table(table, condition, edata->message,
								  edata->hint ? edata->hint : "Fix the source, then call mssql_cdc.resnapshot().");
		return NULL;
	}
	return src;
}

/* Keep src as the table's description for this connection (replacing one) */

void
worker_remember_described(int32 table_id, MssqlSourceTable *src)
{
	ListCell   *lc;
	DescribedTable *d;
	MemoryContext old;

	foreach(lc, described_tables)
	{
		d = lfirst(lc);
		if (d->table_id == table_id)
		{
			d->src = src;
			return;
		}
	}
	old = MemoryContextSwitchTo(worker_connection_context);
	d = palloc(sizeof(DescribedTable));
	d->table_id = table_id;
	d->src = src;
	described_tables = lappend(described_tables, d);
	MemoryContextSwitchTo(old);
}

/*
 * A table about to be snapshot whose recorded capture instance was dropped
 * while another one exists (the recovery: new instance, then resnapshot)
 * adopts that one before the snapshot: new staging columns, the instance
 * recorded, a history row, in one short transaction (no stream position
 * depends on it yet).  Returns false when there is nothing to adopt;
 * otherwise *src is the description, or NULL when the table waits (the
 * capture job has not started the other instance yet) or was parked.
 */
static bool
adopt_capture_instance_for_snapshot(const MssqlCdcTable *table, MssqlSourceTable **src_out)
{
	static const MssqlLsn no_from = {{0}};
	CiPlan		plan;
	MssqlSourceTable *src;
	StagingDiff diff;
	char	   *problem;
	char	   *hint = NULL;

	*src_out = NULL;
	if (table->phase != MSSQL_PHASE_PENDING || !worker_source_cdc.known ||
		!worker_source_cdc.cdc_enabled)
		return false;
	plan = ci_plan_for_window(&worker_source_cdc, table, &no_from);
	if (plan.current != NULL || plan.successor == NULL)
		return false;
	if (!plan.successor->has_start_lsn)
		return true;			/* wait for the capture job */

	src = worker_describe_ci(table, plan.successor->name);
	if (src == NULL)
		return true;
	worker_begin_xact();
	problem = ci_check_staging(table, src, &diff, &hint);
	if (problem == NULL)
		ci_switch_commit(table, table->capture_instance, src, &diff, NULL, worker_args.run_as);
	worker_commit_xact();
	if (problem != NULL)
	{
		worker_park_table(table, COND_SOURCE_SCHEMA_CHANGED, problem, hint);
		return true;
	}
	ereport(LOG,
			(errmsg("mssql_cdc source \"%s\": table %s.%s uses capture instance \"%s\" from its new snapshot on (\"%s\" was dropped)",
					worker_server_name, table->source_schema, table->source_table,
					src->capture_instance->name, table->capture_instance)));
	*src_out = src;
	return true;
}

/*
 * The source table as source_schema_describe sees it through the table's
 * recorded capture instance, once per connection (the columns of a capture
 * instance do not change; a switch replaces the description).  NULL after
 * parking the table in phase 'error', or while a capture instance it is
 * to adopt has not been started by the capture job.
 */
MssqlSourceTable *
worker_describe_source(const MssqlCdcTable *table)
{
	ListCell   *lc;
	MssqlSourceTable *src;

	foreach(lc, described_tables)
	{
		DescribedTable *d = lfirst(lc);

		/*
		 * An instance dropped and created again is described again, and so
		 * is a table about to be snapshot (its source may have changed
		 * shape while it sat in phase 'error').
		 */
		if (d->table_id == table->table_id && table->phase != MSSQL_PHASE_PENDING &&
			(!worker_source_cdc.known ||
			 ci_still_listed(&worker_source_cdc, d->src->schema, d->src->table,
							 d->src->capture_instance)))
		{
			apply_selection(table, d->src);
			return d->src;
		}
	}
	if (!adopt_capture_instance_for_snapshot(table, &src))
		src = worker_describe_ci(table, table->capture_instance);
	if (src != NULL)
		worker_remember_described(table->table_id, src);
	return src;
}

/*
 * CDC disabled on the source database (sys.sp_cdc_disable_db) takes every
 * capture instance with it: park every table of the source with a message
 * that says so (the max LSN is NULL then, which would otherwise read as
 * "waiting for the capture job").  Reads the source's capture instances
 * for this poll, and with poll (not NULL) the max LSN in the same request.
 * Returns false when CDC is disabled.
 */
bool
worker_check_cdc_enabled(List *tables, CdcPoll *poll)
{
	ListCell   *lc;
	char	   *message;
	char	   *hint;

	worker_poll_exec(ci_source_state_batch(poll));
	ci_read_source_state_reply(worker_session, &worker_source_cdc, poll);
	if (worker_source_cdc.cdc_enabled)
		return true;
	ci_explain_cdc_disabled(&worker_source_cdc, worker_server_name, &message, &hint);
	foreach(lc, tables)
	{
		MssqlCdcTable *table = lfirst(lc);

		if (table->phase == MSSQL_PHASE_ERROR)
			continue;
		worker_ctx_table_id = table->table_id;
		worker_park_table(table, COND_CDC_DISABLED, message, hint);
		table->phase = MSSQL_PHASE_ERROR;
	}
	worker_ctx_table_id = 0;
	return false;
}
