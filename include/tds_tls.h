/*-------------------------------------------------------------------------
 *
 * tds_tls.h
 *		What a TLS failure of a login means, for the messages of the session
 *		layer and the status conditions of the worker (src/tds_tls.c).
 *
 * IDENTIFICATION
 *		include/tds_tls.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_TDS_TLS_H
#define MSSQL_CDC_TDS_TLS_H

#include "postgres.h"

#include "tds_session.h"

/* The status condition (a COND_* name of error_condition.h) */
extern const char *tds_tls_condition(TdsTlsFailure failure);

/* What went wrong, to follow "could not connect to SQL Server for server "x": " */
extern const char *tds_tls_failure_summary(TdsTlsFailure failure);

/* What to do about it, naming the server (palloc'd) */
extern char *tds_tls_failure_hint(TdsTlsFailure failure, const char *server_name);

#endif							/* MSSQL_CDC_TDS_TLS_H */
