/*-------------------------------------------------------------------------
 *
 * remote_check_access.h
 *		The permission checks of mssql_cdc.check_server(): every object
 *		the worker reads, tried as the server's login, with the exact GRANT
 *		a missing permission needs.
 *
 * SQL Server gates each object on its own: the change tables and
 * cdc.lsn_time_mapping, cdc.captured_columns, cdc.index_columns are
 * ordinary tables of schema cdc (SELECT on them or on SCHEMA::cdc); the
 * query functions follow the CDC security model (SELECT on the source
 * plus the gating role); sys.dm_cdc_log_scan_sessions needs VIEW DATABASE
 * STATE; the source tables need SELECT for snapshots and are invisible in
 * the catalog without any permission.  doc/sql-server-setup.md explains
 * each of them.
 *
 * IDENTIFICATION
 *		include/remote_check_access.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_REMOTE_CHECK_ACCESS_H
#define MSSQL_CDC_REMOTE_CHECK_ACCESS_H

#include "postgres.h"

#include "foreign/foreign.h"
#include "nodes/pg_list.h"

#include "tds_session.h"

/* One row of check_server's result */
typedef struct CheckRow
{
	const char *name;
	bool		ok;
	char	   *detail;
} CheckRow;

/*
 * The access rows, in order: lsn_time_mapping, captured_columns,
 * index_columns, scan_sessions, read_path, then one "table <schema.table>"
 * row per table captured from the server (or, before any is added, per
 * capture instance the login sees).  A SQL Server error is a row's
 * detail; connection problems raise.  Runs in the caller's transaction
 * (it reads mssql_cdc.tables).
 */
extern List *check_server_access(TdsSession *session, ForeignServer *server);

#endif							/* MSSQL_CDC_REMOTE_CHECK_ACCESS_H */
