/*-------------------------------------------------------------------------
 *
 * worker_staging.c
 *		The worker's upkeep of partitioned staging tables between windows:
 *		close the open partition when it is due, drop partitions past the
 *		table's retention (staging_partitions.h).
 *
 * It runs after an iteration's windows, at a window boundary, so that
 * every staged change lies below the checkpoint a partition is closed at;
 * at most once a second, since partitions live for minutes at least.
 *
 * IDENTIFICATION
 *		src/worker_staging.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/timestamp.h"

#include "staging_partitions.h"

#include "worker_internal.h"

#define STAGING_UPKEEP_INTERVAL_MS	1000

void
worker_maintain_staging(List *tables)
{
	static TimestampTz last_run = 0;
	TimestampTz now = GetCurrentTimestamp();
	ListCell   *lc;

	if (!TimestampDifferenceExceeds(last_run, now, STAGING_UPKEEP_INTERVAL_MS))
		return;
	last_run = now;
	foreach(lc, tables)
	{
		MssqlCdcTable *table = lfirst(lc);

		if (!table->partitioned || table->paused)
			continue;
		worker_ctx_table_id = table->table_id;
		worker_begin_xact();
		(void) staging_partitions_rollover(table, worker_args.run_as);
		worker_commit_xact();
		worker_begin_xact();
		(void) staging_retention_drop_expired(table, worker_args.run_as);
		worker_commit_xact();
		worker_ctx_table_id = 0;
	}
}
