/*-------------------------------------------------------------------------
 *
 * staging_spi_writer.h
 *		The row-by-row way of writing a staging table: one prepared SPI
 *		INSERT per row.  staging_writer.c uses it for tables where a bulk
 *		insert would not behave like INSERT (triggers, rules, row-level
 *		security, partitioned, foreign or non-heap tables); nothing else
 *		calls it directly.
 *
 * IDENTIFICATION
 *		include/staging_spi_writer.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_STAGING_SPI_WRITER_H
#define MSSQL_CDC_STAGING_SPI_WRITER_H

#include "postgres.h"

#include "access/attnum.h"
#include "utils/relcache.h"

typedef struct StagingSpiWriter StagingSpiWriter;

/*
 * Connect to SPI and prepare "INSERT INTO rel (the attnums' columns)
 * VALUES ($1, ...)" as the current user (the caller has switched to
 * run_as).  Columns left out get their defaults from INSERT itself.
 */
extern StagingSpiWriter *staging_spi_writer_open(Relation rel, const AttrNumber *attnums,
												 int ncols);

/* Memory for the next row's values; reset after each row */
extern MemoryContext staging_spi_writer_row_context(StagingSpiWriter *writer);

extern void staging_spi_writer_add(StagingSpiWriter *writer, const Datum *values,
								   const bool *nulls);

/* SPI_finish and free */
extern void staging_spi_writer_close(StagingSpiWriter *writer);

#endif							/* MSSQL_CDC_STAGING_SPI_WRITER_H */
