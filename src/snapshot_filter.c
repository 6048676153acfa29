/*-------------------------------------------------------------------------
 *
 * snapshot_filter.c
 *		Check a snapshot row filter, lexically and by SQL Server (see
 *		include/snapshot_filter.h).
 *
 * The lexical check is what keeps the filter inside the parentheses it is
 * put in: T-SQL needs no ";" between statements, so the only way out of
 * "WHERE (<filter>)" is a ")" that closes it, a comment that hides the
 * closing one, or an unterminated quote; all three are refused, and so is
 * ";".  Inside the parentheses SQL Server's grammar allows one expression
 * (subqueries included), never another statement.
 *
 * IDENTIFICATION
 *		src/snapshot_filter.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"

#include "snapshot_filter.h"

static void
refuse(const char *filter, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_SYNTAX_ERROR),
			 errmsg("invalid snapshot_filter \"%s\"", filter),
			 errdetail("%s", why),
			 errhint("Write one T-SQL condition on the source table's columns, e.g. [region] = N'EU' AND [created] >= '2024-01-01'.")));
}

void
snapshot_filter_check_syntax(const char *filter)
{
	const char *p;
	int			depth = 0;
	bool		blank = true;

	if (pg_mbstrlen(filter) > SNAPSHOT_FILTER_MAX_CHARS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("snapshot_filter is too long"),
				 errdetail("At most %d characters are allowed.", SNAPSHOT_FILTER_MAX_CHARS)));
	for (p = filter; *p; p++)
	{
		char		c = *p;

		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			blank = false;
		if (c == '\'' || c == '[' || c == '"')
		{
			char		close = (c == '[') ? ']' : c;

			/* a quoted literal or identifier; the closing character doubled is itself */
			for (p++;; p++)
			{
				if (*p == '\0')
					refuse(filter, c == '\'' ? "A string literal is not closed." :
						   "A quoted identifier is not closed.");
				if (*p == close)
				{
					if (p[1] == close)
						p++;
					else
						break;
				}
			}
			continue;
		}
		if ((c == '-' && p[1] == '-') || (c == '/' && p[1] == '*'))
			refuse(filter, "Comments are not allowed.");
		if (c == ';')
			refuse(filter, "A statement separator (;) is not allowed: the filter is one condition.");
		if (c == '(')
			depth++;
		if (c == ')' && --depth < 0)
			refuse(filter, "A closing parenthesis has no opening one.");
	}
	if (blank)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("snapshot_filter must not be empty"),
				 errhint("Pass NULL to copy every row.")));
	if (depth != 0)
		refuse(filter, "A parenthesis is not closed.");
}

void
snapshot_filter_validate(TdsSession *session, const char *schema, const char *table,
						 const char *filter)
{
	char	   *query;
	char	   *sql;
	bool		ok;
	TdsStep		step;

	snapshot_filter_check_syntax(filter);

	/* the shape of the snapshot's chunk query, without its keyset part */
	query = psprintf("SELECT TOP (0) 1 AS filter_check FROM %s.%s WHERE (%s)",
					 tds_quote_ident(schema), tds_quote_ident(table), filter);
	sql = psprintf("EXEC sys.sp_describe_first_result_set @tsql = %s", tds_quote_nstring(query));

	ok = tds_exec_try(session, sql);
	while (ok && (step = tds_next_result_try(session)) != TDS_STEP_DONE)
	{
		if (step == TDS_STEP_REMOTE_ERROR)
		{
			ok = false;
			break;
		}
		while ((step = tds_next_row_try(session)) == TDS_STEP_MORE)
			;
		if (step == TDS_STEP_REMOTE_ERROR)
			ok = false;
	}
	if (!ok)
	{
		const TdsRemoteError *err = tds_session_last_error(session);

		if (err == NULL || err->kind != TDS_ERROR_REMOTE)
			tds_report_error(tds_session_server_name(session), err, "checking snapshot_filter");
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("SQL Server (server \"%s\") refuses snapshot_filter \"%s\"",
						tds_session_server_name(session), filter),
				 errdetail("Msg %d: %s", err->msgno, err->msgtext),
				 errhint("The filter is checked as: %s", query)));
	}
}
