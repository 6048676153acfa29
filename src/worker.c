/*-------------------------------------------------------------------------
 *
 * worker.c
 *		The source worker: one background worker per foreign server that
 *		copies CDC windows of all the server's streaming tables into their
 *		staging tables, exactly once.
 *
 * One iteration: read the server's catalog rows (exit when paused or
 * removed: the launcher will not restart us), (re)connect, poll
 * sys.fn_cdc_get_max_lsn(), start 'never' tables at that LSN and start the
 * snapshot of 'initial' tables (record L0), then apply one window per group
 * of tables that share a checkpoint, and last copy snapshot chunks for up
 * to a poll interval (snapshot.c) so that streaming tables get their
 * windows between those runs.
 *
 * A window [from, to] ends on a source transaction boundary (cdc_window.c)
 * and is applied in ONE Postgres transaction together with the new
 * checkpoint of every table in it (apply.c).  A crash, a SIGTERM or an
 * error at any point therefore leaves both the rows and the checkpoint, or
 * neither; resume is exact because from = increment(checkpoint).  A table
 * that is behind (added later) catches up in its own windows so it never
 * holds the others back; once it reaches the same checkpoint it joins
 * their windows.
 *
 * Errors: one iteration runs under PG_TRY.  On error the transaction is
 * rolled back, the TDS session closed (it may be mid-result), the error
 * recorded in a new short transaction, and the process exits with code 1
 * so the launcher retries with capped exponential backoff.  No error path
 * writes a position.
 *
 * IDENTIFICATION
 *		src/worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "apply.h"
#include "capture_instance_switch.h"
#include "capture_stall.h"
#include "catalog.h"
#include "cdc_lag.h"
#include "cdc_window.h"
#include "error_condition.h"
#include "mssql_cdc.h"
#include "options.h"
#include "shmem.h"
#include "snapshot.h"
#include "source_schema.h"
#include "tds_session.h"
#include "worker.h"

/* Who we are (from bgw_extra) */
static WorkerLaunchArgs worker_args;
static const char *server_name;

/* The SQL Server connection; NULL or dead means "reconnect" */
static TdsSession *session = NULL;
static MssqlServerOptions *session_opts = NULL;
static int	utc_offset_minutes = 0;

/* Lives for the whole process; options and the like */
static MemoryContext worker_context = NULL;

/* Reset at every iteration */
static MemoryContext iteration_context = NULL;

/*
 * Adaptive window size in source transactions: halved when a window went
 * over mssql_cdc.batch_max_rows, doubled back when windows are small.  It
 * bounds the window by choosing `to`, never by cutting a transaction.
 */
static int	window_transactions = 0;

/* What the error context names */
static const char *context_capture_instance = NULL;
static int32 context_table_id = 0;
static bool context_has_range = false;
static MssqlLsn context_from;
static MssqlLsn context_to;

/* Sources described on the current connection (reset on reconnect) */
typedef struct DescribedTable
{
	int32		table_id;
	MssqlSourceTable *src;
} DescribedTable;

static MemoryContext connection_context = NULL;
static List *described_tables = NIL;

/* CDC on the source database and its capture instances, read at every poll */
static SourceCdcState source_cdc_state;

/*
 * Why the last login failed (SQL Server's message, e.g. 18456), for the
 * error record: a failed login leaves no session to ask.
 */
static TdsRemoteError connect_error;

/* Said once per connection, not at every poll */
static bool warned_no_max_lsn = false;

/* Whether the source database allows SNAPSHOT isolation (per connection) */
static SnapshotIsolation snapshot_isolation = SNAPSHOT_ISOLATION_UNKNOWN;

/*
 * Set by the syscache callback when any foreign server or user mapping
 * changed (ALTER SERVER / ALTER USER MAPPING): the next iteration re-reads
 * the options and reconnects, so a fixed password or a new host applies
 * without a pause/resume.  Options live in their own context for that.
 */
static bool connection_settings_changed = false;
static MemoryContext options_context = NULL;

static void
worker_error_context(void *arg)
{
	if (context_has_range)
	{
		char		from[MSSQL_LSN_TEXT_SIZE];
		char		to[MSSQL_LSN_TEXT_SIZE];

		mssql_lsn_format(&context_from, from);
		mssql_lsn_format(&context_to, to);
		if (context_capture_instance)
			errcontext("mssql_cdc source \"%s\", capture instance \"%s\", LSN range %s..%s",
					   server_name, context_capture_instance, from, to);
		else
			errcontext("mssql_cdc source \"%s\", LSN range %s..%s", server_name, from, to);
	}
	else
		errcontext("mssql_cdc source \"%s\"", server_name);
}

static void
clear_context(void)
{
	context_capture_instance = NULL;
	context_table_id = 0;
	context_has_range = false;
}

static void
begin_transaction(void)
{
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	/* catalog results must survive the commit: the iteration owns them */
	MemoryContextSwitchTo(iteration_context);
}

static void
commit_transaction(void)
{
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(iteration_context);
}

static void
stop_worker(const char *why)
{
	ereport(LOG,
			(errmsg("mssql_cdc worker for source \"%s\" stops: %s", server_name, why)));
	cdc_slot_report_phase(CDC_PHASE_STOPPING);
	if (session)
		tds_session_close(session);
	session = NULL;
	proc_exit(0);
}

/*
 * A separate short transaction that records why a table cannot continue
 * (it needs the user); the rest of the source goes on.  condition is the
 * status condition (include/error_condition.h).
 */
static void
park_table_with_condition(const MssqlCdcTable *table, const char *condition,
						  const char *message, const char *hint)
{
	char	   *full = hint ? psprintf("%s %s", message, hint) : pstrdup(message);

	ereport(WARNING,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("mssql_cdc: table %s.%s of source \"%s\" stopped: %s",
					table->source_schema, table->source_table, server_name, message),
			 hint ? errhint("%s", hint) : 0));
	begin_transaction();
	apply_set_table_error(table->table_id, full);
	catalog_set_table_condition(table->table_id, condition, hint);
	catalog_record_error_condition(server_name, table->table_id, "55000", message, NULL, hint, 0,
								   condition);
	commit_transaction();
}

/*
 * CDC cleanup removed changes the table still needs (invariant 5: never a
 * silent skip).  Policy 'error' parks the table for the user; 'resnapshot'
 * records the overrun (errors log, LOG line, status warning) and sends the
 * table back to 'pending', so its staging table gets a new snapshot set.
 */
static void
handle_retention_overrun(const MssqlCdcTable *table, const char *message)
{
	const char *retention_hint = "raise the CDC retention (sys.sp_cdc_change_job @retention) so the worker can keep up.";
	char	   *hint;
	bool		restarted;

	/* a 'never' table has no snapshot to take: it would just skip the gap */
	if (table->on_retention_overrun != MSSQL_OVERRUN_RESNAPSHOT ||
		table->snapshot_mode != MSSQL_SNAPSHOT_INITIAL)
	{
		park_table_with_condition(table, COND_RETENTION_OVERRUN, message,
								  psprintf("Call mssql_cdc.resnapshot() for this table to copy it again, and %s",
										   retention_hint));
		return;
	}

	hint = psprintf("The table is copied again by a new snapshot (on_retention_overrun = 'resnapshot'); %s",
					retention_hint);
	begin_transaction();
	restarted = catalog_resnapshot_after_overrun(table->table_id, message, hint);
	if (restarted)
		catalog_record_error_condition(server_name, table->table_id, "55000", message, NULL, hint, 0,
									   COND_RETENTION_OVERRUN);
	commit_transaction();
	if (restarted)
		ereport(LOG,
				(errmsg("mssql_cdc: table %s.%s of source \"%s\" is copied again: %s",
						table->source_schema, table->source_table, server_name, message),
				 errhint("%s", hint)));
}

/*
 * A snapshot read under READ COMMITTED because the source database does
 * not allow SNAPSHOT isolation (Msg 3952 otherwise).  A warning, not an
 * error: correctness comes from L0 and replay (snapshot.c), the isolation
 * level only decides whether chunks block writers.  Noted once per
 * snapshot, not per chunk.
 */
static void
note_snapshot_isolation(const MssqlCdcTable *table)
{
	static int32 noted_table_id = 0;
	static MssqlLsn noted_l0;

	if (snapshot_isolation != SNAPSHOT_ISOLATION_NOT_ALLOWED || !table->has_snapshot_lsn)
		return;
	if (noted_table_id == table->table_id && mssql_lsn_cmp(&noted_l0, &table->snapshot_lsn) == 0)
		return;
	begin_transaction();
	catalog_set_table_warning(table->table_id, COND_SNAPSHOT_ISOLATION_OFF,
							  "Snapshot chunks are read under READ COMMITTED (consistent through L0 and replay, "
							  "but they may block writers): run ALTER DATABASE ... SET ALLOW_SNAPSHOT_ISOLATION ON "
							  "on the source database.",
							  true);
	commit_transaction();
	noted_table_id = table->table_id;
	noted_l0 = table->snapshot_lsn;
}

/* Syscache callback: some server or user mapping changed (maybe ours). */
static void
connection_settings_invalidated(Datum arg, int cacheid, uint32 hashvalue)
{
	connection_settings_changed = true;
}

/* The catalog view of our server; exits when we should not run. */
static List *
read_catalog(MssqlCdcServer **server_out)
{
	MssqlCdcServer *server;
	List	   *tables;

	begin_transaction();
	server = catalog_get_server(server_name, true);
	if (server == NULL)
		stop_worker("the source has no captured tables any more");
	if (server->paused)
		stop_worker("the source is paused");
	tables = catalog_get_server_tables(server_name);
	if (tables == NIL)
		stop_worker("the source has no captured tables any more");

	if (connection_settings_changed && session_opts != NULL)
	{
		ereport(LOG,
				(errmsg("mssql_cdc source \"%s\": server options or user mapping changed, reconnecting",
						server_name)));
		if (session != NULL)
			tds_session_close(session);
		session = NULL;
		session_opts = NULL;
		MemoryContextReset(options_context);
	}
	connection_settings_changed = false;
	if (session_opts == NULL)
	{
		ForeignServer *fs = GetForeignServerByName(server_name, false);
		MemoryContext old = MemoryContextSwitchTo(options_context);

		session_opts = mssql_cdc_get_server_options(fs->serverid, worker_args.run_as);
		MemoryContextSwitchTo(old);
	}
	commit_transaction();
	*server_out = server;
	return tables;
}

static void
ensure_connected(void)
{
	if (session != NULL && !tds_session_is_dead(session))
		return;
	if (session != NULL)
		tds_session_close(session);
	session = NULL;
	cdc_slot_report_phase(CDC_PHASE_CONNECTING);
	MemoryContextReset(connection_context);
	described_tables = NIL;
	session = tds_session_try_open(session_opts, &connect_error);
	if (session == NULL)
		tds_report_error(server_name, &connect_error, "logging in");
	utc_offset_minutes = cdc_query_utc_offset(session);
	warned_no_max_lsn = false;
	snapshot_isolation = SNAPSHOT_ISOLATION_UNKNOWN;
}

/*
 * The source table read through capture instance ci (allocated for the
 * connection).  NULL after parking the table in phase 'error' when the
 * source is gone or not readable any more: that needs the user, and
 * retrying would not help.
 */
static MssqlSourceTable *
describe_capture_instance(const MssqlCdcTable *table, const char *ci)
{
	MssqlSourceTable *volatile src = NULL;
	MemoryContext old;
	ErrorData  *edata = NULL;

	old = MemoryContextSwitchTo(connection_context);
	PG_TRY();
	{
		src = source_schema_describe(session, table->source_schema, table->source_table, ci);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(iteration_context);
		edata = CopyErrorData();
		switch (edata->sqlerrcode)
		{
			case ERRCODE_INSUFFICIENT_PRIVILEGE:
				{
					const TdsRemoteError *remote = tds_session_last_error(session);

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
		park_table_with_condition(table, condition, edata->message,
								  edata->hint ? edata->hint : "Fix the source, then call mssql_cdc.resnapshot().");
		return NULL;
	}
	return src;
}

/* Keep src as the table's description for this connection (replacing one) */
static void
remember_described(int32 table_id, MssqlSourceTable *src)
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
	old = MemoryContextSwitchTo(connection_context);
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
	if (table->phase != MSSQL_PHASE_PENDING || !source_cdc_state.known ||
		!source_cdc_state.cdc_enabled)
		return false;
	plan = ci_plan_for_window(&source_cdc_state, table, &no_from);
	if (plan.current != NULL || plan.successor == NULL)
		return false;
	if (!plan.successor->has_start_lsn)
		return true;			/* wait for the capture job */

	src = describe_capture_instance(table, plan.successor->name);
	if (src == NULL)
		return true;
	begin_transaction();
	problem = ci_check_staging(table, src, &diff, &hint);
	if (problem == NULL)
		ci_switch_commit(table, table->capture_instance, src, &diff, NULL, worker_args.run_as);
	commit_transaction();
	if (problem != NULL)
	{
		park_table_with_condition(table, COND_SOURCE_SCHEMA_CHANGED, problem, hint);
		return true;
	}
	ereport(LOG,
			(errmsg("mssql_cdc source \"%s\": table %s.%s uses capture instance \"%s\" from its new snapshot on (\"%s\" was dropped)",
					server_name, table->source_schema, table->source_table,
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
static MssqlSourceTable *
describe_source(const MssqlCdcTable *table)
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
			(!source_cdc_state.known ||
			 ci_still_listed(&source_cdc_state, d->src->schema, d->src->table,
							 d->src->capture_instance)))
			return d->src;
	}
	if (!adopt_capture_instance_for_snapshot(table, &src))
		src = describe_capture_instance(table, table->capture_instance);
	if (src != NULL)
		remember_described(table->table_id, src);
	return src;
}

/*
 * Check one table before its window: which capture instance it reads
 * (plan, capture_instance_switch.c), the source, and that CDC cleanup has
 * not removed changes we still need (invariant 5).  Returns the described
 * source of the instance to read, or NULL when the table sits this window
 * out: parked in phase 'error', or nothing readable yet.  For a window
 * that switches to the successor, *switch_diff gets what the switch adds
 * to the staging table (NULL otherwise).
 */
static MssqlSourceTable *
check_table_source(const MssqlCdcTable *table, const MssqlLsn *from, const CiPlan *plan,
				   StagingDiff **switch_diff)
{
	MssqlSourceTable *src = NULL;
	const char *ci;
	MssqlLsn	min_lsn;
	char	   *message;
	char	   *hint = NULL;

	*switch_diff = NULL;
	switch (plan->kind)
	{
		case CI_WAIT:
			/* the successor is not started by the capture job yet */
			return NULL;
		case CI_NOT_VISIBLE:
			ci_explain_not_visible(session, table, server_name, &message, &hint);
			park_table_with_condition(table, COND_CAPTURE_INSTANCE_MISSING, message, hint);
			return NULL;
		case CI_LOST_CHANGES:
			ci_explain_lost_changes(table, plan, from, &message, &hint);
			park_table_with_condition(table, COND_CHANGES_LOST, message, hint);
			return NULL;
		case CI_SWITCH:
			src = describe_capture_instance(table, plan->successor->name);
			if (src == NULL)
				return NULL;
			/* a changed column type is refused before the window, not retried */
			*switch_diff = palloc0(sizeof(StagingDiff));
			begin_transaction();
			message = ci_check_staging(table, src, *switch_diff, &hint);
			commit_transaction();
			if (message != NULL)
			{
				park_table_with_condition(table, COND_SOURCE_SCHEMA_CHANGED, message, hint);
				*switch_diff = NULL;
				return NULL;
			}
			break;
		case CI_READ_CURRENT:
		case CI_READ_UNTIL_SUCCESSOR:
			src = describe_source(table);
			break;
	}
	if (src == NULL)
		return NULL;
	ci = src->capture_instance->name;
	context_capture_instance = ci;

	if (!cdc_get_min_lsn(session, ci, &min_lsn))
	{
		/* not processed by the capture job yet: nothing to read, wait */
		ereport(DEBUG1,
				(errmsg_internal("mssql_cdc source \"%s\": capture instance \"%s\" has no min LSN yet",
								 server_name, ci)));
		return NULL;
	}
	if (mssql_lsn_is_zero(&min_lsn))
	{
		park_table_with_condition(table, COND_CAPTURE_INSTANCE_MISSING,
							psprintf("sys.fn_cdc_get_min_lsn(N'%s') returned 0x00000000000000000000: the capture instance does not exist or the login may not read it.",
									 ci),
							"Check the capture instance and the gating role of the login, then call mssql_cdc.resnapshot().");
		return NULL;
	}
	if (mssql_lsn_cmp(from, &min_lsn) < 0)
	{
		char		from_text[MSSQL_LSN_TEXT_SIZE];
		char		min_text[MSSQL_LSN_TEXT_SIZE];

		mssql_lsn_format(from, from_text);
		mssql_lsn_format(&min_lsn, min_text);
		handle_retention_overrun(table,
								 psprintf("Changes of capture instance \"%s\" were removed by CDC cleanup before they were copied: the next change needed is at %s, but the oldest one kept is at %s.",
										  ci, from_text, min_text));
		return NULL;
	}
	return src;
}

/*
 * After a window committed: the tables that switched capture instance read
 * the new one from now on (description kept for the connection), and the
 * log says so.
 */
static void
note_capture_instance_switches(List *ready, List *instances, List *switches,
							   const ApplyResult *results, const MssqlLsn *from)
{
	ListCell   *lc;
	ListCell   *lc2;
	ListCell   *lc3;
	int			i = 0;
	char		from_text[MSSQL_LSN_TEXT_SIZE];

	mssql_lsn_format(from, from_text);
	forthree(lc, ready, lc2, instances, lc3, switches)
	{
		MssqlCdcTable *table = lfirst(lc);
		MssqlSourceTable *src = lfirst(lc2);
		StagingDiff *diff = lfirst(lc3);
		StringInfoData added;
		ListCell   *lc4;

		if (diff == NULL || results[i++].rows < 0)
			continue;
		remember_described(table->table_id, src);
		initStringInfo(&added);
		foreach(lc4, diff->missing)
			appendStringInfo(&added, "%s%s", added.len > 0 ? ", " : "",
							 ((const MssqlColumn *) lfirst(lc4))->pg_name);
		ereport(LOG,
				(errmsg("mssql_cdc source \"%s\": table %s.%s switched from capture instance \"%s\" to \"%s\" at LSN %s",
						server_name, table->source_schema, table->source_table,
						table->capture_instance ? table->capture_instance : "?",
						src->capture_instance->name, from_text),
				 errdetail("Staging columns added: %s; kept but no longer captured: %d.",
						   added.len > 0 ? added.data : "none", list_length(diff->not_captured))));
	}
}

/*
 * CDC disabled on the source database (sys.sp_cdc_disable_db) takes every
 * capture instance with it: park every table of the source with a message
 * that says so (the max LSN is NULL then, which would otherwise read as
 * "waiting for the capture job").  Reads the source's capture instances
 * for this poll.  Returns false when CDC is disabled.
 */
static bool
check_source_cdc_enabled(List *tables)
{
	ListCell   *lc;
	char	   *message;
	char	   *hint;

	ci_read_source_state(session, &source_cdc_state);
	if (source_cdc_state.cdc_enabled)
		return true;
	ci_explain_cdc_disabled(&source_cdc_state, server_name, &message, &hint);
	foreach(lc, tables)
	{
		MssqlCdcTable *table = lfirst(lc);

		if (table->phase == MSSQL_PHASE_ERROR)
			continue;
		context_table_id = table->table_id;
		park_table_with_condition(table, COND_CDC_DISABLED, message, hint);
		table->phase = MSSQL_PHASE_ERROR;
	}
	context_table_id = 0;
	return false;
}

/*
 * In a unit's transaction that succeeded: end the server's failure streak,
 * once (the catalog copy says it is over, so later windows and chunks of
 * the iteration do not write it again).
 */
static void
end_failure_streak(MssqlCdcServer *server)
{
	if (server->consecutive_failures > 0)
	{
		apply_reset_server_failures(server_name);
		server->consecutive_failures = 0;
	}
}

/*
 * Apply one window to a group of tables that share checkpoint `checkpoint`.
 * Returns true when the window was full (more work is waiting).
 */
static bool
apply_window(MssqlCdcServer *server, List *group, const MssqlLsn *checkpoint,
			 const MssqlLsn *max_lsn, TimestampTz max_time, MssqlLsn *reached)
{
	MssqlLsn	from;
	MssqlLsn	to;
	TimestampTz end_time;
	MssqlLsn	window_max;
	CiPlan	   *plans;
	List	   *ready = NIL;
	List	   *instances = NIL;
	List	   *switches = NIL; /* StagingDiff * of a switching table, else NULL */
	ApplyResult *results;
	ListCell   *lc;
	ListCell   *lc2;
	ListCell   *lc3;
	int64		window_rows = 0;
	int64		window_transactions_seen = 0;
	int			i;

	*reached = *checkpoint;
	if (!mssql_lsn_increment(checkpoint, &from))
		return false;

	/*
	 * Which capture instance each table reads.  A successor starting at S
	 * after from ends the window at S - 1 for the whole group (the group
	 * shares its windows, invariant 3): every table reads one instance per
	 * window, and the next window, from S on, switches.
	 */
	window_max = *max_lsn;
	plans = palloc(sizeof(CiPlan) * list_length(group));
	i = 0;
	foreach(lc, group)
	{
		MssqlLsn	before_successor;

		plans[i] = ci_plan_for_window(&source_cdc_state, lfirst(lc), &from);
		if (plans[i].kind == CI_READ_UNTIL_SUCCESSOR &&
			ci_lsn_decrement(&plans[i].successor->start_lsn, &before_successor) &&
			mssql_lsn_cmp(&before_successor, &window_max) < 0)
			window_max = before_successor;
		i++;
	}
	if (!cdc_choose_window_end(session, checkpoint, &window_max, window_transactions,
							   utc_offset_minutes, &to, &end_time))
		return false;
	if (end_time == 0 && mssql_lsn_cmp(&to, max_lsn) == 0)
		end_time = max_time;

	context_from = from;
	context_to = to;
	context_has_range = true;

	/* source checks first, outside the window's transaction */
	i = 0;
	foreach(lc, group)
	{
		MssqlCdcTable *table = lfirst(lc);
		MssqlSourceTable *src;
		StagingDiff *switch_diff;

		context_table_id = table->table_id;
		src = check_table_source(table, &from, &plans[i++], &switch_diff);
		if (src == NULL)
			continue;
		ready = lappend(ready, table);
		instances = lappend(instances, src);
		switches = lappend(switches, switch_diff);
	}
	context_table_id = 0;
	context_capture_instance = NULL;
	if (ready == NIL)
		return false;

	cdc_slot_report_phase(CDC_PHASE_STREAMING);
	results = palloc0(sizeof(ApplyResult) * list_length(ready));

	/* THE window: every table's rows and checkpoints, one transaction */
	begin_transaction();
	i = 0;
	forthree(lc, ready, lc2, instances, lc3, switches)
	{
		MssqlCdcTable *table = lfirst(lc);
		MssqlSourceTable *src = lfirst(lc2);
		StagingDiff *switch_diff = lfirst(lc3);

		context_table_id = table->table_id;
		context_capture_instance = src->capture_instance->name;
		/* a concurrent remove_table/resnapshot wins; the table sits this one out */
		if (!apply_lock_table_state(table->table_id, checkpoint))
		{
			results[i++].rows = -1;
			continue;
		}
		/* the switch commits with the first rows read from the new instance */
		if (switch_diff != NULL)
			ci_switch_commit(table, table->capture_instance, src, switch_diff, &from,
							 worker_args.run_as);
		results[i] = apply_capture_instance(session, table, src,
											worker_args.run_as, utc_offset_minutes,
											&from, &to);
		window_rows += results[i].rows;
		window_transactions_seen = Max(window_transactions_seen, results[i].transactions);
		i++;
	}
	context_capture_instance = NULL;
	i = 0;
	foreach(lc, ready)
	{
		MssqlCdcTable *table = lfirst(lc);

		if (results[i].rows >= 0)
			apply_commit_checkpoint(table->table_id, &to, &results[i], end_time);
		i++;
	}
	end_failure_streak(server);
	commit_transaction();
	cdc_slot_report_success();
	context_table_id = 0;
	context_has_range = false;
	note_capture_instance_switches(ready, instances, switches, results, &from);

	/* adapt the next window's size to mssql_cdc.batch_max_rows */
	if (window_rows > mssql_cdc_batch_max_rows && window_transactions > 1)
		window_transactions = Max(1, window_transactions / 2);
	else if (window_rows < mssql_cdc_batch_max_rows / 4)
		window_transactions = Min(mssql_cdc_batch_max_transactions,
								  window_transactions * 2);
	window_transactions = Min(window_transactions, mssql_cdc_batch_max_transactions);

	ereport(DEBUG1,
			(errmsg_internal("mssql_cdc source \"%s\": applied %lld rows of %lld transactions",
							 server_name, (long long) window_rows,
							 (long long) window_transactions_seen)));

	*reached = to;

	/* the window ended before max: more is waiting */
	return mssql_lsn_cmp(&to, max_lsn) < 0;
}

static int
compare_tables_by_checkpoint(const ListCell *a, const ListCell *b)
{
	const MssqlCdcTable *ta = lfirst(a);
	const MssqlCdcTable *tb = lfirst(b);
	int			c = mssql_lsn_cmp(&ta->checkpoint_lsn, &tb->checkpoint_lsn);

	if (c != 0)
		return c;
	return (ta->table_id > tb->table_id) - (ta->table_id < tb->table_id);
}

/*
 * pending + snapshot_mode 'initial': record L0, the estimate and phase
 * 'snapshotting' in one short transaction (invariant 4: L0 is read before
 * any row is).  Returns true when the snapshot started.
 */
static bool
start_snapshot(MssqlCdcTable *table)
{
	MssqlSourceTable *src;
	const char *refusal;
	MssqlLsn	l0;
	int64		estimate;
	bool		started;

	context_table_id = table->table_id;
	src = describe_source(table);
	if (src == NULL)
		return false;
	refusal = snapshot_refusal(src);
	if (refusal != NULL)
	{
		park_table_with_condition(table, COND_NO_PRIMARY_KEY, refusal,
								  "Add a primary key to the source table and call mssql_cdc.resnapshot(), or remove the table and add it again with snapshot_mode => 'never'.");
		return false;
	}
	if (!snapshot_read_start(session, src, &l0, &estimate))
	{
		ereport(DEBUG1,
				(errmsg_internal("mssql_cdc source \"%s\": no start LSN for the snapshot of table %d yet",
								 server_name, table->table_id)));
		return false;
	}

	begin_transaction();
	started = apply_snapshot_begin(table->table_id, &l0, estimate);
	commit_transaction();
	if (started)
	{
		char		l0_text[MSSQL_LSN_TEXT_SIZE];

		mssql_lsn_format(&l0, l0_text);
		ereport(LOG,
				(errmsg("mssql_cdc source \"%s\": snapshot of %s.%s starts at LSN %s (about %lld rows)",
						server_name, table->source_schema, table->source_table, l0_text,
						(long long) Max(estimate, 0))));
		table->phase = MSSQL_PHASE_SNAPSHOTTING;
		table->has_snapshot_lsn = true;
		table->snapshot_lsn = l0;
		table->snapshot_last_key = NIL;
		table->snapshot_rows = 0;
	}
	return started;
}

/*
 * One chunk of a snapshotting table, in its own transaction with the last
 * key copied (and, for the last chunk, the hand-over to streaming).
 * Returns true while the snapshot has more to copy.
 */
static bool
copy_snapshot_chunk(MssqlCdcServer *server, MssqlCdcTable *table)
{
	MssqlSourceTable *src;
	int64		rows = 0;
	bool		done;

	context_table_id = table->table_id;
	src = describe_source(table);
	if (src == NULL)
		return false;
	if (snapshot_refusal(src) != NULL)
	{
		/* the key went away or changed type since the snapshot started */
		park_table_with_condition(table, COND_NO_PRIMARY_KEY, snapshot_refusal(src),
								  "Add a primary key to the source table and call mssql_cdc.resnapshot().");
		return false;
	}
	context_capture_instance = src->capture_instance->name;
	cdc_slot_report_phase(CDC_PHASE_SNAPSHOTTING);

	begin_transaction();
	/* a concurrent remove_table/resnapshot wins */
	if (!apply_lock_snapshot(table->table_id, &table->snapshot_lsn))
	{
		commit_transaction();
		context_table_id = 0;
		return false;
	}
	done = snapshot_copy_chunk(session, table, src, worker_args.run_as,
							   &snapshot_isolation, &rows);
	end_failure_streak(server);
	commit_transaction();
	cdc_slot_report_success();
	context_table_id = 0;
	context_capture_instance = NULL;

	if (done)
		ereport(LOG,
				(errmsg("mssql_cdc source \"%s\": snapshot of %s.%s done (%lld rows), streaming from its start LSN",
						server_name, table->source_schema, table->source_table,
						(long long) table->snapshot_rows)));
	return !done;
}

/*
 * Lag of the lead checkpoint in source transactions, for the status view.
 * Caught up costs nothing.  Behind, SQL Server counts; while the last count
 * found a big backlog (a count costs about what it finds), at most once per
 * CDC_LAG_COUNT_INTERVAL_MS (cdc_lag.c says why), and in between the last
 * count stays reported with its own base LSN.
 */
static void
report_lag(const MssqlLsn *lead, const MssqlLsn *max_lsn)
{
	static TimestampTz last_count_at = 0;
	static int64 last_count = 0;
	TimestampTz now;

	if (mssql_lsn_cmp(lead, max_lsn) >= 0)
	{
		cdc_slot_report_lag(lead, 0);
		return;
	}
	now = GetCurrentTimestamp();
	if (last_count >= CDC_LAG_CHEAP_COUNT &&
		!TimestampDifferenceExceeds(last_count_at, now, CDC_LAG_COUNT_INTERVAL_MS))
		return;
	last_count_at = now;
	last_count = cdc_count_transactions(session, lead, max_lsn);
	cdc_slot_report_lag(lead, last_count);
}

/* One poll and its windows.  Returns true when more work is waiting. */
static bool
run_iteration(void)
{
	MssqlCdcServer *server;
	List	   *tables;
	List	   *streaming = NIL;
	MssqlCdcTable *snapshotting = NULL;
	MssqlLsn	max_lsn;
	TimestampTz max_time;
	ListCell   *lc;
	bool		busy = false;
	bool		has_lead = false;
	MssqlLsn	lead;

	MemoryContextReset(iteration_context);
	MemoryContextSwitchTo(iteration_context);
	clear_context();

	tables = read_catalog(&server);
	ensure_connected();
	/* capture instances of the source, for switches (capture_instance_switch.c) */
	if (!check_source_cdc_enabled(tables))
		return false;

	if (!cdc_poll_max_lsn(session, utc_offset_minutes, &max_lsn, &max_time))
	{
		cdc_slot_report_poll(NULL, 0);
		capture_stall_observe(server_name, NULL);
		if (!warned_no_max_lsn)
			ereport(LOG,
					(errmsg("mssql_cdc source \"%s\": sys.fn_cdc_get_max_lsn() is NULL, waiting for the capture job",
							server_name),
					 errhint("The SQL Server Agent capture job has not recorded any change yet; make sure it runs.")));
		warned_no_max_lsn = true;
		return false;
	}
	cdc_slot_report_poll(&max_lsn, max_time);
	/* a max LSN frozen for long: the capture job does not run */
	capture_stall_observe(server_name, &max_lsn);

	foreach(lc, tables)
	{
		MssqlCdcTable *table = lfirst(lc);

		if (table->phase == MSSQL_PHASE_PENDING &&
			table->snapshot_mode == MSSQL_SNAPSHOT_NEVER && !table->has_checkpoint_lsn)
		{
			/* stream from now on: nothing before max_lsn is wanted */
			begin_transaction();
			apply_start_streaming(table->table_id, &max_lsn);
			commit_transaction();
			table->phase = MSSQL_PHASE_STREAMING;
			table->has_checkpoint_lsn = true;
			table->checkpoint_lsn = max_lsn;
		}
		if (table->phase == MSSQL_PHASE_PENDING &&
			table->snapshot_mode == MSSQL_SNAPSHOT_INITIAL && !table->has_checkpoint_lsn)
		{
			CHECK_FOR_INTERRUPTS();
			if (start_snapshot(table))
				busy = true;
		}
		if (table->phase == MSSQL_PHASE_STREAMING && table->has_checkpoint_lsn)
			streaming = lappend(streaming, table);
		/* one table snapshots at a time per source, oldest table first */
		if (table->phase == MSSQL_PHASE_SNAPSHOTTING && snapshotting == NULL)
			snapshotting = table;
	}

	/* one window per group of tables with the same checkpoint, oldest first */
	list_sort(streaming, compare_tables_by_checkpoint);

	/*
	 * Lag in source transactions of the most advanced checkpoint (the one
	 * the tables share once caught up), as of this poll and again after the
	 * windows; counting costs nothing when the checkpoint is at max.
	 */
	if (streaming != NIL)
	{
		lead = ((MssqlCdcTable *) llast(streaming))->checkpoint_lsn;
		has_lead = true;
		report_lag(&lead, &max_lsn);
	}
	while (streaming != NIL)
	{
		MssqlCdcTable *first = linitial(streaming);
		List	   *group = NIL;
		MssqlLsn	reached;

		while (streaming != NIL &&
			   mssql_lsn_cmp(&((MssqlCdcTable *) linitial(streaming))->checkpoint_lsn,
							 &first->checkpoint_lsn) == 0)
		{
			group = lappend(group, linitial(streaming));
			streaming = list_delete_first(streaming);
		}
		CHECK_FOR_INTERRUPTS();
		if (apply_window(server, group, &first->checkpoint_lsn, &max_lsn, max_time,
						 &reached))
			busy = true;
		if (mssql_lsn_cmp(&reached, &lead) > 0)
			lead = reached;
	}
	if (has_lead)
		report_lag(&lead, &max_lsn);

	/*
	 * Then snapshot chunks, each its own transaction, for up to a poll
	 * interval: streaming tables get their windows between those runs, so
	 * their lag stays within a poll or two while a big table is copied; no
	 * sleep while rows remain.
	 */
	if (snapshotting != NULL)
	{
		TimestampTz started = GetCurrentTimestamp();
		bool		more;

		/*
		 * Chunks back to back for up to one poll interval: the catalog
		 * reads and the max-LSN poll of an iteration would otherwise sit
		 * between every two chunks, while the streaming tables need their
		 * windows only about once a poll interval.
		 */
		do
		{
			CHECK_FOR_INTERRUPTS();
			more = copy_snapshot_chunk(server, snapshotting);
			note_snapshot_isolation(snapshotting);
		} while (more && !ConfigReloadPending && !cdc_slot_stop_requested() &&
				 !TimestampDifferenceExceeds(started, GetCurrentTimestamp(),
											 mssql_cdc_poll_interval));
		if (more)
			busy = true;
	}
	return busy;
}

/*
 * After an error: roll back, report, record, exit(1) for the launcher's
 * backoff.  Nothing here writes a position.
 */
static void
handle_iteration_error(void)
{
	ErrorData  *edata;
	int			remote_errno = 0;
	int32		table_id = context_table_id;
	TdsRemoteError remote;
	ErrorCondition cond;

	HOLD_INTERRUPTS();
	MemoryContextSwitchTo(worker_context);
	edata = CopyErrorData();
	EmitErrorReport();
	AbortOutOfAnyTransaction();
	FlushErrorState();
	memset(&remote, 0, sizeof(remote));
	if (session != NULL)
	{
		const TdsRemoteError *err = tds_session_last_error(session);

		if (err != NULL)
			remote = *err;
		if (err != NULL && err->kind == TDS_ERROR_REMOTE)
			remote_errno = err->msgno;
		/* it may be in the middle of a result: start over on a new one */
		tds_session_close(session);
		session = NULL;
	}
	else if (connect_error.kind == TDS_ERROR_CONNECT)
	{
		remote = connect_error;
		remote_errno = connect_error.msgno;
	}
	memset(&connect_error, 0, sizeof(connect_error));
	clear_context();
	RESUME_INTERRUPTS();

	/* what it means and what to do, for mssql_cdc.status */
	MemoryContextSwitchTo(worker_context);
	cond = error_condition_classify(edata->sqlerrcode, edata->schema_name, &remote, server_name);

	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	catalog_record_error_condition(server_name, table_id, unpack_sql_state(edata->sqlerrcode),
								   edata->message, edata->detail,
								   edata->hint ? edata->hint : cond.hint, remote_errno,
								   cond.condition);
	apply_record_failure(server_name, table_id, edata->message);
	catalog_set_server_condition(server_name, cond.condition, cond.hint);
	if (table_id > 0)
		catalog_set_table_condition(table_id, cond.condition, cond.hint);
	PopActiveSnapshot();
	CommitTransactionCommand();

	proc_exit(1);
}

void
mssql_cdc_worker_main(Datum main_arg)
{
	int			slot_index = DatumGetInt32(main_arg);
	ErrorContextCallback errcallback;

	memcpy(&worker_args, MyBgworkerEntry->bgw_extra, sizeof(worker_args));
	server_name = pstrdup(NameStr(worker_args.server_name));

	/*
	 * SIGTERM: die.  Aborting mid-window is safe (the window is one
	 * transaction), and the TDS layer's interrupt check makes a hung SQL
	 * Server call return within a second.
	 */
	pqsignal(SIGTERM, die);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();

	/*
	 * Connect as the bootstrap superuser (run_as may lack LOGIN); staging
	 * writes switch to run_as (apply.c), catalog writes to the owner.
	 */
	BackgroundWorkerInitializeConnectionByOid(worker_args.database, InvalidOid, 0);
	cdc_slot_attach(slot_index, worker_args.generation);
	pgstat_report_appname(psprintf("%s %s", MSSQL_CDC_WORKER_TYPE, server_name));

	worker_context = AllocSetContextCreate(TopMemoryContext, "mssql_cdc worker",
										   ALLOCSET_DEFAULT_SIZES);
	iteration_context = AllocSetContextCreate(worker_context, "mssql_cdc worker iteration",
											  ALLOCSET_DEFAULT_SIZES);
	connection_context = AllocSetContextCreate(worker_context, "mssql_cdc worker connection",
											   ALLOCSET_DEFAULT_SIZES);
	options_context = AllocSetContextCreate(worker_context, "mssql_cdc worker options",
											ALLOCSET_SMALL_SIZES);
	CacheRegisterSyscacheCallback(FOREIGNSERVEROID, connection_settings_invalidated, (Datum) 0);
	CacheRegisterSyscacheCallback(USERMAPPINGOID, connection_settings_invalidated, (Datum) 0);
	window_transactions = mssql_cdc_batch_max_transactions;
	tds_session_init();

	errcallback.callback = worker_error_context;
	errcallback.arg = NULL;
	errcallback.previous = NULL;
	error_context_stack = &errcallback;

	ereport(LOG,
			(errmsg("mssql_cdc worker for source \"%s\" started", server_name)));

	for (;;)
	{
		bool		busy = false;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			window_transactions = Min(Max(window_transactions, 1),
									  mssql_cdc_batch_max_transactions);
		}
		if (cdc_slot_stop_requested())
			stop_worker("the launcher asked it to stop");

		PG_TRY();
		{
			busy = run_iteration();
		}
		PG_CATCH();
		{
			handle_iteration_error();
		}
		PG_END_TRY();
		/* the error context stack survives a caught error only if reset */
		error_context_stack = &errcallback;

		if (!busy)
		{
			int			rc;

			cdc_slot_report_phase(CDC_PHASE_IDLE);
			rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						   mssql_cdc_poll_interval, PG_WAIT_EXTENSION);
			if (rc & WL_LATCH_SET)
				ResetLatch(MyLatch);
		}
	}
}
