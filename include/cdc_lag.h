/*-------------------------------------------------------------------------
 *
 * cdc_lag.h
 *		Lag of a streaming checkpoint in source transactions.
 *
 * IDENTIFICATION
 *		include/cdc_lag.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_CDC_LAG_H
#define MSSQL_CDC_CDC_LAG_H

#include "postgres.h"

#include "lsn.h"
#include "tds_session.h"

/* A count stops here: the lag is "at least" this many transactions */
#define CDC_LAG_COUNT_CAP			1000000

/*
 * While the last count found at least CDC_LAG_CHEAP_COUNT transactions, the
 * worker counts at most once per CDC_LAG_COUNT_INTERVAL_MS
 */
#define CDC_LAG_CHEAP_COUNT			10000
#define CDC_LAG_COUNT_INTERVAL_MS	1000

/*
 * Source transactions committed after `after` up to and including `upto`
 * (both commit LSNs), from cdc.lsn_time_mapping, at most CDC_LAG_COUNT_CAP;
 * 0 when after >= upto (without asking SQL Server).  Raises on SQL Server
 * errors like any tds_exec.
 */
extern int64 cdc_count_transactions(TdsSession *session, const MssqlLsn *after,
									const MssqlLsn *upto);

/*
 * The same count as a statement for a batch of the caller's (the lead
 * window's end, cdc_window.c), and reading its result set (the current one)
 */
extern char *cdc_count_transactions_sql(const MssqlLsn *after, const MssqlLsn *upto);
extern int64 cdc_read_transaction_count(TdsSession *session);

#endif							/* MSSQL_CDC_CDC_LAG_H */
