/*-------------------------------------------------------------------------
 *
 * worker_poll_ahead.c
 *		The next iteration's poll, sent while the current iteration writes
 *		its last snapshot chunk (bench/README.md "Round trips").
 *
 * Each iteration begins with one request on the worker's session: the
 * source's CDC state, its capture instances and the max LSN
 * (ci_source_state_batch).  While tables are copied, an iteration is a
 * poll interval's worth of chunks, often a single one; at a network round
 * trip R that request adds R between two chunks, and nothing else runs
 * while it waits (the chunk read ahead is in flight on its own session).
 * So the snapshot loop sends the poll ahead when it starts the chunk it
 * expects to end the iteration (snapshot_parallel.c), and the next
 * iteration awaits that batch's reply instead of sending its own.
 *
 * The reply is older than one sent when the next iteration starts, by about
 * a chunk's time, and that is all it is: an earlier max LSN makes the
 * windows end earlier (the next poll takes the rest), and an earlier list
 * of capture instances is what a poll one chunk earlier would have read.
 * Where "now" matters it is not used: a table added with snapshot_mode
 * 'never' starts streaming at the poll's max LSN, which must be read after
 * the table was added, and a worker that sleeps polls anew when it wakes.
 * Any other batch on the worker's session in between cancels the one sent
 * ahead (tds_session.c), and tds_await_ahead then says so: the poll is
 * sent again, never read from another batch's reply.
 *
 * IDENTIFICATION
 *		src/worker_poll_ahead.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "capture_instance_switch.h"
#include "shmem.h"
#include "worker_internal.h"

static uint64 ahead_serial = 0; /* 0: no poll sent ahead */
static char *ahead_sql = NULL;	/* its text, in TopMemoryContext */

void
worker_poll_forget_ahead(void)
{
	ahead_serial = 0;
	if (ahead_sql != NULL)
		pfree(ahead_sql);
	ahead_sql = NULL;
}

void
worker_poll_send_ahead(void)
{
	CdcPoll		poll;
	char	   *sql;

	if (tds_session_is_dead(worker_session))
		return;
	memset(&poll, 0, sizeof(poll));
	poll.server_zone = worker_server_zone;
	sql = ci_source_state_batch(&poll);
	worker_poll_forget_ahead();
	ahead_sql = MemoryContextStrdup(TopMemoryContext, sql);
	ahead_serial = tds_send_ahead(worker_session, sql);
	pfree(sql);
}

void
worker_poll_exec(const char *sql)
{
	bool		taken = ahead_sql != NULL && strcmp(ahead_sql, sql) == 0 &&
		tds_await_ahead(worker_session, ahead_serial);

	worker_poll_forget_ahead();
	if (taken)
		cdc_slot_count_poll_ahead();
	else
		tds_exec(worker_session, sql);
}
