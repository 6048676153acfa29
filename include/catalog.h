/*-------------------------------------------------------------------------
 *
 * catalog.h
 *		Typed, C-level access to the mssql_cdc catalog tables
 *		(extension/20_catalog.sql) for the launcher and the workers.
 *
 * All functions must be called inside a transaction, in the database that
 * has the extension; results are palloc'd in the caller's memory context.
 *
 * The catalog tables grant nothing to ordinary roles, while a worker runs as
 * its server's run_as role (so that staging tables obey normal ACLs).  The
 * functions here therefore access the catalog as the extension owner for
 * the span of their own statements (catalog_become_owner); other code that
 * writes the catalog directly (e.g. the worker's checkpoint UPDATE, in the
 * same transaction as its staging rows) must use the same pair of calls.
 *
 * IDENTIFICATION
 *		include/catalog.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_CATALOG_H
#define MSSQL_CDC_CATALOG_H

#include "postgres.h"
#include "nodes/pg_list.h"

#include "lsn.h"

/* How many error-log rows per server survive catalog_record_error's trim */
#define MSSQL_CDC_ERRORS_KEPT_PER_SERVER	1000

typedef enum MssqlSnapshotMode
{
	MSSQL_SNAPSHOT_INITIAL,		/* copy the table, then stream */
	MSSQL_SNAPSHOT_NEVER		/* stream from the source's max LSN at start */
} MssqlSnapshotMode;

typedef enum MssqlTablePhase
{
	MSSQL_PHASE_PENDING,		/* nothing done yet (or re-snapshot requested) */
	MSSQL_PHASE_SNAPSHOTTING,
	MSSQL_PHASE_STREAMING,
	MSSQL_PHASE_ERROR			/* needs the user (e.g. cleanup overtook us) */
} MssqlTablePhase;

/* What the worker does when CDC cleanup removed changes it still needs */
typedef enum MssqlOverrunPolicy
{
	MSSQL_OVERRUN_ERROR,		/* park the table in phase 'error' (the user decides) */
	MSSQL_OVERRUN_RESNAPSHOT	/* record the overrun and copy the table again */
} MssqlOverrunPolicy;

/* A row of mssql_cdc.servers */
typedef struct MssqlCdcServer
{
	char	   *server_name;
	char	   *run_as;			/* role name as stored */
	Oid			run_as_oid;		/* InvalidOid if that role no longer exists */
	bool		paused;
	int			consecutive_failures;
	/* most transactions per window since a window timed out; 0: no limit */
	int			window_transactions;
} MssqlCdcServer;

/* A row of mssql_cdc.tables joined with its mssql_cdc.table_state */
typedef struct MssqlCdcTable
{
	int32		table_id;
	char	   *server_name;
	char	   *source_schema;
	char	   *source_table;
	char	   *capture_instance;	/* NULL = current CI of the table */
	char	   *staging_schema;
	char	   *staging_table;
	MssqlSnapshotMode snapshot_mode;
	MssqlOverrunPolicy on_retention_overrun;
	/* progress; a missing table_state row reads as a fresh "pending" row */
	MssqlTablePhase phase;
	bool		has_checkpoint_lsn;
	MssqlLsn	checkpoint_lsn;
	bool		has_snapshot_lsn;
	MssqlLsn	snapshot_lsn;
	List	   *snapshot_last_key;	/* of char *, NIL if none */
	int64		snapshot_rows;
	/* operator controls (0.2) */
	bool		paused;			/* pause(server, table): no windows, no chunks */
	char	   *snapshot_filter;	/* T-SQL predicate of the initial copy, or NULL */
	int64		settings_version;	/* what the settings above were read as */
	bool		partitioned;	/* partition_interval set: staging_partitions.h */
	bool		spatial_postgis;	/* geometry/geography staged as PostGIS types */
	/* column selection (column_selection.h): char * lists, at most one set */
	List	   *include_columns;
	List	   *exclude_columns;
	bool		update_before;	/* stage update_before rows (before-images) */
	/* mirror table (mirror.h), both NULL if none; changelog false: mirror only */
	char	   *mirror_schema;
	char	   *mirror_table;
	bool		changelog;
} MssqlCdcTable;

/* The extension's owner, or InvalidOid if the extension is not installed. */
extern Oid	catalog_extension_owner(void);

/* Saved identity while catalog tables are accessed as the extension owner */
typedef struct CatalogOwnerScope
{
	Oid			saved_userid;
	int			saved_sec_context;
} CatalogOwnerScope;

/*
 * Switch to the extension owner (SECURITY_LOCAL_USERID_CHANGE, like pg_cron)
 * and back.  Do all privilege checks against the real caller before the
 * switch.  An error in between needs no cleanup: transaction (or
 * subtransaction) abort restores the saved identity.
 */
extern void catalog_become_owner(CatalogOwnerScope *scope);
extern void catalog_restore_user(const CatalogOwnerScope *scope);

/* Names (char *) of all servers in mssql_cdc.servers, in name order. */
extern List *catalog_get_server_names(void);

/* One server row; NULL if absent and missing_ok, else an error. */
extern MssqlCdcServer *catalog_get_server(const char *server_name, bool missing_ok);

/* servers.window_transactions (worker_window.c); 0 clears it */
extern void catalog_set_server_window_transactions(const char *server_name, int transactions);

/* The server's tables (MssqlCdcTable *), ordered by table_id. */
extern List *catalog_get_server_tables(const char *server_name);

/* Text forms used by the catalog's CHECK constraints */
extern const char *catalog_snapshot_mode_name(MssqlSnapshotMode mode);
extern bool catalog_snapshot_mode_from_name(const char *name, MssqlSnapshotMode *mode);
extern const char *catalog_phase_name(MssqlTablePhase phase);
extern const char *catalog_overrun_policy_name(MssqlOverrunPolicy policy);
extern bool catalog_overrun_policy_from_name(const char *name, MssqlOverrunPolicy *policy);

/*
 * Append to mssql_cdc.errors and trim that server's log to the newest
 * MSSQL_CDC_ERRORS_KEPT_PER_SERVER rows.  table_id <= 0 means "the server
 * as a whole"; detail, hint and sqlstate may be NULL, remote_error_number 0
 * means none.  Meant for the worker's separate short error transaction.
 */
extern void catalog_record_error(const char *server_name, int32 table_id,
								 const char *sqlstate, const char *message,
								 const char *detail, const char *hint,
								 int remote_error_number);

/* The same, with the condition (src/error_condition.c) of the error; NULL = none */
extern void catalog_record_error_condition(const char *server_name, int32 table_id,
										   const char *sqlstate, const char *message,
										   const char *detail, const char *hint,
										   int remote_error_number, const char *condition);

/*
 * The condition and hint of the failure just recorded as last_error of the
 * server / of the table (mssql_cdc.status shows them while that failure is
 * current: phase 'error' or consecutive_failures > 0).
 */
extern void catalog_set_server_condition(const char *server_name, const char *condition,
										 const char *hint);
extern void catalog_set_table_condition(int32 table_id, const char *condition,
										const char *hint);

/*
 * Set (warning non-NULL) or clear a server's warning: a problem that does
 * not stop the worker.  A message also becomes the server's last_error.
 * Returns false when the warning was already so (nothing written).
 */
extern bool catalog_set_server_warning(const char *server_name, const char *warning,
									   const char *hint, const char *message);

/*
 * A table's warning; status shows it while the table is pending or
 * snapshotting.  keep_other: leave a warning that is already there (the
 * retention overrun that caused the snapshot says more).
 */
extern void catalog_set_table_warning(int32 table_id, const char *warning, const char *hint,
									  bool keep_other);

/*
 * on_retention_overrun = 'resnapshot': reset a streaming table to
 * 'pending' like mssql_cdc.resnapshot(), keeping the overrun as last_error
 * and warning 'retention_overrun'.  False when the table was not streaming
 * any more (a concurrent user action won).
 */
extern bool catalog_resnapshot_after_overrun(int32 table_id, const char *message,
											 const char *hint);

#endif							/* MSSQL_CDC_CATALOG_H */
