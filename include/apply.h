/*-------------------------------------------------------------------------
 *
 * apply.h
 *		The Postgres side of a CDC window: stream one capture instance's
 *		changes into its staging table, and write the checkpoint in the same
 *		transaction.
 *
 * Invariant 1: the only writers of table_state.checkpoint_lsn in streaming
 * are apply_commit_checkpoint() and, for the tables of a window that had no
 * rows in it, apply_commit_checkpoints_without_rows(), called in the
 * transaction that inserted the rows they cover.
 *
 * IDENTIFICATION
 *		include/apply.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_APPLY_H
#define MSSQL_CDC_APPLY_H

#include "postgres.h"

#include "datatype/timestamp.h"

#include "catalog.h"
#include "lsn.h"
#include "options.h"
#include "source_schema.h"
#include "tds_row_buffer.h"
#include "tds_session.h"

/* What one table got from one window */
typedef struct ApplyResult
{
	int64		rows;
	/* of those, before-images read only for the mirror (not in rows_applied) */
	int64		mirror_only_rows;
	int64		transactions;	/* distinct commit LSNs */
	/* rows > 0: the commit LSN and time of the last transaction read */
	MssqlLsn	last_lsn;
	TimestampTz last_commit_time;	/* 0 when unknown */
	/* the row budget was spent: only [from, last_lsn] was read */
	bool		cut;
	/* mirrored: an update pair 3/4 may have moved a row to another key */
	bool		key_moves;
} ApplyResult;

/* How a window's change query is read */
typedef struct ApplyLimits
{
	/*
	 * The window holds one source transaction: read it without ORDER BY
	 * (change_query.h), so that no server sorts it before the first row.
	 */
	bool		one_transaction;

	/*
	 * > 0: stop at the first transaction boundary at or after this many
	 * rows (ApplyResult.cut); a transaction is never split.
	 */
	int64		row_budget;
} ApplyLimits;

/*
 * A window reads its tables' changes in one batch (window_batch.c):
 * apply_change_query() is the change query (change_query.h) of [from, to]
 * of the source's capture instance (src, as source_schema_describe found
 * it) for the columns the table's staging table has; the caller has checked
 * the retention bounds.  apply_read_changes() reads the next result set of
 * the batch, that query's, and inserts its changes into the staging table
 * with the privileges of run_as, except those after keep_to (<= to: the end
 * of a window cut by an earlier table's row budget), which it reads and
 * drops.  Both run inside the window's transaction.
 */
extern char *apply_change_query(const MssqlCdcTable *table, const MssqlSourceTable *src,
								const char *server_zone, MssqlDataQueryMode mode,
								const MssqlLsn *from, const MssqlLsn *to,
								const ApplyLimits *limits);
extern ApplyResult apply_read_changes(TdsSession *session, const MssqlCdcTable *table,
									  const MssqlSourceTable *src, Oid run_as,
									  const MssqlLsn *from, const MssqlLsn *to,
									  const MssqlLsn *keep_to, const ApplyLimits *limits);

/*
 * Lock the table's state row for the window and make sure it still is
 * streaming from `checkpoint` (a concurrent remove_table or resnapshot wins:
 * false means "skip this table in this window").
 */
extern bool apply_lock_table_state(int32 table_id, const MssqlLsn *checkpoint);

/*
 * apply_lock_table_state() for n tables in one statement (the tables of a
 * window without rows of theirs, issue 16 point 5): locked[i] false means
 * "skip table_ids[i] in this window".
 */
extern void apply_lock_table_states(const int32 *table_ids, int n, const MssqlLsn *checkpoint,
									bool *locked);

/*
 * Run a catalog SELECT (as the extension owner) whose first column is a
 * table id: found[i] says whether table_ids[i] is among its rows.
 */
extern void apply_mark_table_ids(const char *sql, int nargs, Oid *types, Datum *values,
								 const int32 *table_ids, int n, bool *found);

/* The window's checkpoint and counters of one table (same transaction). */
extern void apply_commit_checkpoint(int32 table_id, const MssqlLsn *to,
									const ApplyResult *result, TimestampTz commit_time);

/*
 * The window's checkpoint of n tables that read no row in it, in one
 * statement (same transaction; their counters stay).
 */
extern void apply_commit_checkpoints_without_rows(const int32 *table_ids, int n,
												  const MssqlLsn *to, TimestampTz commit_time);

/* pending + snapshot_mode never: start streaming at the source's max LSN. */
extern void apply_start_streaming(int32 table_id, const MssqlLsn *start);

/* ---- snapshot chunks (snapshot.c drives them) ---------------------------- */

/* The staging side of one snapshot chunk (opaque) */
typedef struct SnapshotInsert SnapshotInsert;

/*
 * Prepare the inserts of one chunk into the table's staging table, as
 * run_as.  *select_exprs gets the T-SQL expressions the chunk's SELECT must
 * return as its first columns, in order.  Rows get _cdc_lsn = l0,
 * _cdc_op = 'snapshot', _cdc_command_id = 0, _cdc_seqval = a big-endian
 * counter that continues after the highest one already stored for l0, and
 * NULL commit time and update mask.  Between prepare and finish the caller may use the TDS
 * session but no other SPI.
 */
extern SnapshotInsert *apply_snapshot_prepare(const MssqlCdcTable *table,
											  const MssqlSourceTable *src, Oid run_as,
											  const MssqlLsn *l0, List **select_exprs);

/*
 * Check the column types of session's current result against the staging
 * columns (once per chunk); apply_snapshot_row does it for a live row, a
 * caller that keeps rows (tds_row_buffer.h) does it while the result is
 * current.
 */
extern void apply_snapshot_check_types(SnapshotInsert *ins, TdsSession *session);

/*
 * Insert one row (buffered: written in batches, see staging_writer.h; its
 * memory is freed when its batch is written): with kept NULL the current
 * TDS row, else kept row `row`, read on session.  Rows get their
 * _cdc_seqval in the order they are inserted.
 */
extern void apply_snapshot_row(SnapshotInsert *ins, TdsSession *session,
							   const TdsRowBuffer *kept, int row);

extern void apply_snapshot_finish(SnapshotInsert *ins);

/*
 * Whether the chunk's rows went straight into the mirror (mirror.h
 * mirror_sink_open); else mirror_apply_snapshot copies them from the
 * staging table.
 */
extern bool apply_snapshot_wrote_mirror(const SnapshotInsert *ins);

/* The _cdc_seqval of the chunk's first row (mirror_apply_snapshot) */
extern const MssqlLsn *apply_snapshot_first_seqval(const SnapshotInsert *ins);

/*
 * pending -> snapshotting with L0, the row estimate (< 0: unknown) and the
 * start time, counters cleared.  False when the table is no longer pending
 * (a concurrent remove_table won).
 */
extern bool apply_snapshot_begin(int32 table_id, const MssqlLsn *l0, int64 total_estimate);

/* Lock the state row for a chunk; false unless still snapshotting from l0. */
extern bool apply_lock_snapshot(int32 table_id, const MssqlLsn *l0, List *last_key);

/*
 * In the chunk's transaction: the last key copied (T-SQL literals), the
 * rows added, and when done the hand-over to streaming at checkpoint l0.
 */
extern void apply_snapshot_progress(int32 table_id, List *last_key, int64 rows,
									bool done, const MssqlLsn *l0);

/*
 * Put a table into phase 'error' with a message for the user (retention
 * overrun, capture instance gone).  Its own statement; no position changes.
 * Only while its phase and checkpoint are still those in *table (what the
 * worker saw); returns false when a user's request changed them meanwhile.
 */
extern bool apply_set_table_error(const MssqlCdcTable *table, const char *message);

/* After a good window: end the server's failure streak, if there is one. */
extern void apply_reset_server_failures(const char *server_name);

/*
 * In the separate error transaction: the failure on the server row (and the
 * table's row when table_id > 0), counting the streak.  No position.
 */
extern void apply_record_failure(const char *server_name, int32 table_id,
								 const char *message);

/*
 * In the error transaction, after apply_record_failure: park a streaming
 * table whose staging table refused its window min_failures times in a row
 * (phase 'error' with condition and hint), only while it is still
 * streaming at the checkpoint the failed window started from: a
 * resnapshot(), reset_table() or resume committed meanwhile wins.  The
 * checkpoint is not touched.  Returns true when it parked the table.
 */
extern bool apply_park_failing_table(int32 table_id, const MssqlLsn *checkpoint,
									 int min_failures, const char *condition,
									 const char *hint);

#endif							/* MSSQL_CDC_APPLY_H */
