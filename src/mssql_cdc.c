/*-------------------------------------------------------------------------
 *
 * mssql_cdc.c
 *		Module entry point: preload check, settings, shared memory, launcher.
 *
 * The extension only works when loaded through shared_preload_libraries:
 * its launcher is a static background worker and its worker slots live in
 * shared memory sized at server start.  Loading it any other way (CREATE
 * EXTENSION or LOAD on a server without preload) fails with an error that
 * says how to fix it, before anything is registered.
 *
 * A backend of a preloaded server inherits the loaded library from the
 * postmaster, so calling our SQL functions there does not run _PG_init
 * again (on EXEC_BACKEND platforms it does, with
 * process_shared_preload_libraries_in_progress set, which passes the check).
 *
 * IDENTIFICATION
 *		src/mssql_cdc.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "capture_stall.h"
#include "compat.h"
#include "launcher.h"
#include "mssql_cdc.h"
#include "shmem.h"
#include "staging_writer.h"

PG_MODULE_MAGIC;

char	   *mssql_cdc_database = NULL;
int			mssql_cdc_max_workers = 8;
int			mssql_cdc_poll_interval = 1000;
int			mssql_cdc_batch_max_transactions = 1000;
int			mssql_cdc_batch_max_rows = 100000;
int			mssql_cdc_table_failures_before_park = 5;
int			mssql_cdc_retry_max_backoff = 300;
int			mssql_cdc_snapshot_chunk_rows = 10000;

/* Upper bound of max_workers: far above any sane value, keeps shmem small. */
#define MSSQL_CDC_MAX_WORKERS_LIMIT		1024

/* One day: a longer retry cap would look like a source that never retries. */
#define MSSQL_CDC_RETRY_MAX_BACKOFF_LIMIT	86400

/* exported explicitly: the build hides symbols by default */
extern PGDLLEXPORT void _PG_init(void);

static void
define_settings(void)
{
	DefineCustomStringVariable("mssql_cdc.database",
							   "Database in which the mssql_cdc launcher runs.",
							   "The extension must be created in this database; "
							   "CREATE EXTENSION elsewhere has no running service.",
							   &mssql_cdc_database,
							   "postgres",
							   PGC_POSTMASTER,
							   0,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("mssql_cdc.max_workers",
							"Maximum number of SQL Server sources replicated at once.",
							"One source worker runs per foreign server; each also "
							"counts against max_worker_processes.",
							&mssql_cdc_max_workers,
							8, 1, MSSQL_CDC_MAX_WORKERS_LIMIT,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("mssql_cdc.poll_interval",
							"Time between polls of a source that had no new changes.",
							"A source with a backlog is read again immediately. "
							"The launcher also checks its catalog at this interval.",
							&mssql_cdc_poll_interval,
							1000, 10, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("mssql_cdc.batch_max_transactions",
							"Maximum number of source transactions applied in one local transaction.",
							NULL,
							&mssql_cdc_batch_max_transactions,
							1000, 1, INT_MAX,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("mssql_cdc.table_failures_before_park",
							"Failed windows in a row after which a table whose staging table refuses its rows is parked.",
							"A CHECK constraint, a revoked privilege or a changed column on one staging "
							"table parks that table in state error, so the source's other tables stream on; "
							"resume(server, table) continues it from its checkpoint.",
							&mssql_cdc_table_failures_before_park,
							5, 1, 1000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("mssql_cdc.batch_max_rows",
							"Soft limit of change rows applied in one local transaction.",
							"A batch stops at the first source transaction boundary at or "
							"after this many rows: a source transaction is never split, so "
							"one large transaction may exceed the limit.",
							&mssql_cdc_batch_max_rows,
							100000, 1, INT_MAX,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("mssql_cdc.retry_max_backoff",
							"Maximum delay between retries of a failing source.",
							"After a failure the delay starts at one second and doubles "
							"per consecutive failure up to this value.",
							&mssql_cdc_retry_max_backoff,
							300, 1, MSSQL_CDC_RETRY_MAX_BACKOFF_LIMIT,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("mssql_cdc.snapshot_chunk_rows",
							"Rows copied per snapshot chunk (one local transaction each).",
							"A chunk is one keyset-paged SELECT on SQL Server and one local "
							"transaction that also records the last key copied, so an "
							"interrupted snapshot resumes after the last committed chunk. "
							"Streaming windows of other tables run between chunks.",
							&mssql_cdc_snapshot_chunk_rows,
							10000, 1, 10000000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	compat_mark_guc_prefix_reserved("mssql_cdc");
}

void
_PG_init(void)
{
	/*
	 * Checked before anything is defined: a failed load is retried on the
	 * next call into the library, and defining a GUC twice would turn this
	 * clear message into a confusing one.
	 */
	if (!process_shared_preload_libraries_in_progress)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("mssql_cdc must be loaded via shared_preload_libraries"),
				 errhint("Add mssql_cdc to shared_preload_libraries in postgresql.conf, "
						 "set mssql_cdc.database to the database that will hold the "
						 "extension, and restart the server.")));

	/* before define_settings, which reserves the "mssql_cdc" prefix */
	staging_writer_define_gucs();
	capture_stall_define_gucs();
	define_settings();
	cdc_shmem_install_hooks();
	mssql_cdc_register_launcher();
}
