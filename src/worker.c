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
 * snapshot of 'initial' tables (record L0), then apply the windows of the
 * groups of tables that share a checkpoint (worker_catch_up.c: groups
 * behind catch up and join the others), and last copy snapshot chunks for
 * up to a poll interval (snapshot.c) so that streaming tables get their
 * windows between those runs.
 *
 * A window [from, to] ends on a source transaction boundary (cdc_window.c)
 * and is applied in ONE Postgres transaction together with the new
 * checkpoint of every table in it (apply.c).  A crash, a SIGTERM or an
 * error at any point therefore leaves both the rows and the checkpoint, or
 * neither; resume is exact because from = increment(checkpoint).  A table
 * that is behind (added later, resumed) catches up in its own windows so it
 * never holds the others back; its windows end at the checkpoint of the
 * tables ahead at the latest, so it meets them and joins their windows.
 *
 * Errors: one iteration runs under PG_TRY.  On error the transaction is
 * rolled back, the TDS worker_session closed (it may be mid-result), the error
 * recorded in a new short transaction, and the process exits with code 1
 * so the launcher retries with capped exponential backoff.  No error path
 * writes a position.
 *
 * The worker's files: this one (the process, its loop, the catalog read,
 * the connection and error handling), worker_window.c (one window),
 * worker_snapshot.c (snapshot chunks) and worker_source.c (describing and
 * parking tables); they share include/worker_internal.h.
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
#include "catalog_version.h"
#include "cdc_clock.h"
#include "cdc_lag.h"
#include "cdc_window.h"
#include "error_condition.h"
#include "mssql_cdc.h"
#include "options.h"
#include "shmem.h"
#include "snapshot.h"
#include "snapshot_lanes.h"
#include "source_schema.h"
#include "tds_session.h"
#include "worker.h"
#include "worker_internal.h"

/* Who we are (from bgw_extra); shared with the worker_*.c files */
WorkerLaunchArgs worker_args;
const char *worker_server_name;

/* The SQL Server connection; NULL or dead means "reconnect" */
TdsSession *worker_session = NULL;
TdsSession *worker_ctx_session = NULL;
static MssqlServerOptions *session_opts = NULL;
const char *worker_server_zone = NULL;

/* Lives for the whole process; options and the like */
static MemoryContext worker_context = NULL;

/* Reset at every iteration */
MemoryContext worker_iteration_context = NULL;

/* Reset on reconnect: what was learned on the current connection */
MemoryContext worker_connection_context = NULL;

int			worker_window_transactions = 0;

/* What the error context names */
const char *worker_ctx_capture_instance = NULL;
int32		worker_ctx_table_id = 0;
bool		worker_ctx_has_range = false;
MssqlLsn	worker_ctx_from;
MssqlLsn	worker_ctx_to;

SourceCdcState worker_source_cdc;

/*
 * Why the last login failed (SQL Server's message, e.g. 18456), for the
 * error record: a failed login leaves no session to ask.
 */
static TdsRemoteError connect_error;

/* Said once per connection, not at every poll */
static bool warned_no_max_lsn = false;

SnapshotIsolation worker_snapshot_isolation = SNAPSHOT_ISOLATION_UNKNOWN;

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
	if (worker_ctx_has_range)
	{
		char		from[MSSQL_LSN_TEXT_SIZE];
		char		to[MSSQL_LSN_TEXT_SIZE];

		mssql_lsn_format(&worker_ctx_from, from);
		mssql_lsn_format(&worker_ctx_to, to);
		if (worker_ctx_capture_instance)
			errcontext("mssql_cdc source \"%s\", capture instance \"%s\", LSN range %s..%s",
					   worker_server_name, worker_ctx_capture_instance, from, to);
		else
			errcontext("mssql_cdc source \"%s\", LSN range %s..%s", worker_server_name, from, to);
	}
	else
		errcontext("mssql_cdc source \"%s\"", worker_server_name);
}

void
worker_clear_context(void)
{
	worker_ctx_capture_instance = NULL;
	worker_ctx_table_id = 0;
	worker_ctx_has_range = false;
	worker_ctx_window_table = false;
	worker_ctx_session = NULL;
}

void
worker_begin_xact(void)
{
	/*
	 * A background process has no client messages that would set the
	 * statement start time; without this every now() (updated_at,
	 * occurred_at, snapshot_started_at, ...) would be the time this
	 * process started.
	 */
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	/* catalog results must survive the commit: the iteration owns them */
	MemoryContextSwitchTo(worker_iteration_context);
}

void
worker_commit_xact(void)
{
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(worker_iteration_context);
}

/* Roll back the transaction of worker_begin_xact (nothing of it is kept) */
void
worker_abort_xact(void)
{
	PopActiveSnapshot();
	AbortCurrentTransaction();
	MemoryContextSwitchTo(worker_iteration_context);
}

static void
stop_worker(const char *why)
{
	ereport(LOG,
			(errmsg("mssql_cdc worker for source \"%s\" stops: %s", worker_server_name, why)));
	cdc_slot_report_phase(CDC_PHASE_STOPPING);
	if (worker_session)
		tds_session_close(worker_session);
	worker_session = NULL;
	snapshot_lanes_close();
	proc_exit(0);
}

static void
connection_settings_invalidated(Datum arg, int cacheid, uint32 hashvalue)
{
	connection_settings_changed = true;
}

/*
 * The catalog must be the one this library was built for: a worker started
 * just before the launcher noticed a version change (or by hand) leaves
 * until ALTER EXTENSION ... UPDATE, and the launcher starts it again then.
 */
static void
check_catalog_version(void)
{
	char	   *version = mssql_cdc_installed_version();

	if (version != NULL && strcmp(version, MSSQL_CDC_LIBRARY_VERSION) == 0)
		return;
	ereport(LOG,
			(errmsg("mssql_cdc worker for source \"%s\" waits for the extension: it is %s, the library is version %s",
					worker_server_name,
					version ? psprintf("version %s", version) : "not installed",
					MSSQL_CDC_LIBRARY_VERSION),
			 errhint("Run ALTER EXTENSION %s UPDATE in database \"%s\".",
					 MSSQL_CDC_EXTENSION_NAME, mssql_cdc_database)));
	stop_worker("the extension's catalog does not match the library");
}

/* The catalog view of our server; exits when we should not run. */

static List *
read_catalog(MssqlCdcServer **server_out)
{
	MssqlCdcServer *server;
	List	   *tables;

	worker_begin_xact();
	check_catalog_version();
	server = catalog_get_server(worker_server_name, true);
	if (server == NULL)
		stop_worker("the source has no captured tables any more");
	if (server->paused)
		stop_worker("the source is paused");
	tables = catalog_get_server_tables(worker_server_name);
	if (tables == NIL)
		stop_worker("the source has no captured tables any more");

	if (connection_settings_changed && session_opts != NULL)
	{
		ereport(LOG,
				(errmsg("mssql_cdc source \"%s\": server options or user mapping changed, reconnecting",
						worker_server_name)));
		if (worker_session != NULL)
			tds_session_close(worker_session);
		worker_session = NULL;
		snapshot_lanes_close();
		session_opts = NULL;
		MemoryContextReset(options_context);
	}
	connection_settings_changed = false;
	if (session_opts == NULL)
	{
		ForeignServer *fs = GetForeignServerByName(worker_server_name, false);
		MemoryContext old = MemoryContextSwitchTo(options_context);

		session_opts = mssql_cdc_get_server_options(fs->serverid, worker_args.run_as);
		MemoryContextSwitchTo(old);
	}
	worker_commit_xact();
	*server_out = server;
	return tables;
}

/*
 * How the new session is protected, for mssql_cdc.status; a session
 * without TLS is also said in the log (encryption 'off' or a 'request'
 * that found no TLS, which has WARNED already).
 */
static void
report_connection_security(void)
{
	TdsSessionSecurity sec = tds_session_security(worker_session);

	cdc_slot_report_connection(true, sec.encrypted, sec.certificate_validated);
	if (!sec.encrypted || !sec.certificate_validated)
		ereport(LOG,
				(errmsg("mssql_cdc source \"%s\": connected to SQL Server, %s",
						worker_server_name, tds_session_security_text(worker_session))));
}

int
worker_snapshot_connections(void)
{
	Assert(session_opts != NULL);
	return session_opts->snapshot_connections;
}

/*
 * A new session with the worker's connection settings (the same options
 * and TLS for every session of the source); a failed login raises, and
 * the error path reports it as the worker's connection failure.
 */
TdsSession *
worker_open_session(void)
{
	TdsSession *session = tds_session_try_open(session_opts, &connect_error);

	if (session == NULL)
		tds_report_error(worker_server_name, &connect_error, "logging in");
	return session;
}

TdsSession *
worker_try_open_session(TdsRemoteError *err)
{
	return tds_session_try_open(session_opts, err);
}

const char *
worker_source_name(void)
{
	return worker_server_name;
}

MssqlDataQueryMode
worker_data_query_mode(void)
{
	/* read_catalog loaded the settings before any window */
	Assert(session_opts != NULL);
	return session_opts->data_query_mode;
}

/*
 * How this connection turns SQL Server's local commit times into instants
 * (cdc_clock.h): the zone, or the offset of each statement, which is said
 * once per process because it makes a backlog across a DST change wrong.
 */
static void
choose_commit_time_zone(void)
{
	static bool warned = false;
	MemoryContext old = MemoryContextSwitchTo(worker_connection_context);

	worker_server_zone = cdc_clock_zone(worker_session, session_opts->server_time_zone);
	MemoryContextSwitchTo(old);
	if (worker_server_zone != NULL)
		ereport(DEBUG1,
				(errmsg_internal("mssql_cdc source \"%s\": commit times in time zone \"%s\"",
								 worker_server_name, worker_server_zone)));
	else if (!warned)
	{
		ereport(LOG,
				(errmsg("mssql_cdc source \"%s\": SQL Server does not name its time zone, so commit times use its UTC offset at the time they are read",
						worker_server_name),
				 errdetail("A change committed before a daylight-saving change and read after it gets a commit time off by the change."),
				 errhint("Set the server option server_time_zone to the server's Windows time zone (sys.time_zone_info), e.g. ALTER SERVER %s OPTIONS (ADD server_time_zone 'W. Europe Standard Time').",
						 quote_identifier(worker_server_name))));
		warned = true;
	}
}

static void
ensure_connected(void)
{
	if (worker_session != NULL && !tds_session_is_dead(worker_session))
		return;
	if (worker_session != NULL)
		tds_session_close(worker_session);
	worker_session = NULL;
	cdc_slot_report_phase(CDC_PHASE_CONNECTING);
	cdc_slot_report_connection(false, false, false);
	MemoryContextReset(worker_connection_context);
	worker_forget_described();
	worker_timeline_forget();
	worker_session = worker_open_session();
	report_connection_security();
	choose_commit_time_zone();
	warned_no_max_lsn = false;
	worker_snapshot_isolation = SNAPSHOT_ISOLATION_UNKNOWN;
}

/*
 * In a unit's transaction that succeeded: end the server's failure streak,
 * once (the catalog copy says it is over, so later windows and chunks of
 * the iteration do not write it again).
 */
void
worker_end_failure_streak(MssqlCdcServer *server)
{
	if (server->consecutive_failures > 0)
	{
		apply_reset_server_failures(worker_server_name);
		server->consecutive_failures = 0;
	}
}

/*
 * Lag of the lead checkpoint in source transactions, for the status view.
 * Caught up costs nothing.  Behind, SQL Server counts; while the last count
 * found a big backlog (a count costs about what it finds), at most once per
 * CDC_LAG_COUNT_INTERVAL_MS (cdc_lag.c says why), and in between the last
 * count stays reported with its own base LSN.  The count goes with the
 * lead group's window end (worker_window_lag): before the windows this only
 * asks for it; after them the window's own figure is reported, and only a
 * lead that ran no window end is counted in a request of its own.
 */
static void
report_lag(const MssqlLsn *lead, const MssqlLsn *max_lsn, bool before_windows)
{
	static TimestampTz lag_counted_at = 0;
	static int64 last_count = 0;
	TimestampTz now;

	if (before_windows)
		memset(&worker_window_lag, 0, sizeof(worker_window_lag));
	if (mssql_lsn_cmp(lead, max_lsn) >= 0)
	{
		cdc_slot_report_lag(lead, 0);
		return;
	}
	if (!before_windows)
	{
		if (worker_window_lag.counted)
		{
			last_count = worker_window_lag.count;
			if (worker_window_lag.known && mssql_lsn_cmp(&worker_window_lag.base, lead) == 0)
				cdc_slot_report_lag(lead, worker_window_lag.count);
			return;
		}
		if (!worker_window_lag.wanted)
			return;
	}
	now = GetCurrentTimestamp();
	if (before_windows)
	{
		if (last_count >= CDC_LAG_CHEAP_COUNT &&
			!TimestampDifferenceExceeds(lag_counted_at, now, CDC_LAG_COUNT_INTERVAL_MS))
			return;
		lag_counted_at = now;
		worker_window_lag.wanted = true;
		worker_window_lag.base = *lead;
		return;
	}
	last_count = cdc_count_transactions(worker_session, lead, max_lsn);
	cdc_slot_report_lag(lead, last_count);
}

/*
 * sys.fn_cdc_get_max_lsn() is NULL.  Before the capture job's first scan
 * that means "wait"; but SQL Server also empties cdc.lsn_time_mapping when
 * the last tracked table of the database is disabled (error 22909 is that
 * cleanup failing), and then the tables' capture instances are gone, not
 * late.  Park every table whose recorded instance the source no longer
 * lists (with the same explanation as a dropped instance in a window) and
 * return whether any table is left waiting for the capture job.
 */
static bool
park_dropped_instances(List *tables)
{
	static const MssqlLsn no_from = {{0}};
	bool		waiting = false;
	ListCell   *lc;

	foreach(lc, tables)
	{
		MssqlCdcTable *table = lfirst(lc);
		CiPlan		plan;
		const char *condition;
		char	   *message;
		char	   *hint;

		if (table->phase == MSSQL_PHASE_ERROR)
			continue;
		plan = ci_plan_for_window(&worker_source_cdc, table, &no_from);
		if (table->capture_instance == NULL || plan.current != NULL || plan.successor != NULL)
		{
			waiting = true;
			continue;
		}
		worker_ctx_table_id = table->table_id;
		condition = ci_explain_not_visible(worker_session, table, worker_server_name, &message, &hint);
		worker_park_table(table, condition, message, hint);
		table->phase = MSSQL_PHASE_ERROR;
	}
	worker_ctx_table_id = 0;
	return waiting;
}

/* One poll and its windows.  Returns true when more work is waiting. */

static bool
run_iteration(void)
{
	MssqlCdcServer *server;
	List	   *tables;
	List	   *streaming = NIL;
	List	   *copying = NIL;
	CdcPoll		poll;
	MssqlLsn	max_lsn;
	TimestampTz max_time;
	ListCell   *lc;
	bool		busy = false;
	bool		has_lead = false;
	MssqlLsn	lead;
	int			copies;
	int			max_copies;

	MemoryContextReset(worker_iteration_context);
	MemoryContextSwitchTo(worker_iteration_context);
	worker_clear_context();

	tables = read_catalog(&server);
	ensure_connected();
	/* a table to stream "from now on" needs a max LSN read after it was added */
	foreach(lc, tables)
	{
		MssqlCdcTable *table = lfirst(lc);

		if (table->phase == MSSQL_PHASE_PENDING &&
			table->snapshot_mode == MSSQL_SNAPSHOT_NEVER && !table->has_checkpoint_lsn)
		{
			worker_poll_forget_ahead();
			break;
		}
	}
	/*
	 * capture instances of the source, for switches
	 * (capture_instance_switch.c), and the max LSN: one request
	 */
	memset(&poll, 0, sizeof(poll));
	poll.server_zone = worker_server_zone;
	if (!worker_check_cdc_enabled(tables, &poll))
		return false;
	max_lsn = poll.max_lsn;
	max_time = poll.max_time;
	if (!poll.found)
	{
		cdc_slot_report_poll(NULL, 0);
		/* the last capture instance dropped: say so, it is not the job */
		if (!park_dropped_instances(tables))
			return false;
		capture_stall_observe(worker_session, worker_server_name, NULL, tables);
		if (!warned_no_max_lsn)
			ereport(LOG,
					(errmsg("mssql_cdc source \"%s\": sys.fn_cdc_get_max_lsn() is NULL, waiting for the capture job",
							worker_server_name),
					 errhint("The SQL Server Agent capture job has not recorded any change yet; make sure it runs.")));
		warned_no_max_lsn = true;
		return false;
	}
	cdc_slot_report_poll(&max_lsn, max_time);
	/* a max LSN frozen for long: the capture job may not run */
	capture_stall_observe(worker_session, worker_server_name, &max_lsn, tables);
	/* restored, failed over, repointed: never stream on another history */
	if (!worker_check_timeline(tables, &max_lsn))
		return true;

	/*
	 * Up to snapshot_connections tables copy at once (snapshot_parallel.c),
	 * and a queued table records its L0 only when its own copy begins
	 * (invariant 4), not while it waits for a free connection: a long
	 * earlier copy must not age the later tables' start points towards a
	 * retention overrun or a larger overlap.
	 */
	max_copies = Min(worker_snapshot_connections(), snapshot_lanes_admitted());
	copies = worker_count_copies(tables);

	foreach(lc, tables)
	{
		MssqlCdcTable *table = lfirst(lc);

		/* paused alone (pause(server, table)): its checkpoint stays, the others go on */
		if (table->paused)
			continue;
		/* resnapshot() of a 'never' table: on from where it was, or past the gap */
		if (table->phase == MSSQL_PHASE_PENDING &&
			table->snapshot_mode == MSSQL_SNAPSHOT_NEVER && !table->has_checkpoint_lsn &&
			table->has_snapshot_lsn)
			(void) worker_continue_after_gap(table);
		if (table->phase == MSSQL_PHASE_PENDING &&
			table->snapshot_mode == MSSQL_SNAPSHOT_NEVER && !table->has_checkpoint_lsn &&
			!table->has_snapshot_lsn)
		{
			/* stream from now on: nothing before max_lsn is wanted */
			worker_begin_xact();
			worker_timeline_fingerprint_at(&max_lsn);
			apply_start_streaming(table->table_id, &max_lsn);
			worker_commit_xact();
			table->phase = MSSQL_PHASE_STREAMING;
			table->has_checkpoint_lsn = true;
			table->checkpoint_lsn = max_lsn;
		}
		if (table->phase == MSSQL_PHASE_PENDING && copies < max_copies &&
			table->snapshot_mode == MSSQL_SNAPSHOT_INITIAL && !table->has_checkpoint_lsn)
		{
			CHECK_FOR_INTERRUPTS();
			if (worker_start_snapshot(table))
			{
				busy = true;
				copies++;
			}
		}
		if (table->phase == MSSQL_PHASE_STREAMING && table->has_checkpoint_lsn)
			streaming = lappend(streaming, table);
		/* oldest tables first, as many as may copy at once */
		if (table->phase == MSSQL_PHASE_SNAPSHOTTING && list_length(copying) < max_copies)
			copying = lappend(copying, table);
	}

	/* groups of tables with the same checkpoint, oldest first (worker_catch_up.c) */
	list_sort(streaming, worker_compare_by_checkpoint);

	/*
	 * Lag in source transactions of the most advanced checkpoint (the one
	 * the tables share once caught up), as of this poll and again after the
	 * windows; counting costs nothing when the checkpoint is at max.
	 */
	if (streaming != NIL)
	{
		lead = ((MssqlCdcTable *) llast(streaming))->checkpoint_lsn;
		has_lead = true;
		report_lag(&lead, &max_lsn, true);
		if (worker_apply_windows(server, streaming, &max_lsn, max_time, &lead))
			busy = true;
	}
	if (has_lead)
		report_lag(&lead, &max_lsn, false);

	/* partitioned staging tables: at this window boundary */
	worker_maintain_staging(tables);

	/*
	 * Then snapshot chunks, each its own transaction, for up to a poll
	 * interval: streaming tables get their windows between those runs, so
	 * their lag stays within a poll or two while a big table is copied; no
	 * sleep while rows remain.
	 */
	if (worker_copy_snapshots(server, copying))
		busy = true;
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
	int32		table_id = worker_ctx_table_id;
	bool		in_window = worker_ctx_window_table;
	MssqlLsn	window_checkpoint = worker_ctx_window_checkpoint;
	char	   *park_hint;
	TdsRemoteError remote;
	ErrorCondition cond;
	TdsSession *failed;

	HOLD_INTERRUPTS();
	MemoryContextSwitchTo(worker_context);
	edata = CopyErrorData();
	EmitErrorReport();
	AbortOutOfAnyTransaction();
	FlushErrorState();
	memset(&remote, 0, sizeof(remote));
	/* a failed login (of any session), else the session that failed */
	failed = worker_ctx_session != NULL ? worker_ctx_session : worker_session;
	if (connect_error.kind == TDS_ERROR_CONNECT)
	{
		remote = connect_error;
		remote_errno = connect_error.msgno;
	}
	else if (failed != NULL)
	{
		const TdsRemoteError *err = tds_session_last_error(failed);

		if (err != NULL)
			remote = *err;
		if (err != NULL && err->kind == TDS_ERROR_REMOTE)
			remote_errno = err->msgno;
	}
	/* they may be in the middle of a result: start over on new ones */
	if (worker_session != NULL)
		tds_session_close(worker_session);
	worker_session = NULL;
	worker_poll_forget_ahead();
	snapshot_lanes_close();
	memset(&connect_error, 0, sizeof(connect_error));
	worker_clear_context();
	RESUME_INTERRUPTS();

	/* what it means and what to do, for mssql_cdc.status */
	MemoryContextSwitchTo(worker_context);
	cond = error_condition_classify(edata->sqlerrcode, edata->schema_name, &remote, worker_server_name);

	worker_begin_xact();
	catalog_record_error_condition(worker_server_name, table_id, unpack_sql_state(edata->sqlerrcode),
								   edata->message, edata->detail,
								   edata->hint ? edata->hint : cond.hint, remote_errno,
								   cond.condition);
	apply_record_failure(worker_server_name, table_id, edata->message);
	catalog_set_server_condition(worker_server_name, cond.condition, cond.hint);
	worker_window_after_failure();
	/* one broken staging table does not stop the source */
	park_hint = worker_park_failing_table(table_id, in_window, &window_checkpoint,
										  cond.condition, edata->hint ? edata->hint : cond.hint,
										  edata->message);
	if (table_id > 0 && park_hint == NULL)
		catalog_set_table_condition(table_id, cond.condition, cond.hint);
	worker_commit_xact();

	proc_exit(1);
}

void
mssql_cdc_worker_main(Datum main_arg)
{
	int			slot_index = DatumGetInt32(main_arg);
	ErrorContextCallback errcallback;

	memcpy(&worker_args, MyBgworkerEntry->bgw_extra, sizeof(worker_args));
	worker_server_name = pstrdup(NameStr(worker_args.server_name));

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
	pgstat_report_appname(psprintf("%s %s", MSSQL_CDC_WORKER_TYPE, worker_server_name));

	worker_context = AllocSetContextCreate(TopMemoryContext, "mssql_cdc worker",
										   ALLOCSET_DEFAULT_SIZES);
	worker_iteration_context = AllocSetContextCreate(worker_context, "mssql_cdc worker iteration",
											  ALLOCSET_DEFAULT_SIZES);
	worker_connection_context = AllocSetContextCreate(worker_context, "mssql_cdc worker connection",
											   ALLOCSET_DEFAULT_SIZES);
	options_context = AllocSetContextCreate(worker_context, "mssql_cdc worker options",
											ALLOCSET_SMALL_SIZES);
	CacheRegisterSyscacheCallback(FOREIGNSERVEROID, connection_settings_invalidated, (Datum) 0);
	CacheRegisterSyscacheCallback(USERMAPPINGOID, connection_settings_invalidated, (Datum) 0);
	worker_window_transactions = mssql_cdc_batch_max_transactions;
	tds_session_init();

	errcallback.callback = worker_error_context;
	errcallback.arg = NULL;
	errcallback.previous = NULL;
	error_context_stack = &errcallback;

	ereport(LOG,
			(errmsg("mssql_cdc worker for source \"%s\" started", worker_server_name)));

	for (;;)
	{
		bool		busy = false;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			worker_window_transactions = Min(Max(worker_window_transactions, 1),
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
			/* after the sleep the poll is read anew (worker_poll_ahead.c) */
			worker_poll_forget_ahead();
			rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						   mssql_cdc_poll_interval, PG_WAIT_EXTENSION);
			if (rc & WL_LATCH_SET)
				ResetLatch(MyLatch);
		}
	}
}
