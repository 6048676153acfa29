/*-------------------------------------------------------------------------
 *
 * error_condition.c
 *		SQL Server error number / db-lib failure kind / Postgres SQLSTATE
 *		→ a condition name and a hint the user can act on.
 *
 * Users of CDC tools complain most about errors nobody can act on
 * (reference/peers.md): "Login failed" without saying which credentials,
 * "permission denied" without saying which grant.  The messages themselves
 * come from SQL Server or Postgres and stay untouched in last_error; this
 * module adds the part they cannot know: which mssql_cdc setting or which
 * statement on which side fixes it.
 *
 * The TDS layer's captured error is trusted only when it is consistent
 * with the SQLSTATE that was raised: the session keeps its last error until
 * the next call, so a Postgres error while writing the staging table can
 * follow an earlier, tolerated SQL Server error.
 *
 * IDENTIFICATION
 *		src/error_condition.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/elog.h"

#include "error_condition.h"
#include "mssql_cdc.h"
#include "tds_tls.h"

static ErrorCondition
make(const char *condition, char *hint)
{
	ErrorCondition c;

	c.condition = condition;
	c.hint = hint;
	return c;
}

static bool
is_login_failure(int msgno)
{
	/* login failed, password expired or must change, login disabled/locked */
	return msgno == 18456 || msgno == 18452 || msgno == 18470 ||
		msgno == 18486 || msgno == 18487 || msgno == 18488;
}

static bool
is_database_refused(int msgno)
{
	/* cannot open the database / the login's default database, no access */
	return msgno == 4060 || msgno == 4063 || msgno == 4064 || msgno == 916;
}

static bool
is_permission_denied(int msgno)
{
	/* object / column permission, no permission, VIEW SERVER STATE */
	return msgno == 229 || msgno == 230 || msgno == 297 || msgno == 300;
}

/* A failure to connect or log in (no session came out of it) */
static ErrorCondition
classify_connect(const TdsRemoteError *remote, const char *server_name)
{
	if (is_login_failure(remote->msgno))
		return make(COND_LOGIN_FAILED,
					psprintf("Check the username and password of the user mapping for server \"%s\" "
							 "(ALTER USER MAPPING ... OPTIONS (SET password '...')), that the SQL Server login "
							 "is enabled and allows SQL Server authentication, and that its default database "
							 "exists.  The worker retries by itself.",
							 server_name));
	if (is_database_refused(remote->msgno))
		return make(COND_LOGIN_FAILED,
					psprintf("The login cannot open the database: check the database option of server \"%s\", "
							 "that the login has a user in that database (CREATE USER ... FOR LOGIN ...), and "
							 "the login's default database.  The worker retries by itself.",
							 server_name));
	return make(COND_CONNECTION_REFUSED,
				psprintf("SQL Server could not be reached: check the host and port options of server \"%s\", "
						 "that SQL Server runs and accepts TCP connections there (TCP/IP enabled, firewall, a "
						 "fixed port for named instances), and its login_timeout option.  The worker retries "
						 "with backoff.",
						 server_name));
}

/* An error SQL Server returned for a request (the session stays usable) */
static ErrorCondition
classify_remote(const TdsRemoteError *remote, const char *server_name)
{
	if (is_permission_denied(remote->msgno))
		return make(COND_PERMISSION_DENIED,
					psprintf("The login of server \"%s\" lacks a permission: GRANT SELECT on the source table "
							 "and on schema cdc (GRANT SELECT ON SCHEMA::cdc TO ...), and make it a member of "
							 "the capture instance's gating role if it has one; mssql_cdc.check_server() names the "
							 "GRANT each table needs, and data_query_mode 'function' reads the change function "
							 "instead of the change table.  The worker retries by itself.",
							 server_name));
	if (is_database_refused(remote->msgno))
		return make(COND_LOGIN_FAILED,
					psprintf("The login cannot open the database: check the database option of server \"%s\" "
							 "and that the login has a user in that database.",
							 server_name));
	if (remote->msgno == 3952)
		return make(COND_SNAPSHOT_ISOLATION_OFF,
					pstrdup("Run ALTER DATABASE ... SET ALLOW_SNAPSHOT_ISOLATION ON on the source database."));
	return make(COND_SOURCE_ERROR,
				pstrdup("SQL Server rejected a query of the worker; its message is in last_error and the "
						"detail of mssql_cdc.errors.  The worker retries with backoff."));
}

/* what happens to a staging table that keeps refusing (worker_staging_park.c) */
#define TABLE_PARK_TEXT "mssql_cdc.table_failures_before_park failed windows, parks the table " \
	"(the source's other tables stream on) until mssql_cdc.resume(server, source_table)"

/* Postgres refused a write to the staging table */
static ErrorCondition
classify_staging(int sqlerrcode)
{
	switch (sqlerrcode)
	{
		case ERRCODE_UNDEFINED_TABLE:
			return make(COND_STAGING_TABLE_MISSING,
						pstrdup("The staging table is gone: create it again with the columns it had (or "
								"remove the table with mssql_cdc.remove_table() and add it again).  Nothing "
								"was copied past the failure; the worker retries and, after " TABLE_PARK_TEXT "."));
		case ERRCODE_INSUFFICIENT_PRIVILEGE:
			return make(COND_STAGING_PERMISSION_DENIED,
						pstrdup("The server's run_as role may not write the staging table: GRANT INSERT (and "
								"SELECT) on it to that role.  Nothing was copied past the failure; the worker "
								"retries and, after " TABLE_PARK_TEXT "."));
		case ERRCODE_NOT_NULL_VIOLATION:
		case ERRCODE_CHECK_VIOLATION:
		case ERRCODE_UNIQUE_VIOLATION:
		case ERRCODE_FOREIGN_KEY_VIOLATION:
		case ERRCODE_EXCLUSION_VIOLATION:
		case ERRCODE_RESTRICT_VIOLATION:
			return make(COND_STAGING_CONSTRAINT,
						pstrdup("A constraint added to the staging table rejects a source row: drop or relax it "
								"(staging tables must accept every change).  Nothing was copied past the "
								"failure; the worker retries and, after " TABLE_PARK_TEXT "."));
	}
	return make(COND_STAGING_TABLE_CHANGED,
				pstrdup("The staging table was altered and no longer takes the source's rows (a column "
						"dropped, renamed or of another type): restore its columns as add_table created "
						"them.  Nothing was copied past the failure; the worker retries and, after " TABLE_PARK_TEXT "."));
}

/* SQLSTATEs Postgres raises when the staging table does not fit any more */
static bool
is_staging_sqlstate(int sqlerrcode)
{
	switch (ERRCODE_TO_CATEGORY(sqlerrcode))
	{
		case ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION:	/* class 23 */
		case ERRCODE_DATA_EXCEPTION:	/* class 22: a type that no longer takes the value */
			return true;
	}
	switch (sqlerrcode)
	{
		case ERRCODE_UNDEFINED_TABLE:
		case ERRCODE_UNDEFINED_COLUMN:
		case ERRCODE_DATATYPE_MISMATCH:
		case ERRCODE_WRONG_OBJECT_TYPE:
		case ERRCODE_INVALID_TABLE_DEFINITION:
		case ERRCODE_INSUFFICIENT_PRIVILEGE:
			return true;
	}
	return false;
}

ErrorCondition
error_condition_classify(int sqlerrcode, const char *schema_name,
						 const TdsRemoteError *remote, const char *server_name)
{
	TdsErrorKind kind = remote ? remote->kind : TDS_ERROR_NONE;

	/* garbage on the wire: whatever db-lib made of it, say what it was */
	if (remote != NULL && remote->malformed)
		return make(COND_MALFORMED_RESPONSE,
					psprintf("Server \"%s\" sent a reply that is not valid TDS (a broken proxy or load "
							 "balancer, something else listening on that port, or a server bug).  Check the "
							 "host and port options; nothing of the failed unit was kept, and the worker "
							 "retries with a new connection.",
							 server_name));
	/* which TLS check refused the login */
	if (remote != NULL && tds_error_is_tls_failure(remote))
		return make(tds_tls_condition(remote->tls_failure),
					tds_tls_failure_hint(remote->tls_failure, server_name));

	switch (kind)
	{
		case TDS_ERROR_CONNECT:
			if (sqlerrcode == ERRCODE_FDW_UNABLE_TO_ESTABLISH_CONNECTION)
				return classify_connect(remote, server_name);
			break;
		case TDS_ERROR_TIMEOUT:
			if (sqlerrcode == ERRCODE_CONNECTION_FAILURE)
				return make(COND_TIMEOUT,
							psprintf("SQL Server did not answer within the query_timeout option of server \"%s\": "
									 "look for blocking on the source (sp_who2, long transactions holding "
									 "locks on cdc tables) or raise query_timeout.  The worker retries with a "
									 "new connection.",
									 server_name));
			break;
		case TDS_ERROR_CONNECTION_LOST:
			if (sqlerrcode == ERRCODE_CONNECTION_FAILURE)
				return make(COND_CONNECTION_LOST,
							psprintf("The connection to server \"%s\" broke (SQL Server restarted, failover, "
									 "network).  The worker reconnects with backoff; nothing is lost.",
									 server_name));
			break;
		case TDS_ERROR_REMOTE:
			/* 229 and friends raise 42501, like a staging privilege error */
			if (sqlerrcode == ERRCODE_INSUFFICIENT_PRIVILEGE)
			{
				if (is_permission_denied(remote->msgno))
					return classify_remote(remote, server_name);
			}
			else if (!is_staging_sqlstate(sqlerrcode))
				return classify_remote(remote, server_name);
			break;
		case TDS_ERROR_PROTOCOL:
			if (ERRCODE_TO_CATEGORY(sqlerrcode) == ERRCODE_FDW_ERROR)
				return make(COND_SOURCE_ERROR,
							psprintf("The conversation with server \"%s\" failed on the client side; see "
									 "last_error.  The worker retries with a new connection.",
									 server_name));
			break;
		case TDS_ERROR_INTERRUPTED:
		case TDS_ERROR_NONE:
			break;
	}

	/* a source value PostgreSQL cannot hold (tds_convert.c), not the staging table's fault */
	if (sqlerrcode == ERRCODE_UNTRANSLATABLE_CHARACTER)
		return make(COND_UNSUPPORTED_VALUE,
					pstrdup("A source value cannot be stored in PostgreSQL (e.g. a NUL character in a string).  "
							"Correct the row on the source and, once SQL Server's capture job has recorded the "
							"correction, call mssql_cdc.resnapshot(server, source_table): the changes that carry "
							"the old value (this one, and the correction's before-image or deleted row) stay in "
							"the change table, before the new copy.  A streamed "
							"change fails every retry, so after mssql_cdc.table_failures_before_park failed "
							"windows the table is parked and the source's other tables stream on."));

	/* connection problems raised without a captured error */
	if (sqlerrcode == ERRCODE_FDW_UNABLE_TO_ESTABLISH_CONNECTION)
	{
		static const TdsRemoteError unknown;

		return classify_connect(&unknown, server_name);
	}
	/*
	 * Postgres names the table of a violated constraint; a violation without
	 * one, or on the extension's own catalog (the checkpoint guard), is a bug
	 * of ours, not a staging table that changed.
	 */
	if (ERRCODE_TO_CATEGORY(sqlerrcode) == ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION &&
		(schema_name == NULL || strcmp(schema_name, MSSQL_CDC_SCHEMA_NAME) == 0))
		return make(COND_INTERNAL_ERROR,
					pstrdup("A check of mssql_cdc's own catalog failed (see last_error); nothing was applied.  "
							"Report it with the mssql_cdc.errors row and the server log."));
	if (is_staging_sqlstate(sqlerrcode))
		return classify_staging(sqlerrcode);
	if (ERRCODE_TO_CATEGORY(sqlerrcode) == ERRCODE_FDW_ERROR ||
		ERRCODE_TO_CATEGORY(sqlerrcode) == ERRCODE_CONNECTION_EXCEPTION)
		return make(COND_SOURCE_ERROR,
					psprintf("Reading from server \"%s\" failed; see last_error.  The worker retries with "
							 "backoff.", server_name));
	return make(COND_INTERNAL_ERROR,
				pstrdup("See last_error and the server log.  The worker retries with backoff; if the error "
						"repeats, report it."));
}
