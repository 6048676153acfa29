/*-------------------------------------------------------------------------
 *
 * capture_stall.h
 *		Notice that SQL Server's capture job stopped, without mistaking an
 *		idle database for a stopped job.
 *
 * While the capture job does not run, nothing new reaches the change
 * tables and the transaction log grows, while every query the worker runs
 * succeeds.  A max LSN that does not move is the first sign, but not a
 * proof: Microsoft says only that "in periods of inactivity, a dummy entry
 * is added" to cdc.lsn_time_mapping, how often is not documented, so an
 * idle database may keep its max LSN for a long time.  Once the max LSN
 * has not moved for mssql_cdc.capture_stall_timeout, the worker therefore
 * asks for evidence (capture_stall_probe.c):
 *
 *	- sys.dm_cdc_log_scan_sessions (VIEW DATABASE STATE): the capture job's
 *	  log scans, empty ones included.  A scan within the timeout means the
 *	  job runs and the database is just idle; none means it stopped.
 *	- without that view: the row counts of the source's captured tables
 *	  (sys.partitions, visible with SELECT on the tables).  A table that
 *	  changed while the max LSN stayed put for longer than the timeout has
 *	  changes the job did not capture.  An idle database never shows that,
 *	  so this cannot fire on idleness; the price is that a stopped job is
 *	  noticed only once a captured table gains or loses rows (updates alone
 *	  do not change a row count).
 *
 * The worker keeps polling; the source's status shows condition
 * capture_job_stalled, with a message that says how it was judged, until
 * the max LSN moves or the scans resume.
 *
 * IDENTIFICATION
 *		include/capture_stall.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_CAPTURE_STALL_H
#define MSSQL_CDC_CAPTURE_STALL_H

#include "postgres.h"

#include "nodes/pg_list.h"

#include "lsn.h"
#include "tds_session.h"

/* mssql_cdc.capture_stall_timeout, seconds; 0 turns the check off */
extern int	mssql_cdc_capture_stall_timeout;

/* Define the GUC (from _PG_init). */
extern void capture_stall_define_gucs(void);

/*
 * After each successful max-LSN poll of the source (NULL max_lsn: the
 * function returned NULL).  tables are the source's MssqlCdcTable rows
 * (their source tables are the row-count evidence).  May query the
 * session; sets or clears the server's warning in the catalog in its own
 * short transaction: call outside a transaction.
 */
extern void capture_stall_observe(TdsSession *session, const char *server_name,
								  const MssqlLsn *max_lsn, List *tables);

/* ---- the probes (capture_stall_probe.c) ------------------------------- */

typedef enum ScanSessionsProbe
{
	SCAN_SESSIONS_READ,			/* the view answered */
	SCAN_SESSIONS_DENIED		/* the login may not read it (Msg 297 / 229 / 300) */
} ScanSessionsProbe;

/*
 * sys.dm_cdc_log_scan_sessions: *age_seconds = seconds since the latest
 * scan session ended, by the server's clock (-1: none since SQL Server
 * started); *signature changes whenever a session is added or an empty one
 * is counted.  Other SQL Server errors raise.
 */
extern ScanSessionsProbe capture_stall_probe_scan_sessions(TdsSession *session,
														   int64 *age_seconds,
														   int64 *signature);

/* Row count of one captured source table (sys.partitions), -1 if unknown */
typedef struct TableRowCount
{
	const char *schema;
	const char *table;
	int64		rows;
} TableRowCount;

/*
 * The row counts of the given source tables (MssqlCdcTable *) in one
 * query; a table the login cannot see gets -1.  Returns an array in the
 * order of tables, palloc'd.
 */
extern TableRowCount *capture_stall_probe_row_counts(TdsSession *session, List *tables);

#endif							/* MSSQL_CDC_CAPTURE_STALL_H */
