/*-------------------------------------------------------------------------
 *
 * remote_check_access.c
 *		check_server()'s permission rows (see remote_check_access.h).
 *
 * Each object is tried the way the worker uses it, with TOP (0) so that no
 * row is read: SQL Server checks permissions when it compiles a statement,
 * so a refused object answers Msg 229 (or 297/300 for a DMV) without any
 * data moving.  The GRANT statements name the login's database user
 * (USER_NAME()), which is what GRANT takes, not the login name.
 *
 * IDENTIFICATION
 *		src/remote_check_access.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/defrem.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"

#include "catalog.h"
#include "remote_check_access.h"
#include "source_name.h"

typedef enum ProbeResult
{
	PROBE_OK,
	PROBE_DENIED,				/* Msg 229/230/297/300: a GRANT fixes it */
	PROBE_MISSING,				/* Msg 208: no such object (for this login) */
	PROBE_ERROR					/* anything else SQL Server said */
} ProbeResult;

typedef struct Probe
{
	ProbeResult result;
	int			msgno;
	char	   *text;			/* "Msg 229: ..." for anything but OK */
} Probe;

/* What one captured table needs, as tried */
typedef struct TableAccess
{
	const char *schema;
	const char *table;
	const char *recorded_ci;	/* mssql_cdc.tables.capture_instance, or NULL */
	Probe		source;			/* SELECT on the source table */
	int			help_msgno;		/* 0, or 22981 / 22985 / another error */
	char	   *help_text;
	char	   *ci;				/* the capture instance checked, or NULL */
	char	   *role_name;		/* its gating role as listed, or NULL */
	bool		role_known;
	Probe		direct;			/* SELECT on cdc.[<ci>_CT] */
	Probe		function;		/* SELECT on cdc.fn_cdc_get_all_changes_<ci> */
} TableAccess;

static bool
is_denied(int msgno)
{
	return msgno == 229 || msgno == 230 || msgno == 297 || msgno == 300;
}

static Probe
probe_error(TdsSession *session)
{
	const TdsRemoteError *err = tds_session_last_error(session);
	Probe		p;

	p.msgno = err->msgno;
	p.text = psprintf("Msg %d: %s", err->msgno, err->msgtext);
	p.result = is_denied(err->msgno) ? PROBE_DENIED :
		err->msgno == 208 ? PROBE_MISSING : PROBE_ERROR;
	return p;
}

/* Run sql, ignore its rows; what SQL Server said about it */
static Probe
probe(TdsSession *session, const char *sql)
{
	Probe		ok = {PROBE_OK, 0, NULL};
	TdsStep		step;

	if (!tds_exec_try(session, sql))
		return probe_error(session);
	while ((step = tds_next_result_try(session)) == TDS_STEP_MORE)
	{
		while ((step = tds_next_row_try(session)) == TDS_STEP_MORE)
			;
		if (step == TDS_STEP_REMOTE_ERROR)
			return probe_error(session);
	}
	if (step == TDS_STEP_REMOTE_ERROR)
		return probe_error(session);
	return ok;
}

/* The first column of the first row, or NULL */
static char *
scalar_text(TdsSession *session, const char *sql)
{
	char	   *value = NULL;
	bool		seen = false;

	if (!tds_exec_try(session, sql))
		return NULL;
	while (tds_next_result_try(session) == TDS_STEP_MORE)
		while (tds_next_row_try(session) == TDS_STEP_MORE)
			if (!seen && tds_num_cols(session) >= 1)
			{
				value = tds_col_text(session, 1);
				seen = true;
			}
	return value;
}

static int
col_index(TdsSession *session, const char *name)
{
	int			c;

	for (c = 1; c <= tds_num_cols(session); c++)
		if (pg_strcasecmp(tds_col_name(session, c), name) == 0)
			return c;
	return 0;
}

/*
 * The table's capture instances as the named sys.sp_cdc_help_change_data_
 * capture lists them for this login (22981: not visible, 22985: not
 * enabled).  Picks the recorded instance, else the first one listed.
 */
static void
read_table_instances(TdsSession *session, TableAccess *ta)
{
	char	   *sql = psprintf("EXEC sys.sp_cdc_help_change_data_capture @source_schema = %s, @source_name = %s",
							   tds_quote_nstring(ta->schema), tds_quote_nstring(ta->table));
	TdsStep		step;

	if (!tds_exec_try(session, sql))
		goto failed;
	while ((step = tds_next_result_try(session)) == TDS_STEP_MORE)
	{
		int			ci_col = col_index(session, "capture_instance");
		int			role_col = col_index(session, "role_name");

		while ((step = tds_next_row_try(session)) == TDS_STEP_MORE)
		{
			char	   *ci;

			if (ci_col == 0 || (ci = tds_col_text(session, ci_col)) == NULL)
				continue;
			if (ta->ci == NULL ||
				(ta->recorded_ci != NULL && pg_strcasecmp(ci, ta->recorded_ci) == 0))
			{
				ta->ci = ci;
				ta->role_name = role_col ? tds_col_text(session, role_col) : NULL;
				ta->role_known = role_col != 0;
			}
		}
		if (step == TDS_STEP_REMOTE_ERROR)
			goto failed;
	}
	if (step == TDS_STEP_REMOTE_ERROR)
		goto failed;
	return;

failed:
	{
		const TdsRemoteError *err = tds_session_last_error(session);

		ta->help_msgno = err->msgno;
		ta->help_text = psprintf("Msg %d: %s", err->msgno, err->msgtext);
	}
}

static void
check_table(TdsSession *session, TableAccess *ta)
{
	char	   *object = psprintf("%s.%s", tds_quote_ident(ta->schema), tds_quote_ident(ta->table));
	char	   *ci;

	ta->source = probe(session, psprintf("SELECT TOP (0) * FROM %s", object));
	read_table_instances(session, ta);

	/*
	 * Not listed for this login: the recorded instance is still tried, the
	 * direct path does not need the gating role.
	 */
	ci = ta->ci ? ta->ci : (char *) ta->recorded_ci;
	if (ci == NULL)
		return;
	ta->ci = ci;
	if (!ta->role_known)
	{
		/* readable with SELECT on schema cdc, even when the instance is not */
		ta->role_name = scalar_text(session,
									psprintf("SELECT role_name FROM cdc.change_tables WHERE capture_instance = %s",
											 tds_quote_nstring(ci)));
		ta->role_known = tds_session_last_error(session)->msgno == 0;
	}
	ta->direct = probe(session,
					   psprintf("SELECT TOP (0) __$start_lsn FROM [cdc].%s",
								tds_quote_ident(psprintf("%s_CT", ci))));
	ta->function = probe(session,
						 psprintf("SELECT TOP (0) __$start_lsn FROM [cdc].%s(sys.fn_cdc_get_min_lsn(%s), sys.fn_cdc_get_max_lsn(), N'all')",
								  tds_quote_ident(psprintf("fn_cdc_get_all_changes_%s", ci)),
								  tds_quote_nstring(ci)));
	/* 313: the window is not valid yet, but the permission check passed */
	if (ta->function.result == PROBE_ERROR && ta->function.msgno == 313)
		ta->function.result = PROBE_OK;
}

static bool
table_found(const TableAccess *ta)
{
	return ta->ci != NULL && ta->help_msgno != 22981;
}

static bool
path_works(const TableAccess *ta, bool direct)
{
	return table_found(ta) &&
		(direct ? ta->direct.result : ta->function.result) == PROBE_OK;
}

/* data_query_mode of the server: 'direct' (the default) or 'function' */
static const char *
data_query_mode(ForeignServer *server, bool *is_default)
{
	ListCell   *lc;

	foreach(lc, server->options)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "data_query_mode") == 0)
		{
			*is_default = false;
			return defGetString(def);
		}
	}
	*is_default = true;
	return "direct";
}

static CheckRow *
make_row(const char *name, bool ok, char *detail)
{
	CheckRow   *row = palloc(sizeof(CheckRow));

	row->name = name;
	row->ok = ok;
	row->detail = detail;
	return row;
}

/* lsn_time_mapping / captured_columns / index_columns: SELECT in schema cdc */
static CheckRow *
check_cdc_table(TdsSession *session, const char *name, const char *column, const char *purpose,
				const char *user)
{
	Probe		p = probe(session, psprintf("SELECT TOP (0) %s FROM [cdc].%s", column, tds_quote_ident(name)));

	switch (p.result)
	{
		case PROBE_OK:
			return make_row(name, true, psprintf("cdc.%s is readable (%s)", name, purpose));
		case PROBE_DENIED:
			return make_row(name, false,
							psprintf("%s; the worker reads cdc.%s for %s: GRANT SELECT ON SCHEMA::[cdc] TO %s; (or GRANT SELECT ON [cdc].%s TO %s;)",
									 p.text, name, purpose, user, tds_quote_ident(name), user));
		case PROBE_MISSING:
			return make_row(name, false,
							psprintf("%s; cdc.%s exists once a sysadmin runs EXEC sys.sp_cdc_enable_db", p.text, name));
		case PROBE_ERROR:
			break;
	}
	return make_row(name, false, p.text);
}

static CheckRow *
check_scan_sessions(TdsSession *session, const char *user)
{
	Probe		p = probe(session, "SELECT TOP (0) session_id FROM sys.dm_cdc_log_scan_sessions");

	if (p.result == PROBE_OK)
		return make_row("scan_sessions", true,
						"sys.dm_cdc_log_scan_sessions is readable: the capture-stall check sees the capture job's log scans");
	if (p.result == PROBE_DENIED)
		return make_row("scan_sessions", false,
						psprintf("%s; optional, but without it a stopped capture job is noticed only once a captured table changes: GRANT VIEW DATABASE STATE TO %s;",
								 p.text, user));
	return make_row("scan_sessions", false, p.text);
}

/* The GRANT the function path of ta needs */
static char *
function_grant(const TableAccess *ta, const char *user)
{
	if (ta->role_known && ta->role_name != NULL)
		return psprintf("ALTER ROLE %s ADD MEMBER %s;", tds_quote_ident(ta->role_name), user);
	if (ta->role_known)
		return psprintf("GRANT SELECT ON [cdc].%s TO %s; (the capture instance has no gating role)",
						tds_quote_ident(psprintf("fn_cdc_get_all_changes_%s", ta->ci)), user);
	return psprintf("ALTER ROLE <gating role> ADD MEMBER %s; or, for an instance without a gating role, GRANT SELECT ON [cdc].%s TO %s; (a db_owner sees the role in sys.sp_cdc_help_change_data_capture, column role_name)",
					user, tds_quote_ident(psprintf("fn_cdc_get_all_changes_%s", ta->ci ? ta->ci : "<capture instance>")),
					user);
}

static CheckRow *
table_row(const TableAccess *ta, bool direct_mode, const char *user)
{
	StringInfoData d;
	char	   *object = psprintf("%s.%s", tds_quote_ident(ta->schema), tds_quote_ident(ta->table));
	bool		ok;

	initStringInfo(&d);
	if (ta->source.result == PROBE_OK)
		appendStringInfoString(&d, "source table readable");
	else if (ta->source.result == PROBE_DENIED || ta->source.result == PROBE_MISSING)
		appendStringInfo(&d, "source table not readable (dropped, or not visible to this login: %s): GRANT SELECT ON %s TO %s;",
						 ta->source.text, object, user);
	else
		appendStringInfo(&d, "source table: %s", ta->source.text);

	if (ta->help_msgno == 22985)
		appendStringInfo(&d, "; not enabled for change data capture (%s): a db_owner runs EXEC sys.sp_cdc_enable_table @source_schema = %s, @source_name = %s, @role_name = NULL;",
						 ta->help_text, tds_quote_nstring(ta->schema), tds_quote_nstring(ta->table));
	else if (ta->help_msgno == 22981)
		appendStringInfo(&d, "; sys.sp_cdc_help_change_data_capture: the table does not exist or is not visible to this login (%s)",
						 ta->help_text);
	else if (ta->help_msgno != 0)
		appendStringInfo(&d, "; sys.sp_cdc_help_change_data_capture failed: %s", ta->help_text);
	else if (ta->ci == NULL)
		appendStringInfo(&d, "; no capture instance visible to the login: %s", function_grant(ta, user));

	if (ta->ci != NULL)
	{
		const char *ct = psprintf("[cdc].%s", tds_quote_ident(psprintf("%s_CT", ta->ci)));

		appendStringInfo(&d, "; capture instance %s", ta->ci);
		if (ta->direct.result == PROBE_OK)
			appendStringInfo(&d, "; change table %s readable (data_query_mode 'direct')", ct);
		else
			appendStringInfo(&d, "; change table %s not readable (%s): for data_query_mode 'direct' GRANT SELECT ON SCHEMA::[cdc] TO %s; (or GRANT SELECT ON %s TO %s;)",
							 ct, ta->direct.text, user, ct, user);
		if (ta->function.result == PROBE_OK)
			appendStringInfo(&d, "; query function readable (data_query_mode 'function')");
		else
			appendStringInfo(&d, "; query function not readable (%s): for data_query_mode 'function' %s",
							 ta->function.text, function_grant(ta, user));
	}
	ok = ta->source.result == PROBE_OK && path_works(ta, direct_mode);
	return make_row(psprintf("table %s", mssql_display_name(ta->schema, ta->table)), ok, d.data);
}

static CheckRow *
read_path_row(TableAccess *tables, int ntables, const char *mode, bool mode_is_default)
{
	int			direct = 0;
	int			function = 0;
	bool		direct_mode = strcmp(mode, "function") != 0;
	int			i;
	int			chosen;

	if (ntables == 0)
		return make_row("read_path", false,
						"no capture instance to read: enable a table for change data capture (sys.sp_cdc_enable_table) that the login may see");
	for (i = 0; i < ntables; i++)
	{
		if (path_works(&tables[i], true))
			direct++;
		if (path_works(&tables[i], false))
			function++;
	}
	chosen = direct_mode ? direct : function;
	return make_row("read_path", chosen == ntables,
					psprintf("data_query_mode '%s'%s works for %d of %d table%s; 'direct' (cdc.[<capture instance>_CT]) works for %d, 'function' (cdc.fn_cdc_get_all_changes_<capture instance>) for %d%s",
							 mode, mode_is_default ? " (the default)" : "", chosen, ntables,
							 ntables == 1 ? "" : "s", direct, function,
							 chosen == ntables ? "" : "; the rows below say which GRANT each table needs"));
}

/* The tables to check: those captured from the server, else every visible instance */
static TableAccess *
tables_to_check(TdsSession *session, ForeignServer *server, int *ntables)
{
	List	   *captured = catalog_get_server_tables(server->servername);
	TableAccess *tables;
	ListCell   *lc;
	int			n = 0;
	TdsStep		step;

	if (captured != NIL)
	{
		tables = palloc0(sizeof(TableAccess) * list_length(captured));
		foreach(lc, captured)
		{
			MssqlCdcTable *t = lfirst(lc);

			tables[n].schema = t->source_schema;
			tables[n].table = t->source_table;
			tables[n].recorded_ci = t->capture_instance;
			n++;
		}
		*ntables = n;
		return tables;
	}

	/* nothing captured yet: what the login sees (one row per source table) */
	tables = NULL;
	if (tds_exec_try(session, "EXEC sys.sp_cdc_help_change_data_capture"))
	{
		int			cap = 8;

		tables = palloc0(sizeof(TableAccess) * cap);
		while ((step = tds_next_result_try(session)) == TDS_STEP_MORE)
		{
			int			s_col = col_index(session, "source_schema");
			int			t_col = col_index(session, "source_table");

			while ((step = tds_next_row_try(session)) == TDS_STEP_MORE)
			{
				char	   *schema = s_col ? tds_col_text(session, s_col) : NULL;
				char	   *table = t_col ? tds_col_text(session, t_col) : NULL;
				int			i;

				if (schema == NULL || table == NULL)
					continue;
				for (i = 0; i < n; i++)
					if (strcmp(tables[i].schema, schema) == 0 && strcmp(tables[i].table, table) == 0)
						break;
				if (i < n)
					continue;
				if (n == cap)
				{
					cap *= 2;
					tables = repalloc(tables, sizeof(TableAccess) * cap);
				}
				memset(&tables[n], 0, sizeof(TableAccess));
				tables[n].schema = schema;
				tables[n].table = table;
				n++;
			}
			if (step == TDS_STEP_REMOTE_ERROR)
				break;
		}
	}
	*ntables = n;
	return tables;
}

List *
check_server_access(TdsSession *session, ForeignServer *server)
{
	List	   *rows = NIL;
	char	   *user_name = scalar_text(session, "SELECT USER_NAME()");
	const char *user = tds_quote_ident(user_name ? user_name : "<user>");
	bool		mode_is_default;
	const char *mode = data_query_mode(server, &mode_is_default);
	TableAccess *tables;
	int			ntables;
	int			i;

	rows = lappend(rows, check_cdc_table(session, "lsn_time_mapping", "start_lsn",
										 "window ends on transaction boundaries and commit times", user));
	rows = lappend(rows, check_cdc_table(session, "captured_columns", "column_name",
										 "the columns a capture instance carries", user));
	rows = lappend(rows, check_cdc_table(session, "index_columns", "column_name",
										 "the key columns of a capture instance", user));
	rows = lappend(rows, check_scan_sessions(session, user));

	tables = tables_to_check(session, server, &ntables);
	for (i = 0; i < ntables; i++)
		check_table(session, &tables[i]);
	rows = lappend(rows, read_path_row(tables, ntables, mode, mode_is_default));
	for (i = 0; i < ntables; i++)
		rows = lappend(rows, table_row(&tables[i], strcmp(mode, "function") != 0, user));
	return rows;
}
