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

/*
 * The copying tables starting at the one whose turn it is: an iteration
 * may end after any chunk, and the next one goes on with the next table,
 * so that a table whose chunks take longer than a poll interval does not
 * keep the others waiting.
 */
static List *
in_turn(List *copying, int32 next_table_id)
{
	List	   *ordered = NIL;
	int			start = 0;
	int			n = list_length(copying);
	int			i;

	for (i = 0; i < n; i++)
		if (((MssqlCdcTable *) list_nth(copying, i))->table_id == next_table_id)
			start = i;
	for (i = 0; i < n; i++)
		ordered = lappend(ordered, list_nth(copying, (start + i) % n));
	return ordered;
}

bool
worker_copy_snapshots(MssqlCdcServer *server, List *copying)
{
	static int32 next_table_id = 0;
	static long last_chunk_ms = 0;	/* how long the last chunk took */
	TimestampTz started = GetCurrentTimestamp();
	List	   *waiting = NIL;	/* copies without a session this time */
	bool		progressed = false;
	int			i = 0;

	/* a batch read ahead for a table that stopped copying goes */
	snapshot_lanes_keep_only(copying);
	if (copying == NIL)
	{
		/* no copy runs: the extra sessions go until the next one */
		snapshot_lanes_close();
		return false;
	}

	/*
	 * One chunk per table in turn, for up to one poll interval: the catalog
	 * reads and the max-LSN poll of an iteration would otherwise sit
	 * between every two chunks, while the streaming tables need their
	 * windows only about once a poll interval (so they wait at most a poll
	 * interval plus two chunks, however many tables copy: the iteration
	 * ends after the chunk that has the next poll in flight, foreseen from
	 * the last chunk's time, or else after the one following it).  A copy
	 * that ends leaves the turn; a table waiting for a connection starts at
	 * the next poll.
	 */
	copying = in_turn(copying, next_table_id);
	while (copying != NIL)
	{
		MssqlCdcTable *table;
		TimestampTz chunk_started = GetCurrentTimestamp();
		bool		last = false;

		CHECK_FOR_INTERRUPTS();
		i = i % list_length(copying);
		table = list_nth(copying, i);

		/*
		 * The chunk that will likely end the iteration has the next
		 * iteration's poll in flight while it is read and written
		 * (worker_poll_ahead.c), and it does end the iteration.
		 */
		if (TimestampDifferenceMilliseconds(started, chunk_started) + last_chunk_ms >= mssql_cdc_poll_interval)
		{
			worker_poll_send_ahead();
			last = true;
		}
		switch (worker_copy_snapshot_chunk(server, table))
		{
			case SNAPSHOT_CHUNK_MORE:
				progressed = true;
				i++;
				worker_note_snapshot_isolation(table);
				last_chunk_ms = TimestampDifferenceMilliseconds(chunk_started, GetCurrentTimestamp());
				break;
			case SNAPSHOT_CHUNK_DONE:
				progressed = true;
				copying = list_delete_nth_cell(copying, i);
				worker_note_snapshot_isolation(table);
				last_chunk_ms = TimestampDifferenceMilliseconds(chunk_started, GetCurrentTimestamp());
				break;
			case SNAPSHOT_CHUNK_NO_SESSION:
				/* out of this iteration's rounds; it keeps its copy */
				copying = list_delete_nth_cell(copying, i);
				waiting = lappend(waiting, table);
				break;
		}
		/*
		 * A chunk that took longer than foreseen does not end the iteration
		 * itself: the next one, which sends the poll ahead, does.
		 */
		if (last || ConfigReloadPending || cdc_slot_stop_requested())
			break;
	}
	if (copying == NIL)
	{
		/*
		 * A copy waiting for a session starts the next iteration's turn,
		 * at once if a copy ended and freed one
		 */
		if (waiting != NIL)
			next_table_id = ((MssqlCdcTable *) linitial(waiting))->table_id;
		return waiting != NIL && progressed;
	}
	next_table_id = ((MssqlCdcTable *) list_nth(copying, i % list_length(copying)))->table_id;
	return true;
}
