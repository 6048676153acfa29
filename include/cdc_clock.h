/*-------------------------------------------------------------------------
 *
 * cdc_clock.h
 *		Commit times as real instants: SQL Server reports them in its local
 *		time (cdc.lsn_time_mapping.tran_end_time), and a server in a
 *		daylight-saving zone changes its UTC offset twice a year.
 *
 * The most exact conversion the server supports is chosen once per
 * connection (doc/streaming.md "Commit times"):
 *
 *	zone known	the server option server_time_zone, else the server's own
 *				CURRENT_TIMEZONE_ID() (SQL Server 2022, Azure SQL): every
 *				local time is converted on the server with AT TIME ZONE and
 *				that zone's rules, whenever it was committed.  Exact except
 *				in the hour an autumn change repeats: SQL Server gives that
 *				local hour the daylight-saving offset, so commits made during
 *				its second pass come out one hour early.
 *	offset only	the server's UTC offset measured in the same statement as
 *				the read (DATEPART(TZOFFSET, SYSDATETIMEOFFSET())): exact for
 *				changes committed under the offset the server has when they
 *				are read, off by the difference for a backlog committed
 *				before a change and read after it.
 *
 * IDENTIFICATION
 *		include/cdc_clock.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_CDC_CLOCK_H
#define MSSQL_CDC_CDC_CLOCK_H

#include "postgres.h"

#include "datatype/timestamp.h"

#include "tds_session.h"

/*
 * The server's time zone (a Windows zone name, as sys.time_zone_info spells
 * it), palloc'd, or NULL when only the offset can be used.  configured is
 * the server option server_time_zone (NULL when not set); a name the server
 * does not know is an error naming the option.
 */
extern char *cdc_clock_zone(TdsSession *session, const char *configured);

/*
 * A T-SQL expression of type datetimeoffset for the local-time datetime
 * expression local_expr, converted with zone (NULL: the offset of the
 * statement that reads it).  Read it with cdc_col_commit_time.
 */
extern char *cdc_commit_time_sql(const char *zone, const char *local_expr);

/* Such a column of the current row as timestamptz; false for NULL. */
extern bool cdc_col_commit_time(TdsSession *session, int col, TimestampTz *result);

#endif							/* MSSQL_CDC_CDC_CLOCK_H */
