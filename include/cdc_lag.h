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

/*
 * Source transactions committed after `after` up to and including `upto`
 * (both commit LSNs), from cdc.lsn_time_mapping; 0 when after >= upto.
 * Raises on SQL Server errors like any tds_exec.
 */
extern int64 cdc_count_transactions(TdsSession *session, const MssqlLsn *after,
									const MssqlLsn *upto);

#endif							/* MSSQL_CDC_CDC_LAG_H */
