/*-------------------------------------------------------------------------
 *
 * api_common.h
 *		What the SQL API functions share (src/api*.c): argument checks, the
 *		run_as rule, and the catalog write scope.
 *
 * Every API function checks its arguments and the caller's privileges
 * first, then writes the catalog as the extension owner between
 * api_begin_catalog_write() and api_end_catalog_write() (see src/api.c for
 * the security model).  An error in between needs no cleanup: the abort of
 * the caller's transaction restores its identity.
 *
 * IDENTIFICATION
 *		include/api_common.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_API_COMMON_H
#define MSSQL_CDC_API_COMMON_H

#include "postgres.h"

#include "fmgr.h"
#include "datatype/timestamp.h"

#include "catalog.h"

/* Switch to the extension owner and connect SPI, and back. */
extern void api_begin_catalog_write(CatalogOwnerScope *scope);
extern void api_end_catalog_write(CatalogOwnerScope *scope);

/* argument "argname" must not be NULL (22004) */
extern void api_require_argument(FunctionCallInfo fcinfo, int argno, const char *argname);

/* A SQL Server table name in T-SQL syntax, or 42602 with what is wrong */
extern void api_parse_source_table(const char *input, char **schema, char **table);

/* The caller may change a server that runs as run_as (42501 otherwise). */
extern void api_check_run_as(Oid caller, const char *server_name, const char *run_as);

extern Datum api_name_datum(const char *s);

/*
 * Inside the write scope: lock the server's row; returns its run_as, or
 * NULL when the server has no captured tables.  *paused may be NULL.
 */
extern char *api_lock_server_row(const char *server_name, bool *paused);

/* Inside the write scope: table_id of a captured table, or 0 */
extern int32 api_find_captured_table(const char *server_name, const char *schema,
									 const char *table);

extern void api_report_server_not_in_use(const char *server_name) pg_attribute_noreturn();
extern void api_report_table_not_captured(const char *server_name, const char *schema,
										  const char *table) pg_attribute_noreturn();

/*
 * The common start of the functions that act on one captured table
 * (arguments 0 and 1 are server and source_table): check them, lock the
 * server's row, make sure the caller may act for its run_as role, and find
 * the table.  Returns the table id, with the caller left inside
 * api_begin_catalog_write(scope).  *run_as_out may be NULL.
 */
extern int32 api_begin_table_change(FunctionCallInfo fcinfo, Oid caller, CatalogOwnerScope *scope,
									char **server_name_out, char **run_as_out);

/*
 * Inside the write scope: lock the table's progress row (FOR UPDATE), so
 * that a window or snapshot chunk of the worker that is running for it
 * ends first and the next one sees the change (every setting takes effect
 * at a window boundary), and count the change in tables.settings_version,
 * which the worker compares at the start of each unit.  False when the
 * progress row is missing (after a restore).
 */
extern bool api_lock_table_for_change(int32 table_id);

/*
 * The on_retention_overrun policy named by the user, checked against the
 * table's snapshot mode (22023 with a hint).
 */
extern MssqlOverrunPolicy api_parse_overrun_policy(const char *name, MssqlSnapshotMode mode);

/*
 * A snapshot_filter argument: lexically one condition (snapshot_filter.h),
 * and only for a table that takes snapshots (snapshot_mode 'initial').
 */
extern void api_check_snapshot_filter(const char *filter, MssqlSnapshotMode mode);

/*
 * add_table's mirror: filled by the initial copy, so refused with
 * snapshot_mode 'never' or a start_at, which skip it.
 */
extern void api_check_mirror_start(bool mirror, MssqlSnapshotMode mode, bool start_at);

/*
 * partition_interval and retention (either may be NULL): at least a second
 * (22023), and retention only for a partitioned staging table.
 */
extern void api_check_partitioning(Interval *partition_interval, Interval *retention,
								   bool partitioned);

#endif							/* MSSQL_CDC_API_COMMON_H */
