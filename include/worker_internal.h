/*-------------------------------------------------------------------------
 *
 * worker_internal.h
 *		What the files of the source worker share: the process's state (its
 *		connection, memory contexts, the error context) and the steps one
 *		file calls in another.  Only src/worker*.c include it.
 *
 * IDENTIFICATION
 *		include/worker_internal.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_WORKER_INTERNAL_H
#define MSSQL_CDC_WORKER_INTERNAL_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"

#include "apply.h"
#include "capture_instance_switch.h"
#include "catalog.h"
#include "lsn.h"
#include "options.h"
#include "snapshot.h"
#include "source_identity.h"
#include "source_schema.h"
#include "tds_session.h"
#include "worker.h"

/* ---- state of the process (defined in worker.c) ------------------------- */

extern WorkerLaunchArgs worker_args;
extern const char *worker_server_name;

/* The SQL Server connection; NULL or dead means "reconnect" */
extern TdsSession *worker_session;

/*
 * The server's time zone for commit times (cdc_clock.h), chosen once per
 * connection; NULL: the offset of each statement
 */
extern const char *worker_server_zone;

/* The server option data_query_mode of the current connection settings */
extern MssqlDataQueryMode worker_data_query_mode(void);

/* Reset at every iteration / on every reconnect */
extern MemoryContext worker_iteration_context;
extern MemoryContext worker_connection_context;

/*
 * Adaptive window size in source transactions: halved when a window went
 * over mssql_cdc.batch_max_rows, doubled back when windows are small.  It
 * bounds the window by choosing `to`, never by cutting a transaction.
 */
/*
 * After a failed iteration, in the transaction that records it: a window
 * whose change query timed out halves servers.window_transactions
 * (worker_window.c).
 */
extern void worker_window_after_failure(void);
extern int	worker_window_transactions;

/* What the error context names (cleared by worker_clear_context) */
extern const char *worker_ctx_capture_instance;
extern int32 worker_ctx_table_id;
extern bool worker_ctx_has_range;
extern MssqlLsn worker_ctx_from;
extern MssqlLsn worker_ctx_to;

/* CDC on the source database and its capture instances, read at every poll */
extern SourceCdcState worker_source_cdc;

/* Whether the source database allows SNAPSHOT isolation (per connection) */
extern SnapshotIsolation worker_snapshot_isolation;

/* ---- worker.c ----------------------------------------------------------- */

/*
 * A transaction of the worker with a snapshot; results stay in the
 * iteration's context across the commit.
 */
extern void worker_begin_xact(void);
extern void worker_commit_xact(void);
extern void worker_abort_xact(void);
extern void worker_clear_context(void);

/*
 * In a unit's transaction that succeeded: end the server's failure streak,
 * once per iteration.
 */
extern void worker_end_failure_streak(MssqlCdcServer *server);

/* ---- worker_staging_park.c ---------------------------------------------- */

/* The table whose rows the window is writing, and the checkpoint it saw */
extern bool worker_ctx_window_table;
extern MssqlLsn worker_ctx_window_checkpoint;

/* Raise (42P16 or 42703) when the staging table lost the shape we write */
extern void worker_check_staging_shape(const MssqlCdcTable *table,
									   const MssqlSourceTable *src);

/*
 * In the error transaction: park the table whose staging write failed its
 * window table_failures_before_park times; returns the hint when parked.
 */
extern char *worker_park_failing_table(int32 table_id, bool in_window,
									   const MssqlLsn *checkpoint,
									   const char *condition, const char *hint,
									   const char *message);

/* ---- worker_source.c ---------------------------------------------------- */

/*
 * A separate short transaction that records why a table cannot continue
 * (it needs the user); the rest of the source goes on.  condition is the
 * status condition (include/error_condition.h).
 */
extern void worker_park_table(const MssqlCdcTable *table, const char *condition,
							  const char *message, const char *hint);

/* CDC cleanup removed changes the table still needs (policy per table). */
extern void worker_retention_overrun(const MssqlCdcTable *table, const char *message);

/*
 * The source table read through capture instance ci (connection context);
 * NULL after parking the table when the source is gone or not readable.
 */
extern MssqlSourceTable *worker_describe_ci(const MssqlCdcTable *table, const char *ci);

/* Keep src as the table's description for this connection. */
extern void worker_remember_described(int32 table_id, MssqlSourceTable *src);

/* A new connection describes every table again. */
extern void worker_forget_described(void);

/*
 * The source as seen through the table's capture instance, once per
 * connection; NULL after parking, or while an instance to adopt waits.
 */
extern MssqlSourceTable *worker_describe_source(const MssqlCdcTable *table);

/*
 * Read the source's CDC state for this poll; with CDC disabled on the
 * database park every table and return false.
 */
extern bool worker_check_cdc_enabled(List *tables, CdcPoll *poll);

/* ---- worker_poll_ahead.c ------------------------------------------------ */

/*
 * The next iteration's poll, sent on worker_session before the current
 * iteration's last snapshot chunk; worker_poll_exec runs a poll batch,
 * taking the reply of the one sent ahead when it is this text and nothing
 * cancelled it; forget drops it (before a sleep, or where the poll must be
 * read now).
 */
extern void worker_poll_send_ahead(void);
extern void worker_poll_exec(const char *sql);
extern void worker_poll_forget_ahead(void);

/* ---- worker_window.c ---------------------------------------------------- */

/*
 * The lag of the lead checkpoint (worker.c report_lag), counted by the lead
 * group's window in the request that reads its end: wanted, with base the
 * lead's checkpoint, asks for the count; counted says the window took it,
 * known that count is the lag at base (moved to the window's end when it
 * committed, by the transactions it applied; a window cut by the row
 * budget leaves it unknown).
 */
typedef struct WindowLag
{
	bool		wanted;
	bool		counted;
	bool		known;
	MssqlLsn	base;
	int64		count;
} WindowLag;

extern WindowLag worker_window_lag;

/*
 * Apply one window to a group of tables that share `checkpoint`, ending at
 * `cap` at the latest (NULL: no cap).  Returns true when the window was
 * full (more work is waiting); *reached is the checkpoint the group has
 * afterwards, and the tables that reached it and may read on in this
 * iteration are appended to *advanced.
 */
extern bool worker_apply_window(MssqlCdcServer *server, List *group,
								const MssqlLsn *checkpoint, const MssqlLsn *max_lsn,
								TimestampTz max_time, const MssqlLsn *cap,
								MssqlLsn *reached, List **advanced);

/*
 * A window's read failed: a timeout halves the window from the next one on
 * (worker_window_after_failure).
 */
extern void worker_note_read_failure(int transactions);

/* ---- window_batch.c ----------------------------------------------------- */

/* What the low-watermark recheck at the end of a window's batch found */
typedef struct WindowRecheck
{
	bool	   *overrun;		/* per ready table: its mark moved above from */
	MssqlLsn   *marks;			/* ... to this */
	bool		any_overrun;
	SourceFingerprint fingerprint;	/* at the window's end, when known */
} WindowRecheck;

/*
 * Read the window [from, *to] of every ready table (capture instance
 * description in instances, a switch's StagingDiff or NULL in switches)
 * into its staging table in ONE request, in the window's transaction
 * (begun here, left open), and recheck the low watermarks after the read.
 * The window holds at most mssql_cdc.batch_max_rows rows up to the end of
 * the transaction that reaches them: the table whose read spends the
 * budget ends the window there (*to, *end_time) for the tables after it.
 * results[i].rows is -1 for a table that sits the window out.  A table
 * whose has_rows[i] is false (its change table has no row in the window,
 * cdc_choose_window_end) has no change query in the request and reads 0
 * rows; its state row, checkpoint and low watermark recheck stay.  Returns
 * true (transaction rolled back) when a table read before the cut has rows
 * beyond the new end: read it again with that end.  no_changes: the
 * window holds no source transaction (nothing to read, no request).
 */
extern bool window_read(List *ready, List *instances, List *switches,
						const bool *has_rows, const MssqlLsn *checkpoint,
						const MssqlLsn *from, MssqlLsn *to,
						TimestampTz *end_time, int transactions, bool no_changes,
						ApplyResult *results, int64 *window_rows,
						int64 *window_transactions_seen, WindowRecheck *recheck);

/* ---- window_quiet.c ----------------------------------------------------- */

/*
 * Whether table_id's capture instance ci is known to have no change row in
 * [from, *upto] (set to the known range's end); window_quiet_note records
 * that after a window's probe found none there, window_quiet_forget drops
 * every such fact (a new connection, a source that went back).
 */
extern bool window_quiet_proven(int32 table_id, const char *ci, const MssqlLsn *from,
								MssqlLsn *upto);
extern void window_quiet_note(int32 table_id, const char *ci, const MssqlLsn *from,
							  const MssqlLsn *upto);
extern void window_quiet_forget(void);

/* ---- worker_catch_up.c -------------------------------------------------- */

/*
 * The windows of one iteration for the streaming tables (sorted by
 * checkpoint): groups behind others catch up and join them.  Returns true
 * when more work is waiting; *lead is raised to the most advanced
 * checkpoint reached.
 */
extern bool worker_apply_windows(MssqlCdcServer *server, List *streaming,
								 const MssqlLsn *max_lsn, TimestampTz max_time,
								 MssqlLsn *lead);

/* list_sort comparator: by checkpoint, then table id */
extern int	worker_compare_by_checkpoint(const ListCell *a, const ListCell *b);

/* ---- worker_staging.c --------------------------------------------------- */

/* Partitioned staging tables: rollover and retention, between windows */
extern void worker_maintain_staging(List *tables);

/* ---- worker_timeline.c -------------------------------------------------- */

/*
 * A source that went back in time (restore, failover, repointed server):
 * before the windows of a poll; false after parking the tables that hold a
 * position (the iteration stops there).
 */
extern bool worker_check_timeline(List *tables, const MssqlLsn *max_lsn);

/* A new connection probes the source's identity again. */
extern void worker_timeline_forget(void);

/* A table takes a position at lsn: remember the history up to it (in its transaction) */
extern void worker_timeline_fingerprint_at(const MssqlLsn *lsn);

/* worker_retention_gap.c: a 'never' table after resnapshot() */
extern bool worker_continue_after_gap(MssqlCdcTable *table);

/* ---- worker_snapshot.c -------------------------------------------------- */

/* pending + 'initial': record L0 and start the snapshot; true when started */
extern bool worker_start_snapshot(MssqlCdcTable *table);

/* What worker_copy_snapshot_chunk did */
typedef enum SnapshotChunkResult
{
	SNAPSHOT_CHUNK_MORE,		/* a chunk committed, the copy goes on */
	SNAPSHOT_CHUNK_DONE,		/* done, or stopped (removed, parked, changed) */
	SNAPSHOT_CHUNK_NO_SESSION	/* SQL Server admits no session for it now */
} SnapshotChunkResult;

/* One chunk with its resume key, on the table's own session */
extern SnapshotChunkResult worker_copy_snapshot_chunk(MssqlCdcServer *server, MssqlCdcTable *table);

/* A snapshot read under READ COMMITTED: a status warning, once per snapshot */
extern void worker_note_snapshot_isolation(const MssqlCdcTable *table);

/* ---- snapshot_parallel.c ------------------------------------------------ */

/* Tables copying now (not paused, phase 'snapshotting') */
extern int	worker_count_copies(List *tables);

/*
 * Chunks of the tables in copying (at most snapshot_connections), in
 * rounds, for up to a poll interval; true while a copy has more to do.
 */
extern bool worker_copy_snapshots(MssqlCdcServer *server, List *copying);

/* ---- worker.c: sessions ------------------------------------------------- */

/* The server option snapshot_connections of the current settings */
extern int	worker_snapshot_connections(void);

/* A new session with the worker's connection settings; raises on failure */
extern TdsSession *worker_open_session(void);

/* The same, returning NULL with the login's error in *err */
extern TdsSession *worker_try_open_session(TdsRemoteError *err);

/* The foreign server's name, for the worker's own messages */
extern const char *worker_source_name(void);

/* The session of the work under way when it is not worker_session */
extern TdsSession *worker_ctx_session;

#endif							/* MSSQL_CDC_WORKER_INTERNAL_H */
