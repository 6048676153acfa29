/*-------------------------------------------------------------------------
 *
 * change_query.c
 *		The change query of a window (see change_query.h).
 *
 * Column references are qualified: the query joins cdc.lsn_time_mapping,
 * whose column names (start_lsn, tran_id, tran_end_time ...) a source table
 * may use too, and an unqualified name present on both sides is error 209
 * on SQL Server.
 *
 * __$command_id came with KB3030352 and may be NULL in rows a change table
 * held before that update; NULL sorts first like 0, so ISNULL(…, 0) keeps the
 * staging key in the order the query returns.
 *
 * Without before-images (tables.update_before false) the update_before
 * rows are not read at all: __$operation 3 is filtered on the server, and
 * the change function is asked for N'all' (one row per update, the after
 * image) instead of N'all update old'.
 *
 * Reference: sqlserver-cdc.md §3, real-server-behaviour.md §1; page
 * "cdc.<capture_instance>_CT" (MicrosoftDocs/sql-docs,
 * docs/relational-databases/system-tables/cdc-capture-instance-ct-transact-sql.md).
 *
 * IDENTIFICATION
 *		src/change_query.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "cdc_clock.h"
#include "change_query.h"
#include "type_map.h"

/* the change rows' alias; the mapping table's is "m" */
#define CHANGES_ALIAS	"c"

char *
cdc_change_query_sql(MssqlDataQueryMode mode, const char *server_zone,
					 const char *capture_instance, List *columns,
					 bool update_before, bool ordered,
					 const MssqlLsn *from, const MssqlLsn *to)
{
	StringInfoData sql;
	ListCell   *lc;
	char	   *from_lit = tds_format_lsn_literal(from->bytes);
	char	   *to_lit = tds_format_lsn_literal(to->bytes);

	/* sys.fn_cdc_get_all_changes_* raises Msg 313 for from > to */
	Assert(mssql_lsn_cmp(from, to) <= 0);

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT c.[__$start_lsn], %s, c.[__$seqval], c.[__$operation],"
					 " c.[__$update_mask], %s",
					 mode == MSSQL_QUERY_DIRECT ? "ISNULL(c.[__$command_id], 0)" : "CAST(0 AS int)",
					 cdc_commit_time_sql(server_zone, "m.tran_end_time"));
	foreach(lc, columns)
		appendStringInfo(&sql, ", %s",
						 mssql_column_select_expr_qualified((const MssqlColumn *) lfirst(lc),
															CHANGES_ALIAS));
	/* NOLOCK like the change function's own body (real-server-behaviour.md §2) */
	if (mode == MSSQL_QUERY_DIRECT)
		appendStringInfo(&sql, " FROM cdc.%s AS c WITH (NOLOCK)",
						 tds_quote_ident(psprintf("%s_CT", capture_instance)));
	else
		appendStringInfo(&sql, " FROM cdc.%s(%s, %s, %s) AS c",
						 tds_quote_ident(psprintf("fn_cdc_get_all_changes_%s", capture_instance)),
						 from_lit, to_lit, update_before ? "N'all update old'" : "N'all'");
	/* every change row has its transaction's mapping row; LEFT: never drop one */
	appendStringInfoString(&sql, " LEFT OUTER JOIN cdc.lsn_time_mapping AS m"
						   " ON m.start_lsn = c.[__$start_lsn]");
	if (mode == MSSQL_QUERY_DIRECT)
		appendStringInfo(&sql,
						 " WHERE c.[__$start_lsn] >= %s AND c.[__$start_lsn] <= %s%s",
						 from_lit, to_lit,
						 update_before ? "" : " AND c.[__$operation] <> 3");
	/* unordered: nothing for a server to sort before the first row */
	if (ordered && mode == MSSQL_QUERY_DIRECT)
		appendStringInfoString(&sql,
							   " ORDER BY c.[__$start_lsn], c.[__$command_id], c.[__$seqval], c.[__$operation]");
	else if (ordered)
		appendStringInfoString(&sql,
							   " ORDER BY c.[__$start_lsn], c.[__$seqval], c.[__$operation]");
	return sql.data;
}
