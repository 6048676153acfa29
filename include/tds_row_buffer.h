/*-------------------------------------------------------------------------
 *
 * tds_row_buffer.h
 *		The raw column bytes of a result's rows, kept after the result is
 *		read so that the session is free for the next request while they
 *		are converted.
 *
 * A snapshot chunk reads its rows into a buffer first, sends the next
 * chunk's batch, and only then converts and inserts them (snapshot.c): the
 * server reads the next chunk while the worker writes this one.  A buffer
 * holds the rows of one result (one shape) and at most about its byte
 * budget; what does not fit is read from the session as before.
 *
 * IDENTIFICATION
 *		include/tds_row_buffer.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_TDS_ROW_BUFFER_H
#define MSSQL_CDC_TDS_ROW_BUFFER_H

#include "tds_session.h"

typedef struct TdsRowBuffer TdsRowBuffer;

/* An empty buffer in cxt that holds about budget bytes of rows */
extern TdsRowBuffer *tds_row_buffer_create(MemoryContext cxt, Size budget);

/*
 * Keep the current row of session's current result (every column, NULLs
 * as NULLs); false once the buffer holds its budget (the row is kept).
 */
extern bool tds_row_buffer_add(TdsRowBuffer *buf, TdsSession *session);

extern int	tds_row_buffer_rows(const TdsRowBuffer *buf);

/*
 * Column col (1-based) of kept row `row` (0-based) as tds_col_datum gives
 * it for the row when it was current; session is the one it was read on.
 */
extern Datum tds_row_buffer_datum(const TdsRowBuffer *buf, TdsSession *session, int row,
								  int col, const struct TdsDatumTarget *target, bool *isnull);

#endif							/* MSSQL_CDC_TDS_ROW_BUFFER_H */
