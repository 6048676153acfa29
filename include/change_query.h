/*-------------------------------------------------------------------------
 *
 * change_query.h
 *		The change query of one capture instance for one window: the
 *		statement, its result columns and their order.
 *
 * Two shapes (server option data_query_mode, doc/streaming.md):
 *
 *	direct		cdc.[<ci>_CT] read as a table, ordered by its clustered key
 *				(__$start_lsn, __$command_id, __$seqval, __$operation):
 *				execution order inside a transaction, streamed without a
 *				sort.  The window bounds are the WHERE clause, so SQL Server
 *				raises no 313 on this path: the caller checks from against
 *				sys.fn_cdc_get_min_lsn and to against the max LSN itself.
 *	function	cdc.fn_cdc_get_all_changes_<ci>(from, to, N'all update old')
 *				ordered by __$start_lsn, __$seqval, __$operation, for logins
 *				that may not read the change table.  The function returns no
 *				__$command_id (the result says 0) and __$seqval order is not
 *				execution order.
 *
 * Both read "all update old" (3 = before images included) unless the
 * table does without before-images (update_before false: the direct path
 * filters __$operation <> 3, the function path asks for N'all'), and take
 * the commit time from one join with cdc.lsn_time_mapping, converted to an
 * instant on the server (cdc_clock.h; server_zone NULL: by the offset).
 *
 * IDENTIFICATION
 *		include/change_query.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_CHANGE_QUERY_H
#define MSSQL_CDC_CHANGE_QUERY_H

#include "postgres.h"

#include "nodes/pg_list.h"

#include "lsn.h"
#include "options.h"
#include "tds_session.h"

/* Result columns of cdc_change_query_sql(), 1-based */
#define CDC_COL_START_LSN	1
#define CDC_COL_COMMAND_ID	2			/* int, never NULL; 0 on the function path */
#define CDC_COL_SEQVAL		3
#define CDC_COL_OPERATION	4
#define CDC_COL_UPDATE_MASK	5
#define CDC_COL_COMMIT_TIME	6			/* datetimeoffset: cdc_col_commit_time */
#define CDC_COL_FIRST_DATA	7

/*
 * ordered false: no ORDER BY, for a window of ONE source transaction (every
 * row has the same __$start_lsn).  A sorted read waits for the sort of all
 * the rows it covers before its first row (function mode always; direct
 * mode whenever the server's plan does not follow the clustered index), and
 * db-lib's query_timeout bounds that wait; a read without ORDER BY streams
 * on any plan.  The staging table's primary key orders those rows
 * (lsn, command id, seqval, operation) and refuses a repeated one.
 *
 * The change query (one SELECT, one result set) of one capture instance
 * for [from, to]; columns are CDC_COL_* and then one per element of columns
 * (const MssqlColumn *, read with the type policy's select expression) in
 * order.  The window sends the queries of all its tables in one batch
 * (window_batch.c) and reads their result sets in turn with
 * tds_next_result/tds_next_row; it checks the retention bounds first (see
 * above).  update_before false: no __$operation 3 rows.
 */
extern char *cdc_change_query_sql(MssqlDataQueryMode mode, const char *server_zone,
								  const char *capture_instance, List *columns,
								  bool update_before, bool ordered,
								  const MssqlLsn *from, const MssqlLsn *to);

#endif							/* MSSQL_CDC_CHANGE_QUERY_H */
