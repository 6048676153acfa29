/*-------------------------------------------------------------------------
 *
 * staging_partitions.h
 *		Partitioned staging tables (add_table(partition_interval => ...)):
 *		declarative range partitions on _cdc_lsn that the worker rolls over
 *		every partition_interval, and retention that drops whole old
 *		partitions (never a row-by-row DELETE).
 *
 * Why LSN ranges and not commit time: the staging primary key
 * (_cdc_lsn, ...) must contain the partition key, and it already contains
 * _cdc_lsn; commit time is NULL for snapshot rows and would have to join
 * the key.  Every row of one source transaction has the same _cdc_lsn, so a
 * transaction never spans two partitions.  Time enters through when the
 * worker closes a partition: the open partition is [from, MAXVALUE); once
 * it is partition_interval old, the worker closes it at the next window
 * boundary F = checkpoint + 1 (every row in it is below F) and opens
 * [F, MAXVALUE).  Closing re-attaches the partition with its final bounds
 * in one transaction, after a CHECK constraint proved them (one scan of the
 * closed partition), so PostgreSQL need not scan again.  The worker takes
 * the locks without waiting (ConditionalLockRelationOid): a long reader of
 * the staging table delays a rollover or a drop to a later iteration, it
 * never queues other readers behind the worker.
 *
 * mssql_cdc.staging_partitions records each partition's bounds, when it was
 * opened and closed, and the source commit time of the newest change in it
 * (the table's checkpoint time when it was closed); retention drops closed
 * partitions whose newest change is older than the table's retention.
 * The worker's decisions and records use clock_timestamp(): a background
 * worker's now() is the start of a transaction only when it sets the
 * statement time itself.
 *
 * IDENTIFICATION
 *		include/staging_partitions.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_STAGING_PARTITIONS_H
#define MSSQL_CDC_STAGING_PARTITIONS_H

#include "postgres.h"

#include "catalog.h"
#include "lsn.h"

/* The partition clause of a partitioned staging table */
#define STAGING_PARTITION_BY	"RANGE (_cdc_lsn)"

/* Name of the n-th partition of a staging table (cut to fit NAMEDATALEN) */
extern char *staging_partition_name(const char *staging_table, int n);

/*
 * add_table, as the staging table's owner, right after creating the
 * partitioned table: its first partition, [MINVALUE, MAXVALUE).  Returns
 * its name.
 */
extern char *staging_partitions_create_first(const char *staging_schema,
											 const char *staging_table);

/* add_table, inside its catalog write scope: the first partition's row */
extern void staging_partitions_register_first(int32 table_id, const char *partition_name);

/*
 * The worker, between windows, in a transaction of its own: close the open
 * partition at F = checkpoint + 1 and open [F, MAXVALUE) when it is
 * partition_interval old.  False (nothing done) when it is not due, the
 * table has no checkpoint to close at, or a lock is not free now.  Writes
 * the staging table as run_as.
 */
extern bool staging_partitions_rollover(const MssqlCdcTable *table, Oid run_as);

/*
 * The same for retention (staging_retention.c): drop every closed partition
 * whose newest change is older than the table's retention, oldest first;
 * returns how many were dropped (one that is in use stays for later).
 */
extern int	staging_retention_drop_expired(const MssqlCdcTable *table, Oid run_as);

/*
 * reset_table: the lowest LSN the staging table still has a partition for
 * (false when it has one from MINVALUE on, or is not partitioned).  Inside
 * a catalog write scope.
 */
extern bool staging_partitions_lowest_lsn(int32 table_id, MssqlLsn *lowest);

#endif							/* MSSQL_CDC_STAGING_PARTITIONS_H */
