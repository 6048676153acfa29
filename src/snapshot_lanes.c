/*-------------------------------------------------------------------------
 *
 * snapshot_lanes.c
 *		The TDS sessions snapshot chunks are read on (see snapshot_lanes.h).
 *
 * Each table copied at once gets a session of its own, so that the
 * chunk batches of several tables (and each table's batch read ahead,
 * snapshot.c) are in flight together while one worker process writes
 * one chunk after the other: N round trips overlap instead of adding up.
 * The worker's own session stays free for polls and windows, so a batch
 * read ahead may stay in flight while the streaming tables get their
 * windows between chunk rounds.  The sessions are opened with the
 * worker's connection settings (the same options and TLS), when a copy
 * first needs them, and closed when no copy runs, on new connection
 * settings and on any error (the worker then exits and its restart
 * copies on from each table's committed resume key).
 *
 * IDENTIFICATION
 *		src/snapshot_lanes.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "snapshot_lanes.h"
#include "worker_internal.h"

static SnapshotReader lanes[MSSQL_CDC_MAX_SNAPSHOT_CONNECTIONS];
static MemoryContext lanes_context = NULL;

static void
lane_close(SnapshotReader *lane)
{
	if (lane->session != NULL)
		tds_session_close(lane->session);
	lane->session = NULL;
	lane->table_id = 0;
	lane->sent_sql = NULL;		/* in lanes_context, reset with it */
}

SnapshotReader *
snapshot_lane_for(int32 table_id)
{
	SnapshotReader *free_lane = NULL;
	SnapshotReader *closed_lane = NULL;
	int			i;

	if (lanes_context == NULL)
		lanes_context = AllocSetContextCreate(TopMemoryContext, "mssql_cdc snapshot lanes",
											  ALLOCSET_SMALL_SIZES);
	for (i = 0; i < MSSQL_CDC_MAX_SNAPSHOT_CONNECTIONS; i++)
	{
		SnapshotReader *lane = &lanes[i];

		if (lane->session != NULL && tds_session_is_dead(lane->session))
			lane_close(lane);
		if (lane->session == NULL)
		{
			if (closed_lane == NULL)
				closed_lane = lane;
			continue;
		}
		if (lane->sent_sql != NULL && lane->table_id == table_id)
			return lane;
		if (lane->sent_sql == NULL && free_lane == NULL)
			free_lane = lane;
	}
	if (free_lane != NULL)
		return free_lane;
	if (closed_lane == NULL)
		elog(ERROR, "more tables copying at once than snapshot lanes");
	closed_lane->cxt = lanes_context;
	closed_lane->session = worker_open_session();
	return closed_lane;
}

void
snapshot_lanes_keep_only(List *copying)
{
	int			i;

	for (i = 0; i < MSSQL_CDC_MAX_SNAPSHOT_CONNECTIONS; i++)
	{
		SnapshotReader *lane = &lanes[i];
		bool		wanted = false;
		ListCell   *lc;

		if (lane->sent_sql == NULL)
			continue;
		foreach(lc, copying)
			if (((MssqlCdcTable *) lfirst(lc))->table_id == lane->table_id)
				wanted = true;
		if (!wanted)
			snapshot_reader_discard(lane);
	}
}

void
snapshot_lanes_close(void)
{
	int			i;

	for (i = 0; i < MSSQL_CDC_MAX_SNAPSHOT_CONNECTIONS; i++)
		lane_close(&lanes[i]);
	if (lanes_context != NULL)
		MemoryContextReset(lanes_context);
}

int
snapshot_lanes_open(void)
{
	int			n = 0;
	int			i;

	for (i = 0; i < MSSQL_CDC_MAX_SNAPSHOT_CONNECTIONS; i++)
		if (lanes[i].session != NULL)
			n++;
	return n;
}
