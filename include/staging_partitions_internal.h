/*-------------------------------------------------------------------------
 *
 * staging_partitions_internal.h
 *		What staging_partitions.c and staging_retention.c share.
 *
 * IDENTIFICATION
 *		include/staging_partitions_internal.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_STAGING_PARTITIONS_INTERNAL_H
#define MSSQL_CDC_STAGING_PARTITIONS_INTERNAL_H

#include "postgres.h"

#include "nodes/pg_list.h"

/* DDL on a staging table as run_as, its owner */
extern void staging_partitions_run_as(const char *sql, Oid run_as);

/*
 * One catalog statement as the extension owner; *rows (if not NULL) gets
 * the result as char *[ncols] text values.  Returns SPI_processed.
 */
extern uint64 staging_partitions_catalog(const char *sql, int nargs, Oid *types, Datum *args,
										 int expected, List **rows, int ncols);

/* Whether the partition has a row (read as run_as) */
extern bool staging_partitions_has_rows(const char *schema, const char *relname, Oid run_as);

/* AccessExclusiveLock on schema.relname if it is free now, without waiting */
extern bool staging_partitions_lock(const char *schema, const char *relname);

#endif							/* MSSQL_CDC_STAGING_PARTITIONS_INTERNAL_H */
