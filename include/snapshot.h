/*-------------------------------------------------------------------------
 *
 * snapshot.h
 *		The initial snapshot of one table: a keyset-paged copy that hands
 *		over to streaming through the catalog (DESIGN.md invariant 4,
 *		doc/snapshot.md).
 *
 * Protocol, driven by the worker:
 *	1. snapshot_read_start(): outside any Postgres transaction, read L0 =
 *	   sys.fn_cdc_get_max_lsn() and a cheap row estimate; the worker then
 *	   records phase 'snapshotting' with them (apply_snapshot_begin) in one
 *	   short transaction.
 *	2. snapshot_copy_chunk(): inside the chunk's transaction, read the next
 *	   mssql_cdc.snapshot_chunk_rows rows after the recorded last key (one
 *	   SELECT TOP (n) ... ORDER BY key under SNAPSHOT isolation), insert
 *	   them as 'snapshot' rows and record the new last key; the chunk that
 *	   returns fewer rows also sets phase 'streaming' and checkpoint = L0.
 *	   A crash loses at most the uncommitted chunk, and resumes after the
 *	   last committed one.
 *
 * IDENTIFICATION
 *		include/snapshot.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_SNAPSHOT_H
#define MSSQL_CDC_SNAPSHOT_H

#include "postgres.h"

#include "catalog.h"
#include "lsn.h"
#include "source_schema.h"
#include "tds_session.h"

/* Whether the source database allows SNAPSHOT isolation (per connection) */
typedef enum SnapshotIsolation
{
	SNAPSHOT_ISOLATION_UNKNOWN = 0,
	SNAPSHOT_ISOLATION_ALLOWED,
	SNAPSHOT_ISOLATION_NOT_ALLOWED	/* chunks fall back to READ COMMITTED */
} SnapshotIsolation;

/*
 * Whether the source database allows SNAPSHOT isolation (logged once when
 * it does not: reads then run under READ COMMITTED).  Also used by
 * verify().
 */
extern SnapshotIsolation snapshot_isolation_check(TdsSession *session);

/*
 * Why the table cannot be snapshotted (no primary key, a key column type
 * that cannot be paged), as a message for phase 'error'; NULL if it can.
 */
extern const char *snapshot_refusal(const MssqlSourceTable *src);

/*
 * L0 and the row estimate (-1 when unknown).  False when L0 is not known
 * yet (the capture job has not run, or has not started the capture
 * instance): try again at the next poll.
 */
extern bool snapshot_read_start(TdsSession *session, const MssqlSourceTable *src,
								MssqlLsn *l0, int64 *total_estimate);

/*
 * A TDS session that reads snapshot chunks, and the chunk batch it sent
 * ahead, if any (snapshot_lanes.c keeps one per table copying at once).
 * The batch read ahead is used only by a chunk of the same table and L0
 * that would send exactly the same text; anything else cancels it.
 */
typedef struct SnapshotReader
{
	TdsSession *session;
	int32		table_id;		/* whose batch is in flight (0: none) */
	MssqlLsn	l0;				/* that table's L0 when it was sent */
	char	   *sent_sql;		/* the batch in flight, in cxt; NULL: none */
	MemoryContext cxt;
} SnapshotReader;

/* Forget (cancel) the batch a reader sent ahead */
extern void snapshot_reader_discard(SnapshotReader *reader);

/*
 * Copy one chunk of a table in phase 'snapshotting' (table as read from
 * the catalog: snapshot_lsn, snapshot_last_key), inside the caller's
 * transaction, after it locked the state row (apply_lock_snapshot), on
 * the reader's session.  The chunk's rows are read into memory (up to a
 * bound) before they are inserted; before the inserts and the commit,
 * the next chunk's batch is sent on that session (read ahead: nothing is
 * committed early, and the next chunk uses it only if it still starts
 * from this chunk's last key).  *isolation caches the database's snapshot
 * isolation setting for the connection.  Returns true when this chunk
 * finished the snapshot; *rows gets the rows copied.  Advances
 * table->snapshot_last_key and snapshot_rows the way the chunk's commit
 * advances the state row.
 */
extern bool snapshot_copy_chunk(SnapshotReader *reader, MssqlCdcTable *table,
								const MssqlSourceTable *src, Oid run_as,
								SnapshotIsolation *isolation, int64 *rows);

#endif							/* MSSQL_CDC_SNAPSHOT_H */
