/*-------------------------------------------------------------------------
 *
 * snapshot_parallel.c
 *		The worker's snapshot chunks of one iteration: up to
 *		snapshot_connections tables copied at once, one chunk of each in
 *		turn, for up to a poll interval (doc/snapshot.md "Parallel copy").
 *
 * One worker process writes every chunk, each in its own transaction with
 * its table's resume key, as before; what runs in parallel is SQL Server's
 * side: each table reads on its own session (snapshot_lanes.c) and sends
 * its next chunk's batch before its current chunk commits (snapshot.c), so
 * while one table's chunk is inserted the other tables' batches are in
 * flight.  At a round trip of R and N tables, a round of N chunks waits
 * about R once instead of N times.
 *
 * IDENTIFICATION
 *		src/snapshot_parallel.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "postmaster/interrupt.h"
#include "utils/timestamp.h"

#include "mssql_cdc.h"
#include "shmem.h"
#include "snapshot_lanes.h"
#include "worker_internal.h"

int
worker_count_copies(List *tables)
{
	ListCell   *lc;
	int			n = 0;

	foreach(lc, tables)
	{
		MssqlCdcTable *table = lfirst(lc);

		if (!table->paused && table->phase == MSSQL_PHASE_SNAPSHOTTING)
			n++;
	}
	return n;
}

bool
worker_copy_snapshots(MssqlCdcServer *server, List *copying)
{
	TimestampTz started = GetCurrentTimestamp();

	/* a batch read ahead for a table that stopped copying goes */
	snapshot_lanes_keep_only(copying);
	if (copying == NIL)
	{
		/* no copy runs: the extra sessions go until the next one */
		snapshot_lanes_close();
		return false;
	}

	/*
	 * Rounds of one chunk per table for up to one poll interval: the
	 * catalog reads and the max-LSN poll of an iteration would otherwise
	 * sit between every two rounds, while the streaming tables need their
	 * windows only about once a poll interval.  A copy that ends leaves the
	 * round; a table waiting for a connection starts at the next poll.
	 */
	do
	{
		ListCell   *lc;

		foreach(lc, copying)
		{
			MssqlCdcTable *table = lfirst(lc);

			CHECK_FOR_INTERRUPTS();
			if (!worker_copy_snapshot_chunk(server, table))
				copying = foreach_delete_current(copying, lc);
			worker_note_snapshot_isolation(table);
		}
	} while (copying != NIL && !ConfigReloadPending && !cdc_slot_stop_requested() &&
			 !TimestampDifferenceExceeds(started, GetCurrentTimestamp(),
										 mssql_cdc_poll_interval));
	return copying != NIL;
}
