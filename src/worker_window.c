/*-------------------------------------------------------------------------
 *
 * worker_window.c
 *		One CDC window of a group of streaming tables that share a
 *		checkpoint: choose its end on a transaction boundary, check each
 *		table's source (capture instance, retention), and apply every table's
 *		rows and checkpoint in ONE Postgres transaction (invariants 1-3).
 *
 * IDENTIFICATION
 *		src/worker_window.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "apply.h"
#include "catalog.h"
#include "cdc_window.h"
#include "error_condition.h"
#include "mirror.h"
#include "mssql_cdc.h"
#include "shmem.h"
#include "source_identity.h"
#include "table_settings.h"

#include "worker_internal.h"

/*
 * Check one table before its window: which capture instance it reads
 * (plan, capture_instance_switch.c), the source, and that CDC cleanup has
 * not removed changes we still need (invariant 5).  Returns the described
 * source of the instance to read, or NULL when the table sits this window
 * out: parked in phase 'error', or nothing readable yet.  For a window
 * that switches to the successor, *switch_diff gets what the switch adds
 * to the staging table (NULL otherwise).
 */
/*
 * Read nothing from what the change query reads (the change table, or for
 * data_query_mode 'function' the source table, whose SELECT the change
 * function requires): raises SQL Server's permission error when the login
 * may not read it.
 */
static void
probe_read_access(const MssqlCdcTable *table, const char *ci)
{
	char	   *sql;

	if (worker_data_query_mode() == MSSQL_QUERY_DIRECT)
		sql = psprintf("SELECT TOP (0) 1 FROM cdc.%s",
					   tds_quote_ident(psprintf("%s_CT", ci)));
	else
		sql = psprintf("SELECT TOP (0) 1 FROM %s.%s",
					   tds_quote_ident(table->source_schema), tds_quote_ident(table->source_table));
	tds_exec_simple(worker_session, sql);
}

/*
 * The capture instance a plan reads, when it reads one (what
 * check_table_source describes), for reading its low watermark with the
 * window's end.
 */
static const char *
plan_instance(const MssqlCdcTable *table, const CiPlan *plan)
{
	switch (plan->kind)
	{
		case CI_SWITCH:
			return plan->successor->name;
		case CI_READ_CURRENT:
		case CI_READ_UNTIL_SUCCESSOR:
			return plan->current != NULL ? plan->current->name : table->capture_instance;
		case CI_READ_PREDECESSOR:
			return plan->predecessor->name;
		default:
			return NULL;
	}
}

/*
 * sys.fn_cdc_get_min_lsn(ci) as the window end's batch read it, or (an
 * instance it did not read) in a request of its own.  False for NULL.
 */
static bool
window_min_lsn(const CdcMinLsn *mins, int nmins, const char *ci, MssqlLsn *min_lsn)
{
	int			i;

	for (i = 0; i < nmins; i++)
		if (mins[i].fetched && strcmp(mins[i].capture_instance, ci) == 0)
		{
			*min_lsn = mins[i].lsn;
			return mins[i].known;
		}
	return cdc_get_min_lsn(worker_session, ci, min_lsn);
}

/*
 * Whether the window's batch reads ci's changes: false only when the probe
 * read with the window's end found no row of it in the window.
 */
static bool
window_has_rows(const CdcMinLsn *mins, int nmins, const char *ci)
{
	int			i;

	for (i = 0; i < nmins; i++)
		if (mins[i].fetched && mins[i].probe && strcmp(mins[i].capture_instance, ci) == 0)
			return mins[i].has_rows;
	return true;
}

static MssqlSourceTable *
check_table_source(const MssqlCdcTable *table, const MssqlLsn *from, const CiPlan *plan,
				   const CdcMinLsn *mins, int nmins, const char *proven_ci,
				   StagingDiff **switch_diff)
{
	MssqlSourceTable *src = NULL;
	const char *ci;
	const char *condition;
	MssqlLsn	min_lsn;
	char	   *message;
	char	   *hint = NULL;

	*switch_diff = NULL;
	switch (plan->kind)
	{
		case CI_WAIT:
			/* the successor is not started by the capture job yet */
			return NULL;
		case CI_NOT_VISIBLE:
			condition = ci_explain_not_visible(worker_session, table, worker_server_name, &message, &hint);
			worker_park_table(table, condition, message, hint);
			return NULL;
		case CI_LOST_CHANGES:
			ci_explain_lost_changes(table, plan, from, &message, &hint);
			worker_park_table(table, COND_CHANGES_LOST, message, hint);
			return NULL;
		case CI_SWITCH:
			src = worker_describe_ci(table, plan->successor->name);
			if (src == NULL)
				return NULL;
			/* a changed column type is refused before the window, not retried */
			*switch_diff = palloc0(sizeof(StagingDiff));
			worker_begin_xact();
			message = ci_check_staging(table, src, *switch_diff, &hint);
			worker_commit_xact();
			if (message != NULL)
			{
				worker_park_table(table, COND_SOURCE_SCHEMA_CHANGED, message, hint);
				*switch_diff = NULL;
				return NULL;
			}
			break;
		case CI_READ_CURRENT:
		case CI_READ_UNTIL_SUCCESSOR:
			src = worker_describe_source(table);
			break;
		case CI_READ_PREDECESSOR:
			/* one transaction that began before the switch; the switch stays */
			src = worker_describe_ci(table, plan->predecessor->name);
			break;
	}
	if (src == NULL)
		return NULL;
	ci = src->capture_instance->name;
	worker_ctx_capture_instance = ci;

	/* no row of the window, ever (window_quiet.c): nothing cleanup could remove */
	if (proven_ci != NULL && strcmp(proven_ci, ci) == 0)
		return src;
	if (!window_min_lsn(mins, nmins, ci, &min_lsn))
	{
		/* not processed by the capture job yet: nothing to read, wait */
		ereport(DEBUG1,
				(errmsg_internal("mssql_cdc source \"%s\": capture instance \"%s\" has no min LSN yet",
								 worker_server_name, ci)));
		return NULL;
	}
	if (mssql_lsn_is_zero(&min_lsn))
	{
		/*
		 * Zero means the instance does not exist or the login may not read
		 * its change data.  This poll's catalog still lists it, so first let
		 * SQL Server say which permission is missing: a refused read of what
		 * the worker reads is Msg 229, permission_denied, retried with
		 * backoff and fixed by a GRANT alone (the checkpoint is intact; no
		 * resnapshot needed).  Only a readable source with a zero mark parks.
		 */
		probe_read_access(table, ci);
		worker_park_table(table, COND_CAPTURE_INSTANCE_MISSING,
							psprintf("sys.fn_cdc_get_min_lsn(N'%s') returned 0x00000000000000000000: the capture instance does not exist or the login may not read it.",
									 ci),
							"Check the capture instance and the gating role of the login, then call mssql_cdc.resnapshot().");
		return NULL;
	}
	if (mssql_lsn_cmp(from, &min_lsn) < 0)
	{
		char		from_text[MSSQL_LSN_TEXT_SIZE];
		char		min_text[MSSQL_LSN_TEXT_SIZE];

		mssql_lsn_format(from, from_text);
		mssql_lsn_format(&min_lsn, min_text);
		worker_retention_overrun(table,
								 psprintf("Changes of capture instance \"%s\" were removed by CDC cleanup before they were copied: the next change needed is at %s, but the oldest one kept is at %s.",
										  ci, from_text, min_text));
		return NULL;
	}
	return src;
}

/*
 * The window was read while cleanup removed some of its rows: roll it back
 * entirely (nothing of it is kept, not even the other tables' rows; they
 * read it again at once) and treat each affected table as a retention
 * overrun, with the policy of that table.
 */
static void
abandon_window_after_cleanup(List *ready, List *instances, const bool *overrun,
							 const MssqlLsn *marks, const MssqlLsn *from)
{
	ListCell   *lc;
	ListCell   *lc2;
	int			i = 0;
	char		from_text[MSSQL_LSN_TEXT_SIZE];

	worker_abort_xact();
	mssql_lsn_format(from, from_text);
	forboth(lc, ready, lc2, instances)
	{
		MssqlCdcTable *table = lfirst(lc);
		MssqlSourceTable *src = lfirst(lc2);
		char		mark_text[MSSQL_LSN_TEXT_SIZE];

		if (!overrun[i])
		{
			i++;
			continue;
		}
		mssql_lsn_format(&marks[i++], mark_text);
		worker_ctx_table_id = table->table_id;
		worker_retention_overrun(table,
								 psprintf("Changes of capture instance \"%s\" from %s on were removed by CDC cleanup while the worker read them: its low watermark moved to %s during the read. Nothing of that window was applied.",
										  src->capture_instance->name, from_text, mark_text));
	}
	worker_ctx_table_id = 0;
}

/*
 * After a window committed: the tables that switched capture instance read
 * the new one from now on (description kept for the connection), and the
 * log says so.
 */
static void
note_capture_instance_switches(List *ready, List *instances, List *switches,
							   const ApplyResult *results, const MssqlLsn *from)
{
	ListCell   *lc;
	ListCell   *lc2;
	ListCell   *lc3;
	int			i = 0;
	char		from_text[MSSQL_LSN_TEXT_SIZE];

	mssql_lsn_format(from, from_text);
	forthree(lc, ready, lc2, instances, lc3, switches)
	{
		MssqlCdcTable *table = lfirst(lc);
		MssqlSourceTable *src = lfirst(lc2);
		StagingDiff *diff = lfirst(lc3);
		StringInfoData added;
		ListCell   *lc4;

		if (diff == NULL || results[i++].rows < 0)
			continue;
		worker_remember_described(table->table_id, src);
		initStringInfo(&added);
		foreach(lc4, diff->missing)
			appendStringInfo(&added, "%s%s", added.len > 0 ? ", " : "",
							 ((const MssqlColumn *) lfirst(lc4))->pg_name);
		ereport(LOG,
				(errmsg("mssql_cdc source \"%s\": table %s.%s switched from capture instance \"%s\" to \"%s\" at LSN %s",
						worker_server_name, table->source_schema, table->source_table,
						table->capture_instance ? table->capture_instance : "?",
						src->capture_instance->name, from_text),
				 errdetail("Staging columns added: %s; kept but no longer captured: %d.",
						   added.len > 0 ? added.data : "none", list_length(diff->not_captured))));
	}
}

WindowLag	worker_window_lag;

/*
 * Window size learned from query timeouts (doc/streaming.md "Large
 * transactions").  A sorted change query waits for the sort of everything it
 * covers before its first row, and query_timeout bounds that wait: a window
 * whose read timed out is retried with half as many transactions, down to
 * one, which is read without ORDER BY and so is never sorted.  The limit is
 * kept in mssql_cdc.servers.window_transactions, written by the failure's
 * own transaction (the worker exits after a failure and the launcher starts
 * it again, so nothing in memory survives it), and doubled back after
 * WINDOW_LIMIT_PROBATION windows that ran at it.
 */
#define WINDOW_LIMIT_PROBATION 64

/* transactions of the window whose read timed out; 0: none */
static int	window_timed_out = 0;

/* windows in a row that ran at the persisted limit */
static int	windows_at_limit = 0;

void
worker_note_read_failure(int transactions)
{
	const TdsRemoteError *err = tds_session_last_error(worker_session);

	if (err != NULL && err->kind == TDS_ERROR_TIMEOUT)
		window_timed_out = Max(transactions, 1);
}

void
worker_window_after_failure(void)
{
	int			limit = Max(1, window_timed_out / 2);

	if (window_timed_out <= 0)
		return;
	if (window_timed_out <= 1)
		ereport(WARNING,
				(errcode(ERRCODE_QUERY_CANCELED),
				 errmsg("mssql_cdc source \"%s\": reading one source transaction timed out",
						worker_server_name),
				 errhint("One transaction is read without ORDER BY and cannot be split; raise the server's query_timeout.")));
	else
		ereport(LOG,
				(errmsg("mssql_cdc source \"%s\": reading a window of %d source transactions timed out; windows hold at most %d from now on",
						worker_server_name, window_timed_out, limit)));
	window_timed_out = 0;
	windows_at_limit = 0;
	catalog_set_server_window_transactions(worker_server_name, limit);
}

/*
 * A window that ran at the limit without timing out: after enough of them
 * the limit doubles (in the window's transaction); it goes away at
 * batch_max_transactions.
 */
static void
relax_window_limit(MssqlCdcServer *server, int transactions)
{
	int			limit = server->window_transactions;

	if (limit <= 0 || transactions < limit || ++windows_at_limit < WINDOW_LIMIT_PROBATION)
		return;
	windows_at_limit = 0;
	limit = limit * 2 >= mssql_cdc_batch_max_transactions ? 0 : limit * 2;
	catalog_set_server_window_transactions(worker_server_name, limit);
	server->window_transactions = limit;
}

/*
 * Change every ready table's mirror (mirror_apply.c) from the staging rows
 * the window wrote, once the window's end is final: window_read() may still
 * move it back while reading, and rereads the window when it does.
 */
static void
apply_mirrors(List *ready, List *instances, const ApplyResult *results,
			  const MssqlLsn *checkpoint, const MssqlLsn *from, const MssqlLsn *to)
{
	ListCell   *lc;
	ListCell   *lc2;
	int			i = 0;

	forboth(lc, ready, lc2, instances)
	{
		MssqlCdcTable *table = lfirst(lc);
		const ApplyResult *result = &results[i++];

		/* sat out (-1), or nothing read */
		if (result->rows <= 0)
			continue;
		/* a failure here is this table's, as one of its read (worker_staging_park.c) */
		worker_ctx_table_id = table->table_id;
		worker_ctx_window_table = true;
		worker_ctx_window_checkpoint = *checkpoint;
		mirror_apply_window(table, lfirst(lc2), worker_args.run_as, from, to, result->key_moves);
		worker_ctx_window_table = false;
	}
	worker_ctx_table_id = 0;
}

/*
 * Every table's checkpoint moves to the window's end, with its rows; those
 * without rows in it all in one statement.
 */
static void
commit_checkpoints(List *ready, const bool *has_rows, const ApplyResult *results,
				   const MssqlLsn *to, TimestampTz end_time)
{
	int32	   *quiet = palloc(sizeof(int32) * list_length(ready));
	int			nquiet = 0;
	ListCell   *lc;
	int			i = 0;

	foreach(lc, ready)
	{
		MssqlCdcTable *table = lfirst(lc);

		if (results[i].rows >= 0 && !has_rows[i])
			quiet[nquiet++] = table->table_id;
		else if (results[i].rows >= 0)
			apply_commit_checkpoint(table->table_id, to, &results[i], end_time);
		i++;
	}
	apply_commit_checkpoints_without_rows(quiet, nquiet, to, end_time);
}

/*
 * Apply one window to a group of tables that share checkpoint `checkpoint`,
 * ending at `cap` at the latest when it is not NULL (the checkpoint of the
 * group ahead, worker_catch_up.c).  Returns true when the window was full
 * (more work is waiting).  The tables that committed it get their new
 * checkpoint in memory too, and those that may read on in this iteration
 * (not parked, and not switched to a new capture instance, which the next
 * catalog read describes) are appended to *advanced.
 */
bool
worker_apply_window(MssqlCdcServer *server, List *group, const MssqlLsn *checkpoint,
			 const MssqlLsn *max_lsn, TimestampTz max_time, const MssqlLsn *cap,
			 MssqlLsn *reached, List **advanced)
{
	MssqlLsn	from;
	MssqlLsn	to;
	TimestampTz end_time;
	MssqlLsn	window_max;
	CiPlan	   *plans;
	List	   *ready = NIL;
	List	   *instances = NIL;
	List	   *switches = NIL; /* StagingDiff * of a switching table, else NULL */
	ApplyResult *results;
	WindowRecheck recheck;
	CdcMinLsn  *mins;
	int			nmins = 0;
	const char **proven;		/* per table: the instance known quiet, or NULL */
	bool	   *has_rows;		/* per ready table: the batch reads its rows */
	bool	   *probed_quiet;	/* per ready table: the probe found no row */
	int64	   *lag;
	ListCell   *lc;
	ListCell   *lc2;
	int64		window_rows = 0;
	int64		window_transactions_seen = 0;
	int			i;
	int			max_transactions;
	int			transactions;
	MssqlLsn	chosen_to;

	*reached = *checkpoint;
	if (!mssql_lsn_increment(checkpoint, &from))
		return false;
	max_transactions = worker_window_transactions;
	if (server->window_transactions > 0)
		max_transactions = Min(max_transactions, server->window_transactions);

	/*
	 * Which capture instance each table reads.  A successor starting at S
	 * after from ends the window at S - 1 for the whole group (the group
	 * shares its windows, invariant 3): every table reads one instance per
	 * window, and the next window, from S on, switches.
	 */
	window_max = *max_lsn;
	if (cap != NULL && mssql_lsn_cmp(cap, &window_max) < 0)
		window_max = *cap;
	plans = palloc(sizeof(CiPlan) * list_length(group));
	mins = palloc0(sizeof(CdcMinLsn) * list_length(group));
	proven = palloc0(sizeof(char *) * list_length(group));
	i = 0;
	foreach(lc, group)
	{
		MssqlCdcTable *table = lfirst(lc);
		const char *ci;
		MssqlLsn	before_successor;
		MssqlLsn	quiet_upto;

		plans[i] = ci_plan_for_window(&worker_source_cdc, lfirst(lc), &from);
		if (plans[i].kind == CI_READ_UNTIL_SUCCESSOR &&
			ci_lsn_decrement(&plans[i].successor->start_lsn, &before_successor) &&
			mssql_lsn_cmp(&before_successor, &window_max) < 0)
			window_max = before_successor;
		/* transactions open across sp_cdc_enable_table stay with the older instance */
		ci_route_open_transactions(worker_session, &plans[i], &from, &window_max);
		/*
		 * its low watermark comes with the window's end (check_table_source),
		 * and whether its change table has rows in the window: direct reads
		 * only (the login of data_query_mode 'function' may not read the
		 * change table), and not for a switch, which commits even without rows
		 */
		ci = plan_instance(table, &plans[i]);
		if (ci != NULL && worker_data_query_mode() == MSSQL_QUERY_DIRECT &&
			plans[i].kind != CI_SWITCH &&
			window_quiet_proven(table->table_id, ci, &from, &quiet_upto))
		{
			/*
			 * known to have no row from `from` to quiet_upto: no probe, no
			 * low watermark, and the window ends inside what is known (the
			 * next one asks again)
			 */
			proven[i] = ci;
			if (mssql_lsn_cmp(&quiet_upto, &window_max) < 0)
				window_max = quiet_upto;
		}
		else if (ci != NULL)
		{
			mins[nmins].probe = worker_data_query_mode() == MSSQL_QUERY_DIRECT &&
				plans[i].kind != CI_SWITCH;
			mins[nmins++].capture_instance = ci;
		}
		i++;
	}
	lag = NULL;
	if (worker_window_lag.wanted && !worker_window_lag.counted &&
		mssql_lsn_cmp(checkpoint, &worker_window_lag.base) == 0)
		lag = &worker_window_lag.count;
	if (!cdc_choose_window_end(worker_session, checkpoint, &window_max, max_transactions,
							   worker_server_zone, mins, nmins, max_lsn, lag,
							   &to, &end_time, &transactions))
		return false;
	if (lag != NULL)
	{
		worker_window_lag.counted = worker_window_lag.known = true;
		cdc_slot_report_lag(checkpoint, worker_window_lag.count);
	}
	chosen_to = to;
	if (end_time == 0 && mssql_lsn_cmp(&to, max_lsn) == 0)
		end_time = max_time;

	worker_ctx_from = from;
	worker_ctx_to = to;
	worker_ctx_has_range = true;

	/* source checks first, outside the window's transaction */
	has_rows = palloc(sizeof(bool) * list_length(group));
	probed_quiet = palloc(sizeof(bool) * list_length(group));
	i = 0;
	foreach(lc, group)
	{
		MssqlCdcTable *table = lfirst(lc);
		MssqlSourceTable *src;
		StagingDiff *switch_diff;
		bool		known_quiet;

		worker_ctx_table_id = table->table_id;
		src = check_table_source(table, &from, &plans[i], mins, nmins, proven[i], &switch_diff);
		known_quiet = proven[i] != NULL && src != NULL &&
			strcmp(proven[i], src->capture_instance->name) == 0;
		i++;
		if (src == NULL)
			continue;
		has_rows[list_length(ready)] = switch_diff != NULL ||
			(!known_quiet && window_has_rows(mins, nmins, src->capture_instance->name));
		probed_quiet[list_length(ready)] = !known_quiet && !has_rows[list_length(ready)];
		ready = lappend(ready, table);
		instances = lappend(instances, src);
		switches = lappend(switches, switch_diff);
	}
	worker_ctx_table_id = 0;
	worker_ctx_capture_instance = NULL;
	if (ready == NIL)
		return false;

	cdc_slot_report_phase(CDC_PHASE_STREAMING);
	results = palloc0(sizeof(ApplyResult) * list_length(ready));
	recheck.overrun = palloc(sizeof(bool) * list_length(ready));
	recheck.marks = palloc(sizeof(MssqlLsn) * list_length(ready));

	/* THE window: every table's rows and checkpoints, one transaction, one request */
	while (window_read(ready, instances, switches, has_rows, checkpoint, &from, &to, &end_time,
					   transactions, transactions == 0, results, &window_rows,
					   &window_transactions_seen, &recheck))
		memset(results, 0, sizeof(ApplyResult) * list_length(ready));

	/* the mirrors change with the rows, in the window's transaction */
	apply_mirrors(ready, instances, results, checkpoint, &from, &to);

	/* nothing of the window may have been removed by cleanup during the read */
	if (recheck.any_overrun)
	{
		abandon_window_after_cleanup(ready, instances, recheck.overrun, recheck.marks, &from);
		worker_ctx_has_range = false;
		return true;			/* the other tables read the window again */
	}

	commit_checkpoints(ready, has_rows, results, &to, end_time);
	if (recheck.fingerprint.known)
		source_fingerprint_store(worker_server_name, &recheck.fingerprint);
	relax_window_limit(server, transactions);
	worker_end_failure_streak(server);
	worker_commit_xact();
	cdc_slot_report_success();
	worker_ctx_table_id = 0;
	worker_ctx_has_range = false;
	note_capture_instance_switches(ready, instances, switches, results, &from);
	i = 0;
	forboth(lc, ready, lc2, switches)
	{
		MssqlCdcTable *table = lfirst(lc);

		if (results[i].rows < 0)
		{
			i++;
			continue;
		}
		/* the probe found no row up to window_max: later windows need none */
		if (probed_quiet[i])
			window_quiet_note(table->table_id,
							  ((MssqlSourceTable *) list_nth(instances, i))->capture_instance->name,
							  &from, &window_max);
		i++;
		table->checkpoint_lsn = to;
		if (lfirst(lc2) == NULL)
			*advanced = lappend(*advanced, table);
	}

	/*
	 * adapt the next window's size to mssql_cdc.batch_max_rows: a window the
	 * row budget ended early held as many transactions as fit (the next one
	 * then reads, and on a sorting server sorts, no more than it applies)
	 */
	if (mssql_lsn_cmp(&to, &chosen_to) < 0)
		worker_window_transactions = Max(1, (int) window_transactions_seen);
	else if (window_rows > mssql_cdc_batch_max_rows && worker_window_transactions > 1)
		worker_window_transactions = Max(1, worker_window_transactions / 2);
	else if (window_rows < mssql_cdc_batch_max_rows / 4)
		worker_window_transactions = Min(mssql_cdc_batch_max_transactions,
								  worker_window_transactions * 2);
	worker_window_transactions = Min(worker_window_transactions, mssql_cdc_batch_max_transactions);

	ereport(DEBUG1,
			(errmsg_internal("mssql_cdc source \"%s\": applied %lld rows of %lld transactions",
							 worker_server_name, (long long) window_rows,
							 (long long) window_transactions_seen)));

	*reached = to;

	/*
	 * The lag at the lead's new checkpoint without counting again: the
	 * window applied the transactions of (checkpoint, to] that its end's
	 * query listed, unless the row budget cut it short
	 */
	if (worker_window_lag.known && mssql_lsn_cmp(checkpoint, &worker_window_lag.base) == 0)
	{
		worker_window_lag.known = mssql_lsn_cmp(&to, &chosen_to) == 0;
		worker_window_lag.base = to;
		worker_window_lag.count = Max(0, worker_window_lag.count - transactions);
	}

	/* the window ended before max: more is waiting */
	return mssql_lsn_cmp(&to, max_lsn) < 0;
}

int
worker_compare_by_checkpoint(const ListCell *a, const ListCell *b)
{
	const MssqlCdcTable *ta = lfirst(a);
	const MssqlCdcTable *tb = lfirst(b);
	int			c = mssql_lsn_cmp(&ta->checkpoint_lsn, &tb->checkpoint_lsn);

	if (c != 0)
		return c;
	return (ta->table_id > tb->table_id) - (ta->table_id < tb->table_id);
}
