/*-------------------------------------------------------------------------
 *
 * snapshot_filter.h
 *		The row filter of a table's initial copy: a T-SQL predicate over the
 *		source table (add_table/alter_table snapshot_filter, the role of
 *		Debezium's snapshot.select.statement.overrides).
 *
 * The predicate is put into the snapshot's chunk query as
 * "WHERE (<filter>) AND <keyset position>", so it must be one boolean
 * expression and nothing else.  Two checks make sure of that before it is
 * stored: a lexical one here (no statement separator, no comment, no
 * parenthesis that closes the surrounding one, every quote closed), and
 * SQL Server's own: sys.sp_describe_first_result_set parses and binds the
 * query the snapshot would send, so a misspelt column or a syntax error is
 * refused now, not when the snapshot runs.
 *
 * It filters the initial copy only: changes to rows outside the filter are
 * still streamed, as in Debezium.
 *
 * IDENTIFICATION
 *		include/snapshot_filter.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_SNAPSHOT_FILTER_H
#define MSSQL_CDC_SNAPSHOT_FILTER_H

#include "postgres.h"

#include "tds_session.h"

/* Longest filter accepted (characters) */
#define SNAPSHOT_FILTER_MAX_CHARS	4000

/* The lexical check; raises 42601 (22023 for empty or too long) */
extern void snapshot_filter_check_syntax(const char *filter);

/*
 * Ask SQL Server to parse and bind the snapshot query with the filter
 * (sp_describe_first_result_set).  Raises 42601 with SQL Server's message
 * when it refuses.
 */
extern void snapshot_filter_validate(TdsSession *session, const char *schema, const char *table,
									 const char *filter);

#endif							/* MSSQL_CDC_SNAPSHOT_FILTER_H */
