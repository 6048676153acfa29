/*-------------------------------------------------------------------------
 *
 * worker.h
 *		The source worker: one dynamic background worker per foreign server
 *		that streams CDC windows into the staging tables (src/worker.c), and
 *		how the launcher starts it (src/worker_launch.c).
 *
 * IDENTIFICATION
 *		include/worker.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_WORKER_H
#define MSSQL_CDC_WORKER_H

#include "postgres.h"

#include "postmaster/bgworker.h"

#define MSSQL_CDC_WORKER_TYPE	"mssql_cdc worker"

/* Outcome of starting a worker for a slot (the launcher's seam). */
typedef enum LaunchResult
{
	LAUNCH_STARTED,				/* a process was registered for the slot */
	LAUNCH_FAILED,				/* could not start now; retry with backoff */
	LAUNCH_UNAVAILABLE			/* this build has no source worker */
} LaunchResult;

/*
 * What the launcher hands to a worker in bgw_extra: the slot generation
 * (a stale launch must not take over a reused slot), the database and the
 * role whose privileges the staging writes use, and the source's name.
 */
typedef struct WorkerLaunchArgs
{
	uint32		generation;
	Oid			database;
	Oid			run_as;
	NameData	server_name;
} WorkerLaunchArgs;

StaticAssertDecl(sizeof(WorkerLaunchArgs) <= BGW_EXTRALEN,
				 "WorkerLaunchArgs must fit into bgw_extra");

/*
 * Register the worker of slot `index` (claimed for server_name with
 * `generation`) in the current database.  Never raises for lack of
 * resources: returns LAUNCH_FAILED (after a LOG line) so the launcher can
 * retry with backoff.
 */
extern LaunchResult worker_launch(int index, uint32 generation, Oid run_as,
								  const char *server_name,
								  BackgroundWorkerHandle **handle);

extern PGDLLEXPORT void mssql_cdc_worker_main(Datum main_arg);

#endif							/* MSSQL_CDC_WORKER_H */
