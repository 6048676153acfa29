/*-------------------------------------------------------------------------
 *
 * tds_session.h
 *		One conversation with SQL Server through FreeTDS db-lib.
 *
 * Every SQL Server call of the extension goes through this layer.  Its
 * rules:
 *
 * - db-lib's error and message handlers only *record* what went wrong (in
 *   the session, reached through dbgetuserdata) and return INT_CANCEL; they
 *   never ereport, because a longjmp out of a library callback leaves db-lib
 *   in an undefined state.  After each db-lib call returns, this layer turns
 *   the recorded error into an ereport with a proper SQLSTATE, naming the
 *   foreign server, with the SQL Server message in errdetail.
 * - A pending Postgres interrupt (query cancel, terminate, or the worker's
 *   own shutdown flag) makes db-lib stop waiting within a second; the session
 *   is then closed (dead) and CHECK_FOR_INTERRUPTS runs.
 * - query_timeout bounds every wait for the server; a timeout closes the
 *   connection (a hung server may never acknowledge a cancel), so the
 *   session is dead afterwards and the caller reconnects.
 * - After a remote (SQL) error the pending results are flushed with
 *   dbcancel and the session stays usable.  Any connection-level error marks
 *   it dead; tds_session_is_dead() tells the caller to reconnect.
 * - Sessions are closed at process exit, and tds_session_open never leaks a
 *   DBPROCESS on an error path.
 * - The password never reaches a log line, a message or the application
 *   name.
 * - Logins are encrypted with TLS and the certificate validated unless the
 *   server's options say otherwise (src/tds_tls.c); a session never falls
 *   back to plain text without a WARNING, and tds_session_security() says
 *   what the connection got.
 *
 * Typical use (results are streamed row by row, nothing is buffered):
 *
 *		tds_exec(s, "SELECT a, b FROM t");
 *		while (tds_next_result(s))
 *			while (tds_next_row(s))
 *			{
 *				MemoryContextReset(rowcxt);  ... tds_col_data(s, 1, &len) ...
 *			}
 *
 * IDENTIFICATION
 *		include/tds_session.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_TDS_SESSION_H
#define MSSQL_CDC_TDS_SESSION_H

#include "postgres.h"

#include <signal.h>

#include "lsn.h"
#include "options.h"

typedef struct TdsSession TdsSession;

/* What kind of failure the last error of a session was. */
typedef enum TdsErrorKind
{
	TDS_ERROR_NONE = 0,
	TDS_ERROR_CONNECT,			/* login or connection could not be established */
	TDS_ERROR_REMOTE,			/* SQL Server rejected the request; session usable */
	TDS_ERROR_TIMEOUT,			/* query_timeout expired; session dead */
	TDS_ERROR_CONNECTION_LOST,	/* socket closed/failed mid-conversation; dead */
	TDS_ERROR_INTERRUPTED,		/* Postgres interrupt stopped the wait; dead */
	TDS_ERROR_PROTOCOL			/* db-lib misuse or malformed reply */
} TdsErrorKind;

#define TDS_ERROR_TEXT_SIZE		512

/*
 * Why a login failed on TLS, as a separate check of the server found out
 * after FreeTDS (which says only "connection failed") gave up; see
 * tds_tls.c.  NONE when the failure was something else.
 */
typedef enum TdsTlsFailure
{
	TDS_TLS_NONE = 0,
	TDS_TLS_NOT_OFFERED,		/* TLS required; SQL Server offers none */
	TDS_TLS_REQUIRED_BY_SERVER, /* encryption 'off'; SQL Server forces TLS */
	TDS_TLS_UNTRUSTED,			/* no chain to a trusted CA */
	TDS_TLS_EXPIRED,			/* past its validity period */
	TDS_TLS_NOT_YET_VALID,		/* before its validity period */
	TDS_TLS_NAME_MISMATCH,		/* does not name the host option */
	TDS_TLS_REVOKED,			/* listed in crl_file */
	TDS_TLS_HANDSHAKE,			/* the TLS handshake itself failed */
	TDS_TLS_CA_FILE,			/* ca_file (or the system store) unusable */
	TDS_TLS_CRL_FILE			/* crl_file unusable */
} TdsTlsFailure;

/*
 * The captured state of the last failure: what db-lib said and what SQL
 * Server said.  The worker branches on msgno (e.g. 313, 229, 1205) and
 * dberr (e.g. 20003 timeout, 20017 EOF).
 */
typedef struct TdsRemoteError
{
	TdsErrorKind kind;

	/*
	 * With kind PROTOCOL or CONNECT: db-lib rejected what the server sent
	 * (not valid TDS, unconvertible text, impossible lengths).  Raised as
	 * ERRCODE_PROTOCOL_VIOLATION "sent a malformed response".  Also set by
	 * the checks of a result's shape (tds_expect_num_cols and friends,
	 * tds_mark_malformed), which raise their own messages.
	 */
	bool		malformed;

	/* With kind CONNECT: the login asked for encryption 'require' */
	bool		encryption_required;

	/* db-lib (client side) error, from the error handler; 0 if none */
	int			dberr;			/* SYBE* number, e.g. 20009 */
	int			dberr_severity; /* EX* severity class */
	int			oserr;			/* errno, 0 if none */
	char		dbtext[TDS_ERROR_TEXT_SIZE];
	char		ostext[128];
	/* db-lib said "connection failed" (SYBEFCON), whatever it raised first */
	bool		connect_failed;

	/* SQL Server message of severity > 10 (the first of the batch); 0 if none */
	int			msgno;			/* e.g. 208, 18456 */
	int			msgstate;
	int			msgclass;		/* "Level" */
	int			msgline;
	char		msgtext[TDS_ERROR_TEXT_SIZE];
	char		procname[128];

	/* With kind CONNECT: a TLS problem and what the check saw (certificate names, dates) */
	TdsTlsFailure tls_failure;
	char		tls_detail[TDS_ERROR_TEXT_SIZE];
} TdsRemoteError;

/*
 * How an open session's connection is protected.  encrypted: the whole
 * session travels inside TLS; certificate_validated: and the server's
 * certificate was checked against the CA (and the host name).  An
 * unencrypted session is never opened without either encryption 'off' or a
 * WARNING (encryption 'request' against a server without TLS).
 */
typedef struct TdsSessionSecurity
{
	bool		encrypted;
	bool		certificate_validated;
} TdsSessionSecurity;

/*
 * Process setup: dbinit, the capturing handlers, the exit hook.  Idempotent;
 * tds_session_open calls it, a worker may call it early at startup.
 */
extern void tds_session_init(void);

/*
 * A flag that, when set, interrupts any wait for SQL Server just like a
 * Postgres interrupt does (for a worker with its own SIGTERM handler).
 * Pass NULL to remove it.
 */
extern void tds_session_set_shutdown_flag(volatile sig_atomic_t *flag);

/*
 * Connect and log in.  On failure raises ERRCODE_FDW_UNABLE_TO_ESTABLISH_
 * CONNECTION naming the server, with the SQL Server / db-lib messages in
 * errdetail and a hint.  The session lives in TopMemoryContext until
 * tds_session_close or process exit.
 */
extern TdsSession *tds_session_open(const MssqlServerOptions *opts);

/*
 * Like tds_session_open but does not raise on a failed login/connect:
 * returns NULL and copies the captured error into *err.  Interrupts still
 * raise.
 */
extern TdsSession *tds_session_try_open(const MssqlServerOptions *opts,
										TdsRemoteError *err);

/* Close the connection and free the session.  NULL is allowed. */
extern void tds_session_close(TdsSession *session);

/* True once the connection is unusable; the caller must reopen. */
extern bool tds_session_is_dead(TdsSession *session);

/* The error captured by the last failed call (kind NONE if it succeeded). */
extern const TdsRemoteError *tds_session_last_error(TdsSession *session);

/* The foreign server's name, for the caller's own messages. */
extern const char *tds_session_server_name(TdsSession *session);

/* Encryption and certificate validation of the session's connection. */
extern TdsSessionSecurity tds_session_security(TdsSession *session);

/* "TLS, certificate validated against …" for check_server() and logs. */
extern char *tds_session_security_text(TdsSession *session);

/*
 * Raise the error captured in err as a Postgres ERROR for server_name
 * ("what" says what we were doing, e.g. "running a query").  Does not
 * return.
 */
extern void tds_report_error(const char *server_name, const TdsRemoteError *err,
							 const char *what) pg_attribute_noreturn();

/* The DETAIL tds_report_error gives err (SQL Server's and db-lib's messages) */
extern char *tds_error_detail_text(const TdsRemoteError *err);

/* ---- batches ---------------------------------------------------------- */

/*
 * Send a batch and wait for the first reply.  Pending results of an earlier
 * batch are discarded first.  Raises on any error.  The batch gets a last
 * statement of the session layer's (a PRINT, no result set): a response
 * that ends without its message and without an error is reported as a lost
 * connection when the results are read to their end, never as a short
 * result (a killed session's request can end that way).
 */
extern void tds_exec(TdsSession *session, const char *sql);

/*
 * tds_exec in two halves, for overlapping a round trip with other work:
 * tds_send sends the batch and returns at once (one request counted),
 * tds_await waits for its first reply; then read it as after tds_exec.
 * Nothing else may use the session in between.
 */
extern void tds_send(TdsSession *session, const char *sql);
extern void tds_await(TdsSession *session);

/*
 * A batch sent long before its reply is wanted, while the session may be
 * used for other batches in between (which cancel it, as any new batch
 * cancels the results pending): tds_send_ahead returns its serial (unique
 * among every batch the process sends), and tds_await_ahead waits for its
 * reply and returns true only when it is still the batch the session waits
 * for; false means the reply is gone and the caller sends the batch now.
 */
extern uint64 tds_send_ahead(TdsSession *session, const char *sql);
extern bool tds_await_ahead(TdsSession *session, uint64 serial);

/*
 * Same, but a SQL Server error (not a connection problem) returns false
 * with the session still usable and the error in tds_session_last_error.
 */
extern bool tds_exec_try(TdsSession *session, const char *sql);

/*
 * Advance to the next result of the batch.  True if there is one (check
 * tds_num_cols: 0 for a statement without a result set), false when the
 * batch is complete.  Raises on errors.
 */
extern bool tds_next_result(TdsSession *session);

/* Step results of a tds_exec_try batch without raising on SQL errors. */
typedef enum TdsStep
{
	TDS_STEP_MORE,				/* a result / a row is available */
	TDS_STEP_DONE,				/* no more results / rows */
	TDS_STEP_REMOTE_ERROR		/* SQL Server error; session usable */
} TdsStep;

extern TdsStep tds_next_result_try(TdsSession *session);
extern TdsStep tds_next_row_try(TdsSession *session);

/* Fetch the next row of the current result; false when exhausted. */
extern bool tds_next_row(TdsSession *session);

/* Discard whatever remains of the current batch. */
extern void tds_cancel(TdsSession *session);

/* Run a batch and discard its results (commands, SET options...). */
extern void tds_exec_simple(TdsSession *session, const char *sql);

/* ---- columns of the current result (1-based) ---------------------------- */

extern int	tds_num_cols(TdsSession *session);
extern int	tds_col_type(TdsSession *session, int col);	/* SYB* type code */
extern const char *tds_col_name(TdsSession *session, int col);

/* precision and scale of decimal/numeric and of the date/time types */
extern void tds_col_typeinfo(TdsSession *session, int col,
							 int *precision, int *scale);

/*
 * Value of the column in the current row: pointer into db-lib's row buffer
 * (valid until the next tds_next_row), *len its length in bytes.  NULL for
 * a SQL NULL.  An empty string is a non-NULL pointer with *len == 0.
 */
extern const uint8 *tds_col_data(TdsSession *session, int col, int *len);

/* The column converted to Postgres input text (see tds_convert.h); NULL for NULL */
extern char *tds_col_text(TdsSession *session, int col);

/*
 * The column as a Datum of target's type (tds_convert.h: binary where the
 * types allow, else through the text above); *isnull for NULL.
 */
struct TdsDatumTarget;
extern Datum tds_col_datum(TdsSession *session, int col,
						   const struct TdsDatumTarget *target, bool *isnull);

/* ---- checking the shape of a result (a broken server's defence) -------- */

/*
 * Raise ERRCODE_PROTOCOL_VIOLATION "SQL Server (server "x") sent an
 * unexpected result while <what>" and close the connection unless the
 * current result has exactly ncols columns.  Callers skip results with 0
 * columns (statements without a result set) before asking.
 */
extern void tds_expect_num_cols(TdsSession *session, int ncols, const char *what);

typedef enum TdsColKind
{
	TDS_COL_BINARY,				/* binary/varbinary: LSNs, seqvals, update masks */
	TDS_COL_INTEGER				/* tinyint/smallint/int/bigint: __$operation */
} TdsColKind;

/* Same error unless column col (1-based) is of that kind of type. */
extern void tds_expect_col_kind(TdsSession *session, int col, TdsColKind kind,
								const char *colname, const char *what);

/*
 * Same error unless column col can be a column of SQL Server type
 * sqlserver_type ("int", "nvarchar", ... as MssqlColumn.type_name) selected
 * without conversion.  Types it does not know (xml, sql_variant, CLR
 * types) pass; callers skip columns read through a conversion expression.
 */
extern void tds_expect_col_source_type(TdsSession *session, int col,
									   const char *sqlserver_type,
									   const char *colname, const char *what);

/*
 * For the callers' own checks of a result against its query (more rows
 * than its TOP, rows out of its ORDER BY, values outside its WHERE): such
 * a result cannot come from SQL Server running the query.  Closes the
 * connection (nothing else it sends can be trusted) and marks the
 * session's error malformed, so that the worker reports it as condition
 * malformed_response; the caller raises its own error next.
 */
extern void tds_mark_malformed(TdsSession *session);

/* ---- helpers ------------------------------------------------------------ */

/*
 * Run a query that returns one binary(10) value (an LSN) in its first row.
 * Returns false if the value is NULL (or there is no row); raises if it is
 * not a 10-byte binary value.
 */
extern bool tds_fetch_lsn(TdsSession *session, const char *sql, MssqlLsn *lsn);

/*
 * A binary(10) column of the current row as an LSN; false for NULL, raises
 * if it is not a 10-byte binary value.
 */
extern bool tds_col_lsn(TdsSession *session, int col, MssqlLsn *lsn);

/* T-SQL quoting: tds_quote_ident("a]b") = "[a]]b]" */
extern char *tds_quote_ident(const char *ident);

/* tds_quote_nstring("it's") = "N'it''s'" */
extern char *tds_quote_nstring(const char *str);

/* A binary(10) literal for T-SQL: "0x0000002A000001F00003" */
extern char *tds_format_lsn_literal(const uint8 *bytes);

/* Did a login fail on TLS (no TLS offered, a certificate refused, ...)? */
extern bool tds_error_is_tls_failure(const TdsRemoteError *err);

#endif							/* MSSQL_CDC_TDS_SESSION_H */
