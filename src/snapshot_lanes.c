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
 * SQL Server may admit fewer sessions than snapshot_connections asks for
 * (sp_configure 'user connections', Azure SQL's session limits, a logon
 * trigger: error 17809 and the like).  A refused extra session is not an
 * error of the source: the copies go on with the lanes that are open, the
 * others wait for one to be free, no table starts a copy it could not get
 * a session for (its L0 would only age), and the worker tries for more
 * sessions again after a minute.  Only when not even one lane opens is
 * the refusal raised, as for the worker's own session.
 *
 * IDENTIFICATION
 *		src/snapshot_lanes.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "snapshot_lanes.h"
#include "worker_internal.h"

static SnapshotReader lanes[MSSQL_CDC_MAX_SNAPSHOT_CONNECTIONS];
static MemoryContext lanes_context = NULL;

/* After a refused login: the lanes SQL Server admitted, until when */
#define LANE_LIMIT_RETRY_MS 60000
static int	lanes_admitted = 0;		/* 0: no refusal in force */
static TimestampTz lanes_admitted_until = 0;
static int	lanes_admitted_warned = 0;	/* the limit last warned about */

static void
lane_close(SnapshotReader *lane)
{
	if (lane->session != NULL)
		tds_session_close(lane->session);
	lane->session = NULL;
	lane->table_id = 0;
	lane->sent_sql = NULL;		/* in lanes_context, reset with it */
}

static bool
lane_limit_in_force(void)
{
	if (lanes_admitted > 0 && GetCurrentTimestamp() >= lanes_admitted_until)
		lanes_admitted = 0;		/* try for more sessions again */
	return lanes_admitted > 0;
}

/*
 * A new lane's session, or NULL when SQL Server refused it while other
 * lanes are open: the copies go on with those (see the file header).
 */
static TdsSession *
lane_open(int open)
{
	TdsRemoteError err;
	TdsSession *session;

	if (lane_limit_in_force() && open >= lanes_admitted)
		return NULL;
	session = worker_try_open_session(&err);
	if (session != NULL)
		return session;
	if (open == 0)
		tds_report_error(worker_source_name(), &err, "opening a session for a snapshot copy");

	lanes_admitted = open;
	lanes_admitted_until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), LANE_LIMIT_RETRY_MS);
	if (lanes_admitted_warned != open)
	{
		ereport(WARNING,
				(errcode(ERRCODE_FDW_UNABLE_TO_ESTABLISH_CONNECTION),
				 errmsg("mssql_cdc source \"%s\": could not open another snapshot session (%d open, "
						"snapshot_connections is %d); copying %d table%s at once, the others wait",
						worker_source_name(), open, worker_snapshot_connections(), open,
						open == 1 ? "" : "s"),
				 errdetail_internal("%s", tds_error_detail_text(&err)),
				 errhint("SQL Server admits no more sessions for this login (its 'user connections' "
						 "option, a session limit of the service tier, or a logon trigger).  Lower the "
						 "server option snapshot_connections (ALTER SERVER %s OPTIONS (SET "
						 "snapshot_connections '%d')) or let the login open more sessions; the worker "
						 "tries again in a minute.",
						 quote_identifier(worker_source_name()), open)));
		lanes_admitted_warned = open;
	}
	return NULL;
}

int
snapshot_lanes_admitted(void)
{
	return lane_limit_in_force() ? lanes_admitted : MSSQL_CDC_MAX_SNAPSHOT_CONNECTIONS;
}

SnapshotReader *
snapshot_lane_for(int32 table_id)
{
	int			open = 0;
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
		open++;
		if (lane->sent_sql != NULL && lane->table_id == table_id)
			return lane;
		if (lane->sent_sql == NULL && free_lane == NULL)
			free_lane = lane;
	}
	if (free_lane != NULL)
		return free_lane;
	if (closed_lane == NULL)
		elog(ERROR, "more tables copying at once than snapshot lanes");
	closed_lane->session = lane_open(open);
	if (closed_lane->session == NULL)
		return NULL;
	closed_lane->cxt = lanes_context;
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
