/*-------------------------------------------------------------------------
 *
 * worker_launch.c
 *		Registering a source worker for a launcher slot.
 *
 * The launcher owns restarts (with backoff), so the worker is registered
 * with BGW_NEVER_RESTART and notifies the launcher when it starts and
 * stops.  A failure to register is not an ERROR: that would take the
 * launcher, and with it every other source, down.
 *
 * IDENTIFICATION
 *		src/worker_launch.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "utils/builtins.h"

#include "worker.h"

LaunchResult
worker_launch(int index, uint32 generation, Oid run_as, const char *server_name,
			  BackgroundWorkerHandle **handle)
{
	BackgroundWorker worker;
	WorkerLaunchArgs args;

	*handle = NULL;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(worker.bgw_library_name, "mssql_cdc", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "mssql_cdc_worker_main", BGW_MAXLEN);
	snprintf(worker.bgw_name, BGW_MAXLEN, "%s %s", MSSQL_CDC_WORKER_TYPE, server_name);
	strlcpy(worker.bgw_type, MSSQL_CDC_WORKER_TYPE, BGW_MAXLEN);
	worker.bgw_main_arg = Int32GetDatum(index);
	worker.bgw_notify_pid = MyProcPid;

	memset(&args, 0, sizeof(args));
	args.generation = generation;
	args.database = MyDatabaseId;
	args.run_as = run_as;
	namestrcpy(&args.server_name, server_name);
	memcpy(worker.bgw_extra, &args, sizeof(args));

	if (!RegisterDynamicBackgroundWorker(&worker, handle))
	{
		ereport(LOG,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("mssql_cdc launcher: could not start the worker of source \"%s\"",
						server_name),
				 errdetail("No background worker slot is free."),
				 errhint("Raise max_worker_processes (each source needs one worker besides the launcher).")));
		*handle = NULL;
		return LAUNCH_FAILED;
	}
	return LAUNCH_STARTED;
}
