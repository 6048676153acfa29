/*-------------------------------------------------------------------------
 *
 * error_condition.h
 *		Turn a failure of the worker into a short machine-readable condition
 *		and a hint that says what the user can do about it.
 *
 * mssql_cdc.status shows the condition and the hint next to last_error
 * (doc/troubleshooting.md lists them all).  The classification looks at
 * where the error came from: SQL Server's message number and db-lib's view
 * of the connection when the error came from the source, the SQLSTATE of
 * Postgres itself when writing the staging table failed.
 *
 * IDENTIFICATION
 *		include/error_condition.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_ERROR_CONDITION_H
#define MSSQL_CDC_ERROR_CONDITION_H

#include "postgres.h"

#include "tds_session.h"

/* Conditions of the source (SQL Server) */
#define COND_LOGIN_FAILED				"login_failed"
#define COND_PERMISSION_DENIED			"permission_denied"
#define COND_CONNECTION_REFUSED			"connection_refused"
#define COND_TIMEOUT					"timeout"
#define COND_CONNECTION_LOST			"connection_lost"
#define COND_SOURCE_ERROR				"source_error"
#define COND_SOURCE_UNAVAILABLE			"source_unavailable"
#define COND_SNAPSHOT_ISOLATION_OFF		"snapshot_isolation_off"
#define COND_CAPTURE_JOB_STALLED		"capture_job_stalled"
#define COND_RETENTION_OVERRUN			"retention_overrun"
#define COND_RETENTION_GAP				"retention_gap"
#define COND_UNSUPPORTED_VALUE			"unsupported_value"
#define COND_SOURCE_TABLE_MISSING		"source_table_missing"
#define COND_CAPTURE_INSTANCE_MISSING	"capture_instance_missing"
#define COND_CDC_DISABLED				"cdc_disabled"
#define COND_CHANGES_LOST				"changes_lost"
#define COND_SOURCE_SCHEMA_CHANGED		"source_schema_changed"
#define COND_NO_PRIMARY_KEY				"no_primary_key"
#define COND_MALFORMED_RESPONSE			"malformed_response"
#define COND_ENCRYPTION_UNAVAILABLE		"encryption_unavailable"
/* restore, failover that lost the tail, server repointed: src/worker_timeline.c */
#define COND_SOURCE_WENT_BACK			"source_went_back"

/* TLS at login: which check refused the connection (tds_tls.c) */
#define COND_ENCRYPTION_REQUIRED_BY_SERVER	"encryption_required_by_server"
#define COND_CERTIFICATE_UNTRUSTED		"certificate_untrusted"
#define COND_CERTIFICATE_EXPIRED		"certificate_expired"
#define COND_CERTIFICATE_NAME_MISMATCH	"certificate_name_mismatch"
#define COND_CERTIFICATE_REVOKED		"certificate_revoked"
#define COND_TLS_HANDSHAKE_FAILED		"tls_handshake_failed"
#define COND_TLS_FILE_UNUSABLE			"tls_file_unusable"


/* Conditions of the staging table (Postgres) */
#define COND_STAGING_TABLE_MISSING		"staging_table_missing"
#define COND_STAGING_TABLE_CHANGED		"staging_table_changed"
#define COND_STAGING_PERMISSION_DENIED	"staging_permission_denied"
#define COND_STAGING_CONSTRAINT			"staging_constraint_violation"

/* Anything else: the message says what happened, the worker retries */
#define COND_INTERNAL_ERROR				"internal_error"

typedef struct ErrorCondition
{
	const char *condition;		/* one of the COND_* names */
	char	   *hint;			/* palloc'd, never NULL */
} ErrorCondition;

/*
 * Classify an error the worker caught.  sqlerrcode is the ERROR's SQLSTATE,
 * schema_name its schema field (ErrorData.schema_name: Postgres sets it for
 * a violated constraint; may be NULL); remote is what the TDS layer
 * captured for the failed call (kind NONE when the error did not come from
 * SQL Server; NULL is the same).  server_name goes into the hints.
 */
extern ErrorCondition error_condition_classify(int sqlerrcode, const char *schema_name,
											   const TdsRemoteError *remote,
											   const char *server_name);

#endif							/* MSSQL_CDC_ERROR_CONDITION_H */
