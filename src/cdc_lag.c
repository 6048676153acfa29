/*-------------------------------------------------------------------------
 *
 * cdc_lag.c
 *		How far behind the source a streaming checkpoint is, in source
 *		transactions.
 *
 * cdc.lsn_time_mapping has one row per committed source transaction
 * (tran_id <> 0x00) plus the capture job's dummy rows for idle scans, and
 * it is clustered on start_lsn, so counting the transactional rows in
 * (checkpoint, max] is an index range scan on SQL Server.  The worker runs
 * it only when it is not caught up (a caught-up checkpoint has lag 0).
 *
 * The scan still grows with the backlog, and a worker catching up runs
 * many windows per second: counting a million-transaction backlog after
 * every window would cost SQL Server more than the windows themselves
 * (bench/README.md measured it).  So the count stops at
 * CDC_LAG_COUNT_CAP ("at least that many"), and while the backlog is big
 * the worker counts at most once per CDC_LAG_COUNT_INTERVAL_MS.
 *
 * IDENTIFICATION
 *		src/cdc_lag.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "cdc_lag.h"
#include "tds_session.h"

char *
cdc_count_transactions_sql(const MssqlLsn *after, const MssqlLsn *upto)
{
	return psprintf("SELECT CAST(COUNT_BIG(*) AS varchar(20)) FROM"
					" (SELECT TOP (%d) start_lsn FROM cdc.lsn_time_mapping"
					" WHERE start_lsn > %s AND start_lsn <= %s AND tran_id <> 0x00) AS backlog",
					CDC_LAG_COUNT_CAP,
					tds_format_lsn_literal(after->bytes),
					tds_format_lsn_literal(upto->bytes));
}

int64
cdc_read_transaction_count(TdsSession *session)
{
	int64		count = 0;

	while (tds_next_row(session))
	{
		char	   *text = tds_col_text(session, 1);

		if (text != NULL)
			count = strtoi64(text, NULL, 10);
	}
	return count;
}

int64
cdc_count_transactions(TdsSession *session, const MssqlLsn *after,
					   const MssqlLsn *upto)
{
	int64		count = 0;

	if (mssql_lsn_cmp(after, upto) >= 0)
		return 0;

	tds_exec(session, cdc_count_transactions_sql(after, upto));
	while (tds_next_result(session))
		count = cdc_read_transaction_count(session);
	return count;
}
