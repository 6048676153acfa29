/*-------------------------------------------------------------------------
 *
 * start_point.c
 *		Parse a start point and find it on SQL Server (see
 *		include/start_point.h).
 *
 * Times: cdc.lsn_time_mapping.tran_end_time is the server's local time
 * (a datetime, 1/300 s).  The instant the user gave is turned into that
 * local time with the server's current UTC offset, as the worker turns
 * commit times the other way (cdc_window.c), and compared by SQL Server.
 * Retention: every change at or after the point must still be in the change
 * table.  For an LSN that is "at or after the capture instance's min LSN";
 * for a time, the time must not be older than the oldest commit CDC still
 * maps at or after the min LSN: changes committed between an older time and
 * that commit may have been removed, and nothing on SQL Server tells which.
 *
 * IDENTIFICATION
 *		src/start_point.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "pgtime.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/timestamp.h"

#include "cdc_window.h"
#include "start_point.h"

static void
start_at_context(void *arg)
{
	errcontext("start_at must be an LSN (0x and 20 hex digits) or a timestamp with time zone");
}

void
start_point_parse(const char *input, StartPoint *point)
{
	ErrorContextCallback callback;

	memset(point, 0, sizeof(*point));
	point->input = input;
	if (mssql_lsn_parse(input, &point->lsn))
		return;

	point->is_time = true;
	callback.callback = start_at_context;
	callback.arg = NULL;
	callback.previous = error_context_stack;
	error_context_stack = &callback;
	point->time = DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in,
														  CStringGetDatum(input),
														  ObjectIdGetDatum(InvalidOid),
														  Int32GetDatum(-1)));
	error_context_stack = callback.previous;

	if (TIMESTAMP_NOT_FINITE(point->time) || point->time > GetCurrentTransactionStartTimestamp())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("start_at \"%s\" is in the future", input),
				 errhint("Give a time that has passed; without start_at a table streams from now on.")));
}

static char *
lsn_text(const MssqlLsn *lsn)
{
	char		buf[MSSQL_LSN_TEXT_SIZE];

	mssql_lsn_format(lsn, buf);
	return pstrdup(buf);
}

/* The instant as the server's naive local time, for comparing with tran_end_time */
static char *
local_time_literal(TimestampTz t, int utc_offset_minutes)
{
	Timestamp	local = t + (int64) utc_offset_minutes * USECS_PER_MINUTE;
	struct pg_tm tm;
	fsec_t		fsec;

	if (timestamp2tm(local, NULL, &tm, &fsec, NULL, NULL) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	/*
	 * As a datetime, the type of tran_end_time: rounded to its 1/300 s, so
	 * a commit time read from a staging row finds its own transaction
	 * again (a datetime2 with the microseconds could lie just above it).
	 * Style 126 text has 7 digits at most; datetime takes only 3 as text,
	 * hence the datetime2 in between.
	 */
	return psprintf("CAST(CONVERT(datetime2(7), N'%04d-%02d-%02dT%02d:%02d:%02d.%06d', 126) AS datetime)",
					tm.tm_year, tm.tm_mon, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
					(int) fsec);
}

static void
refuse_outside_retention(const StartPoint *point, const char *ci, const char *oldest)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("start_at \"%s\" is older than the changes CDC keeps for capture instance \"%s\"",
					point->input, ci),
			 errdetail("The oldest point CDC still keeps is %s; changes before it were removed by CDC cleanup.",
					   oldest),
			 errhint("Give a later start_at, or copy the table with a snapshot (mssql_cdc.resnapshot()).")));
}

/* A time point: the first transaction committed at or after it */
static void
resolve_time(TdsSession *session, const char *ci, const StartPoint *point,
			 const MssqlLsn *min_lsn, const MssqlLsn *max_lsn, MssqlLsn *checkpoint)
{
	int			offset = cdc_query_utc_offset(session);
	char	   *min_literal = tds_format_lsn_literal(min_lsn->bytes);
	char	   *sql;
	bool		seen = false;
	bool		has_oldest = false;
	bool		has_first = false;
	TimestampTz oldest = 0;
	char	   *oldest_text = NULL;
	MssqlLsn	first;

	sql = psprintf("SELECT (SELECT MIN(tran_end_time) FROM cdc.lsn_time_mapping"
				   " WHERE start_lsn >= %s),"
				   " (SELECT MIN(start_lsn) FROM cdc.lsn_time_mapping"
				   " WHERE tran_end_time >= %s AND tran_id <> 0x00 AND start_lsn >= %s)",
				   min_literal, local_time_literal(point->time, offset), min_literal);
	tds_exec(session, sql);
	while (tds_next_result(session))
		while (tds_next_row(session))
		{
			int			len;
			const uint8 *data;

			if (seen)
				continue;		/* drain */
			seen = true;
			has_oldest = cdc_col_local_time(session, 1, offset, &oldest);
			if (has_oldest)
				oldest_text = pstrdup(timestamptz_to_str(oldest));
			data = tds_col_data(session, 2, &len);
			if (data != NULL && len == MSSQL_LSN_BYTES)
			{
				memcpy(first.bytes, data, MSSQL_LSN_BYTES);
				has_first = true;
			}
		}
	if (!has_oldest)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("CDC keeps no commit times for capture instance \"%s\" yet", ci),
				 errhint("Wait for the capture job to record a transaction, or give start_at as an LSN.")));
	if (point->time < oldest)
		refuse_outside_retention(point, ci, oldest_text);
	if (!has_first)
	{
		/* nothing committed at or after it yet: everything from now on */
		*checkpoint = *max_lsn;
		return;
	}
	if (!mssql_lsn_decrement(&first, checkpoint))
		memset(checkpoint->bytes, 0, MSSQL_LSN_BYTES);
}

void
start_point_resolve(TdsSession *session, const char *ci, const StartPoint *point,
					MssqlLsn *checkpoint)
{
	MssqlLsn	min_lsn;
	MssqlLsn	max_lsn;

	if (!cdc_get_min_lsn(session, ci, &min_lsn) ||
		!tds_fetch_lsn(session, "SELECT sys.fn_cdc_get_max_lsn()", &max_lsn))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("capture instance \"%s\" has no changes to start from yet", ci),
				 errhint("Wait for the SQL Server capture job to run, then try again.")));
	if (mssql_lsn_is_zero(&min_lsn))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("capture instance \"%s\" does not exist or the login may not read it", ci),
				 errdetail("sys.fn_cdc_get_min_lsn() returned 0x00000000000000000000.")));

	if (point->is_time)
	{
		resolve_time(session, ci, point, &min_lsn, &max_lsn, checkpoint);
		return;
	}
	if (mssql_lsn_cmp(&point->lsn, &min_lsn) < 0)
		refuse_outside_retention(point, ci, lsn_text(&min_lsn));
	if (mssql_lsn_cmp(&point->lsn, &max_lsn) > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("start_at \"%s\" is beyond the source's max LSN %s", point->input,
						lsn_text(&max_lsn)),
				 errhint("Give an LSN that SQL Server has reached (sys.fn_cdc_get_max_lsn()).")));
	(void) mssql_lsn_decrement(&point->lsn, checkpoint);
}
