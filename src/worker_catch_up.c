/*-------------------------------------------------------------------------
 *
 * worker_catch_up.c
 *		The windows of one iteration: streaming tables that share a
 *		checkpoint form a group and read their windows together
 *		(invariant 3); a group behind another catches up and joins it.
 *
 * A table falls behind the others of its source when it starts later (an
 * initial snapshot streams from its L0, add_table(start_at), reset_table
 * back), after resume(server, table), after resnapshot, or when it sat
 * windows out (parked and continued, waiting for a capture instance).
 * While it is behind, a source transaction that also changed a table ahead
 * is applied there in an earlier PostgreSQL transaction than here: that is
 * the only time a cross-table transaction is split.  So a group behind
 * must reach the next group's checkpoint exactly and then read with it:
 *
 * - A group's window ends at the checkpoint of the group ahead at the
 *   latest (the cap).  That checkpoint is a position the group ahead
 *   resumes after, so the window still ends on a transaction boundary, and
 *   when the group reaches it the two groups merge at once and read the
 *   rest of this iteration's windows together.
 * - Capping alone never closes the gap under a sustained backlog (both
 *   groups would move by batch_max_transactions per iteration), so groups
 *   behind get more windows than the lead: oldest first, as long as the
 *   iteration's catch-up time (one poll interval) lasts; the oldest group
 *   always gets two, so it gains even when one window takes longer than
 *   the budget; every group gets one, as before.  The lead gets one window
 *   per iteration, after at most a poll interval and a few windows of the
 *   groups behind: its latency stays bounded.
 *
 * With hundreds of tables this costs at most one extra window per group
 * behind and one poll interval per iteration, and every meeting lowers the
 * number of groups for good: tables that read together stay together
 * (their checkpoints commit in one transaction).
 *
 * IDENTIFICATION
 *		src/worker_catch_up.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "postmaster/interrupt.h"
#include "utils/timestamp.h"

#include "mssql_cdc.h"
#include "shmem.h"

#include "worker_internal.h"

/* The streaming tables (sorted by checkpoint) as a list of groups */
static List *
group_by_checkpoint(List *streaming)
{
	List	   *groups = NIL;
	List	   *group = NIL;
	ListCell   *lc;

	foreach(lc, streaming)
	{
		MssqlCdcTable *table = lfirst(lc);

		if (group != NIL &&
			mssql_lsn_cmp(&((MssqlCdcTable *) linitial(group))->checkpoint_lsn,
						  &table->checkpoint_lsn) != 0)
		{
			groups = lappend(groups, group);
			group = NIL;
		}
		group = lappend(group, table);
	}
	if (group != NIL)
		groups = lappend(groups, group);
	return groups;
}

/* Whether the time for windows of groups behind is spent, or we must stop */
static bool
catch_up_time_spent(TimestampTz started)
{
	return ConfigReloadPending || cdc_slot_stop_requested() ||
		TimestampDifferenceExceeds(started, GetCurrentTimestamp(), mssql_cdc_poll_interval);
}

bool
worker_apply_windows(MssqlCdcServer *server, List *streaming, const MssqlLsn *max_lsn,
					 TimestampTz max_time, MssqlLsn *lead)
{
	List	   *groups = group_by_checkpoint(streaming);
	TimestampTz started = GetCurrentTimestamp();
	bool		oldest = true;	/* the head group is the oldest of the iteration */
	int			windows = 0;	/* of the head group */
	bool		busy = false;
	bool		refresh = false;	/* catch-up windows ran since the poll */

	while (groups != NIL)
	{
		List	   *group = linitial(groups);
		List	   *ahead = list_length(groups) > 1 ? lsecond(groups) : NIL;
		MssqlLsn	checkpoint = ((MssqlCdcTable *) linitial(group))->checkpoint_lsn;
		MssqlLsn	cap;
		MssqlLsn	reached;
		List	   *advanced = NIL;
		bool		full;

		if (ahead != NIL)
			cap = ((MssqlCdcTable *) linitial(ahead))->checkpoint_lsn;
		CHECK_FOR_INTERRUPTS();

		/*
		 * The capture instances as of now, not as of the poll, once windows
		 * of groups behind took time: a window plans its instance from them
		 * and takes a vanished one for a permission problem.  (Successors
		 * created since start after the poll's max LSN, which bounds every
		 * window of the iteration.)
		 */
		if (refresh)
		{
			if (!worker_check_cdc_enabled(streaming, NULL))
				return busy;
			refresh = false;
		}
		full = worker_apply_window(server, group, &checkpoint, max_lsn, max_time,
								   ahead != NIL ? &cap : NULL, &reached, &advanced);
		windows++;
		if (full)
			busy = true;
		if (mssql_lsn_cmp(&reached, lead) > 0)
			*lead = reached;

		if (advanced != NIL && ahead != NIL && mssql_lsn_cmp(&reached, &cap) == 0)
		{
			/* met the group ahead: read its windows from now on */
			ahead = list_concat(advanced, ahead);
			list_sort(ahead, worker_compare_by_checkpoint);
			groups = list_delete_first(groups);
			linitial(groups) = ahead;
			windows = 0;
			continue;
		}

		/*
		 * The same group again while it is behind and the catch-up time
		 * lasts; the tables that sat this window out (parked, waiting, a
		 * settings change, a switched capture instance) wait for the next
		 * iteration's catalog read.
		 */
		if (advanced != NIL && ahead != NIL && full &&
			((oldest && windows < 2) || !catch_up_time_spent(started)))
		{
			linitial(groups) = advanced;
			refresh = true;
			continue;
		}
		groups = list_delete_first(groups);
		oldest = false;
		windows = 0;
	}
	return busy;
}
