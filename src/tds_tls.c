/*-------------------------------------------------------------------------
 *
 * tds_tls.c
 *		The encryption policy of a login, and what a TLS failure means.
 *
 * FreeTDS 1.3 is told 'require' or 'off' (tds_freetds_conf.c), never its
 * own 'request', whose fallback to plain text is silent: with it nobody
 * could tell afterwards whether a session was encrypted.  So:
 *
 * - encryption 'require' (the default): one login with TLS and the
 *   certificate validated against ca_file (default: the operating system's
 *   trust store), the CRL and the host name, unless trust_server_
 *   certificate.  A successful login means the whole session is encrypted:
 *   FreeTDS sends ENCRYPT_ON, refuses ENCRYPT_NOT_SUP, and by [MS-TDS]
 *   2.2.6.5 SQL Server answers ENCRYPT_ON (or REQ) to it, which encrypts
 *   the entire connection.
 * - 'request': the same, and only if that login fails because SQL Server
 *   offers no TLS at all (ENCRYPT_NOT_SUP, checked by tds_tls_probe), a
 *   second login without TLS, with a WARNING every time.  A certificate
 *   that fails validation is never a reason to go without TLS.
 * - 'off': no TLS (FreeTDS sends ENCRYPT_NOT_SUP; a server that forces
 *   encryption ends the connection, [MS-TDS] 2.2.6.5).
 *
 * FreeTDS reports every TLS failure as db-lib error 20002 "Adaptive Server
 * connection failed" (the reason goes to its debug log only, which can hold
 * the password), so after such a failure tds_tls_probe looks at the server
 * itself: what its PRELOGIN answers and what its certificate is.  The
 * probe is a second connection and never logs in; it runs only after a
 * failed login, so a healthy server sees no extra connections.
 *
 * The CA and CRL files are read by the database server's operating-system
 * user.  Before each login they must be regular files, owned by that user
 * or root and writable by nobody else: whoever can replace a trust anchor
 * can make mssql_cdc trust their own certificate.
 *
 * IDENTIFICATION
 *		src/tds_tls.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>
#include <unistd.h>

#include "miscadmin.h"
#include "utils/builtins.h"

#include "error_condition.h"
#include "tds_session_internal.h"
#include "tds_tls.h"

/* ---- the CA and CRL files ---------------------------------------------- */

/* False, with the reason in detail, if path is no file to trust */
static bool
check_trust_file(const char *option, const char *path, char *detail, size_t size)
{
	struct stat st;

	if (!tds_valid_conf_value(path) || path[0] != '/')
	{
		snprintf(detail, size, "%s \"%s\" is not an absolute path FreeTDS can read.", option, path);
		return false;
	}
	if (stat(path, &st) != 0)
	{
		snprintf(detail, size, "%s \"%s\": %s.", option, path, strerror(errno));
		return false;
	}
	if (!S_ISREG(st.st_mode))
	{
		snprintf(detail, size, "%s \"%s\" is not a regular file.", option, path);
		return false;
	}
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
	{
		snprintf(detail, size,
				 "%s \"%s\" is writable by other operating-system users (mode %04o): whoever can replace it "
				 "decides which certificates are trusted.",
				 option, path, (unsigned int) (st.st_mode & 07777));
		return false;
	}
	if (st.st_uid != geteuid() && st.st_uid != 0)
	{
		snprintf(detail, size,
				 "%s \"%s\" belongs to another operating-system user (uid %u): only the database server's "
				 "user or root may own a file of trusted certificates.",
				 option, path, (unsigned int) st.st_uid);
		return false;
	}
	if (access(path, R_OK) != 0)
	{
		snprintf(detail, size, "%s \"%s\" cannot be read by the database server: %s.",
				 option, path, strerror(errno));
		return false;
	}
	return true;
}

static bool
check_trust_files(const MssqlServerOptions *opts, TdsRemoteError *err)
{
	if (opts->trust_server_certificate)
		return true;
	if (opts->ca_file != NULL && strcmp(opts->ca_file, MSSQL_CDC_CA_FILE_SYSTEM) != 0 &&
		!check_trust_file("ca_file", opts->ca_file, err->tls_detail, sizeof(err->tls_detail)))
	{
		err->tls_failure = TDS_TLS_CA_FILE;
		return false;
	}
	if (opts->crl_file != NULL &&
		!check_trust_file("crl_file", opts->crl_file, err->tls_detail, sizeof(err->tls_detail)))
	{
		err->tls_failure = TDS_TLS_CRL_FILE;
		return false;
	}
	return true;
}

/* ---- the login ---------------------------------------------------------- */

/*
 * A login that FreeTDS gave up before SQL Server said anything: what a TLS
 * failure (or a refused plain login) looks like from db-lib.  Which error
 * db-lib raises first varies (20002, or 20017 when the server's FIN wins
 * the race); a timeout (20003) first is a silent server, not a refusal,
 * and probing it would wait login_timeout a second time.
 */
static bool
failed_before_login(const TdsRemoteError *err)
{
	return err->msgno == 0 && err->connect_failed && !err->malformed &&
		(err->dberr == SYBEFCON || err->dberr == SYBESEOF);
}

static TdsTlsFailure
probe(const MssqlServerOptions *opts, bool want_tls, TdsRemoteError *err)
{
	bool		interrupted = false;
	TdsTlsFailure failure;

	failure = tds_tls_probe(opts, want_tls, err->tls_detail, sizeof(err->tls_detail),
							&interrupted);
	if (interrupted)
		CHECK_FOR_INTERRUPTS();
	return failure;
}

/* How a session that logged in is protected, in flags and in words */
static void
set_security(TdsSession *session, const MssqlServerOptions *opts, bool encrypted)
{
	char	   *text = session->security_text;
	size_t		size = sizeof(session->security_text);

	session->security.encrypted = encrypted;
	session->security.certificate_validated = encrypted && !opts->trust_server_certificate;
	if (!encrypted)
		snprintf(text, size, "not encrypted (encryption '%s'%s): the login and all data cross the network "
				 "in plain text",
				 opts->encryption == MSSQL_ENCRYPTION_OFF ? "off" : "request",
				 opts->encryption == MSSQL_ENCRYPTION_OFF ? "" : " and SQL Server offers no TLS");
	else if (opts->trust_server_certificate)
		snprintf(text, size, "TLS for the whole session, but SQL Server's certificate was not validated "
				 "(trust_server_certificate 'true'): anyone in between can impersonate the server");
	else
		snprintf(text, size, "TLS for the whole session; SQL Server's certificate validated against ca_file "
				 "'%s'%s, %s",
				 opts->ca_file ? opts->ca_file : MSSQL_CDC_CA_FILE_SYSTEM,
				 opts->crl_file ? " and crl_file" : "",
				 opts->check_host_name ? "host name checked" : "host name not checked (check_host_name 'false')");
}

DBPROCESS *
tds_tls_login(const MssqlServerOptions *opts, TdsSession *session)
{
	TdsRemoteError *err = &session->err;
	MssqlEncryption level = opts->encryption == MSSQL_ENCRYPTION_OFF ?
		MSSQL_ENCRYPTION_OFF : MSSQL_ENCRYPTION_REQUIRE;
	DBPROCESS  *dbproc;
	TdsTlsFailure failure;

	if (level == MSSQL_ENCRYPTION_REQUIRE && !check_trust_files(opts, err))
		return NULL;

	dbproc = tds_dbopen(opts, level, session);
	if (dbproc != NULL)
	{
		set_security(session, opts, level == MSSQL_ENCRYPTION_REQUIRE);
		return dbproc;
	}
	if (!failed_before_login(err))
		return NULL;

	failure = probe(opts, level == MSSQL_ENCRYPTION_REQUIRE, err);
	if (failure == TDS_TLS_NOT_OFFERED && opts->encryption == MSSQL_ENCRYPTION_REQUEST)
	{
		ereport(WARNING,
				(errmsg("SQL Server for server \"%s\" offers no TLS encryption: connecting without it",
						session->server_name),
				 errdetail("The encryption option of the server is 'request'.  The login and all data cross "
						   "the network unencrypted."),
				 errhint("Configure a certificate on SQL Server and drop the encryption option (TLS with "
						 "certificate validation is the default), or set it to 'off' to say that plain text "
						 "is intended.")));
		tds_clear_error(session);
		dbproc = tds_dbopen(opts, MSSQL_ENCRYPTION_OFF, session);
		set_security(session, opts, false);
		return dbproc;
	}
	err->tls_failure = failure;
	if (failure == TDS_TLS_NONE)
		err->tls_detail[0] = '\0';
	return NULL;
}

char *
tds_session_security_text(TdsSession *session)
{
	return pstrdup(session->security_text);
}

/* ---- what a failure means ----------------------------------------------- */

const char *
tds_tls_condition(TdsTlsFailure failure)
{
	switch (failure)
	{
		case TDS_TLS_NOT_OFFERED:
			return COND_ENCRYPTION_UNAVAILABLE;
		case TDS_TLS_REQUIRED_BY_SERVER:
			return COND_ENCRYPTION_REQUIRED_BY_SERVER;
		case TDS_TLS_UNTRUSTED:
			return COND_CERTIFICATE_UNTRUSTED;
		case TDS_TLS_EXPIRED:
		case TDS_TLS_NOT_YET_VALID:
			return COND_CERTIFICATE_EXPIRED;
		case TDS_TLS_NAME_MISMATCH:
			return COND_CERTIFICATE_NAME_MISMATCH;
		case TDS_TLS_REVOKED:
			return COND_CERTIFICATE_REVOKED;
		case TDS_TLS_HANDSHAKE:
			return COND_TLS_HANDSHAKE_FAILED;
		case TDS_TLS_CA_FILE:
		case TDS_TLS_CRL_FILE:
			return COND_TLS_FILE_UNUSABLE;
		case TDS_TLS_NONE:
			break;
	}
	return COND_CONNECTION_REFUSED;
}

const char *
tds_tls_failure_summary(TdsTlsFailure failure)
{
	switch (failure)
	{
		case TDS_TLS_NOT_OFFERED:
			return "the server does not offer TLS encryption";
		case TDS_TLS_REQUIRED_BY_SERVER:
			return "SQL Server requires encryption, but the encryption option is 'off'";
		case TDS_TLS_UNTRUSTED:
			return "the server's TLS certificate is not trusted";
		case TDS_TLS_EXPIRED:
			return "the server's TLS certificate has expired";
		case TDS_TLS_NOT_YET_VALID:
			return "the server's TLS certificate is not valid yet";
		case TDS_TLS_NAME_MISMATCH:
			return "the server's TLS certificate does not name the host option";
		case TDS_TLS_REVOKED:
			return "the server's TLS certificate has been revoked";
		case TDS_TLS_HANDSHAKE:
			return "the TLS handshake failed";
		case TDS_TLS_CA_FILE:
			return "a file of trusted certificates cannot be used";
		case TDS_TLS_CRL_FILE:
			return "the certificate revocation list cannot be used";
		case TDS_TLS_NONE:
			break;
	}
	return "the login failed";
}

char *
tds_tls_failure_hint(TdsTlsFailure failure, const char *server_name)
{
	const char *q = quote_identifier(server_name);

	switch (failure)
	{
		case TDS_TLS_NOT_OFFERED:
			return psprintf("Server \"%s\" requires TLS (encryption 'require', the default), but SQL Server "
							"does not offer TLS: no certificate could be loaded, or something other than SQL "
							"Server answers at host and port.  Configure a certificate on SQL Server.  "
							"Only if plain text is acceptable: ALTER SERVER %s OPTIONS (ADD encryption 'off').",
							server_name, q);
		case TDS_TLS_REQUIRED_BY_SERVER:
			return psprintf("SQL Server forces encryption (Force Encryption): ALTER SERVER %s OPTIONS "
							"(DROP encryption) to connect with TLS and certificate validation.", q);
		case TDS_TLS_UNTRUSTED:
			return psprintf("Name the CA that issued SQL Server's certificate: ALTER SERVER %s OPTIONS "
							"(ADD ca_file '/path/ca.pem') (SET if it is there), a PEM file the database server's operating-system user "
							"can read; the default ca_file 'system' trusts the operating system's CA store.  For "
							"a self-signed certificate, its own PEM file is the ca_file.", q);
		case TDS_TLS_EXPIRED:
			return pstrdup("SQL Server needs a renewed certificate.  If the dates in DETAIL look right, check "
						   "the clock of the database server.");
		case TDS_TLS_NOT_YET_VALID:
			return pstrdup("Check the clocks of the database server and of SQL Server: the certificate's "
						   "validity starts later (see DETAIL).");
		case TDS_TLS_NAME_MISMATCH:
			return psprintf("Set the host option to a name the certificate carries (see DETAIL): ALTER SERVER "
							"%s OPTIONS (SET host '...').  check_host_name 'false' accepts any certificate of a "
							"trusted CA, which lets any other server holding one impersonate this one.", q);
		case TDS_TLS_REVOKED:
			return pstrdup("The CA revoked SQL Server's certificate (it is listed in crl_file): SQL Server "
						   "needs a new one.");
		case TDS_TLS_HANDSHAKE:
			/* TLS 1.3 alone on SQL Server's machine is the likely cause: name the fix */
			return psprintf("See DETAIL for what the TLS library reported.  No common protocol version or "
							"cipher: SQL Server's machine must have TLS 1.2 enabled (SQL Server uses TLS 1.3 "
							"only with TDS 8.0, which FreeTDS 1.3 does not speak) and a cipher suite GnuTLS "
							"supports.  An alert or a connection closed during the handshake: check that host "
							"and port of server \"%s\" lead to SQL Server itself.",
							server_name);
		case TDS_TLS_CA_FILE:
			return psprintf("Fix the file named in DETAIL, or name another: ALTER SERVER %s OPTIONS (SET "
							"ca_file '...').  It must be a regular file of PEM certificates, owned by the "
							"database server's operating-system user or root and writable by no one else.", q);
		case TDS_TLS_CRL_FILE:
			/* naming ca_file here sent users to change the file that was fine */
			return psprintf("Fix the file named in DETAIL, or name another: ALTER SERVER %s OPTIONS (SET "
							"crl_file '...').  It must be a regular file with the PEM revocation list of the CA "
							"that issued SQL Server's certificate, owned by the database server's operating-system "
							"user or root and writable by no one else.", q);
		case TDS_TLS_NONE:
			break;
	}
	return psprintf("The login to server \"%s\" failed.", server_name);
}
