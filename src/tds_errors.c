/*-------------------------------------------------------------------------
 *
 * tds_errors.c
 *		Error capture of the TDS session layer: the db-lib callbacks, which
 *		only record what they are told into the session (a longjmp out of
 *		db-lib would leave it torn), and the code that turns such a record
 *		into an ereport with a SQLSTATE, a detail and a hint once the db-lib
 *		call has returned.  See tds_session.c for the timeout and interrupt
 *		design.
 *
 * IDENTIFICATION
 *		src/tds_errors.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>

#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"

#include "tds_session_internal.h"
#include "tds_tls.h"

/* ---- db-lib callbacks: record, never raise ------------------------------ */

static TdsSession *
session_of(DBPROCESS *dbproc)
{
	TdsSession *session = NULL;

	if (dbproc != NULL)
		session = (TdsSession *) dbgetuserdata(dbproc);
	if (session == NULL)
		session = tds_opening_session;
	return session;
}

/* A login that failed on TLS, as tds_tls.c found out (which way: tls_failure) */
bool
tds_error_is_tls_failure(const TdsRemoteError *err)
{
	return err->kind == TDS_ERROR_CONNECT && err->tls_failure != TDS_TLS_NONE;
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

int
tds_error_handler(DBPROCESS *dbproc, int severity, int dberr, int oserr,
				  char *dberrstr, char *oserrstr)
{
	TdsSession *session = session_of(dbproc);
	TdsRemoteError *err = session ? &session->err : &tds_orphan_error;

	if (dberr == SYBETIME && session != NULL)
	{
		/*
		 * Our interrupt handler or query_timeout ended the wait.  Returning
		 * INT_CANCEL makes libtds close the socket (see file header).
		 */
		err->kind = session->interrupted ? TDS_ERROR_INTERRUPTED : TDS_ERROR_TIMEOUT;
		session->dead = true;
	}

	/*
	 * A refused login ends in SYBEFCON, but db-lib may raise "unexpected
	 * EOF" (SYBESEOF) before it when the server closed first: the record
	 * keeps the first error, and this says the login itself failed.
	 */
	if (dberr == SYBEFCON)
		err->connect_failed = true;

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

int
tds_message_handler(DBPROCESS *dbproc, DBINT msgno, int msgstate, int severity,
					char *msgtext, char *srvname, char *procname, int line)
{
	TdsSession *session = session_of(dbproc);
	TdsRemoteError *err = session ? &session->err : &tds_orphan_error;

	/* the PRINT that ends every batch (tds_session.c, exec_internal) */
	if (session != NULL && msgno == 0 && severity <= 10 && msgtext != NULL &&
		strcmp(msgtext, TDS_BATCH_END_TEXT) == 0)
	{
		session->batch_end_seen = true;
		return 0;
	}

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
int
tds_check_interrupt(void *dbproc)
{
	if (tds_shutdown_flag != NULL && *tds_shutdown_flag)
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

int
tds_handle_interrupt(void *dbproc)
{
	TdsSession *session = session_of((DBPROCESS *) dbproc);

	if (session != NULL)
		session->interrupted = true;
	return INT_CANCEL;
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
	if (err->tls_failure != TDS_TLS_NONE && err->tls_detail[0] != '\0')
		appendStringInfoString(detail, err->tls_detail);
	if (err->msgno != 0)
	{
		appendStringInfo(detail, "Msg %d, Level %d, State %d, ",
						 err->msgno, err->msgclass, err->msgstate);
		if (err->procname[0] != '\0')
			appendStringInfo(detail, "Procedure %s, ", err->procname);
		appendStringInfo(detail, "Line %d: %s", err->msgline, err->msgtext);
	}
	if (err->dberr != 0 && !(err->dberr == SYBESMSG && err->msgno != 0) &&
		err->tls_failure != TDS_TLS_CA_FILE && err->tls_failure != TDS_TLS_CRL_FILE)
	{
		if (detail->len > 0)
			appendStringInfoChar(detail, '\n');
		appendStringInfo(detail, "db-lib error %d: %s", err->dberr, err->dbtext);
		/* a timeout's errno is whatever the last socket call left behind */
		if (err->oserr != 0 && err->dberr != SYBETIME)
			appendStringInfo(detail, " (OS error %d: %s)", err->oserr, err->ostext);
	}
	else if (err->dberr == 0 && err->dbtext[0] != '\0')
	{
		/* what this layer found out where db-lib said nothing */
		if (detail->len > 0)
			appendStringInfoChar(detail, '\n');
		appendStringInfoString(detail, err->dbtext);
		if (err->oserr != 0)
			appendStringInfo(detail, " (OS error %d: %s)", err->oserr, err->ostext);
	}
}

char *
tds_error_detail_text(const TdsRemoteError *err)
{
	StringInfoData detail;

	initStringInfo(&detail);
	append_detail(&detail, err);
	return detail.data;
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
	else if (err->msgno == 17809)
		hint = psprintf("SQL Server admits no more sessions (its 'user connections' option, a session limit of "
						"the service tier, or a logon trigger).  The worker of server \"%s\" needs one session, "
						"and one more per table copying at once (server option snapshot_connections).",
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
		hint = tds_tls_failure_hint(err->tls_failure, server_name);
	else if (err->kind == TDS_ERROR_CONNECT && err->msgno == 0)
		hint = psprintf("The TCP connection was made but the login did not complete.  Check that the port "
						"belongs to SQL Server and the login_timeout option of server \"%s\".",
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
			else if (tds_error_is_tls_failure(err))
				message = psprintf("could not connect to SQL Server for server \"%s\": %s",
								   server_name, tds_tls_failure_summary(err->tls_failure));
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

/* errno values of a socket the peer or the network closed */
static bool
errno_is_connection_loss(int e)
{
	return e == ECONNRESET || e == EPIPE || e == ECONNABORTED || e == ENOTCONN ||
		e == ESHUTDOWN || e == ETIMEDOUT || e == EHOSTUNREACH || e == ENETUNREACH ||
		e == ENETDOWN || e == ENETRESET;
}

/* Report the connection as lost, with what this layer found out. */
static void
connection_lost(TdsSession *session, const char *why, int oserr, const char *what)
{
	TdsRemoteError *err = &session->err;

	err->kind = TDS_ERROR_CONNECTION_LOST;
	if (err->dberr == 0)
	{
		strlcpy(err->dbtext, why, sizeof(err->dbtext));
		err->oserr = oserr;
		copy_server_text(err->ostext, sizeof(err->ostext), oserr != 0 ? strerror(oserr) : "");
	}
	tds_close_dbproc(session);
	tds_report_error(session->server_name, err, what);
}

void
tds_check_batch_end(TdsSession *session, const char *what)
{
	/* a batch an error ended early has said so */
	if (session->batch_end_seen || session->err.msgno != 0)
		return;
	connection_lost(session,
					"The response ended before the end of the batch, without an error message: what SQL "
					"Server sends a session that is killed while it runs a request.", 0, what);
}

/*
 * After a db-lib call: decide whether it failed, leave the session usable
 * (dbcancel) or dead, and raise unless the caller accepts remote errors.
 * Returns true if the call succeeded, false for a tolerated remote error.
 */
bool
tds_after_call(TdsSession *session, bool failed, const char *what, bool tolerate_remote)
{
	TdsRemoteError *err = &session->err;

	/* first: the callers zero errno before the db-lib call (see below) */
	int			call_errno = errno;

	if (session->interrupted)
	{
		volatile sig_atomic_t *flag = tds_shutdown_flag;

		tds_close_dbproc(session);
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
	 * A read that failed without any message (dbcmd alone fails with
	 * nothing pending).  libtds built with MARS support, as Debian's is,
	 * closes the connection without a word both when the server reset it
	 * (a restart or a KILL while the session was idle: the socket poll
	 * reports ECONNRESET) and when it refuses the server's bytes (an
	 * unknown type, a packet length of 0, a PLP length it cannot
	 * allocate); errno, which it leaves as the failure set it, tells the
	 * two apart.  A silent failure on a connection still open is a DONE
	 * with the error bit and no message: how SQL Server ends the request
	 * of a session it kills (test/standin/ENGINE.md, "KILL").
	 */
	if (failed && err->msgno == 0 && err->dberr == 0 && session->results_pending)
	{
		if (!session->dead)
			connection_lost(session,
							"SQL Server ended the request with an error but without a message, as it does "
							"for a session it kills.", 0, what);
		if (errno_is_connection_loss(call_errno))
			connection_lost(session, "The server closed the connection.", call_errno, what);
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
		tds_close_dbproc(session);
		tds_report_error(session->server_name, err, what);
	}

	if (session->dead)
	{
		if (err->kind != TDS_ERROR_TIMEOUT)
			err->kind = TDS_ERROR_CONNECTION_LOST;
		tds_close_dbproc(session);
		tds_report_error(session->server_name, err, what);
	}

	/*
	 * Severity 20 and above is fatal: SQL Server ended the task and most
	 * likely the connection (Database Engine Error Severities; Msg 596
	 * "the session is in the kill state" after KILL is one).  The session
	 * cannot go on; SQL Server's message stays in the detail.
	 */
	if (err->msgno != 0 && err->msgclass >= 20)
		connection_lost(session, "", 0, what);

	if (err->msgno != 0)
		err->kind = TDS_ERROR_REMOTE;
	else
		err->kind = TDS_ERROR_PROTOCOL;

	if (err->kind == TDS_ERROR_PROTOCOL && err->dberr == 0)
	{
		/* FAIL without any explanation: we cannot know the state; close */
		strlcpy(err->dbtext, "db-lib call failed without an error message", sizeof(err->dbtext));
		tds_close_dbproc(session);
		tds_report_error(session->server_name, err, what);
	}

	/* The connection is alive: flush the rest of the batch so it is usable */
	if (session->results_pending)
	{
		TdsRemoteError saved = *err;
		RETCODE		rc = dbcancel(session->dbproc);

		session->results_pending = false;
		session->reply_awaited = false;
		if (session->interrupted || rc == FAIL || DBDEAD(session->dbproc))
		{
			/* the cancel itself failed: report the original error, drop the connection */
			tds_close_dbproc(session);
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

