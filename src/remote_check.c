/*-------------------------------------------------------------------------
 *
 * remote_check.c
 *		mssql_cdc.check_server(server): can we capture from this source?
 *
 * Connects as the caller's user mapping and reports one row per
 * prerequisite, so a user can fix a setup before adding tables.  A failed
 * login is an ERROR (the message, detail and hint say what to fix); once
 * connected, every SQL Server error of a check becomes that check's row
 * with ok = false, while a timeout or a lost connection is still an ERROR
 * (nothing after it could be trusted).
 *
 * IDENTIFICATION
 *		src/remote_check.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_foreign_server.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

#include "api_common.h"
#include "compat.h"
#include "lsn.h"
#include "options.h"
#include "remote_check_access.h"
#include "tds_session.h"

PG_FUNCTION_INFO_V1(mssql_cdc_check_server);

typedef struct CheckOutput
{
	Tuplestorestate *store;
	TupleDesc	desc;
} CheckOutput;

static void
emit(CheckOutput *out, const char *name, bool ok, const char *detail)
{
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	values[0] = CStringGetTextDatum(name);
	values[1] = BoolGetDatum(ok);
	if (detail != NULL)
		values[2] = CStringGetTextDatum(detail);
	else
		nulls[2] = true;
	tuplestore_putvalues(out->store, out->desc, values, nulls);
}

/* "Msg 208, Level 16, State 1: text" for a check's row */
static char *
remote_error_text(TdsSession *session)
{
	const TdsRemoteError *err = tds_session_last_error(session);

	return psprintf("Msg %d, Level %d, State %d: %s",
					err->msgno, err->msgclass, err->msgstate, err->msgtext);
}

/*
 * Run a single-row query; the first row's columns come back as text in
 * cols[0..ncols-1] (NULL for SQL NULL).  Returns false with *error set if
 * SQL Server rejected it, true otherwise (*got_row says whether a row came).
 */
static bool
query_first_row(TdsSession *session, const char *sql, char **cols, int ncols,
				bool *got_row, char **error)
{
	TdsStep		step;
	int			i;

	*got_row = false;
	for (i = 0; i < ncols; i++)
		cols[i] = NULL;
	if (!tds_exec_try(session, sql))
	{
		*error = remote_error_text(session);
		return false;
	}
	while ((step = tds_next_result_try(session)) == TDS_STEP_MORE)
	{
		while ((step = tds_next_row_try(session)) == TDS_STEP_MORE)
		{
			if (*got_row || tds_num_cols(session) < ncols)
				continue;
			for (i = 0; i < ncols; i++)
				cols[i] = tds_col_text(session, i + 1);
			*got_row = true;
		}
		if (step == TDS_STEP_REMOTE_ERROR)
			break;
	}
	if (step == TDS_STEP_REMOTE_ERROR)
	{
		*error = remote_error_text(session);
		return false;
	}
	return true;
}

static void
check_connect(CheckOutput *out, TdsSession *session)
{
	char	   *version;
	char	   *error;
	bool		got_row;

	if (!query_first_row(session, "SELECT @@VERSION", &version, 1, &got_row, &error))
	{
		emit(out, "connect", false, psprintf("logged in, but SELECT @@VERSION failed: %s", error));
		return;
	}
	if (got_row && version != NULL)
	{
		/* @@VERSION is several lines; the first names product and build */
		char	   *nl = strpbrk(version, "\r\n");

		if (nl)
			*nl = '\0';
	}
	emit(out, "connect", true,
		 psprintf("logged in; %s", got_row && version ? version : "server did not report @@VERSION"));
}

/*
 * How the connection is protected: ok only for TLS with a validated
 * certificate, so a connection that anyone in between can read or
 * impersonate is never reported as all well (doc/connecting.md).
 */
static void
check_encryption(CheckOutput *out, TdsSession *session)
{
	TdsSessionSecurity sec = tds_session_security(session);

	emit(out, "encryption", sec.encrypted && sec.certificate_validated,
		 tds_session_security_text(session));
}

static void
check_database(CheckOutput *out, TdsSession *session, const MssqlServerOptions *opts)
{
	char	   *dbname;
	char	   *error;
	bool		got_row;

	if (!query_first_row(session, "SELECT DB_NAME()", &dbname, 1, &got_row, &error))
	{
		emit(out, "database", false, error);
		return;
	}
	if (!got_row || dbname == NULL)
		emit(out, "database", false, "SQL Server did not report the current database");
	else if (opts->database != NULL && opts->database[0] != '\0' &&
			 pg_strcasecmp(dbname, opts->database) != 0)
		emit(out, "database", false,
			 psprintf("connected to database \"%s\", but the server's database option is \"%s\"",
					  dbname, opts->database));
	else
		emit(out, "database", true, psprintf("current database is \"%s\"", dbname));
}

static void
check_cdc_and_snapshot(CheckOutput *out, TdsSession *session)
{
	char	   *cols[2];
	char	   *error;
	bool		got_row;

	if (!query_first_row(session,
						 "SELECT is_cdc_enabled, snapshot_isolation_state FROM sys.databases "
						 "WHERE database_id = DB_ID()",
						 cols, 2, &got_row, &error))
	{
		emit(out, "cdc_enabled", false, error);
		emit(out, "snapshot_isolation", false, error);
		return;
	}
	if (!got_row)
	{
		emit(out, "cdc_enabled", false, "the current database is not visible in sys.databases");
		emit(out, "snapshot_isolation", false, "the current database is not visible in sys.databases");
		return;
	}

	if (cols[0] != NULL && strcmp(cols[0], "true") == 0)
		emit(out, "cdc_enabled", true, "change data capture is enabled for the database");
	else
		emit(out, "cdc_enabled", false,
			 "change data capture is not enabled for the database; a sysadmin runs EXEC sys.sp_cdc_enable_db in it");

	if (cols[1] != NULL && strcmp(cols[1], "1") == 0)
		emit(out, "snapshot_isolation", true, "ALLOW_SNAPSHOT_ISOLATION is ON");
	else
		emit(out, "snapshot_isolation", false,
			 psprintf("ALLOW_SNAPSHOT_ISOLATION is not ON (snapshot_isolation_state = %s); initial snapshots "
					  "need it: ALTER DATABASE ... SET ALLOW_SNAPSHOT_ISOLATION ON",
					  cols[1] ? cols[1] : "NULL"));
}

static void
check_max_lsn(CheckOutput *out, TdsSession *session)
{
	TdsStep		step;
	bool		got = false;
	char	   *lsn_text = NULL;

	if (!tds_exec_try(session, "SELECT sys.fn_cdc_get_max_lsn()"))
	{
		emit(out, "max_lsn", false, remote_error_text(session));
		return;
	}
	while ((step = tds_next_result_try(session)) == TDS_STEP_MORE)
	{
		while ((step = tds_next_row_try(session)) == TDS_STEP_MORE)
		{
			int			len;
			const uint8 *data;

			if (got || tds_num_cols(session) < 1)
				continue;
			got = true;
			data = tds_col_data(session, 1, &len);
			if (data != NULL && len == MSSQL_LSN_BYTES)
				lsn_text = tds_format_lsn_literal(data);
			else if (data != NULL)
				lsn_text = psprintf("unexpected %d-byte value", len);
		}
		if (step == TDS_STEP_REMOTE_ERROR)
			break;
	}
	if (step == TDS_STEP_REMOTE_ERROR)
		emit(out, "max_lsn", false, remote_error_text(session));
	else if (lsn_text == NULL)
		emit(out, "max_lsn", false,
			 "sys.fn_cdc_get_max_lsn() is NULL: the capture job has not recorded any transaction yet "
			 "(is SQL Server Agent running the cdc capture job?)");
	else
		emit(out, "max_lsn", strncmp(lsn_text, "0x", 2) == 0, lsn_text);
}

static void
check_capture_instances(CheckOutput *out, TdsSession *session)
{
	TdsStep		step;
	int64		count = 0;

	if (!tds_exec_try(session, "EXEC sys.sp_cdc_help_change_data_capture"))
	{
		emit(out, "capture_instances", false, remote_error_text(session));
		return;
	}
	while ((step = tds_next_result_try(session)) == TDS_STEP_MORE)
	{
		bool		rowset = tds_num_cols(session) > 0;

		while ((step = tds_next_row_try(session)) == TDS_STEP_MORE)
			if (rowset)
				count++;
		if (step == TDS_STEP_REMOTE_ERROR)
			break;
	}
	if (step == TDS_STEP_REMOTE_ERROR)
		emit(out, "capture_instances", false, remote_error_text(session));
	else if (count == 0)
		emit(out, "capture_instances", false,
			 "no capture instances visible: no table is enabled for CDC, or the login lacks SELECT on the "
			 "captured columns or membership in the gating role");
	else
		emit(out, "capture_instances", true,
			 psprintf(INT64_FORMAT " capture instance%s visible", count, count == 1 ? "" : "s"));
}

/*
 * The parallel copy's sessions: besides the worker's own, one per table
 * copying at once (snapshot_connections).  Opens them all at once and
 * closes them; a login SQL Server refuses (17809 and the like) is this
 * check's row, since the worker then copies fewer tables at once.
 */
static void
check_snapshot_sessions(CheckOutput *out, const MssqlServerOptions *opts)
{
	TdsSession *volatile sessions[MSSQL_CDC_MAX_SNAPSHOT_CONNECTIONS];
	TdsRemoteError err;
	int			want = opts->snapshot_connections;
	volatile int opened = 0;

	memset(&err, 0, sizeof(err));
	PG_TRY();
	{
		while (opened < want)
		{
			TdsSession *s = tds_session_try_open(opts, &err);

			if (s == NULL)
				break;
			sessions[opened++] = s;
		}
	}
	PG_FINALLY();
	{
		for (int i = 0; i < opened; i++)
			tds_session_close(sessions[i]);
	}
	PG_END_TRY();

	if (opened == want)
		emit(out, "snapshot_sessions", true,
			 psprintf("%d more session%s logged in next to this one (snapshot_connections %d: "
					  "the worker's session and one per table copying at once)",
					  want, want == 1 ? "" : "s", want));
	else if (opened == 0)
		emit(out, "snapshot_sessions", false,
			 psprintf("no second session logged in (snapshot_connections %d): %s; no initial copy can "
					  "start while SQL Server admits only the worker's own session",
					  want, tds_error_detail_text(&err)));
	else
		emit(out, "snapshot_sessions", false,
			 psprintf("only %d of %d more sessions logged in (snapshot_connections %d): %s; the worker "
					  "copies %d table%s at once and the others wait, or lower snapshot_connections to %d",
					  opened, want, want, tds_error_detail_text(&err), opened,
					  opened == 1 ? "" : "s", opened));
}

Datum
mssql_cdc_check_server(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *server_name;
	ForeignServer *server;
	MssqlServerOptions *opts;
	TdsSession *volatile session;
	CheckOutput out;
	ListCell   *lc;

	/* not STRICT: a NULL server is an error, as in every API function */
	api_require_argument(fcinfo, 0, "server");
	server_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	server = mssql_cdc_get_server_by_name(server_name);

	/* the same rule as using the server through the API */
	mssql_cdc_check_server_access(GetUserId(), server);

	opts = mssql_cdc_get_server_options(server->serverid, GetUserId());

	compat_init_materialized_srf(fcinfo);
	out.store = rsinfo->setResult;
	out.desc = rsinfo->setDesc;

	session = tds_session_open(opts);
	PG_TRY();
	{
		check_connect(&out, session);
		check_encryption(&out, session);
		check_database(&out, session, opts);
		check_cdc_and_snapshot(&out, session);
		check_max_lsn(&out, session);
		check_capture_instances(&out, session);
		check_snapshot_sessions(&out, opts);
		/* every object the worker reads, and the GRANT each one needs */
		foreach(lc, check_server_access(session, server))
		{
			CheckRow   *row = lfirst(lc);

			emit(&out, row->name, row->ok, row->detail);
		}
	}
	PG_FINALLY();
	{
		/* never leave a DBPROCESS behind, error or not */
		tds_session_close(session);
	}
	PG_END_TRY();

	return (Datum) 0;
}
