/*-------------------------------------------------------------------------
 *
 * staging_writer.h
 *		Write rows into one staging table for one unit of work (a streaming
 *		window or a snapshot chunk), fast, with the privileges of run_as.
 *
 * Two ways to write, chosen per table when the writer is opened:
 *
 * - bulk (the usual case): rows are buffered in TupleTableSlots and flushed
 *   with table_multi_insert, index entries with ExecInsertIndexTuples (the
 *   primary key's unique check included), NOT NULL and CHECK constraints
 *   with ExecConstraints, stored generated columns and the defaults of
 *   columns the caller does not supply computed as INSERT would.  The
 *   INSERT privilege of run_as on the supplied columns is checked with the
 *   executor's own check (ExecCheckRTPerms), so a missing grant gives the
 *   standard "permission denied for table ..." error.
 *
 * - SPI (staging_spi_writer.c): one prepared INSERT per row, exactly as a
 *   user's INSERT.  Used where a bulk insert would not behave like INSERT:
 *   triggers (user, foreign key or constraint triggers), rules, row-level
 *   security, a partitioned or partition table, a foreign or non-heap
 *   table.  The choice is logged once per table and process.
 *
 * Either way, nothing is visible before the caller's transaction commits,
 * and an error anywhere rolls the whole unit back (the caller's
 * transaction aborts): a batch boundary is never a commit boundary.
 *
 * Memory: the values of a row are built in staging_writer_row_context(),
 * which lives until the row has been written (bulk: until the batch is
 * flushed; SPI: until the next row).  A batch is flushed after
 * mssql_cdc.insert_batch_rows rows or once its memory passes
 * STAGING_BATCH_MAX_BYTES, so a batch of wide LOB rows stays small.
 *
 * IDENTIFICATION
 *		include/staging_writer.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_STAGING_WRITER_H
#define MSSQL_CDC_STAGING_WRITER_H

#include "postgres.h"

#include "access/attnum.h"

/* Memory of one batch of buffered rows above which it is flushed */
#define STAGING_BATCH_MAX_BYTES		(1024 * 1024)

/* mssql_cdc.insert_batch_rows: rows per bulk flush */
extern int	mssql_cdc_insert_batch_rows;

typedef struct StagingWriter StagingWriter;

/* Define mssql_cdc.insert_batch_rows (called from _PG_init). */
extern void staging_writer_define_gucs(void);

/*
 * Open the staging relation relid for inserts by run_as.  The caller
 * supplies the columns attnums[0 .. ncols-1] (no dropped or generated
 * ones); every other column gets its default (or NULL), generated columns
 * are computed.  Until staging_writer_close the current user is run_as
 * under SECURITY_RESTRICTED_OPERATION; the caller may use the TDS session
 * but must not run other SPI or catalog writes in between.
 */
extern StagingWriter *staging_writer_open(Oid relid, Oid run_as,
										  const AttrNumber *attnums, int ncols);

/* Where to allocate the next row's values (see the header comment). */
extern MemoryContext staging_writer_row_context(StagingWriter *writer);

/*
 * Write one row: values[i] / nulls[i] for attnums[i].  The arrays are
 * copied; what they point to must be in staging_writer_row_context().
 */
extern void staging_writer_add(StagingWriter *writer, const Datum *values,
							   const bool *nulls);

/*
 * The same, for values that may be freed right after the call (another
 * writer's row context): the row is copied into the writer's own memory.
 * Heap inserts form that copy anyway, so it costs nothing extra.
 */
extern void staging_writer_add_copy(StagingWriter *writer, const Datum *values,
									const bool *nulls);

/*
 * Whether relid is written in bulk (no trigger, rule, row-level security,
 * partitioning; a heap table): a writer on the SPI path keeps an SPI
 * connection open, so two such writers cannot be interleaved.
 */
extern bool staging_writer_is_bulk(Oid relid);

/* Flush what is buffered, restore the user, release everything. */
extern void staging_writer_close(StagingWriter *writer);

#endif							/* MSSQL_CDC_STAGING_WRITER_H */
