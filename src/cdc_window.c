/*-------------------------------------------------------------------------
 *
 * cdc_window.c
 *		SQL Server queries of the streaming worker (see cdc_window.h).
 *
 * Window ends come from cdc.lsn_time_mapping, which has one row per
 * committed transaction (tran_id 0x00 rows are the capture job's own
 * bookkeeping and are skipped), so a window never ends inside a source
 * transaction.  Reference: sqlserver-cdc.md §2, §3.
 *
 * IDENTIFICATION
 *		src/cdc_window.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/timestamp.h"

#include "cdc_clock.h"
#include "cdc_lag.h"
#include "cdc_window.h"

static char *
lsn_literal(const MssqlLsn *lsn)
{
	return tds_format_lsn_literal(lsn->bytes);
}

/* The binary(10) column of the current row as an LSN; false for NULL. */
static bool
col_lsn(TdsSession *session, int col, MssqlLsn *lsn)
{
	int			len;
	const uint8 *data = tds_col_data(session, col, &len);

	if (data == NULL)
		return false;
	if (len != MSSQL_LSN_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
				 errmsg("SQL Server (server \"%s\") returned an LSN of %d bytes, expected %d",
						tds_session_server_name(session), len, MSSQL_LSN_BYTES)));
	memcpy(lsn->bytes, data, MSSQL_LSN_BYTES);
	return true;
}

int
cdc_query_utc_offset(TdsSession *session)
{
	int			offset = 0;
	bool		found = false;

	tds_exec(session, "SELECT DATEPART(TZOFFSET, SYSDATETIMEOFFSET())");
	while (tds_next_result(session))
		while (tds_next_row(session))
		{
			char	   *text = tds_col_text(session, 1);

			if (!found && text != NULL)
			{
				offset = pg_strtoint32(text);
				found = true;
			}
		}
	if (!found)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("SQL Server (server \"%s\") did not report its UTC offset",
						tds_session_server_name(session))));
	return offset;
}

bool
cdc_col_local_time(TdsSession *session, int col, int utc_offset_minutes,
				   TimestampTz *result)
{
	char	   *text = tds_col_text(session, col);
	Timestamp	local;

	if (text == NULL)
		return false;
	/* the exact text form of the naive datetime, read as if it were UTC ... */
	local = DatumGetTimestamp(DirectFunctionCall3(timestamp_in,
												  CStringGetDatum(text),
												  ObjectIdGetDatum(InvalidOid),
												  Int32GetDatum(-1)));
	/* ... then shifted by the server's offset to the real instant */
	*result = local - (int64) utc_offset_minutes * 60 * USECS_PER_SEC;
	return true;
}

char *
cdc_poll_max_lsn_sql(const char *server_zone)
{
	return psprintf("SELECT sys.fn_cdc_get_max_lsn(), %s",
					cdc_commit_time_sql(server_zone,
										"sys.fn_cdc_map_lsn_to_time(sys.fn_cdc_get_max_lsn())"));
}

bool
cdc_read_max_lsn(TdsSession *session, MssqlLsn *max_lsn, TimestampTz *max_time)
{
	bool		found = false;
	bool		seen = false;

	*max_time = 0;
	while (tds_next_row(session))
	{
		if (seen)
			continue;			/* drain */
		seen = true;
		found = col_lsn(session, 1, max_lsn);
		if (found && !cdc_col_commit_time(session, 2, max_time))
			*max_time = 0;
	}
	return found;
}

/*
 * One row, one column per probed capture instance: 1 when its change table
 * has a row in (checkpoint, max_lsn].  The change table is clustered on
 * __$start_lsn first, so each EXISTS is an index seek.  Returns how many
 * instances are probed.
 */
static int
append_row_probes(StringInfo sql, CdcMinLsn *mins, int nmins, const MssqlLsn *checkpoint,
				  const MssqlLsn *max_lsn)
{
	int			n = 0;
	int			i;

	for (i = 0; i < nmins; i++)
	{
		mins[i].has_rows = true;	/* unless the probe says otherwise */
		if (!mins[i].probe)
			continue;
		appendStringInfo(sql,
						 "%sCASE WHEN EXISTS (SELECT 1 FROM cdc.%s"
						 " WHERE [__$start_lsn] > %s AND [__$start_lsn] <= %s) THEN 1 ELSE 0 END",
						 n++ == 0 ? "; SELECT " : ", ",
						 tds_quote_ident(psprintf("%s_CT", mins[i].capture_instance)),
						 lsn_literal(checkpoint), lsn_literal(max_lsn));
	}
	return n;
}

/* The probes' row (append_row_probes): has_rows of each probed instance */
static void
read_row_probes(TdsSession *session, CdcMinLsn *mins, int nmins, int nprobes)
{
	bool		seen = false;
	int			i;

	while (tds_next_row(session))
	{
		int			col = 0;

		if (seen)
			continue;			/* drain */
		seen = true;
		tds_expect_num_cols(session, nprobes, "asking which change tables have rows in a window");
		for (i = 0; i < nmins; i++)
		{
			char	   *text;

			if (!mins[i].probe)
				continue;
			text = tds_col_text(session, ++col);
			/* anything but a plain 0 reads the table, as without the probe */
			mins[i].has_rows = text == NULL || strcmp(text, "0") != 0;
		}
	}
}

bool
cdc_choose_window_end(TdsSession *session, const MssqlLsn *checkpoint,
					  const MssqlLsn *max_lsn, int max_transactions,
					  const char *server_zone, CdcMinLsn *mins, int nmins,
					  const MssqlLsn *lag_upto, int64 *lag,
					  MssqlLsn *to, TimestampTz *end_time, int *transactions)
{
	StringInfoData sql;
	int			nrows = 0;
	int			nresult = 0;
	int			nprobes;
	int			i;
	MssqlLsn	last;
	TimestampTz last_time = 0;

	if (mssql_lsn_cmp(max_lsn, checkpoint) <= 0)
		return false;

	initStringInfo(&sql);
	appendStringInfo(&sql,
					 "SELECT TOP (%d) start_lsn, %s FROM cdc.lsn_time_mapping"
					 " WHERE start_lsn > %s AND start_lsn <= %s AND tran_id <> 0x00"
					 " ORDER BY start_lsn",
					 max_transactions, cdc_commit_time_sql(server_zone, "tran_end_time"),
					 lsn_literal(checkpoint), lsn_literal(max_lsn));
	/*
	 * which change tables have rows in the window at all (issue 16 point 5:
	 * a quiet table costs an index seek, not a change query), read before
	 * the low watermarks: rows cleanup removed before this read raised the
	 * mark read after it
	 */
	nprobes = append_row_probes(&sql, mins, nmins, checkpoint, max_lsn);
	/* the same round trip reads the low watermarks the window checks */
	for (i = 0; i < nmins; i++)
	{
		mins[i].fetched = mins[i].known = false;
		appendStringInfo(&sql, "%ssys.fn_cdc_get_min_lsn(%s)", i == 0 ? "; SELECT " : ", ",
						 tds_quote_nstring(mins[i].capture_instance));
	}
	/* and the lag of the lead checkpoint (worker.c), when asked */
	if (lag != NULL)
		appendStringInfo(&sql, "; %s", cdc_count_transactions_sql(checkpoint, lag_upto));
	tds_exec(session, sql.data);
	while (tds_next_result(session))
	{
		bool		seen = false;

		if (tds_num_cols(session) == 0)
			continue;
		nresult++;
		if (lag != NULL && nresult == (nmins > 0 ? 3 : 2) + (nprobes > 0))
		{
			*lag = cdc_read_transaction_count(session);
			continue;
		}
		if (nprobes > 0 && nresult == 2)
		{
			read_row_probes(session, mins, nmins, nprobes);
			continue;
		}
		while (tds_next_row(session))
		{
			if (nresult == 1)
			{
				if (!col_lsn(session, 1, &last))
					continue;
				nrows++;
				if (!cdc_col_commit_time(session, 2, &last_time))
					last_time = 0;
				continue;
			}
			if (nmins == 0 || nresult != 2 + (nprobes > 0) || seen)
				continue;		/* drain */
			seen = true;
			tds_expect_num_cols(session, nmins, "reading the low watermarks of a window");
			for (i = 0; i < nmins; i++)
			{
				mins[i].fetched = true;
				mins[i].known = col_lsn(session, i + 1, &mins[i].lsn);
			}
		}
	}

	*transactions = nrows;
	if (nrows >= max_transactions)
	{
		*to = last;
		*end_time = last_time;
	}
	else
	{
		/* everything up to max: commits and the capture job's own LSNs */
		*to = *max_lsn;
		*end_time = (nrows > 0 && mssql_lsn_cmp(&last, max_lsn) == 0) ? last_time : 0;
	}
	return mssql_lsn_cmp(to, checkpoint) > 0;
}

bool
cdc_get_min_lsn(TdsSession *session, const char *capture_instance, MssqlLsn *min_lsn)
{
	char	   *sql = psprintf("SELECT sys.fn_cdc_get_min_lsn(%s)",
							   tds_quote_nstring(capture_instance));

	return tds_fetch_lsn(session, sql, min_lsn);
}
