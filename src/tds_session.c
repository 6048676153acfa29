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
 * The layer's files: this one (process setup, login, batches), tds_errors.c
 * (the callbacks and the ereports made of what they recorded),
 * tds_result.c (columns and result-shape checks), tds_freetds_conf.c (the
 * per-login freetds.conf) and tds_quote.c (T-SQL quoting); they share
 * include/tds_session_internal.h.
 *
 * IDENTIFICATION
 *		src/tds_session.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>
#include <errno.h>

#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/memutils.h"

#include "shmem.h"
#include "tds_session_internal.h"

static bool tds_initialized = false;
static dlist_head open_sessions = DLIST_STATIC_INIT(open_sessions);

TdsSession *tds_opening_session = NULL;
TdsRemoteError tds_orphan_error;
volatile sig_atomic_t *tds_shutdown_flag = NULL;

/* ---- process setup and teardown ----------------------------------------- */

void
tds_close_dbproc(TdsSession *session)
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
	session->reply_awaited = false;
}

static void
tds_session_at_exit(int code, Datum arg)
{
	dlist_mutable_iter iter;

	dlist_foreach_modify(iter, &open_sessions)
	{
		TdsSession *session = dlist_container(TdsSession, node, iter.cur);

		tds_close_dbproc(session);
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
	tds_shutdown_flag = flag;
}

void
tds_clear_error(TdsSession *session)
{
	memset(&session->err, 0, sizeof(session->err));
	session->interrupted = false;
}

void
tds_check_usable(TdsSession *session)
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

static void
restore_freetds_conf(const char *conf_path, const char *saved_conf)
{
	if (conf_path == NULL)
		return;
	if (saved_conf != NULL)
		setenv("FREETDSCONF", saved_conf, 1);
	else
		unsetenv("FREETDSCONF");
	unlink(conf_path);
}

/*
 * One dbopen with the given encryption level ('off' or 'require': what
 * FreeTDS is told; tds_tls.c decides which and what a failure means).  The
 * settings a LOGINREC cannot carry go into a private freetds.conf
 * (tds_freetds_conf.c) that FREETDSCONF names while dbopen runs.  NULL when
 * the login failed, with the callbacks' record in session->err.
 */
DBPROCESS *
tds_dbopen(const MssqlServerOptions *opts, MssqlEncryption level, TdsSession *session)
{
	LOGINREC   *volatile login = NULL;
	char	   *volatile conf_path = NULL;
	char	   *volatile saved_conf = NULL;
	DBPROCESS  *dbproc = NULL;

	PG_TRY();
	{
		const char *prev = getenv("FREETDSCONF");
		char	   *target;

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

		if (!tds_valid_conf_value(opts->host) || !tds_valid_conf_value(opts->tds_version))
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("host option of server \"%s\" contains characters not allowed in freetds.conf",
							session->server_name)));
		/* a section header cannot hold an IPv6 literal's brackets */
		target = strchr(opts->host, ':') != NULL ? pstrdup(TDS_CONF_SECTION) :
			psprintf("%s:%d", opts->host, opts->port);
		conf_path = tds_write_freetds_conf(opts, level, target);
		if (prev != NULL)
			saved_conf = pstrdup(prev);
		setenv("FREETDSCONF", conf_path, 1);

		tds_opening_session = session;
		dbproc = dbopen(login, target);
		tds_opening_session = NULL;
	}
	PG_CATCH();
	{
		tds_opening_session = NULL;
		restore_freetds_conf(conf_path, saved_conf);
		if (login != NULL)
			dbloginfree(login);
		PG_RE_THROW();
	}
	PG_END_TRY();

	restore_freetds_conf(conf_path, saved_conf);
	/* libtds zeroes its copy of the password when the login is freed */
	dbloginfree(login);
	return dbproc;
}

TdsSession *
tds_session_try_open(const MssqlServerOptions *opts, TdsRemoteError *err_out)
{
	TdsSession *volatile session;
	DBPROCESS  *dbproc = NULL;
	volatile bool configured = false;

	tds_session_init();

	session = MemoryContextAllocZero(TopMemoryContext, sizeof(TdsSession));
	session->server_name = MemoryContextStrdup(TopMemoryContext,
											   opts->server_name ? opts->server_name : "?");
	session->dead = true;

	PG_TRY();
	{
		/* which logins, and what a failed one means: tds_tls.c */
		dbproc = tds_tls_login(opts, session);
	}
	PG_CATCH();
	{
		pfree(session->server_name);
		pfree(session);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (dbproc == NULL)
	{
		session->err.kind = TDS_ERROR_CONNECT;
		session->err.encryption_required = opts->encryption != MSSQL_ENCRYPTION_OFF;
		if (session->err.dberr == 0 && session->err.msgno == 0 &&
			session->err.tls_failure == TDS_TLS_NONE)
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
	tds_clear_error(session);
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
	tds_close_dbproc(session);
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

TdsSessionSecurity
tds_session_security(TdsSession *session)
{
	return session->security;
}

/* ---- batches ------------------------------------------------------------ */

/* every batch this process sent, for tds_send_ahead's serials */
static uint64 batches_sent = 0;

/*
 * Queue the batch and its end marker and send them, without waiting for the
 * reply (dbsqlsend): the caller may do other work, e.g. write the previous
 * result into PostgreSQL, while SQL Server runs it.
 */
static bool
send_internal(TdsSession *session, const char *sql, bool tolerate_remote)
{
	RETCODE		rc;

	tds_check_usable(session);
	if (session->results_pending)
		tds_cancel(session);
	tds_clear_error(session);
	session->batch_end_seen = false;

	/*
	 * Every batch ends with a PRINT whose message proves that SQL Server
	 * ran the batch to its end (tds_check_batch_end): the request of a
	 * session SQL Server kills can end with just a DONE that has the error
	 * bit, which db-lib takes for the normal end of a result (Microsoft's
	 * JDBC driver had to learn the same, test/standin/ENGINE.md "KILL"),
	 * so the rows read until then would look like all of them.
	 */
	rc = dbcmd(session->dbproc, sql);
	if (rc != FAIL)
		rc = dbcmd(session->dbproc, TDS_BATCH_END_STATEMENT);
	if (rc == FAIL)
		return tds_after_call(session, true, "sending a query", tolerate_remote);
	session->results_pending = true;
	session->reply_awaited = true;
	session->sent_serial = ++batches_sent;
	/* tds_after_call reads what a silent failure left in errno */
	errno = 0;
	cdc_slot_count_request();	/* one round trip (worker_state().requests_sent) */
	rc = dbsqlsend(session->dbproc);
	return tds_after_call(session, rc == FAIL, "sending a query", tolerate_remote);
}

/* Wait for the first reply of the batch sent last (dbsqlok). */
static bool
await_internal(TdsSession *session, bool tolerate_remote)
{
	RETCODE		rc;

	tds_check_usable(session);
	if (!session->reply_awaited)
		elog(ERROR, "no batch was sent on this TDS session");
	session->reply_awaited = false;
	errno = 0;
	rc = dbsqlok(session->dbproc);
	return tds_after_call(session, rc == FAIL, "running a query", tolerate_remote);
}

static bool
exec_internal(TdsSession *session, const char *sql, bool tolerate_remote)
{
	if (!send_internal(session, sql, tolerate_remote))
		return false;
	return await_internal(session, tolerate_remote);
}

void
tds_send(TdsSession *session, const char *sql)
{
	send_internal(session, sql, false);
}

void
tds_await(TdsSession *session)
{
	await_internal(session, false);
}

uint64
tds_send_ahead(TdsSession *session, const char *sql)
{
	send_internal(session, sql, false);
	return session->sent_serial;
}

bool
tds_await_ahead(TdsSession *session, uint64 serial)
{
	if (serial == 0 || tds_session_is_dead(session) || !session->reply_awaited ||
		session->sent_serial != serial)
		return false;
	await_internal(session, false);
	return true;
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

	tds_check_usable(session);
	if (!session->results_pending)
		return TDS_STEP_DONE;
	errno = 0;
	rc = dbresults(session->dbproc);
	if (rc == NO_MORE_RESULTS)
	{
		session->results_pending = false;
	session->reply_awaited = false;
		if (!tds_after_call(session, false, "reading results", tolerate_remote))
			return TDS_STEP_REMOTE_ERROR;
		tds_check_batch_end(session, "reading results");
		return TDS_STEP_DONE;
	}
	if (!tds_after_call(session, rc == FAIL, "reading results", tolerate_remote))
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
	tds_check_usable(session);
	if (!session->results_pending || dbnumcols(session->dbproc) == 0)
		return TDS_STEP_DONE;
	errno = 0;
	st = dbnextrow(session->dbproc);
	if (st == NO_MORE_ROWS)
	{
		if (!tds_after_call(session, false, "reading rows", tolerate_remote))
			return TDS_STEP_REMOTE_ERROR;
		return TDS_STEP_DONE;
	}
	if (!tds_after_call(session, st != REG_ROW, "reading rows", tolerate_remote))
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
	tds_clear_error(session);
	errno = 0;
	rc = dbcancel(session->dbproc);
	session->results_pending = false;
	session->reply_awaited = false;
	tds_after_call(session, rc == FAIL, "canceling a query", false);
}

void
tds_exec_simple(TdsSession *session, const char *sql)
{
	tds_exec(session, sql);
	while (tds_next_result(session))
		while (tds_next_row(session))
			;
}

