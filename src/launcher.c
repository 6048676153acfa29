/*-------------------------------------------------------------------------
 *
 * launcher.c
 *		The mssql_cdc launcher: one static background worker per cluster that
 *		keeps one source worker running per active foreign server.
 *
 * The launcher connects to mssql_cdc.database and loops:
 *	- while the extension is not installed there, or installed at another
 *	  version than this library's (ALTER EXTENSION ... UPDATE not run yet),
 *	  it idles, checking again every mssql_cdc.poll_interval (and says so
 *	  once in the log);
 *	- once installed, it reads the desired set of sources (servers that are
 *	  not paused and have at least one table) and reconciles it with the
 *	  shared-memory slots: stop workers whose source went away, start the
 *	  missing ones, restart failed ones when their backoff has expired.
 * It reconciles when an API call or a hand edit of the source catalog
 * commits (see mssql_cdc_wake_launcher_at_commit and the catalog trigger),
 * when a worker exits, when a backoff expires, and every
 * LAUNCHER_RESYNC_INTERVAL_MS as a safety net (for example for changes made
 * in prepared transactions, or with triggers disabled).
 *
 * Source workers are started through launcher_start_worker(), which hands
 * over to worker_launch() (src/worker_launch.c).
 *
 * Signals: SIGTERM sets ShutdownRequestPending and the loop exits at once
 * with code 1 so the postmaster starts a fresh launcher after
 * LAUNCHER_RESTART_SECONDS (a terminated launcher must come back: users
 * expect the service to keep running; on server shutdown the postmaster
 * does not restart anything).  SIGHUP reloads the configuration.
 *
 * IDENTIFICATION
 *		src/launcher.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "access/xact.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "catalog_version.h"
#include "compat.h"
#include "launcher.h"
#include "mssql_cdc.h"
#include "shmem.h"
#include "worker.h"

/* Seconds before the postmaster restarts a launcher that exited or failed. */
#define LAUNCHER_RESTART_SECONDS	5

/* Re-read the catalog at least this often even without a wake-up. */
#define LAUNCHER_RESYNC_INTERVAL_MS	60000

#define LAUNCHER_NAME				"mssql_cdc launcher"

/* A source the catalog says should be running. */
typedef struct DesiredSource
{
	NameData	server_name;
	NameData	run_as_name;
	Oid			run_as;			/* InvalidOid if the role does not exist */
} DesiredSource;

/* Outcome of launcher_start_worker(). */
/* Whether the extension exists in our database, as last seen. */
typedef enum ExtensionPresence
{
	EXTENSION_UNKNOWN,
	EXTENSION_ABSENT,
	EXTENSION_PRESENT,
	EXTENSION_OTHER_VERSION		/* installed, but not this library's version */
} ExtensionPresence;

/*
 * Handles of the workers this launcher registered, by slot index, with the
 * slot generation they were started for.  A launcher that restarts does not
 * inherit them; it recognises its predecessor's workers by their pid in the
 * slot instead.
 */
typedef struct LaunchedWorker
{
	BackgroundWorkerHandle *handle;
	uint32		generation;
} LaunchedWorker;

static LaunchedWorker *launched = NULL;

static ExtensionPresence extension_presence = EXTENSION_UNKNOWN;

/* Slot exhaustion is logged once per episode, not every reconcile. */
static bool slots_exhausted_logged = false;

/* Commit-time wake-up state of the current backend (any backend). */
static bool wake_callbacks_registered = false;
static int	wake_requested_nest_level = 0;	/* 0 = no request pending */

/* ------------------------------------------------------------------------
 * Registration
 * ------------------------------------------------------------------------
 */

void
mssql_cdc_register_launcher(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS |
		BGWORKER_BACKEND_DATABASE_CONNECTION;
	/* CDC writes staging tables: never on a standby */
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = LAUNCHER_RESTART_SECONDS;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "mssql_cdc");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "mssql_cdc_launcher_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, LAUNCHER_NAME);
	snprintf(worker.bgw_type, BGW_MAXLEN, LAUNCHER_NAME);
	worker.bgw_main_arg = (Datum) 0;
	worker.bgw_notify_pid = 0;

	RegisterBackgroundWorker(&worker);
}

/* ------------------------------------------------------------------------
 * Commit-time wake-up (called by the SQL API in ordinary backends)
 * ------------------------------------------------------------------------
 */

/*
 * Deliver a pending wake-up if the top-level transaction commits; forget it
 * otherwise.  A prepared transaction commits later, possibly in another
 * session, so its request is dropped too: the periodic resync notices it.
 */
static void
launcher_wake_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
			if (wake_requested_nest_level > 0)
				cdc_launcher_signal_catalog_changed();
			wake_requested_nest_level = 0;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
			wake_requested_nest_level = 0;
			break;
		default:
			break;
	}
}

/*
 * Subtransactions: a request made inside a savepoint that is rolled back
 * must vanish, one made in a released savepoint belongs to the parent.  We
 * track only the outermost level holding a request, which is enough: a
 * request at that level survives exactly when something must be signalled.
 */
static void
launcher_wake_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							   SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();

	if (wake_requested_nest_level == 0 || wake_requested_nest_level < level)
		return;

	switch (event)
	{
		case SUBXACT_EVENT_ABORT_SUB:
			wake_requested_nest_level = 0;
			break;
		case SUBXACT_EVENT_COMMIT_SUB:
			wake_requested_nest_level = level - 1;
			break;
		default:
			break;
	}
}

void
mssql_cdc_wake_launcher_at_commit(void)
{
	int			level = GetCurrentTransactionNestLevel();

	if (!wake_callbacks_registered)
	{
		RegisterXactCallback(launcher_wake_xact_callback, NULL);
		RegisterSubXactCallback(launcher_wake_subxact_callback, NULL);
		wake_callbacks_registered = true;
	}

	if (wake_requested_nest_level == 0 || level < wake_requested_nest_level)
		wake_requested_nest_level = level;
}

/*
 * Statement trigger on the source catalog (extension/50_runtime.sql): a
 * superuser who edits mssql_cdc.servers or mssql_cdc.tables by hand (as the
 * API's own error hints suggest for run_as) gets the same commit-time
 * wake-up as an API call, instead of waiting for the periodic resync.
 */
PG_FUNCTION_INFO_V1(mssql_cdc_catalog_changed_trigger);

Datum
mssql_cdc_catalog_changed_trigger(PG_FUNCTION_ARGS)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("mssql_cdc.catalog_changed_trigger() must be called as a trigger")));

	mssql_cdc_wake_launcher_at_commit();

	return PointerGetDatum(NULL);
}

/* ------------------------------------------------------------------------
 * Reading the catalog
 * ------------------------------------------------------------------------
 */

/*
 * Is the extension installed in our database, at this library's version?
 * Logs transitions once.  A catalog of another version (new binaries, no
 * ALTER EXTENSION ... UPDATE yet) gets no workers: its tables may lack what
 * this library writes (catalog_version.h).  Must be called inside a
 * transaction.
 */
static bool
launcher_check_extension(void)
{
	char	   *version = mssql_cdc_installed_version();
	ExtensionPresence now;

	if (version == NULL)
		now = EXTENSION_ABSENT;
	else if (strcmp(version, MSSQL_CDC_LIBRARY_VERSION) != 0)
		now = EXTENSION_OTHER_VERSION;
	else
		now = EXTENSION_PRESENT;

	if (now != extension_presence)
	{
		if (now == EXTENSION_PRESENT)
			ereport(LOG,
					(errmsg("mssql_cdc launcher found the extension in database \"%s\" and is managing its sources",
							mssql_cdc_database)));
		else if (now == EXTENSION_OTHER_VERSION)
			ereport(LOG,
					(errmsg("mssql_cdc launcher is waiting: extension \"%s\" in database \"%s\" is version %s, the library is version %s",
							MSSQL_CDC_EXTENSION_NAME, mssql_cdc_database, version,
							MSSQL_CDC_LIBRARY_VERSION),
					 errdetail("No source is replicated until the extension's catalog matches the library."),
					 errhint("Run ALTER EXTENSION %s UPDATE in database \"%s\"; the launcher notices within mssql_cdc.poll_interval.",
							 MSSQL_CDC_EXTENSION_NAME, mssql_cdc_database)));
		else
			ereport(LOG,
					(errmsg("mssql_cdc launcher is idle: extension \"%s\" is not installed in database \"%s\"",
							MSSQL_CDC_EXTENSION_NAME, mssql_cdc_database),
					 errhint("Run CREATE EXTENSION %s in database \"%s\"; the launcher notices within mssql_cdc.poll_interval.",
							 MSSQL_CDC_EXTENSION_NAME, mssql_cdc_database)));
		extension_presence = now;
	}

	return now == EXTENSION_PRESENT;
}

/*
 * The sources that should run: servers that are not paused and have at
 * least one table.  Must be called inside a transaction with a snapshot;
 * the result is allocated in result_cxt.
 */
static List *
launcher_load_desired_sources(MemoryContext result_cxt)
{
	static const char *query =
		"SELECT s.server_name, s.run_as, r.oid"
		"  FROM mssql_cdc.servers s"
		"  LEFT JOIN pg_catalog.pg_roles r ON r.rolname OPERATOR(pg_catalog.=) s.run_as"
		" WHERE NOT s.paused"
		"   AND EXISTS (SELECT FROM mssql_cdc.tables t"
		"                WHERE t.server_name OPERATOR(pg_catalog.=) s.server_name)"
		" ORDER BY s.server_name";
	List	   *result = NIL;
	uint64		i;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	debug_query_string = query;
	pgstat_report_activity(STATE_RUNNING, query);

	if (SPI_execute(query, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the mssql_cdc source catalog");

	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		server_name = SPI_getbinval(tuple, desc, 1, &isnull);
		Datum		run_as_name = SPI_getbinval(tuple, desc, 2, &isnull);
		Datum		run_as = SPI_getbinval(tuple, desc, 3, &isnull);
		MemoryContext oldcxt = MemoryContextSwitchTo(result_cxt);
		DesiredSource *source = palloc0(sizeof(DesiredSource));

		namestrcpy(&source->server_name, NameStr(*DatumGetName(server_name)));
		namestrcpy(&source->run_as_name, NameStr(*DatumGetName(run_as_name)));
		source->run_as = isnull ? InvalidOid : DatumGetObjectId(run_as);
		result = lappend(result, source);
		MemoryContextSwitchTo(oldcxt);
	}

	SPI_finish();
	debug_query_string = NULL;

	return result;
}

/* ------------------------------------------------------------------------
 * Starting and stopping workers
 * ------------------------------------------------------------------------
 */

/*
 * Start the source worker for slot `index` (claimed for the source with
 * `generation`).  worker_launch() (src/worker_launch.c) registers a
 * BGW_NEVER_RESTART dynamic worker that notifies us: restarts are our job,
 * with backoff.  It never raises for lack of worker slots (that would take
 * the launcher, and every other source, down) but returns LAUNCH_FAILED.
 * The worker then calls cdc_slot_attach(index, generation).
 */
static LaunchResult
launcher_start_worker(int index, uint32 generation, const DesiredSource *source,
					  BackgroundWorkerHandle **handle)
{
	return worker_launch(index, generation, source->run_as,
						 NameStr(source->server_name), handle);
}

static const DesiredSource *
find_desired(List *desired, const char *server_name)
{
	ListCell   *lc;

	foreach(lc, desired)
	{
		const DesiredSource *source = lfirst(lc);

		if (strcmp(NameStr(source->server_name), server_name) == 0)
			return source;
	}
	return NULL;
}

static const MssqlCdcSlotState *
find_slot(const MssqlCdcSlotState *slots, int nslots, const char *server_name)
{
	int			i;

	for (i = 0; i < nslots; i++)
	{
		if (strcmp(NameStr(slots[i].server_name), server_name) == 0)
			return &slots[i];
	}
	return NULL;
}

static void
forget_handle(int index)
{
	if (launched[index].handle)
		pfree(launched[index].handle);
	launched[index].handle = NULL;
	launched[index].generation = 0;
}

/*
 * Does a process registered by us for this slot still exist (or is it about
 * to start)?  A process that stopped before attaching to its slot counts as
 * a failed launch: nobody else would notice it.
 */
static bool
launch_in_flight(const MssqlCdcSlotState *slot)
{
	LaunchedWorker *lw = &launched[slot->index];
	pid_t		pid;

	if (lw->handle == NULL)
		return false;
	if (lw->generation != slot->generation)
	{
		forget_handle(slot->index);
		return false;
	}

	switch (GetBackgroundWorkerPid(lw->handle, &pid))
	{
		case BGWH_STARTED:
		case BGWH_NOT_YET_STARTED:
			return true;
		case BGWH_STOPPED:
			if (slot->pid == 0 && slot->phase == CDC_PHASE_STARTING)
			{
				ereport(LOG,
						(errmsg("mssql_cdc worker for source \"%s\" exited before it started",
								NameStr(slot->server_name))));
				cdc_slot_record_launch_failure(slot->index, slot->generation);
			}
			forget_handle(slot->index);
			return false;
		case BGWH_POSTMASTER_DIED:
			proc_exit(1);
	}
	return false;
}

static void
launch(int index, uint32 generation, const DesiredSource *source)
{
	BackgroundWorkerHandle *handle = NULL;
	MemoryContext oldcxt;
	LaunchResult result;

	if (!OidIsValid(source->run_as))
	{
		ereport(WARNING,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("mssql_cdc source \"%s\" is not started: its role \"%s\" does not exist",
						NameStr(source->server_name), NameStr(source->run_as_name)),
				 errhint("Create the role, or remove and re-add the source's tables as an existing role.")));
		cdc_slot_record_launch_failure(index, generation);
		return;
	}

	ereport(DEBUG1,
			(errmsg("mssql_cdc launcher: starting a worker for source \"%s\" in slot %d",
					NameStr(source->server_name), index)));

	/*
	 * The handle outlives this iteration (launched[] keeps it until the
	 * worker is reaped), so it must not be allocated in the loop's context,
	 * which is reset after every iteration.
	 */
	oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	result = launcher_start_worker(index, generation, source, &handle);
	MemoryContextSwitchTo(oldcxt);

	switch (result)
	{
		case LAUNCH_STARTED:
			forget_handle(index);
			launched[index].handle = handle;
			launched[index].generation = generation;
			break;
		case LAUNCH_FAILED:
			cdc_slot_record_launch_failure(index, generation);
			break;
		case LAUNCH_UNAVAILABLE:
			cdc_slot_release(index, generation);
			break;
	}
}

/*
 * Make the slots match the desired set.  Runs outside any transaction.
 * Returns the earliest time at which a backoff expires (0 if none), so the
 * caller can sleep until then.
 */
static TimestampTz
launcher_reconcile(List *desired)
{
	int			capacity = cdc_slot_count();
	MssqlCdcSlotState *slots = palloc(sizeof(MssqlCdcSlotState) * capacity);
	int			nslots = cdc_slots_read(slots);
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz next_wake = 0;
	int			i;
	ListCell   *lc;

	pgstat_report_activity(STATE_RUNNING, "reconciling mssql_cdc sources");
	ereport(DEBUG1,
			(errmsg("mssql_cdc launcher: %d source(s) should run, %d slot(s) in use",
					list_length(desired), nslots)));

	/* Stop what should not run; restart what failed, when due. */
	for (i = 0; i < nslots; i++)
	{
		MssqlCdcSlotState *slot = &slots[i];
		const DesiredSource *source = find_desired(desired, NameStr(slot->server_name));

		if (launch_in_flight(slot))
		{
			if (source == NULL && !slot->stop_requested)
				cdc_slot_request_stop(slot->index, slot->generation);
			continue;
		}

		if (source == NULL)
		{
			/* A running worker is released once its exit wakes us. */
			if (slot->pid == 0)
				cdc_slot_release(slot->index, slot->generation);
			else if (!slot->stop_requested)
				cdc_slot_request_stop(slot->index, slot->generation);
			continue;
		}

		if (slot->stop_requested)
		{
			/*
			 * Stopped (say, paused) and wanted again (resumed) before we
			 * released the slot.  Its stop flag must not reach a new worker:
			 * once the old process is gone, free the slot and let the loop
			 * below claim a fresh one (new generation, clean retry state).
			 */
			if (slot->pid == 0)
			{
				cdc_slot_release(slot->index, slot->generation);
				NameStr(slot->server_name)[0] = '\0';	/* no longer has a slot */
			}
			continue;
		}

		if (slot->pid != 0)
			continue;			/* running (perhaps started by a predecessor) */

		if (slot->next_attempt_at <= now)
			launch(slot->index, slot->generation, source);
		else if (next_wake == 0 || slot->next_attempt_at < next_wake)
			next_wake = slot->next_attempt_at;
	}

	/* Start what has no slot yet. */
	foreach(lc, desired)
	{
		const DesiredSource *source = lfirst(lc);
		uint32		generation;
		int			index;

		if (find_slot(slots, nslots, NameStr(source->server_name)) != NULL)
			continue;

		index = cdc_slot_claim(NameStr(source->server_name), source->run_as,
							   &generation);
		if (index < 0)
		{
			if (!slots_exhausted_logged)
				ereport(LOG,
						(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
						 errmsg("mssql_cdc cannot start source \"%s\": all %d worker slots are in use",
								NameStr(source->server_name), capacity),
						 errhint("Raise mssql_cdc.max_workers (and max_worker_processes) and restart the server, or pause some sources.")));
			slots_exhausted_logged = true;
			continue;
		}
		launch(index, generation, source);
	}

	if (list_length(desired) <= capacity)
		slots_exhausted_logged = false;

	return next_wake;
}

/*
 * Is any slot idle past its backoff, or without a process for a desired
 * source?  Then reconcile even if the catalog did not change.
 */
static bool
slots_need_attention(TimestampTz now)
{
	int			capacity = cdc_slot_count();
	MssqlCdcSlotState *slots = palloc(sizeof(MssqlCdcSlotState) * capacity);
	int			nslots = cdc_slots_read(slots);
	int			i;

	for (i = 0; i < nslots; i++)
	{
		BackgroundWorkerHandle *handle = launched[slots[i].index].handle;
		pid_t		pid;

		if (handle == NULL)
		{
			/* no process of ours: due for a (re)start? */
			if (slots[i].pid == 0 && slots[i].next_attempt_at <= now)
				return true;
		}
		else if (GetBackgroundWorkerPid(handle, &pid) == BGWH_STOPPED)
			return true;		/* our worker exited: reap it */
	}
	return false;
}

/* ------------------------------------------------------------------------
 * Main loop
 * ------------------------------------------------------------------------
 */

static void
launcher_reload_config(void)
{
	ConfigReloadPending = false;
	ProcessConfigFile(PGC_SIGHUP);
	ereport(DEBUG1,
			(errmsg("mssql_cdc launcher reloaded its configuration: poll_interval = %d ms, retry_max_backoff = %d s",
					mssql_cdc_poll_interval, mssql_cdc_retry_max_backoff)));
}

/*
 * One pass: check the extension, and reconcile if there is a reason to.
 * Returns the number of milliseconds to sleep afterwards.
 */
static long
launcher_iteration(MemoryContext loop_cxt, TimestampTz *next_resync)
{
	bool		catalog_changed = cdc_launcher_take_catalog_changed();
	ExtensionPresence before = extension_presence;
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz next_wake;
	bool		installed;
	bool		reconcile;
	List	   *desired = NIL;
	long		sleep_ms = mssql_cdc_poll_interval;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());

	installed = launcher_check_extension();
	reconcile = catalog_changed || extension_presence != before ||
		now >= *next_resync || slots_need_attention(now);
	if (installed && reconcile)
		desired = launcher_load_desired_sources(loop_cxt);

	PopActiveSnapshot();
	CommitTransactionCommand();
	/* commit leaves us in TopMemoryContext; keep our garbage in the loop's */
	MemoryContextSwitchTo(loop_cxt);
	pgstat_report_stat(false);

	/* Dropping the extension stops everything: the desired set is empty. */
	if (reconcile)
	{
		next_wake = launcher_reconcile(desired);
		*next_resync = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												   LAUNCHER_RESYNC_INTERVAL_MS);
		if (next_wake != 0)
		{
			long		until_retry = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
																	  next_wake);

			sleep_ms = Min(sleep_ms, until_retry);
		}
	}

	pgstat_report_activity(STATE_IDLE, NULL);
	return Max(sleep_ms, 1);
}

void
mssql_cdc_launcher_main(Datum main_arg)
{
	MemoryContext loop_cxt;
	TimestampTz next_resync = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();

	if (!cdc_launcher_attach())
	{
		/* exit code 0: the postmaster will not restart this duplicate */
		ereport(LOG,
				(errmsg("mssql_cdc launcher not started: another launcher is running with PID %d",
						(int) cdc_launcher_pid())));
		proc_exit(0);
	}

	BackgroundWorkerInitializeConnection(mssql_cdc_database, NULL, 0);

	launched = MemoryContextAllocZero(TopMemoryContext,
									  sizeof(LaunchedWorker) * cdc_slot_count());
	loop_cxt = AllocSetContextCreate(TopMemoryContext,
									 "mssql_cdc launcher loop",
									 ALLOCSET_DEFAULT_SIZES);

	ereport(LOG,
			(errmsg("mssql_cdc launcher started in database \"%s\"",
					mssql_cdc_database)));

	for (;;)
	{
		long		sleep_ms;
		MemoryContext oldcxt;

		CHECK_FOR_INTERRUPTS();
		if (ShutdownRequestPending)
			break;
		if (ConfigReloadPending)
			launcher_reload_config();

		oldcxt = MemoryContextSwitchTo(loop_cxt);
		sleep_ms = launcher_iteration(loop_cxt, &next_resync);
		MemoryContextSwitchTo(oldcxt);
		MemoryContextReset(loop_cxt);

		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 sleep_ms,
						 MSSQL_CDC_WAIT_EVENT_MAIN);
		ResetLatch(MyLatch);
	}

	/*
	 * Source workers are left running: their batches are atomic and a new
	 * launcher adopts them through their slots.  Exit code 1 asks the
	 * postmaster for a restart after bgw_restart_time.
	 */
	ereport(LOG,
			(errmsg("mssql_cdc launcher shutting down"),
			 errdetail("It is restarted after %d seconds unless the server is shutting down.",
					   LAUNCHER_RESTART_SECONDS)));
	proc_exit(1);
}
