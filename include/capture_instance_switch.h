/*-------------------------------------------------------------------------
 *
 * capture_instance_switch.h
 *		Schema evolution through capture instances: which capture instance
 *		a table reads in a window, when it switches to a newer one, and
 *		what happens when its instance (or CDC on the database) is gone.
 *
 * SQL Server keeps at most two capture instances per table.  After
 * ALTER TABLE ... ADD c the operator creates a second one (with c); both
 * carry every change from the new one's start_lsn S on.  A table reads its
 * recorded instance (mssql_cdc.tables.capture_instance) for commit LSNs
 * below S and the new one from S on: windows of the table's group end
 * before S, and the first window that starts at or after S reads the new
 * instance and, in the same Postgres transaction, adds the new staging
 * columns, records the new instance and writes a history row
 * (mssql_cdc.capture_instance_switches).  A crash before that commit
 * leaves the old instance recorded and the checkpoint below S, so the
 * switch is simply done again.
 *
 * IDENTIFICATION
 *		include/capture_instance_switch.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_CAPTURE_INSTANCE_SWITCH_H
#define MSSQL_CDC_CAPTURE_INSTANCE_SWITCH_H

#include "postgres.h"

#include "nodes/pg_list.h"

#include "catalog.h"
#include "cdc_window.h"
#include "lsn.h"
#include "source_schema.h"
#include "staging.h"
#include "tds_session.h"

/* One capture instance of the source database, as the login sees it */
typedef struct SourceInstance
{
	char	   *source_schema;
	char	   *source_table;
	char	   *name;
	bool		has_start_lsn;	/* false until the capture job started it */
	MssqlLsn	start_lsn;		/* its min LSN: raised by cleanup */
} SourceInstance;

/* The CDC state of the source database, read once per poll */
typedef struct SourceCdcState
{
	bool		known;			/* read on this connection */
	bool		cdc_enabled;	/* sys.databases.is_cdc_enabled */
	char	   *database;		/* its name, for messages */
	List	   *instances;		/* SourceInstance *, every one the login may read */
} SourceCdcState;

/*
 * One batch: sys.databases' is_cdc_enabled and, when enabled,
 * sys.sp_cdc_help_change_data_capture for all tables (it lists the capture
 * instances the login may read, on SQL Server and the stand-in alike), and
 * with poll (not NULL) the poll of the max LSN after them (cdc_window.h):
 * the poll is one request.  ci_source_state_batch is its text (the caller
 * sends it, now or ahead of its use: worker_poll_ahead.c), and
 * ci_read_source_state_reply reads its reply once awaited.
 */
extern char *ci_source_state_batch(const CdcPoll *poll);
extern void ci_read_source_state_reply(TdsSession *session, SourceCdcState *state, CdcPoll *poll);

typedef enum CiPlanKind
{
	CI_READ_CURRENT,			/* read the recorded instance */
	CI_READ_UNTIL_SUCCESSOR,	/* read it, the window ends before successor's S */
	CI_SWITCH,					/* from >= S: read the successor, switch now */
	CI_WAIT,					/* nothing readable yet: sit this window out */
	CI_NOT_VISIBLE,				/* recorded instance gone, no other: explain */
	CI_LOST_CHANGES,			/* recorded gone, successor starts after from */
	CI_READ_PREDECESSOR			/* switched, but this window is a transaction that
								 * began before the recorded instance's start: read
								 * it from the older instance (ci_route_open_transactions) */
} CiPlanKind;

typedef struct CiPlan
{
	CiPlanKind	kind;
	const SourceInstance *current;	/* NULL when not listed */
	const SourceInstance *successor;	/* NULL when none */
	const SourceInstance *predecessor;	/* older instance still listed, or NULL */
} CiPlan;

/*
 * What the table reads in a window that starts at from.  Only forward:
 * while the recorded instance exists, only an instance with a later
 * start_lsn is a successor.
 */
extern CiPlan ci_plan_for_window(const SourceCdcState *state, const MssqlCdcTable *table,
								 const MssqlLsn *from);

/*
 * A transaction that was open across sys.sp_cdc_enable_table began before
 * the new instance's start S and commits after it: the new instance may
 * lack its changes from before S (SQL Server may or may not make the enable
 * wait for it), the older one has them all.  So while the older instance
 * exists, every transaction committed at or after S whose
 * cdc.lsn_time_mapping.tran_begin_lsn is below S is read from the older
 * one: a window that would read the newer instance ends before the first
 * such transaction, and one that starts with it reads the older instance
 * for that transaction alone (the switch waits for it, or, after the
 * switch, plan CI_READ_PREDECESSOR).  One query of cdc.lsn_time_mapping per
 * window, only while a table has two instances.  May lower *window_max.
 */
extern void ci_route_open_transactions(TdsSession *session, CiPlan *plan, const MssqlLsn *from,
									   MssqlLsn *window_max);

/* What to do about a captured table that is gone (source_table_missing) */
extern char *ci_hint_source_table_missing(const MssqlCdcTable *table);

/*
 * The recorded capture instance is not listed and no other is: dropped
 * (sys.sp_cdc_disable_table), gone with its table (DROP TABLE, or the table
 * hidden from the login), or not readable by the login (gating role)?  Asks
 * sys.tables; returns the condition (source_table_missing or
 * capture_instance_missing), message and hint.
 */
extern const char *ci_explain_not_visible(TdsSession *session, const MssqlCdcTable *table,
								   const char *server_name, char **message, char **hint);

/* Message and hint for CI_LOST_CHANGES */
extern void ci_explain_lost_changes(const MssqlCdcTable *table, const CiPlan *plan,
									const MssqlLsn *from, char **message, char **hint);

/* Message and hint for CDC disabled on the source database */
extern void ci_explain_cdc_disabled(const SourceCdcState *state, const char *server_name,
									char **message, char **hint);

/*
 * Check (in a transaction) that the staging table can take the new
 * instance's columns: no mapped type changed, no reserved name.  Returns
 * NULL when it can, else the message (*hint set) for phase 'error'.
 * *diff gets the comparison for ci_switch_commit.
 */
extern char *ci_check_staging(const MssqlCdcTable *table, const MssqlSourceTable *new_src,
							  StagingDiff *diff, char **hint);

/*
 * The switch itself, inside the window's transaction (before the new
 * instance's rows are applied): add the staging columns as run_as, record
 * the new instance in mssql_cdc.tables and a history row.  switch_lsn NULL:
 * adopted for a new snapshot (no stream position involved).
 */
extern void ci_switch_commit(const MssqlCdcTable *table, const char *old_instance,
							 const MssqlSourceTable *new_src, const StagingDiff *diff,
							 const MssqlLsn *switch_lsn, Oid run_as);

/*
 * Is the described capture instance still the one SQL Server lists (same
 * name and start LSN)?  False after it was dropped, or dropped and created
 * again, or cleanup moved its start.
 */
extern bool ci_still_listed(const SourceCdcState *state, const char *source_schema,
							const char *source_table, const MssqlCaptureInstance *ci);

/* The LSN just below lsn (false for 0x00...) */
extern bool ci_lsn_decrement(const MssqlLsn *lsn, MssqlLsn *result);

#endif							/* MSSQL_CDC_CAPTURE_INSTANCE_SWITCH_H */
