/*-------------------------------------------------------------------------
 *
 * worker_snapshot.c
 *		The worker's side of an initial snapshot: record L0 and start it,
 *		copy one chunk per transaction with its resume key (snapshot.c reads
 *		the rows), and note a snapshot read without SNAPSHOT isolation.
 *
 * IDENTIFICATION
 *		src/worker_snapshot.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "apply.h"
#include "catalog.h"
#include "error_condition.h"
#include "mirror.h"
#include "shmem.h"
#include "snapshot.h"
#include "snapshot_lanes.h"
#include "table_settings.h"

#include "worker_internal.h"

/*
 * A snapshot read under READ COMMITTED because the source database does
 * not allow SNAPSHOT isolation (Msg 3952 otherwise).  A warning, not an
 * error: correctness comes from L0 and replay (snapshot.c), the isolation
 * level only decides whether chunks block writers.  Noted once per
 * snapshot, not per chunk.
 */
typedef struct NotedSnapshot
{
	int32		table_id;
	MssqlLsn	l0;
} NotedSnapshot;

void
worker_note_snapshot_isolation(const MssqlCdcTable *table)
{
	/* several tables copy at once: one entry per lane is enough */
	static NotedSnapshot noted[MSSQL_CDC_MAX_SNAPSHOT_CONNECTIONS];
	static int	next_slot = 0;
	int			i;

	if (worker_snapshot_isolation != SNAPSHOT_ISOLATION_NOT_ALLOWED || !table->has_snapshot_lsn)
		return;
	for (i = 0; i < MSSQL_CDC_MAX_SNAPSHOT_CONNECTIONS; i++)
		if (noted[i].table_id == table->table_id &&
			mssql_lsn_cmp(&noted[i].l0, &table->snapshot_lsn) == 0)
			return;
	worker_begin_xact();
	catalog_set_table_warning(table->table_id, COND_SNAPSHOT_ISOLATION_OFF,
							  "Snapshot chunks are read under READ COMMITTED (consistent through L0 and replay, "
							  "but they may block writers): run ALTER DATABASE ... SET ALLOW_SNAPSHOT_ISOLATION ON "
							  "on the source database.",
							  true);
	worker_commit_xact();
	noted[next_slot].table_id = table->table_id;
	noted[next_slot].l0 = table->snapshot_lsn;
	next_slot = (next_slot + 1) % MSSQL_CDC_MAX_SNAPSHOT_CONNECTIONS;
}

/* Syscache callback: some server or user mapping changed (maybe ours). */

/*
 * pending + snapshot_mode 'initial': record L0, the estimate and phase
 * 'snapshotting' in one short transaction (invariant 4: L0 is read before
 * any row is).  Returns true when the snapshot started.
 */
bool
worker_start_snapshot(MssqlCdcTable *table)
{
	MssqlSourceTable *src;
	const char *refusal;
	MssqlLsn	l0;
	int64		estimate;
	bool		started;

	worker_ctx_table_id = table->table_id;
	src = worker_describe_source(table);
	if (src == NULL)
		return false;
	refusal = snapshot_refusal(src);
	if (refusal != NULL)
	{
		worker_park_table(table, COND_NO_PRIMARY_KEY, refusal,
								  "Add a primary key to the source table and call mssql_cdc.resnapshot(), or remove the table and add it again with snapshot_mode => 'never'.");
		return false;
	}
	if (!snapshot_read_start(worker_session, src, &l0, &estimate))
	{
		ereport(DEBUG1,
				(errmsg_internal("mssql_cdc source \"%s\": no start LSN for the snapshot of table %d yet",
								 worker_server_name, table->table_id)));
		return false;
	}

	worker_begin_xact();
	/* the history the snapshot starts from, remembered with its L0 */
	worker_timeline_fingerprint_at(&l0);
	started = apply_snapshot_begin(table->table_id, &l0, estimate);
	/* a resnapshot rebuilds the mirror aside (mirror_rebuild.c) */
	if (started)
		mirror_snapshot_begin(table, worker_args.run_as);
	worker_commit_xact();
	if (started)
	{
		char		l0_text[MSSQL_LSN_TEXT_SIZE];

		mssql_lsn_format(&l0, l0_text);
		ereport(LOG,
				(errmsg("mssql_cdc source \"%s\": snapshot of %s.%s starts at LSN %s (about %lld rows)",
						worker_server_name, table->source_schema, table->source_table, l0_text,
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
 */
SnapshotChunkResult
worker_copy_snapshot_chunk(MssqlCdcServer *server, MssqlCdcTable *table)
{
	SnapshotReader *reader;
	MssqlSourceTable *src;
	int64		rows = 0;
	bool		done;

	worker_ctx_table_id = table->table_id;
	src = worker_describe_source(table);
	if (src == NULL)
		return SNAPSHOT_CHUNK_DONE;
	if (snapshot_refusal(src) != NULL)
	{
		/* the key went away or changed type since the snapshot started */
		worker_park_table(table, COND_NO_PRIMARY_KEY, snapshot_refusal(src),
								  "Add a primary key to the source table and call mssql_cdc.resnapshot().");
		return SNAPSHOT_CHUNK_DONE;
	}
	worker_ctx_capture_instance = src->capture_instance->name;
	cdc_slot_report_phase(CDC_PHASE_SNAPSHOTTING);

	/* the table's own session; its faults are this table's, like the main session's */
	reader = snapshot_lane_for(table->table_id);
	if (reader == NULL)
	{
		/* its turn comes again once another copy frees a session */
		worker_clear_context();
		return SNAPSHOT_CHUNK_NO_SESSION;
	}
	worker_ctx_session = reader->session;

	worker_begin_xact();
	/* a concurrent remove_table/resnapshot wins, and a settings change applies */
	if (!apply_lock_snapshot(table->table_id, &table->snapshot_lsn, table->snapshot_last_key) ||
		!table_settings_current(table))
	{
		worker_commit_xact();
		/* what it read ahead is of a copy that does not go on like this */
		snapshot_reader_discard(reader);
		worker_clear_context();
		return SNAPSHOT_CHUNK_DONE;
	}
	done = snapshot_copy_chunk(reader, table, src, worker_args.run_as,
							   &worker_snapshot_isolation, &rows);
	cdc_slot_count_chunk();
	worker_end_failure_streak(server);
	worker_commit_xact();
	cdc_slot_report_success();
	worker_clear_context();

	if (done)
		ereport(LOG,
				(errmsg("mssql_cdc source \"%s\": snapshot of %s.%s done (%lld rows), streaming from its start LSN",
						worker_server_name, table->source_schema, table->source_table,
						(long long) table->snapshot_rows)));
	return done ? SNAPSHOT_CHUNK_DONE : SNAPSHOT_CHUNK_MORE;
}
