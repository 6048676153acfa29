/*-------------------------------------------------------------------------
 *
 * tds_session.c
 *		One conversation with SQL Server through FreeTDS db-lib.
 *
 * See tds_session.h for the contract.  The central idea: db-lib reports
 * trouble through process-wide callbacks that run deep inside the library,
 * where a longjmp (ereport) would leave db-lib's state torn.  So the
 * callbacks only copy what they are told into the session the DBPROCESS
 * belongs to and return INT_CANCEL; every public function below checks
 * that record after the db-lib call has returned and only then raises.
 *
 * Timeouts and interrupts.  db-lib polls its socket in one-second steps
 * whenever an interrupt handler is installed (libtds tds_select), and a
 * signal interrupts the poll at once.  At each step our check function
 * looks at Postgres' pending interrupts and the optional shutdown flag;
 * when one is set, the handle function returns INT_CANCEL, db-lib reports
 * SYBETIME to the error handler, which returns INT_CANCEL again and libtds
 * closes the socket.  When query_timeout expires without an interrupt the
 * same SYBETIME path runs.  We deliberately close instead of sending an
 * attention (INT_TIMEOUT): a server that does not answer a query within
 * the timeout may not acknowledge a cancel either, and waiting for the
 * acknowledgement would defeat both the timeout and a fast SIGTERM.  The
 * price is a reconnect, which the worker does at its next batch anyway.
 *
 * During dbopen no interrupt handler can be installed yet (db-lib creates
 * the DBPROCESS inside dbopen), so the login is bounded by login_timeout
 * only.
 *
 * Broken or hostile servers.  db-lib validates the TDS stream itself and
 * reports what it rejects (bad token, unknown type, unconvertible text)
 * or just fails the call; either way the session records "malformed", is
 * closed and raises PROTOCOL_VIOLATION.  Everything the server says that
 * reaches a message (SQL Server errors, db-lib's quotes of them) is
 * sanitized in the callbacks: no control characters, valid UTF-8, cut on
 * a character boundary.  Well-formed results of the wrong shape are for
 * the callers to reject (tds_expect_num_cols and friends).
 *
 * IDENTIFICATION
 *		src/tds_session.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>
#include <sys/stat.h>

#define MSDBLIB 1				/* Microsoft db-lib semantics (see dbopen) */
#include <sybfront.h>
#include <sybdb.h>

#include "lib/ilist.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "utils/memutils.h"

#include "tds_convert.h"
#include "tds_session.h"

struct TdsSession
{
	DBPROCESS  *dbproc;			/* NULL once closed */
	char	   *server_name;	/* the foreign server, for messages */
	bool		dead;			/* connection unusable; reopen */
	bool		interrupted;	/* our interrupt handler stopped a wait */
	bool		results_pending;	/* batch sent, results not all read */
	TdsRemoteError err;			/* filled by the db-lib callbacks */
	dlist_node	node;			/* in open_sessions */
};

static bool tds_initialized = false;
static dlist_head open_sessions = DLIST_STATIC_INIT(open_sessions);

/*
 * Where the callbacks record errors while dbopen runs: the DBPROCESS has
 * no user data yet (and for some failures there is no DBPROCESS at all).
 */
static TdsSession *opening_session = NULL;

/* Errors raised outside any session (dbinit, login record setup) */
static TdsRemoteError orphan_error;

static volatile sig_atomic_t *shutdown_flag = NULL;

/* ---- db-lib callbacks: record, never raise ------------------------------ */

static TdsSession *
session_of(DBPROCESS *dbproc)
{
	TdsSession *session = NULL;

	if (dbproc != NULL)
		session = (TdsSession *) dbgetuserdata(dbproc);
	if (session == NULL)
		session = opening_session;
	return session;
}

/*
 * Neither refused, nor timed out, nor a SQL Server message, with encryption
 * 'require': that is how db-lib reports a server that does not offer TLS or
 * a TLS handshake that failed.
 */
bool
tds_error_is_tls_failure(const TdsRemoteError *err)
{
	return err->kind == TDS_ERROR_CONNECT && err->msgno == 0 &&
		err->encryption_required && err->dberr == SYBEFCON;
}

/*
 * db-lib errors that mean the server's bytes were not valid TDS (or not
 * convertible data): a broken or hostile server, or a port that is not SQL
 * Server.  The connection cannot be trusted after any of them.
 */
static bool
dberr_is_malformed(int dberr)
{
	switch (dberr)
	{
		case SYBEBTOK:			/* bad token: data stream out of sync */
		case SYBESYNC:			/* read while out of sync */
		case SYBEIICL:			/* illegal integer column length */
		case SYBEUVDT:			/* unknown variable-length type */
		case SYBEUFDT:			/* unknown fixed-length type */
		case SYBEUDTY:			/* unknown data type */
		case SYBERPND:			/* rows without a result: stream out of order */
		case SYBEICONVI:		/* server text not convertible to UTF-8 */
		case SYBEICONVIU:
		case SYBEICONV2BIG:
		case SYBEICONVAVAIL:
		case SYBEMEM:			/* a length too large to allocate */
			return true;
		default:
			return false;
	}
}

/*
 * Copy text the server (or db-lib, quoting the server) gave us into one of
 * the fixed buffers of TdsRemoteError, fit for a Postgres message: cut at
 * a character boundary, invalid UTF-8 and control characters (a hostile
 * server can send terminal escapes or NULs) replaced by '?'.  Non-ASCII is
 * kept only when the database encoding is UTF-8, the encoding db-lib
 * delivers.  Runs inside db-lib callbacks, so it must not raise.
 */
static void
copy_server_text(char *dst, size_t size, const char *src)
{
	size_t		out = 0;
	bool		utf8 = GetDatabaseEncoding() == PG_UTF8;
	const unsigned char *p = (const unsigned char *) (src ? src : "");

	while (*p != '\0' && out + 1 < size)
	{
		if (*p < 0x80)
		{
			dst[out++] = (*p < 0x20 && *p != '\t' && *p != '\n') || *p == 0x7F ? '?' : (char) *p;
			p++;
			continue;
		}
		else
		{
			int			len = pg_utf_mblen(p);
			int			i;
			bool		complete = true;

			for (i = 1; i < len; i++)
				if (p[i] == '\0')
					complete = false;
			if (utf8 && complete && pg_utf8_islegal(p, len))
			{
				if (out + len >= size)
					break;		/* never half a character */
				memcpy(dst + out, p, len);
				out += len;
				p += len;
			}
			else
			{
				dst[out++] = '?';
				p += complete ? len : 1;
			}
		}
	}
	dst[out] = '\0';
}

/* Is this db-lib error worth replacing an already recorded one? */
static bool
dberr_is_generic(int dberr)
{
	/* "check messages from the server" and "DBPROCESS is dead" say nothing new */
	return dberr == 0 || dberr == SYBESMSG || dberr == SYBEDDNE;
}

static int
tds_error_handler(DBPROCESS *dbproc, int severity, int dberr, int oserr,
				  char *dberrstr, char *oserrstr)
{
	TdsSession *session = session_of(dbproc);
	TdsRemoteError *err = session ? &session->err : &orphan_error;

	if (dberr == SYBETIME && session != NULL)
	{
		/*
		 * Our interrupt handler or query_timeout ended the wait.  Returning
		 * INT_CANCEL makes libtds close the socket (see file header).
		 */
		err->kind = session->interrupted ? TDS_ERROR_INTERRUPTED : TDS_ERROR_TIMEOUT;
		session->dead = true;
	}

	/* the first sign of a malformed stream explains what follows it */
	if (dberr_is_malformed(dberr) && !err->malformed)
	{
		err->malformed = true;
		err->dberr = 0;
	}

	if (dberr_is_generic(err->dberr) || dberr == SYBETIME)
	{
		err->dberr = dberr;
		err->dberr_severity = severity;
		err->oserr = oserr;
		copy_server_text(err->dbtext, sizeof(err->dbtext), dberrstr);
		copy_server_text(err->ostext, sizeof(err->ostext), oserr != 0 ? oserrstr : "");
	}
	return INT_CANCEL;
}

static int
tds_message_handler(DBPROCESS *dbproc, DBINT msgno, int msgstate, int severity,
					char *msgtext, char *srvname, char *procname, int line)
{
	TdsSession *session = session_of(dbproc);
	TdsRemoteError *err = session ? &session->err : &orphan_error;

	/*
	 * Severity 10 and below are informational ("Changed database context",
	 * PRINT).  Keep the first real error: later ones are usually
	 * consequences of it (4060 "cannot open database" precedes 18456).
	 */
	if (severity <= 10 || err->msgno != 0)
		return 0;
	err->msgno = msgno;
	err->msgstate = msgstate;
	err->msgclass = severity;
	err->msgline = line;
	copy_server_text(err->msgtext, sizeof(err->msgtext), msgtext);
	copy_server_text(err->procname, sizeof(err->procname), procname);
	return 0;
}

/* True when Postgres (or the worker) wants this process to stop waiting. */
static int
tds_check_interrupt(void *dbproc)
{
	if (shutdown_flag != NULL && *shutdown_flag)
		return TRUE;
	/* only interrupts that CHECK_FOR_INTERRUPTS would act on right now */
	if (InterruptHoldoffCount != 0 || CritSectionCount != 0)
		return FALSE;
	if (ProcDiePending)
		return TRUE;
	if (QueryCancelPending && QueryCancelHoldoffCount == 0)
		return TRUE;
	return FALSE;
}

static int
tds_handle_interrupt(void *dbproc)
{
	TdsSession *session = session_of((DBPROCESS *) dbproc);

	if (session != NULL)
		session->interrupted = true;
	return INT_CANCEL;
}

/* ---- process setup and teardown ----------------------------------------- */

static void
close_dbproc(TdsSession *session)
{
	if (session->dbproc != NULL)
	{
		DBPROCESS  *dbproc = session->dbproc;

		session->dbproc = NULL;
		dbsetuserdata(dbproc, NULL);
		dbclose(dbproc);
	}
	session->dead = true;
	session->results_pending = false;
}

static void
tds_session_at_exit(int code, Datum arg)
{
	dlist_mutable_iter iter;

	dlist_foreach_modify(iter, &open_sessions)
	{
		TdsSession *session = dlist_container(TdsSession, node, iter.cur);

		close_dbproc(session);
		dlist_delete(&session->node);
	}
	dbexit();
}

void
tds_session_init(void)
{
	if (tds_initialized)
		return;
	if (dbinit() == FAIL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OUT_OF_MEMORY),
				 errmsg("could not initialize FreeTDS db-lib")));
	dberrhandle(tds_error_handler);
	dbmsghandle(tds_message_handler);
	on_proc_exit(tds_session_at_exit, (Datum) 0);
	tds_initialized = true;

	/*
	 * FreeTDS's protocol trace logs the arguments of dbsetlname, the
	 * password included, once the dump is open.  We cannot switch that off
	 * through db-lib's API, so at least say so.
	 */
	if (getenv("TDSDUMP") != NULL)
		ereport(WARNING,
				(errmsg("the environment variable TDSDUMP is set: FreeTDS writes a protocol trace that can include SQL Server passwords"),
				 errhint("Unset TDSDUMP in the environment of the PostgreSQL server except while debugging.")));
}

void
tds_session_set_shutdown_flag(volatile sig_atomic_t *flag)
{
	shutdown_flag = flag;
}

/* ---- raising captured errors -------------------------------------------- */

static int
remote_errcode(const TdsRemoteError *err)
{
	switch (err->kind)
	{
		case TDS_ERROR_CONNECT:
			return ERRCODE_FDW_UNABLE_TO_ESTABLISH_CONNECTION;
		case TDS_ERROR_TIMEOUT:
		case TDS_ERROR_CONNECTION_LOST:
			return ERRCODE_CONNECTION_FAILURE;
		case TDS_ERROR_INTERRUPTED:
			return ERRCODE_QUERY_CANCELED;
		case TDS_ERROR_PROTOCOL:
			return err->malformed ? ERRCODE_PROTOCOL_VIOLATION : ERRCODE_FDW_ERROR;
		case TDS_ERROR_NONE:
			return ERRCODE_FDW_ERROR;
		case TDS_ERROR_REMOTE:
			break;
	}
	switch (err->msgno)
	{
		case 1205:				/* chosen as deadlock victim */
			return ERRCODE_T_R_DEADLOCK_DETECTED;
		case 1222:				/* lock request time out */
			return ERRCODE_LOCK_NOT_AVAILABLE;
		case 208:				/* invalid object name */
			return ERRCODE_FDW_TABLE_NOT_FOUND;
		case 207:				/* invalid column name */
			return ERRCODE_FDW_COLUMN_NAME_NOT_FOUND;
		case 229:				/* permission denied on object */
		case 230:				/* permission denied on column */
		case 297:				/* user has no permission */
		case 300:				/* VIEW SERVER STATE etc. */
		case 916:				/* cannot access database */
			return ERRCODE_INSUFFICIENT_PRIVILEGE;
		default:
			return ERRCODE_FDW_ERROR;
	}
}

static void
append_detail(StringInfo detail, const TdsRemoteError *err)
{
	if (err->msgno != 0)
	{
		appendStringInfo(detail, "Msg %d, Level %d, State %d, ",
						 err->msgno, err->msgclass, err->msgstate);
		if (err->procname[0] != '\0')
			appendStringInfo(detail, "Procedure %s, ", err->procname);
		appendStringInfo(detail, "Line %d: %s", err->msgline, err->msgtext);
	}
	if (err->dberr != 0 && !(err->dberr == SYBESMSG && err->msgno != 0))
	{
		if (detail->len > 0)
			appendStringInfoChar(detail, '\n');
		appendStringInfo(detail, "db-lib error %d: %s", err->dberr, err->dbtext);
		/* a timeout's errno is whatever the last socket call left behind */
		if (err->oserr != 0 && err->dberr != SYBETIME)
			appendStringInfo(detail, " (OS error %d: %s)", err->oserr, err->ostext);
	}
}

static bool
is_login_msg(int msgno)
{
	/* login failed, password expired/must change, login disabled/locked */
	return msgno == 18456 || msgno == 18452 || msgno == 18470 ||
		msgno == 18486 || msgno == 18487 || msgno == 18488;
}

void
tds_report_error(const char *server_name, const TdsRemoteError *err, const char *what)
{
	StringInfoData detail;
	char	   *hint = NULL;
	char	   *message;

	initStringInfo(&detail);
	append_detail(&detail, err);

	if (is_login_msg(err->msgno))
		hint = psprintf("Check the username and password of the user mapping for server \"%s\" "
						"(ALTER USER MAPPING), and that the SQL Server login is enabled.",
						server_name);
	else if (err->msgno == 4060 || err->msgno == 4063 || err->msgno == 916)
		hint = psprintf("Check the database option of server \"%s\" and that the login has access to that database.",
						server_name);
	else if (err->dberr == SYBECONN)
		hint = psprintf("Check the host and port options of server \"%s\" and that SQL Server accepts TCP "
						"connections there (TCP/IP enabled, firewall, a fixed port for named instances).",
						server_name);
	else if (err->dberr == SYBEUHST || err->dberr == SYBEINTF)
		hint = psprintf("The host name of server \"%s\" could not be resolved; check its host option.",
						server_name);
	else if (err->malformed)
		hint = psprintf("The connection was closed and is reopened on the next attempt.  If this repeats, check "
						"that the host and port options of server \"%s\" lead to SQL Server itself (not to a "
						"proxy or another service).",
						server_name);
	else if (tds_error_is_tls_failure(err))
	{
		hint = psprintf("Server \"%s\" has the encryption option 'require', so the login fails when SQL Server "
						"does not offer TLS or the TLS handshake fails (certificate, \"ca file\" in freetds.conf, "
						"TLS versions).  Enable TLS on SQL Server, or set encryption to 'request' or 'off' "
						"(ALTER SERVER ... OPTIONS (SET encryption ...)) if an unencrypted connection is acceptable.",
						server_name);
	}
	else if (err->kind == TDS_ERROR_CONNECT && err->msgno == 0)
		hint = psprintf("The TCP connection was made but the login did not complete.  Check that the port "
						"belongs to SQL Server, the login_timeout option, and the encryption option of server "
						"\"%s\" ('require' if the server forces TLS, 'off' if it does not support it).",
						server_name);
	else if (err->kind == TDS_ERROR_TIMEOUT)
		hint = psprintf("The connection was closed and is reopened on the next attempt; raise the query_timeout "
						"option of server \"%s\" if the statement legitimately takes longer.",
						server_name);
	else if (err->kind == TDS_ERROR_CONNECTION_LOST)
		hint = pstrdup("The connection is reopened on the next attempt.");

	switch (err->kind)
	{
		case TDS_ERROR_CONNECT:
			if (err->malformed)
				message = psprintf("could not connect to SQL Server for server \"%s\": the server sent a malformed login response",
								   server_name);
			else
				message = psprintf("could not connect to SQL Server for server \"%s\"", server_name);
			break;
		case TDS_ERROR_TIMEOUT:
			message = psprintf("timed out waiting for SQL Server (server \"%s\") while %s",
							   server_name, what);
			break;
		case TDS_ERROR_CONNECTION_LOST:
			message = psprintf("lost the connection to SQL Server (server \"%s\") while %s",
							   server_name, what);
			break;
		case TDS_ERROR_INTERRUPTED:
			message = psprintf("canceled the request to SQL Server (server \"%s\") while %s",
							   server_name, what);
			break;
		case TDS_ERROR_REMOTE:
			message = psprintf("SQL Server error on server \"%s\" while %s: %s",
							   server_name, what, err->msgtext);
			break;
		default:
			if (err->malformed)
				message = psprintf("SQL Server (server \"%s\") sent a malformed response while %s",
								   server_name, what);
			else
				message = psprintf("FreeTDS failed on server \"%s\" while %s", server_name, what);
			break;
	}

	ereport(ERROR,
			(errcode(remote_errcode(err)),
			 errmsg_internal("%s", message),
			 detail.len > 0 ? errdetail_internal("%s", detail.data) : 0,
			 hint ? errhint("%s", hint) : 0));
	pg_unreachable();
}

/*
 * After a db-lib call: decide whether it failed, leave the session usable
 * (dbcancel) or dead, and raise unless the caller accepts remote errors.
 * Returns true if the call succeeded, false for a tolerated remote error.
 */
static bool
after_call(TdsSession *session, bool failed, const char *what, bool tolerate_remote)
{
	TdsRemoteError *err = &session->err;

	if (session->interrupted)
	{
		volatile sig_atomic_t *flag = shutdown_flag;

		close_dbproc(session);
		err->kind = TDS_ERROR_INTERRUPTED;
		/* Postgres' own message and SQLSTATE (terminate, cancel, timeout) */
		CHECK_FOR_INTERRUPTS();
		ereport(ERROR,
				(errcode(flag != NULL && *flag ? ERRCODE_ADMIN_SHUTDOWN : ERRCODE_QUERY_CANCELED),
				 errmsg("canceled the request to SQL Server (server \"%s\") while %s",
						session->server_name, what)));
	}

	if (session->dbproc != NULL && DBDEAD(session->dbproc))
		session->dead = true;

	if (!failed && err->msgno == 0 && err->dberr == 0 && !session->dead)
		return true;

	/*
	 * A read that failed without any message: db-lib refused the server's
	 * bytes silently (an unknown type, a packet length of 0, a PLP length
	 * it cannot allocate).  dbcmd alone fails with nothing pending.
	 */
	if (failed && err->msgno == 0 && err->dberr == 0 && session->results_pending)
	{
		err->malformed = true;
		strlcpy(err->dbtext, "db-lib rejected the reply without an error message", sizeof(err->dbtext));
	}

	/*
	 * The server's bytes were not valid TDS: whatever db-lib made of the
	 * rest, the stream cannot be trusted.  Close it and say so.
	 */
	if (err->malformed)
	{
		err->kind = TDS_ERROR_PROTOCOL;
		close_dbproc(session);
		tds_report_error(session->server_name, err, what);
	}

	if (session->dead)
	{
		if (err->kind != TDS_ERROR_TIMEOUT)
			err->kind = TDS_ERROR_CONNECTION_LOST;
		close_dbproc(session);
		tds_report_error(session->server_name, err, what);
	}

	if (err->msgno != 0)
		err->kind = TDS_ERROR_REMOTE;
	else
		err->kind = TDS_ERROR_PROTOCOL;

	if (err->kind == TDS_ERROR_PROTOCOL && err->dberr == 0)
	{
		/* FAIL without any explanation: we cannot know the state; close */
		strlcpy(err->dbtext, "db-lib call failed without an error message", sizeof(err->dbtext));
		close_dbproc(session);
		tds_report_error(session->server_name, err, what);
	}

	/* The connection is alive: flush the rest of the batch so it is usable */
	if (session->results_pending)
	{
		TdsRemoteError saved = *err;
		RETCODE		rc = dbcancel(session->dbproc);

		session->results_pending = false;
		if (session->interrupted || rc == FAIL || DBDEAD(session->dbproc))
		{
			/* the cancel itself failed: report the original error, drop the connection */
			close_dbproc(session);
			*err = saved;
			CHECK_FOR_INTERRUPTS();
			tds_report_error(session->server_name, err, what);
		}
		*err = saved;
	}

	if (tolerate_remote && err->kind == TDS_ERROR_REMOTE)
		return false;
	tds_report_error(session->server_name, err, what);
	return false;				/* keep compiler quiet */
}

static void
clear_error(TdsSession *session)
{
	memset(&session->err, 0, sizeof(session->err));
	session->interrupted = false;
}

static void
check_usable(TdsSession *session)
{
	if (session == NULL || session->dead || session->dbproc == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_DOES_NOT_EXIST),
				 errmsg("the connection to SQL Server (server \"%s\") is closed",
						session ? session->server_name : "?"),
				 errhint("Reopen the session.")));
}

/* ---- opening and closing ------------------------------------------------ */

static BYTE
tds_version_code(const char *tds_version)
{
	if (tds_version == NULL || strcmp(tds_version, "7.4") == 0)
		return DBVERSION_74;
	if (strcmp(tds_version, "7.3") == 0)
		return DBVERSION_73;
	if (strcmp(tds_version, "7.2") == 0)
		return DBVERSION_72;
	if (strcmp(tds_version, "7.1") == 0)
		return DBVERSION_71;
	ereport(ERROR,
			(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
			 errmsg("unsupported tds_version \"%s\"", tds_version),
			 errhint("Valid values are 7.1, 7.2, 7.3 and 7.4.")));
	return DBVERSION_74;		/* keep compiler quiet */
}

static void
set_login_name(LOGINREC *login, const char *value, int which, const char *option)
{
	if (dbsetlname(login, value ? value : "", which) == FAIL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("value of option \"%s\" is not accepted by FreeTDS", option),
				 errhint("FreeTDS limits login strings to 128 bytes.")));
}

/*
 * Session settings every conversation relies on.  SQL Server cuts LOB
 * values longer than the session's TEXTSIZE without any error, and db-lib
 * sends no SET TEXTSIZE of its own (the ODBC and OLE DB drivers ask for the
 * maximum at login; so do we).  False, with the error in session->err, if
 * the server refused.
 */
static bool
configure_session(TdsSession *session)
{
	TdsStep		step;

	if (!tds_exec_try(session, "SET TEXTSIZE 2147483647"))
		return false;
	while ((step = tds_next_result_try(session)) == TDS_STEP_MORE)
		;
	return step == TDS_STEP_DONE;
}

/*
 * FreeTDS 1.3 db-lib cannot set the encryption level on a LOGINREC
 * (dbsetlbool(DBSETENCRYPT) is unimplemented); it only comes from
 * freetds.conf.  For 'off' and 'require' we therefore write a private
 * configuration file: a copy of the file FreeTDS would read anyway (so the
 * administrator's [global] settings such as "ca file" still apply) plus
 * one section for this server, and point FREETDSCONF at it for the
 * duration of dbopen.  The section is named "host:port", the name dbopen
 * is given, so db-lib's messages still show where we connected (FreeTDS
 * looks up a section by that name before it parses host and port out of
 * it).  'request' is FreeTDS's own default and needs no file.  The file
 * lives under base/pgsql_tmp, whose temporary files the postmaster removes
 * at startup, and is deleted right after dbopen.  It holds no password:
 * credentials travel in the LOGINREC only.
 */
#define TDS_CONF_SECTION	"mssql_cdc_session"	/* for IPv6 hosts */

static char *
base_freetds_conf(void)
{
	const char *env = getenv("FREETDSCONF");
	const char *freetds = getenv("FREETDS");
	const char *home = getenv("HOME");
	char	   *candidates[4];
	int			n = 0;
	int			i;

	if (env != NULL && env[0] != '\0')
		candidates[n++] = pstrdup(env);
	if (freetds != NULL && freetds[0] != '\0')
		candidates[n++] = psprintf("%s/etc/freetds.conf", freetds);
	if (home != NULL && home[0] != '\0')
		candidates[n++] = psprintf("%s/.freetds.conf", home);
	candidates[n++] = pstrdup("/etc/freetds/freetds.conf");

	for (i = 0; i < n; i++)
		if (access(candidates[i], R_OK) == 0)
			return candidates[i];
	return NULL;
}

static char *
write_encryption_conf(const MssqlServerOptions *opts, const char *section)
{
	char	   *base = base_freetds_conf();
	char	   *path;
	FILE	   *out;
	bool		ok = true;

	MakePGDirectory("base/" PG_TEMP_FILES_DIR);
	path = psprintf("%s/base/%s/%s_mssql_cdc_freetds.%d.conf",
					DataDir, PG_TEMP_FILES_DIR, PG_TEMP_FILE_PREFIX, (int) MyProcPid);
	out = AllocateFile(path, PG_BINARY_W);
	if (out == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create FreeTDS configuration file \"%s\": %m", path)));
	if (base != NULL)
	{
		FILE	   *in = AllocateFile(base, PG_BINARY_R);
		char		buf[8192];
		size_t		nread;

		if (in != NULL)
		{
			while ((nread = fread(buf, 1, sizeof(buf), in)) > 0)
				if (fwrite(buf, 1, nread, out) != nread)
					ok = false;
			FreeFile(in);
		}
	}
	if (fprintf(out, "\n[%s]\n\thost = %s\n\tport = %d\n\ttds version = %s\n\tencryption = %s\n",
				section, opts->host, opts->port,
				opts->tds_version ? opts->tds_version : "7.4",
				opts->encryption == MSSQL_ENCRYPTION_OFF ? "off" : "require") < 0)
		ok = false;
	if (FreeFile(out) != 0 || !ok)
	{
		unlink(path);
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write FreeTDS configuration file \"%s\": %m", path)));
	}
	return path;
}

static bool
valid_conf_value(const char *value)
{
	/* a newline, '#' or ';' would let a value inject configuration */
	return value != NULL && strpbrk(value, "\r\n#;[]") == NULL;
}

TdsSession *
tds_session_try_open(const MssqlServerOptions *opts, TdsRemoteError *err_out)
{
	TdsSession *volatile session;
	LOGINREC   *volatile login = NULL;
	char	   *volatile conf_path = NULL;
	char	   *volatile saved_conf = NULL;
	DBPROCESS  *dbproc = NULL;
	char	   *target;
	volatile bool configured = false;

	tds_session_init();

	session = MemoryContextAllocZero(TopMemoryContext, sizeof(TdsSession));
	session->server_name = MemoryContextStrdup(TopMemoryContext,
											   opts->server_name ? opts->server_name : "?");
	session->dead = true;

	PG_TRY();
	{
		login = dblogin();
		if (login == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_OUT_OF_MEMORY),
					 errmsg("out of memory in FreeTDS dblogin")));
		set_login_name(login, opts->username, DBSETUSER, "username");
		set_login_name(login, opts->password, DBSETPWD, "password");
		set_login_name(login, opts->application_name, DBSETAPP, "application_name");
		set_login_name(login, "UTF-8", DBSETCHARSET, "client charset");
		if (opts->database != NULL && opts->database[0] != '\0')
			set_login_name(login, opts->database, DBSETDBNAME, "database");
		if (opts->packet_size > 0 && DBSETLPACKET(login, opts->packet_size) == FAIL)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("invalid packet_size %d", opts->packet_size)));
		if (dbsetlversion(login, tds_version_code(opts->tds_version)) == FAIL)
			elog(ERROR, "dbsetlversion failed");
		/* 0 would mean "wait forever" in db-lib; the options layer gives a default */
		dbsetlogintime(opts->login_timeout > 0 ? opts->login_timeout : MSSQL_CDC_DEFAULT_LOGIN_TIMEOUT);

		if (opts->encryption != MSSQL_ENCRYPTION_REQUEST)
		{
			const char *prev = getenv("FREETDSCONF");

			if (!valid_conf_value(opts->host) || !valid_conf_value(opts->tds_version))
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("host option of server \"%s\" contains characters not allowed in freetds.conf",
								session->server_name)));
			/* a section header cannot hold an IPv6 literal's brackets */
			target = strchr(opts->host, ':') != NULL ? pstrdup(TDS_CONF_SECTION) :
				psprintf("%s:%d", opts->host, opts->port);
			conf_path = write_encryption_conf(opts, target);
			if (prev != NULL)
				saved_conf = pstrdup(prev);
			setenv("FREETDSCONF", conf_path, 1);
		}
		else if (strchr(opts->host, ':') != NULL)
			target = psprintf("[%s]:%d", opts->host, opts->port);	/* IPv6 */
		else
			target = psprintf("%s:%d", opts->host, opts->port);

		opening_session = session;
		dbproc = dbopen(login, target);
		opening_session = NULL;
	}
	PG_CATCH();
	{
		opening_session = NULL;
		if (conf_path != NULL)
		{
			if (saved_conf != NULL)
				setenv("FREETDSCONF", saved_conf, 1);
			else
				unsetenv("FREETDSCONF");
			unlink(conf_path);
		}
		if (login != NULL)
			dbloginfree(login);
		pfree(session->server_name);
		pfree(session);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (conf_path != NULL)
	{
		if (saved_conf != NULL)
			setenv("FREETDSCONF", saved_conf, 1);
		else
			unsetenv("FREETDSCONF");
		unlink(conf_path);
	}
	/* libtds zeroes its copy of the password when the login is freed */
	dbloginfree(login);

	if (dbproc == NULL)
	{
		session->err.kind = TDS_ERROR_CONNECT;
		session->err.encryption_required = opts->encryption == MSSQL_ENCRYPTION_REQUIRE;
		if (session->err.dberr == 0 && session->err.msgno == 0)
			strlcpy(session->err.dbtext, "dbopen failed without an error message",
					sizeof(session->err.dbtext));
		if (err_out != NULL)
			*err_out = session->err;
		pfree(session->server_name);
		pfree(session);
		return NULL;
	}

	session->dbproc = dbproc;
	session->dead = false;
	dbsetuserdata(dbproc, (BYTE *) session);
	dbsetinterrupt(dbproc, tds_check_interrupt, tds_handle_interrupt);
	if (opts->query_timeout > 0)
	{
		char		seconds[16];

		/* per connection: dbsettime() would change every open DBPROCESS */
		snprintf(seconds, sizeof(seconds), "%d", opts->query_timeout);
		dbsetopt(dbproc, DBSETTIME, seconds, 0);
	}
	clear_error(session);
	dlist_push_tail(&open_sessions, &session->node);

	/* the login could not be interrupted; honour a signal that came meanwhile */
	PG_TRY();
	{
		CHECK_FOR_INTERRUPTS();
		configured = configure_session(session);
	}
	PG_CATCH();
	{
		tds_session_close(session);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (!configured)
	{
		if (err_out != NULL)
			*err_out = session->err;
		tds_session_close(session);
		return NULL;
	}

	return session;
}

TdsSession *
tds_session_open(const MssqlServerOptions *opts)
{
	TdsRemoteError err;
	TdsSession *session = tds_session_try_open(opts, &err);

	if (session == NULL)
		tds_report_error(opts->server_name ? opts->server_name : "?", &err, "logging in");
	return session;
}

void
tds_session_close(TdsSession *session)
{
	if (session == NULL)
		return;
	close_dbproc(session);
	dlist_delete(&session->node);
	pfree(session->server_name);
	pfree(session);
}

bool
tds_session_is_dead(TdsSession *session)
{
	if (session == NULL || session->dead || session->dbproc == NULL)
		return true;
	if (DBDEAD(session->dbproc))
		session->dead = true;
	return session->dead;
}

const TdsRemoteError *
tds_session_last_error(TdsSession *session)
{
	return &session->err;
}

const char *
tds_session_server_name(TdsSession *session)
{
	return session->server_name;
}

/* ---- batches ------------------------------------------------------------ */

static bool
exec_internal(TdsSession *session, const char *sql, bool tolerate_remote)
{
	RETCODE		rc;

	check_usable(session);
	if (session->results_pending)
		tds_cancel(session);
	clear_error(session);

	rc = dbcmd(session->dbproc, sql);
	if (rc == FAIL)
		return after_call(session, true, "sending a query", tolerate_remote);
	session->results_pending = true;
	rc = dbsqlexec(session->dbproc);
	return after_call(session, rc == FAIL, "running a query", tolerate_remote);
}

void
tds_exec(TdsSession *session, const char *sql)
{
	exec_internal(session, sql, false);
}

bool
tds_exec_try(TdsSession *session, const char *sql)
{
	return exec_internal(session, sql, true);
}

static TdsStep
next_result_internal(TdsSession *session, bool tolerate_remote)
{
	RETCODE		rc;

	check_usable(session);
	if (!session->results_pending)
		return TDS_STEP_DONE;
	rc = dbresults(session->dbproc);
	if (rc == NO_MORE_RESULTS)
	{
		session->results_pending = false;
		if (!after_call(session, false, "reading results", tolerate_remote))
			return TDS_STEP_REMOTE_ERROR;
		return TDS_STEP_DONE;
	}
	if (!after_call(session, rc == FAIL, "reading results", tolerate_remote))
		return TDS_STEP_REMOTE_ERROR;
	return TDS_STEP_MORE;
}

bool
tds_next_result(TdsSession *session)
{
	return next_result_internal(session, false) == TDS_STEP_MORE;
}

TdsStep
tds_next_result_try(TdsSession *session)
{
	return next_result_internal(session, true);
}

static TdsStep
next_row_internal(TdsSession *session, bool tolerate_remote)
{
	STATUS		st;

	/*
	 * db-lib only polls our interrupt handler while it waits for the
	 * socket; a server that streams rows without pause (or rows a caller
	 * merely drains) never makes it wait.  So look here too.
	 */
	CHECK_FOR_INTERRUPTS();
	check_usable(session);
	if (!session->results_pending || dbnumcols(session->dbproc) == 0)
		return TDS_STEP_DONE;
	st = dbnextrow(session->dbproc);
	if (st == NO_MORE_ROWS)
	{
		if (!after_call(session, false, "reading rows", tolerate_remote))
			return TDS_STEP_REMOTE_ERROR;
		return TDS_STEP_DONE;
	}
	if (!after_call(session, st != REG_ROW, "reading rows", tolerate_remote))
		return TDS_STEP_REMOTE_ERROR;
	return TDS_STEP_MORE;
}

bool
tds_next_row(TdsSession *session)
{
	return next_row_internal(session, false) == TDS_STEP_MORE;
}

TdsStep
tds_next_row_try(TdsSession *session)
{
	return next_row_internal(session, true);
}

void
tds_cancel(TdsSession *session)
{
	RETCODE		rc;

	if (session == NULL || session->dead || session->dbproc == NULL || !session->results_pending)
		return;
	clear_error(session);
	rc = dbcancel(session->dbproc);
	session->results_pending = false;
	after_call(session, rc == FAIL, "canceling a query", false);
}

void
tds_exec_simple(TdsSession *session, const char *sql)
{
	tds_exec(session, sql);
	while (tds_next_result(session))
		while (tds_next_row(session))
			;
}

/* ---- columns ------------------------------------------------------------ */

static void
check_column(TdsSession *session, int col)
{
	check_usable(session);
	if (col < 1 || col > dbnumcols(session->dbproc))
		elog(ERROR, "column %d out of range of the SQL Server result (%d columns)",
			 col, dbnumcols(session->dbproc));
}

int
tds_num_cols(TdsSession *session)
{
	check_usable(session);
	return dbnumcols(session->dbproc);
}

int
tds_col_type(TdsSession *session, int col)
{
	check_column(session, col);
	return dbcoltype(session->dbproc, col);
}

const char *
tds_col_name(TdsSession *session, int col)
{
	const char *name;

	check_column(session, col);
	name = dbcolname(session->dbproc, col);
	return name ? name : "";
}

void
tds_col_typeinfo(TdsSession *session, int col, int *precision, int *scale)
{
	DBTYPEINFO *ti;

	check_column(session, col);
	ti = dbcoltypeinfo(session->dbproc, col);
	*precision = ti ? ti->precision : 0;
	*scale = ti ? ti->scale : 0;
}

const uint8 *
tds_col_data(TdsSession *session, int col, int *len)
{
	BYTE	   *data;
	DBINT		datlen;

	check_column(session, col);
	data = dbdata(session->dbproc, col);
	datlen = dbdatlen(session->dbproc, col);
	if (data == NULL || datlen < 0)
	{
		/* NULL, but a zero-length non-NULL string also has datlen 0 */
		*len = 0;
		return NULL;
	}
	*len = datlen;
	return (const uint8 *) data;
}

char *
tds_col_text(TdsSession *session, int col)
{
	int			len;
	const uint8 *data = tds_col_data(session, col, &len);

	return tds_value_to_text(session->dbproc, tds_col_type(session, col), data, len);
}

Datum
tds_col_datum(TdsSession *session, int col, const struct TdsDatumTarget *target,
			  bool *isnull)
{
	int			len;
	const uint8 *data = tds_col_data(session, col, &len);

	return tds_value_to_datum(session->dbproc, tds_col_type(session, col), data, len,
							  target, isnull);
}

/* ---- checking the shape of a result ------------------------------------- */

/* Type codes libtds reports that sybdb.h does not name (as in tds_convert.c) */
#ifndef SYBUNIQUE
#define SYBUNIQUE		36
#endif
#define SESSION_XSYBVARBINARY	165
#define SESSION_XSYBBINARY		173
#define SESSION_XSYBVARCHAR		167
#define SESSION_XSYBCHAR		175
#define SESSION_XSYBNVARCHAR	231
#define SESSION_XSYBNCHAR		239

/*
 * A result that does not have the shape the query asked for cannot come
 * from SQL Server running our query: close the connection (whatever else
 * it sends is untrustworthy too) and raise PROTOCOL_VIOLATION.
 */
static void
unexpected_result(TdsSession *session, const char *what, const char *fmt,...)
	pg_attribute_printf(3, 4);

static void
unexpected_result(TdsSession *session, const char *what, const char *fmt,...)
{
	char		detail[256];
	va_list		args;

	va_start(args, fmt);
	vsnprintf(detail, sizeof(detail), fmt, args);
	va_end(args);
	close_dbproc(session);
	ereport(ERROR,
			(errcode(ERRCODE_PROTOCOL_VIOLATION),
			 errmsg("SQL Server (server \"%s\") sent an unexpected result while %s",
					session->server_name, what),
			 errdetail_internal("%s", detail),
			 errhint("The connection was closed and is reopened on the next attempt.  If this repeats, check "
					 "that the host and port options of server \"%s\" lead to SQL Server itself.",
					 session->server_name)));
}

void
tds_expect_num_cols(TdsSession *session, int ncols, const char *what)
{
	int			got = tds_num_cols(session);

	if (got != ncols)
		unexpected_result(session, what, "The result has %d columns; the query selects %d.", got, ncols);
}

void
tds_expect_col_kind(TdsSession *session, int col, TdsColKind kind, const char *colname,
					const char *what)
{
	int			type = tds_col_type(session, col);
	bool		ok;

	switch (kind)
	{
		case TDS_COL_BINARY:
			ok = type == SYBBINARY || type == SYBVARBINARY;
			break;
		case TDS_COL_INTEGER:
			ok = type == SYBINT1 || type == SYBINT2 || type == SYBINT4 || type == SYBINT8 ||
				type == SYBINTN;
			break;
		default:
			ok = false;
			break;
	}
	if (!ok)
		unexpected_result(session, what, "Column %d (%s) is of type %s, which the query cannot produce.",
						  col, colname, tds_type_name(type));
}

static bool
name_in(const char *name, const char *const *list)
{
	for (; *list != NULL; list++)
		if (strcmp(*list, name) == 0)
			return true;
	return false;
}

/* db-lib types a plainly selected column of SQL Server type `name` arrives as */
static bool
source_type_allows(const char *name, int type)
{
	static const char *const integers[] = {"tinyint", "smallint", "int", "bigint", NULL};
	static const char *const strings[] = {"char", "varchar", "nchar", "nvarchar", "text", "ntext",
	"sysname", NULL};
	static const char *const binaries[] = {"binary", "varbinary", "image", "rowversion", "timestamp", NULL};
	static const char *const datetimes[] = {"date", "time", "datetime2", "datetimeoffset", "datetime",
	"smalldatetime", NULL};

	if (name_in(name, integers))
		return type == SYBINT1 || type == SYBINT2 || type == SYBINT4 || type == SYBINT8 ||
			type == SYBINTN;
	if (name_in(name, strings))
		return type == SYBCHAR || type == SYBVARCHAR || type == SYBTEXT || type == SYBNTEXT ||
			type == SYBNVARCHAR || type == SESSION_XSYBCHAR || type == SESSION_XSYBVARCHAR ||
			type == SESSION_XSYBNCHAR || type == SESSION_XSYBNVARCHAR;
	if (name_in(name, binaries))
		return type == SYBBINARY || type == SYBVARBINARY || type == SYBIMAGE ||
			type == SESSION_XSYBBINARY || type == SESSION_XSYBVARBINARY;
	if (name_in(name, datetimes))
		return type == SYBMSDATE || type == SYBMSTIME || type == SYBMSDATETIME2 ||
			type == SYBMSDATETIMEOFFSET || type == SYBDATETIME || type == SYBDATETIME4 ||
			type == SYBDATETIMN;
	if (strcmp(name, "bit") == 0)
		return type == SYBBIT || type == SYBBITN;
	if (strcmp(name, "decimal") == 0 || strcmp(name, "numeric") == 0)
		return type == SYBDECIMAL || type == SYBNUMERIC;
	if (strcmp(name, "money") == 0 || strcmp(name, "smallmoney") == 0)
		return type == SYBMONEY || type == SYBMONEY4 || type == SYBMONEYN;
	if (strcmp(name, "float") == 0 || strcmp(name, "real") == 0)
		return type == SYBFLT8 || type == SYBREAL || type == SYBFLTN;
	if (strcmp(name, "uniqueidentifier") == 0)
		return type == SYBUNIQUE;
	return true;				/* xml, sql_variant, CLR types...: not checked */
}

void
tds_expect_col_source_type(TdsSession *session, int col, const char *sqlserver_type,
						   const char *colname, const char *what)
{
	int			type = tds_col_type(session, col);

	if (sqlserver_type != NULL && !source_type_allows(sqlserver_type, type))
		unexpected_result(session, what, "Column %d (%s) is of type %s; the source column is %s.",
						  col, colname, tds_type_name(type), sqlserver_type);
}

/* ---- helpers ------------------------------------------------------------ */

bool
tds_fetch_lsn(TdsSession *session, const char *sql, MssqlLsn *lsn)
{
	bool		found = false;

	tds_exec(session, sql);
	while (tds_next_result(session))
	{
		while (tds_next_row(session))
		{
			int			len;
			const uint8 *data;
			int			type;

			if (found || tds_num_cols(session) < 1)
				continue;		/* drain the rest */
			type = tds_col_type(session, 1);
			data = tds_col_data(session, 1, &len);
			if (data == NULL)
			{
				found = false;
				continue;
			}
			if ((type != SYBBINARY && type != SYBVARBINARY) || len != MSSQL_LSN_BYTES)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
						 errmsg("SQL Server (server \"%s\") returned a %s value of %d bytes where a binary(10) LSN was expected",
								session->server_name, tds_type_name(type), len)));
			memcpy(lsn->bytes, data, MSSQL_LSN_BYTES);
			found = true;
		}
	}
	return found;
}

/*
 * T-SQL quoting is one rule twice: open, the text with every closing
 * character doubled, close.  Both work on UTF-8 bytes: ']' and '\'' never
 * occur inside a multibyte character.
 */
static char *
quote_doubling(const char *open, char close, const char *text)
{
	StringInfoData buf;
	const char *p;

	initStringInfo(&buf);
	appendStringInfoString(&buf, open);
	for (p = text; *p; p++)
	{
		if (*p == close)
			appendStringInfoChar(&buf, close);
		appendStringInfoChar(&buf, *p);
	}
	appendStringInfoChar(&buf, close);
	return buf.data;
}

char *
tds_quote_ident(const char *ident)
{
	return quote_doubling("[", ']', ident);
}

char *
tds_quote_nstring(const char *str)
{
	return quote_doubling("N'", '\'', str);
}

char *
tds_format_lsn_literal(const uint8 *bytes)
{
	MssqlLsn	lsn;
	char	   *buf = palloc(MSSQL_LSN_TEXT_SIZE);

	memcpy(lsn.bytes, bytes, MSSQL_LSN_BYTES);
	mssql_lsn_format(&lsn, buf);
	return buf;
}
