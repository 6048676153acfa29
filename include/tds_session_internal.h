/*-------------------------------------------------------------------------
 *
 * tds_session_internal.h
 *		What the files of the TDS session layer share and nobody else
 *		sees: the session struct and the db-lib glue between them
 *		(tds_session.c opens, runs batches and closes; tds_errors.c holds
 *		the db-lib callbacks and turns what they recorded into ereports;
 *		tds_result.c reads result columns; tds_freetds_conf.c writes the
 *		per-login freetds.conf; tds_tls.c and tds_tls_probe.c decide and
 *		check the encryption of a login).
 *
 * Only those files include this header (it pulls in db-lib's sybdb.h).
 *
 * IDENTIFICATION
 *		include/tds_session_internal.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_TDS_SESSION_INTERNAL_H
#define MSSQL_CDC_TDS_SESSION_INTERNAL_H

#include "postgres.h"

#define MSDBLIB 1				/* Microsoft db-lib semantics (see dbopen) */
#include <sybfront.h>
#include <sybdb.h>

#include "lib/ilist.h"

#include "tds_session.h"

struct TdsSession
{
	DBPROCESS  *dbproc;			/* NULL once closed */
	char	   *server_name;	/* the foreign server, for messages */
	bool		dead;			/* connection unusable; reopen */
	bool		interrupted;	/* our interrupt handler stopped a wait */
	bool		results_pending;	/* batch sent, results not all read */
	bool		reply_awaited;	/* tds_send done, tds_await not yet */
	uint64		sent_serial;	/* the last batch sent (tds_send_ahead) */
	bool		batch_end_seen; /* the batch's last statement answered */
	TdsRemoteError err;			/* filled by the db-lib callbacks */
	TdsSessionSecurity security;	/* set by tds_tls_login, */
	char		security_text[320]; /* and said in words */
	dlist_node	node;			/* in open_sessions */
};

/*
 * Where the callbacks record errors while dbopen runs: the DBPROCESS has
 * no user data yet (and for some failures there is no DBPROCESS at all).
 */
extern TdsSession *tds_opening_session;

/* Errors raised outside any session (dbinit, login record setup) */
extern TdsRemoteError tds_orphan_error;

/* The worker's own stop flag, or NULL (tds_session_set_shutdown_flag) */
extern volatile sig_atomic_t *tds_shutdown_flag;

/*
 * The statement tds_session.c appends to every batch, and the message it
 * makes SQL Server send last: a response that ends without it and without
 * an error did not run the whole batch (see exec_internal).
 */
#define TDS_BATCH_END_TEXT		"mssql_cdc: end of batch"
#define TDS_BATCH_END_STATEMENT	"\nPRINT N'" TDS_BATCH_END_TEXT "'"

/* ---- tds_errors.c: db-lib callbacks (record, never raise) --------------- */
extern int	tds_error_handler(DBPROCESS *dbproc, int severity, int dberr, int oserr,
							  char *dberrstr, char *oserrstr);
extern int	tds_message_handler(DBPROCESS *dbproc, DBINT msgno, int msgstate, int severity,
								char *msgtext, char *srvname, char *procname, int line);
extern int	tds_check_interrupt(void *dbproc);
extern int	tds_handle_interrupt(void *dbproc);

/*
 * After a db-lib call: decide whether it failed, leave the session usable
 * (dbcancel) or dead, and raise unless the caller accepts remote errors.
 * Returns true if the call succeeded, false for a tolerated remote error.
 */
extern bool tds_after_call(TdsSession *session, bool failed, const char *what,
						   bool tolerate_remote);

/*
 * At the end of a batch's results: raise "lost the connection" unless the
 * batch ran to its end (TDS_BATCH_END_TEXT arrived) or an error said why
 * it did not.
 */
extern void tds_check_batch_end(TdsSession *session, const char *what);

/* ---- tds_session.c ------------------------------------------------------ */
extern DBPROCESS *tds_dbopen(const MssqlServerOptions *opts, MssqlEncryption level,
							 TdsSession *session);
extern void tds_close_dbproc(TdsSession *session);
extern void tds_clear_error(TdsSession *session);
extern void tds_check_usable(TdsSession *session);

/* ---- tds_freetds_conf.c ------------------------------------------------- */
/* the section name used for IPv6 hosts (a header cannot hold brackets) */
#define TDS_CONF_SECTION	"mssql_cdc_session"
extern char *tds_write_freetds_conf(const MssqlServerOptions *opts, MssqlEncryption level,
									const char *section);
extern bool tds_valid_conf_value(const char *value);

/* ---- tds_tls.c: the encryption policy of a login ------------------------ */

/*
 * Log in as opts->encryption asks (trying 'require' first for 'request'),
 * set session->security, and on a failed login find out with
 * tds_tls_probe whether, and how, TLS was the reason (session->err).
 */
extern DBPROCESS *tds_tls_login(const MssqlServerOptions *opts, TdsSession *session);

/* ---- tds_tls_probe.c: a PRELOGIN + TLS handshake of our own ------------ */

/*
 * Connect to the server, send PRELOGIN offering TLS (want_tls) or not, and
 * if the server encrypts, run the TLS handshake inside PRELOGIN packets and
 * check the certificate the way FreeTDS would (CA, CRL, host name).  Never
 * logs in.  Returns what is wrong (TDS_TLS_NONE: nothing found, or the
 * server could not be reached), with a sentence in detail; *interrupted is
 * set when a Postgres interrupt ended it (the caller runs
 * CHECK_FOR_INTERRUPTS).  Never raises.
 */
extern TdsTlsFailure tds_tls_probe(const MssqlServerOptions *opts, bool want_tls,
								   char *detail, size_t detail_size, bool *interrupted);

#endif							/* MSSQL_CDC_TDS_SESSION_INTERNAL_H */
