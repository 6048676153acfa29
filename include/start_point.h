/*-------------------------------------------------------------------------
 *
 * start_point.h
 *		A point to stream a table from: add_table(start_at => ...) and
 *		reset_table(); an LSN or a source commit time that CDC still keeps.
 *
 * The point is where the first change read lies: the transaction committed
 * at that LSN (or the first one after it), or the first transaction whose
 * commit time is at or after the time.  The table's checkpoint becomes the
 * LSN just before it, so the worker's first window starts there.  A point
 * older than the oldest change CDC keeps for the capture instance, or one
 * beyond the source's max LSN or in the future, is refused: the table would
 * silently miss changes, or wait for ones that may never come.
 *
 * IDENTIFICATION
 *		include/start_point.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_START_POINT_H
#define MSSQL_CDC_START_POINT_H

#include "postgres.h"

#include "datatype/timestamp.h"

#include "lsn.h"
#include "tds_session.h"

typedef struct StartPoint
{
	const char *input;			/* as the user wrote it, for messages */
	bool		is_time;
	MssqlLsn	lsn;			/* when !is_time */
	TimestampTz time;			/* when is_time */
} StartPoint;

/*
 * Parse start_at: an LSN (0x + 20 hex digits, or the colon form) or a
 * timestamp with time zone.  Raises 22007 (with what start_at may be) for
 * anything else, and 22023 for a time in the future.
 */
extern void start_point_parse(const char *input, StartPoint *point);

/*
 * Ask SQL Server where `point` lies for capture instance ci and return the
 * checkpoint that makes a table stream from it.  Raises 22023 with the
 * oldest point CDC keeps when the point is outside retention, or beyond
 * the source's max LSN; 55000 when the capture instance has no changes
 * yet or is not visible to the login.
 */
extern void start_point_resolve(TdsSession *session, const char *ci, const StartPoint *point,
								MssqlLsn *checkpoint);

#endif							/* MSSQL_CDC_START_POINT_H */
