/*-------------------------------------------------------------------------
 *
 * cdc_window.h
 *		The SQL Server side of a CDC window: the source's max LSN, choosing
 *		the window's end on a transaction boundary and the retention
 *		check's min LSN.  The change query itself is change_query.h.
 *
 * Everything here only reads SQL Server; nothing writes Postgres.
 *
 * IDENTIFICATION
 *		include/cdc_window.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_CDC_WINDOW_H
#define MSSQL_CDC_CDC_WINDOW_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"

#include "lsn.h"
#include "tds_session.h"

/*
 * The server's offset from UTC in minutes now, and a naive SQL Server
 * datetime column of the current row shifted by such an offset (false for
 * NULL).  For a single point in time (start_point.c); commit times of
 * changes go through cdc_clock.h, which stays right across DST changes.
 */
extern int	cdc_query_utc_offset(TdsSession *session);
extern bool cdc_col_local_time(TdsSession *session, int col, int utc_offset_minutes,
							   TimestampTz *result);

/*
 * The poll: sys.fn_cdc_get_max_lsn() and the commit time of that LSN
 * (converted as cdc_clock.h says, server_zone NULL: by the offset).  False
 * when it is NULL (the capture job has not run yet).
 */
extern char *cdc_poll_max_lsn_sql(const char *server_zone);

/*
 * Read the current result set, that of cdc_poll_max_lsn_sql() (sent in
 * the poll's batch, capture_instance_switch.c ci_read_source_state).
 */
extern bool cdc_read_max_lsn(TdsSession *session, MssqlLsn *max_lsn, TimestampTz *max_time);

/* What a poll read: the max LSN and its commit time, found: not NULL */
typedef struct CdcPoll
{
	const char *server_zone;	/* in: for the commit time */
	bool		read;			/* its result set was there */
	bool		found;
	MssqlLsn	max_lsn;
	TimestampTz max_time;
} CdcPoll;

/*
 * A capture instance's low watermark (sys.fn_cdc_get_min_lsn), read in the
 * same round trip as a window's end: fetched says it was read, known that
 * it was not NULL.  With probe set, the same batch first asks whether its
 * change table has rows in (checkpoint, max_lsn] (an index seek on its
 * clustered key): has_rows false says it has none in the window, read
 * BEFORE the low watermark, so that a cleanup which removed them raised
 * that mark first (the retention check sees it).
 */
typedef struct CdcMinLsn
{
	const char *capture_instance;
	bool		probe;
	bool		fetched;
	bool		known;
	bool		has_rows;
	MssqlLsn	lsn;
} CdcMinLsn;

/*
 * The end of the next window after checkpoint: the max_transactions-th
 * commit LSN after it, or max_lsn when fewer commits follow (the idle case
 * still moves the checkpoint to max, so cleanup does not overtake quiet
 * tables).  Always a transaction boundary.  Returns false when there is
 * nothing after the checkpoint.  *end_time is the end's commit time, when
 * known (0 otherwise); *transactions the number of source transactions
 * in the window (0 or 1: every change row of it has one commit LSN).
 * The same batch reads the low watermarks of the nmins capture instances
 * of mins (the window's retention checks), before them whether the change
 * tables of those with probe set have rows in (checkpoint, max_lsn], and
 * with lag (not NULL) the source transactions in (checkpoint, lag_upto]
 * (cdc_lag.h).
 */
extern bool cdc_choose_window_end(TdsSession *session, const MssqlLsn *checkpoint,
								  const MssqlLsn *max_lsn, int max_transactions,
								  const char *server_zone, CdcMinLsn *mins, int nmins,
								  const MssqlLsn *lag_upto, int64 *lag,
								  MssqlLsn *to, TimestampTz *end_time,
								  int *transactions);

/*
 * sys.fn_cdc_get_min_lsn(ci).  SQL Server returns 0x00... when the capture
 * instance does not exist or the login may not read it, and NULL (false
 * here) while the capture job has not processed a new capture instance.
 */
extern bool cdc_get_min_lsn(TdsSession *session, const char *capture_instance,
							MssqlLsn *min_lsn);

#endif							/* MSSQL_CDC_CDC_WINDOW_H */
