/*-------------------------------------------------------------------------
 *
 * cdc_clock.c
 *		Commit times as real instants (see cdc_clock.h).
 *
 * AT TIME ZONE reads a datetime without offset as local time of the named
 * zone; in the spring gap it takes the offset after the change, in the
 * autumn overlap the offset before it (page "AT TIME ZONE", MicrosoftDocs
 * sql-docs docs/t-sql/queries/at-time-zone-transact-sql.md).  Zone names
 * are Windows names, also on Linux hosts: the server's own list is
 * sys.time_zone_info, so a configured or reported name is checked there
 * before any change query uses it (an unknown one would be error 9820 in
 * every window).  The date/time functions are runtime constants, so the
 * offset of the fallback is one value per statement.
 *
 * tran_end_time is datetime; CAST(... AS datetime2(7)) keeps its exact
 * 1/300 s value in the datetimeoffset(7) result.
 *
 * IDENTIFICATION
 *		src/cdc_clock.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/fmgroids.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "cdc_clock.h"
#include "tds_convert.h"

/* The one name of sys.time_zone_info that query returns, or NULL */
static char *
zone_of(TdsSession *session, const char *sql, bool may_fail)
{
	char	   *zone = NULL;

	if (may_fail)
	{
		TdsStep		step;

		if (!tds_exec_try(session, sql))
			return NULL;
		while ((step = tds_next_result_try(session)) == TDS_STEP_MORE)
			while (tds_next_row_try(session) == TDS_STEP_MORE)
			{
				char	   *text = tds_col_text(session, 1);

				if (zone == NULL && text != NULL && text[0] != '\0')
					zone = text;
			}
		return step == TDS_STEP_DONE ? zone : NULL;
	}
	tds_exec(session, sql);
	while (tds_next_result(session))
		while (tds_next_row(session))
		{
			char	   *text = tds_col_text(session, 1);

			if (zone == NULL && text != NULL && text[0] != '\0')
				zone = text;
		}
	return zone;
}

char *
cdc_clock_zone(TdsSession *session, const char *configured)
{
	char	   *zone;

	if (configured != NULL)
	{
		zone = zone_of(session,
					   psprintf("SELECT name FROM sys.time_zone_info WHERE name = %s",
								tds_quote_nstring(configured)),
					   false);
		if (zone == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("server_time_zone \"%s\" of server \"%s\" is not a time zone of that SQL Server",
							configured, tds_session_server_name(session)),
					 errhint("Use a Windows time zone name as the server lists it in sys.time_zone_info, e.g. 'W. Europe Standard Time': ALTER SERVER %s OPTIONS (SET server_time_zone '…').",
							 tds_session_server_name(session))));
		return zone;
	}

	/*
	 * SQL Server 2022 and Azure SQL say their zone; before 2022 the function
	 * does not exist (Msg 195) and the worker falls back to the offset.
	 */
	return zone_of(session,
				   "SELECT z.name FROM sys.time_zone_info AS z WHERE z.name = CURRENT_TIMEZONE_ID()",
				   true);
}

char *
cdc_commit_time_sql(const char *zone, const char *local_expr)
{
	if (zone != NULL)
		return psprintf("(CAST(%s AS datetime2(7)) AT TIME ZONE %s)", local_expr,
						tds_quote_nstring(zone));
	return psprintf("TODATETIMEOFFSET(CAST(%s AS datetime2(7)), DATEPART(TZOFFSET, SYSDATETIMEOFFSET()))",
					local_expr);
}

bool
cdc_col_commit_time(TdsSession *session, int col, TimestampTz *result)
{
	static TdsDatumTarget target;
	static bool ready = false;
	bool		isnull;
	Datum		value;

	if (!ready)
	{
		/*
		 * Filled by hand, not by tds_datum_target_init: the max-LSN poll runs
		 * outside a transaction, where a catalog lookup is not allowed;
		 * timestamptz's input function is built in and its I/O parameter is
		 * the type itself.  Kept for the life of the process.
		 */
		target.typid = TIMESTAMPTZOID;
		target.typmod = -1;
		target.ioparam = TIMESTAMPTZOID;
		fmgr_info_cxt(F_TIMESTAMPTZ_IN, &target.input, TopMemoryContext);
		ready = true;
	}
	value = tds_col_datum(session, col, &target, &isnull);
	if (isnull)
		return false;
	*result = DatumGetTimestampTz(value);
	return true;
}
