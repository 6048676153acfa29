/*-------------------------------------------------------------------------
 *
 * capture_stall_probe.c
 *		The two pieces of evidence the capture-stall check asks SQL Server
 *		for (see capture_stall.h): the capture job's log scan sessions, and
 *		the row counts of the captured tables.
 *
 * Both are single cheap catalog queries, run only while a source's max LSN
 * has been frozen for longer than mssql_cdc.capture_stall_timeout, at most
 * every few seconds.  Time differences are computed by SQL Server itself
 * (DATEDIFF against GETDATE()), so neither clock skew nor the server's UTC
 * offset matters.
 *
 * IDENTIFICATION
 *		src/capture_stall_probe.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/builtins.h"

#include "capture_stall.h"
#include "catalog.h"
#include "source_name.h"

/* an integer column, -1 for NULL or anything that does not parse */
static int64
col_int64(TdsSession *session, int col)
{
	char	   *text = tds_col_text(session, col);
	char	   *end;
	long long	v;

	if (text == NULL)
		return -1;
	errno = 0;
	v = strtoll(text, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	return (int64) v;
}

/* Msg numbers SQL Server uses when a DMV is not readable for the login */
static bool
is_view_denied(int msgno)
{
	return msgno == 297 || msgno == 300 || msgno == 229;
}

ScanSessionsProbe
capture_stall_probe_scan_sessions(TdsSession *session, int64 *age_seconds, int64 *signature)
{
	TdsStep		step;
	bool		seen = false;

	*age_seconds = -1;
	*signature = 0;

	/*
	 * Every session counts, empty ones included (the aggregate row 0 ends
	 * with the latest one, and consecutive empty sessions raise
	 * empty_scan_count): the job runs while either moves.
	 */
	if (!tds_exec_try(session,
					  "SELECT DATEDIFF(second, MAX(end_time), GETDATE()), COUNT_BIG(*),"
					  " SUM(CAST(empty_scan_count AS bigint)) FROM sys.dm_cdc_log_scan_sessions"))
		goto remote_error;
	while ((step = tds_next_result_try(session)) == TDS_STEP_MORE)
	{
		while ((step = tds_next_row_try(session)) == TDS_STEP_MORE)
		{
			int64		count;
			int64		empty;

			if (seen || tds_num_cols(session) < 3)
				continue;
			seen = true;
			*age_seconds = col_int64(session, 1);
			count = col_int64(session, 2);
			empty = col_int64(session, 3);
			*signature = count * 1000003 + empty;
		}
		if (step == TDS_STEP_REMOTE_ERROR)
			goto remote_error;
	}
	if (step == TDS_STEP_REMOTE_ERROR)
		goto remote_error;
	return SCAN_SESSIONS_READ;

remote_error:
	{
		const TdsRemoteError *err = tds_session_last_error(session);

		if (is_view_denied(err->msgno))
			return SCAN_SESSIONS_DENIED;
		tds_report_error(tds_session_server_name(session), err,
						 "reading sys.dm_cdc_log_scan_sessions");
	}
	return SCAN_SESSIONS_DENIED;	/* not reached */
}

TableRowCount *
capture_stall_probe_row_counts(TdsSession *session, List *tables)
{
	TableRowCount *counts = palloc0(sizeof(TableRowCount) * Max(list_length(tables), 1));
	StringInfoData sql;
	ListCell   *lc;
	int			n = 0;
	bool		seen = false;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	foreach(lc, tables)
	{
		MssqlCdcTable *table = lfirst(lc);
		char	   *object = psprintf("%s.%s", tds_quote_ident(table->source_schema),
									  tds_quote_ident(table->source_table));

		counts[n].schema = table->source_schema;
		counts[n].table = table->source_table;
		counts[n].rows = -1;
		/* NULL for a table the login cannot see (metadata visibility) */
		appendStringInfo(&sql, "%s(SELECT SUM(rows) FROM sys.partitions WHERE object_id = OBJECT_ID(%s)"
						 " AND index_id IN (0, 1))",
						 n > 0 ? ", " : "", tds_quote_nstring(object));
		n++;
	}
	if (n == 0)
		return counts;

	tds_exec(session, sql.data);
	while (tds_next_result(session))
		while (tds_next_row(session))
		{
			int			i;

			if (seen || tds_num_cols(session) < n)
				continue;
			seen = true;
			for (i = 0; i < n; i++)
				counts[i].rows = col_int64(session, i + 1);
		}
	return counts;
}
