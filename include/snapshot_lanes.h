/*-------------------------------------------------------------------------
 *
 * snapshot_lanes.h
 *		The TDS sessions a worker copies snapshot chunks on: one per table
 *		copied at once (server option snapshot_connections), opened when a
 *		copy needs one, closed when no copy runs (doc/snapshot.md
 *		"Parallel copy").
 *
 * IDENTIFICATION
 *		include/snapshot_lanes.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_SNAPSHOT_LANES_H
#define MSSQL_CDC_SNAPSHOT_LANES_H

#include "postgres.h"

#include "nodes/pg_list.h"

#include "snapshot.h"

/*
 * The reader of the table's chunks: the one that has its batch in flight,
 * else a free one, opened (or reopened) if needed.  NULL when SQL Server
 * refused another session while others are open (the table waits for a
 * free one); a refusal of the first lane raises like the worker's own
 * session's.
 */
extern SnapshotReader *snapshot_lane_for(int32 table_id);

/*
 * How many tables may copy at once as far as SQL Server is concerned: the
 * lanes it admitted after a refusal (for a minute), else the most there are
 */
extern int	snapshot_lanes_admitted(void);

/* Cancel what is in flight for tables not in copying (MssqlCdcTable *) */
extern void snapshot_lanes_keep_only(List *copying);

/* Close every lane (no copy runs, an error, new connection settings) */
extern void snapshot_lanes_close(void);

/* Lanes open now, for the worker's status */
extern int	snapshot_lanes_open(void);

#endif							/* MSSQL_CDC_SNAPSHOT_LANES_H */
