/*-------------------------------------------------------------------------
 *
 * capture_stall.h
 *		Notice that SQL Server's capture job stopped: the max LSN of a
 *		source does not move for longer than mssql_cdc.capture_stall_timeout.
 *
 * The capture job writes dummy rows to cdc.lsn_time_mapping even when the
 * database is idle, so sys.fn_cdc_get_max_lsn() moves every few seconds
 * while the job runs (reference/sqlserver-cdc.md §5.1).  A max LSN frozen
 * for minutes means nobody is harvesting the log: changes pile up in the
 * transaction log and the worker copies nothing, while every query it runs
 * succeeds.  The worker keeps polling; the source's status shows condition
 * capture_job_stalled until the max LSN moves again.
 *
 * IDENTIFICATION
 *		include/capture_stall.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_CAPTURE_STALL_H
#define MSSQL_CDC_CAPTURE_STALL_H

#include "lsn.h"

/* mssql_cdc.capture_stall_timeout, seconds; 0 turns the check off */
extern int	mssql_cdc_capture_stall_timeout;

/* Define the GUC (from _PG_init). */
extern void capture_stall_define_gucs(void);

/*
 * After each successful max-LSN poll of the source (NULL max_lsn: the
 * function returned NULL).  Sets or clears the server's warning in the
 * catalog, in its own short transaction: call outside a transaction.
 */
extern void capture_stall_observe(const char *server_name, const MssqlLsn *max_lsn);

#endif							/* MSSQL_CDC_CAPTURE_STALL_H */
