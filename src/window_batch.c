/*-------------------------------------------------------------------------
 *
 * window_batch.c
 *		Read one CDC window of a group of tables in ONE request: the change
 *		queries of every table, one result set each, and after them the
 *		low-watermark recheck and the window's fingerprint, all in one SQL
 *		batch read in turn (issue 16, points 2 and 5).  A window costs the
 *		same number of round trips with 5 tables as with 200, and a table
 *		without rows in the window (told by the window end's batch,
 *		cdc_choose_window_end) has no change query in it and no recheck: its
 *		state row and checkpoint move with the window (rechecked() below).
 *
 * The invariants hold as with one query per table:
 *
 * - The rows of every table are staged in the window's one Postgres
 *   transaction (begun here, left open for the caller's checkpoints).
 * - The row budget (batch_max_rows) cuts the window at a transaction
 *   boundary.  The batch was sent with the window's first end, so when
 *   table i cuts it, the result sets of the tables after i still carry
 *   rows beyond the new end: apply_read_changes reads and drops them (they
 *   are ordered, so everything after the first one is dropped too), and a
 *   table before i that read beyond the new end makes the whole window be
 *   rolled back and read again with that end (a new batch), as before.
 * - SQL Server runs the statements of a batch one after the other and
 *   starts a statement only when the one before has sent all its rows, so
 *   the low watermarks that the batch's last SELECT reads are read after
 *   every change row: the same proof as a recheck request of its own
 *   (recheck_marks below).  Its fingerprint is taken at the window's
 *   first end; a cut window takes it again at the new end.
 * - Each table's result set is read with that table in the error context
 *   (worker_ctx_*): a SQL error in its query (access denied, an instance
 *   dropped since the poll), a broken staging table or a lost connection
 *   in the middle of its rows fails the window with that table named and
 *   parked where it was before (worker_staging_park.c); nothing commits.
 * - A window without source transactions (an idle source whose capture job
 *   only adds its dummy mapping rows) sends no batch at all.
 *
 * Reference: "Batches of SQL Statements" (MicrosoftDocs/sql-docs,
 * docs/odbc/reference/develop-app/batches-of-sql-statements.md) and
 * dbresults (db-lib: one call per statement's result, in order).
 *
 * IDENTIFICATION
 *		src/window_batch.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "apply.h"
#include "mssql_cdc.h"
#include "source_identity.h"
#include "table_settings.h"

#include "worker_internal.h"

/* The highest transaction read by tables 0..last (with rows), and its time */
static void
last_read_end(const ApplyResult *results, int last, MssqlLsn *to, TimestampTz *end_time)
{
	bool		found = false;
	int			j;

	for (j = 0; j <= last; j++)
	{
		if (results[j].rows <= 0)
			continue;
		if (!found || mssql_lsn_cmp(&results[j].last_lsn, to) > 0)
		{
			*to = results[j].last_lsn;
			*end_time = results[j].last_commit_time;
		}
		found = true;
	}
}

/* Did a table read before `cut` read rows after end? */
static bool
read_beyond(const ApplyResult *results, int cut, const MssqlLsn *end)
{
	int			j;

	for (j = 0; j < cut; j++)
		if (results[j].rows > 0 && mssql_lsn_cmp(&results[j].last_lsn, end) > 0)
			return true;
	return false;
}

/*
 * Whether table i's low watermark is read again after the batch's change
 * rows: the tables whose rows the batch reads.  A table without rows in the
 * window needs no recheck: the window end's batch found no row of it up to
 * the window's largest end and read its mark after that probe, at most
 * from (check_table_source), and cleanup raises the mark before it deletes,
 * so no row of the window was deleted before the probe looked, and none
 * can be lost afterwards (issue 16 point 5: 195 quiet tables cost 195
 * function calls less per window).
 */
static inline bool
rechecked(const ApplyResult *results, const bool *has_rows, int i)
{
	return results[i].rows >= 0 && has_rows[i];
}

/*
 * The batch's last statements: the low watermark of every table read in
 * one row (none: no such statement), then the fingerprint of the history
 * up to `to` (worker_timeline.c).
 */
static void
append_recheck(StringInfo sql, List *instances, const ApplyResult *results,
			   const bool *has_rows, const MssqlLsn *to)
{
	ListCell   *lc;
	int			i = 0;
	int			n = 0;

	foreach(lc, instances)
	{
		MssqlSourceTable *src = lfirst(lc);

		if (rechecked(results, has_rows, i++))
			appendStringInfo(sql, "%ssys.fn_cdc_get_min_lsn(%s)",
							 n++ > 0 ? ", " : sql->len > 0 ? "; SELECT " : "SELECT ",
							 tds_quote_nstring(src->capture_instance->name));
	}
	appendStringInfo(sql, "%s%s", sql->len > 0 ? "; " : "", source_fingerprint_sql(to));
}

/*
 * Read the recheck's result sets (after every change query's): overrun[i]
 * for the read tables whose mark moved above from (mark in marks[i]), and
 * the fingerprint at fp_lsn.  Returns whether any table overran.
 */
static bool
recheck_marks(int ntables, const ApplyResult *results, const bool *has_rows,
			  const MssqlLsn *from, const MssqlLsn *fp_lsn, bool *overrun,
			  MssqlLsn *marks, SourceFingerprint *fingerprint)
{
	int			n = 0;
	int			i;
	int			nresult = 0;
	int			fp_result;
	bool		any = false;

	memset(fingerprint, 0, sizeof(*fingerprint));
	for (i = 0; i < ntables; i++)
	{
		overrun[i] = false;
		if (rechecked(results, has_rows, i))
			n++;
	}
	/* the marks' row comes first when any table was read */
	fp_result = n > 0 ? 2 : 1;
	while (tds_next_result(worker_session))
	{
		bool		seen = false;

		if (tds_num_cols(worker_session) == 0)
			continue;
		if (++nresult == fp_result)
		{
			source_fingerprint_read(worker_session, fp_lsn, fingerprint);
			continue;
		}
		if (nresult > fp_result)
		{
			/* more result sets than the batch has statements */
			tds_mark_malformed(worker_session);
			ereport(ERROR,
					(errcode(ERRCODE_FDW_ERROR),
					 errmsg("SQL Server (server \"%s\") returned more result sets than the window's batch has statements",
							worker_server_name)));
		}
		while (tds_next_row(worker_session))
		{
			int			col = 0;

			if (seen)
				continue;		/* drain */
			seen = true;
			tds_expect_num_cols(worker_session, n, "the low watermark check after a window");
			for (i = 0; i < ntables; i++)
			{
				if (!rechecked(results, has_rows, i))
					continue;
				/* NULL or 0x00: the instance is gone; the next window explains it */
				if (tds_col_lsn(worker_session, ++col, &marks[i]) &&
					!mssql_lsn_is_zero(&marks[i]) && mssql_lsn_cmp(&marks[i], from) > 0)
					overrun[i] = any = true;
			}
		}
	}
	if (nresult < fp_result)
	{
		tds_mark_malformed(worker_session);
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("SQL Server (server \"%s\") did not return the low watermark check of a window",
						worker_server_name)));
	}
	return any;
}

/*
 * prepare_tables for the tables without rows in the window, together: one
 * statement locks their state rows, one reads their settings (after the
 * lock, as for one table: a settings change that locked a row first has
 * committed by then).  Those moved or changed sit the window out (-1).
 */
static void
prepare_tables_without_rows(List *ready, const bool *has_rows, const MssqlLsn *checkpoint,
							ApplyResult *results)
{
	int			ntables = list_length(ready);
	int32	   *ids = palloc(sizeof(int32) * ntables);
	MssqlCdcTable **tables = palloc(sizeof(MssqlCdcTable *) * ntables);
	int		   *at = palloc(sizeof(int) * ntables);
	bool	   *ok = palloc(sizeof(bool) * ntables);
	int			n = 0;
	int			m = 0;
	int			i;

	for (i = 0; i < ntables; i++)
		if (!has_rows[i])
		{
			tables[n] = list_nth(ready, i);
			ids[n] = tables[n]->table_id;
			at[n++] = i;
		}
	apply_lock_table_states(ids, n, checkpoint, ok);
	for (i = 0; i < n; i++)
	{
		if (!ok[i])
		{
			results[at[i]].rows = -1;
			continue;
		}
		tables[m] = tables[i];
		at[m++] = at[i];
	}
	table_settings_current_many(tables, m, ok);
	for (i = 0; i < m; i++)
		if (!ok[i])
			results[at[i]].rows = -1;
}

/*
 * The Postgres side of each table before the batch is sent, in the
 * window's transaction: a concurrent remove_table/resnapshot wins, and a
 * settings change (alter_table, pause) takes effect here (rows -1: the
 * table sits this window out); a switching table commits its switch; the
 * staging table must have the shape its rows are written in.  Appends the
 * change query of every table that reads to sql.
 */
static void
prepare_tables(List *ready, List *instances, List *switches, const bool *has_rows,
			   const MssqlLsn *checkpoint, const MssqlLsn *from, const MssqlLsn *to,
			   const ApplyLimits *limits, bool no_changes, ApplyResult *results,
			   StringInfo sql)
{
	ListCell   *lc;
	ListCell   *lc2;
	ListCell   *lc3;
	int			i = 0;

	prepare_tables_without_rows(ready, has_rows, checkpoint, results);
	forthree(lc, ready, lc2, instances, lc3, switches)
	{
		MssqlCdcTable *table = lfirst(lc);
		MssqlSourceTable *src = lfirst(lc2);
		StagingDiff *switch_diff = lfirst(lc3);

		/* no row in the window: nothing to write, no query (its checkpoint still moves) */
		if (!has_rows[i++])
			continue;
		worker_ctx_table_id = table->table_id;
		worker_ctx_capture_instance = src->capture_instance->name;
		if (!apply_lock_table_state(table->table_id, checkpoint) ||
			!table_settings_current(table))
		{
			results[i - 1].rows = -1;
			continue;
		}
		/* from here a failure is this table's (worker_staging_park.c) */
		worker_ctx_window_table = true;
		worker_ctx_window_checkpoint = *checkpoint;
		/* the switch commits with the first rows read from the new instance */
		if (switch_diff != NULL)
			ci_switch_commit(table, table->capture_instance, src, switch_diff, from,
							 worker_args.run_as);
		worker_check_staging_shape(table, src);
		if (!no_changes)
			appendStringInfo(sql, "%s%s", sql->len > 0 ? "; " : "",
							 apply_change_query(table, src, worker_server_zone,
												worker_data_query_mode(), from, to, limits));
		worker_ctx_window_table = false;
	}
	worker_ctx_capture_instance = NULL;
	worker_ctx_table_id = 0;
}

/*
 * Read the batch's change result sets in turn (see read_window).  Returns
 * true when the window must be read again (a table read beyond the end a
 * later table's budget cut it at).
 */
static bool
read_tables(List *ready, List *instances, const bool *has_rows,
			const MssqlLsn *checkpoint, const MssqlLsn *from,
			const MssqlLsn *query_to, MssqlLsn *to, TimestampTz *end_time,
			ApplyLimits *limits, ApplyResult *results, int64 *window_rows,
			int64 *window_transactions_seen)
{
	bool		budget_spent = false;
	ListCell   *lc;
	ListCell   *lc2;
	int			i = 0;

	forboth(lc, ready, lc2, instances)
	{
		MssqlCdcTable *table = lfirst(lc);
		MssqlSourceTable *src = lfirst(lc2);

		if (results[i].rows < 0 || !has_rows[i])
		{
			i++;
			continue;			/* sat out, or no row: not in the batch */
		}
		worker_ctx_table_id = table->table_id;
		worker_ctx_capture_instance = src->capture_instance->name;
		worker_ctx_window_table = true;
		worker_ctx_window_checkpoint = *checkpoint;
		limits->row_budget = budget_spent ? 0 : Max(1, mssql_cdc_batch_max_rows - *window_rows);
		results[i] = apply_read_changes(worker_session, table, src, worker_args.run_as,
										from, query_to, to, limits);
		worker_ctx_window_table = false;
		*window_rows += results[i].rows;
		*window_transactions_seen = Max(*window_transactions_seen, results[i].transactions);
		if (results[i].cut)
		{
			budget_spent = true;
			*to = results[i].last_lsn;
			*end_time = results[i].last_commit_time;
			worker_ctx_to = *to;
			if (read_beyond(results, i, to))
				return true;
		}
		else if (!budget_spent && *window_rows >= mssql_cdc_batch_max_rows &&
				 lnext(ready, lc) != NULL)
		{
			/* spent with this table's last row: the window ends there */
			budget_spent = true;
			last_read_end(results, i, to, end_time);
			worker_ctx_to = *to;
		}
		i++;
	}
	worker_ctx_capture_instance = NULL;
	worker_ctx_table_id = 0;
	return false;
}

bool
window_read(List *ready, List *instances, List *switches, const bool *has_rows,
			const MssqlLsn *checkpoint,
			const MssqlLsn *from, MssqlLsn *to, TimestampTz *end_time, int transactions,
			bool no_changes, ApplyResult *results, int64 *window_rows,
			int64 *window_transactions_seen, WindowRecheck *recheck)
{
	ApplyLimits limits;
	StringInfoData sql;
	MssqlLsn	query_to = *to;
	int			ntables = list_length(ready);
	int			i;
	int			first;
	bool		reread = false;

	limits.one_transaction = transactions <= 1;
	limits.row_budget = 0;
	*window_rows = 0;
	*window_transactions_seen = 0;
	recheck->any_overrun = false;
	memset(&recheck->fingerprint, 0, sizeof(recheck->fingerprint));
	worker_begin_xact();
	source_fingerprint_lock(worker_server_name);

	initStringInfo(&sql);
	prepare_tables(ready, instances, switches, has_rows, checkpoint, from, to, &limits,
				   no_changes, results, &sql);

	/*
	 * Every table sits this window out, or the window holds no source
	 * transaction: no change row can be in it (each has the commit LSN of
	 * its transaction's cdc.lsn_time_mapping row), so there is nothing to
	 * read and nothing that cleanup could remove during a read (rows it
	 * removed before are told by the low watermarks read with the window's
	 * end, which cleanup raises first).  The checkpoint still moves to the
	 * window's end (invariant 5), without a request; the fingerprint stored
	 * with an earlier window names the same last transaction.  A window
	 * whose tables have no row in it (has_rows) still sends the
	 * fingerprint of its end, without a change query or a recheck.
	 */
	for (first = 0; first < ntables && results[first].rows < 0; first++)
		;
	if (no_changes || first == ntables)
		return false;
	append_recheck(&sql, instances, results, has_rows, to);

	PG_TRY();
	{
		/* a failure of the request itself is the first queried table's, as before */
		for (i = first; i < ntables && (results[i].rows < 0 || !has_rows[i]); i++)
			;
		worker_ctx_table_id = ((MssqlCdcTable *) list_nth(ready, i < ntables ? i : first))->table_id;
		tds_exec(worker_session, sql.data);
		worker_ctx_table_id = 0;
		reread = read_tables(ready, instances, has_rows, checkpoint, from, &query_to, to, end_time,
							 &limits, results, window_rows, window_transactions_seen);
		if (!reread)
			recheck->any_overrun = recheck_marks(ntables, results, has_rows, from, &query_to,
												 recheck->overrun, recheck->marks,
												 &recheck->fingerprint);
	}
	PG_CATCH();
	{
		worker_note_read_failure(transactions);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (reread)
	{
		worker_ctx_capture_instance = NULL;
		worker_ctx_table_id = 0;
		worker_abort_xact();
		return true;
	}
	/* cut by the row budget: the fingerprint belongs to the new end */
	if (mssql_lsn_cmp(to, &query_to) != 0)
	{
		memset(&recheck->fingerprint, 0, sizeof(recheck->fingerprint));
		worker_timeline_fingerprint_at(to);
	}
	return false;
}
