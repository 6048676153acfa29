/*-------------------------------------------------------------------------
 *
 * capture_stall.c
 *		The capture-job watchdog of a source worker (see capture_stall.h).
 *
 * State lives in the worker process: the max LSN seen last and when it
 * last changed.  A new worker process starts its clock afresh; a warning
 * left in the catalog by an earlier process is cleared at the first move
 * of the max LSN this process sees, and otherwise confirmed when its own
 * clock runs out.  Catalog writes happen only on a change of the warning,
 * never per poll.
 *
 * IDENTIFICATION
 *		src/capture_stall.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/xact.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "capture_stall.h"
#include "catalog.h"
#include "error_condition.h"

int			mssql_cdc_capture_stall_timeout = 300;

static bool have_seen = false;
static bool seen_null = false;
static MssqlLsn last_seen;
static TimestampTz last_change = 0;

/* What the catalog holds: unknown at start (an earlier process may have set it) */
typedef enum StallWarning
{
	STALL_WARNING_UNKNOWN,
	STALL_WARNING_OFF,
	STALL_WARNING_ON
} StallWarning;

static StallWarning warning_state = STALL_WARNING_UNKNOWN;

void
capture_stall_define_gucs(void)
{
	DefineCustomIntVariable("mssql_cdc.capture_stall_timeout",
							"Time after which a source whose max LSN does not move is reported as "
							"having a stalled capture job.",
							"SQL Server's capture job moves sys.fn_cdc_get_max_lsn() every few "
							"seconds even on an idle database; when it stays put for longer than "
							"this, mssql_cdc.status shows condition capture_job_stalled until it "
							"moves again.  0 turns the check off.",
							&mssql_cdc_capture_stall_timeout,
							300, 0, INT_MAX / 1000,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
}

static void
set_warning(const char *server_name, bool on, int64 seconds)
{
	MemoryContext caller_cxt = CurrentMemoryContext;
	bool		changed;
	char	   *message = NULL;
	const char *hint = NULL;

	if (on)
	{
		message = psprintf("The capture job of SQL Server (server \"%s\") is not advancing: "
						   "sys.fn_cdc_get_max_lsn() has not changed for %lld seconds.",
						   server_name, (long long) seconds);
		hint = "Start SQL Server Agent and the capture job (EXEC sys.sp_cdc_start_job @job_type = N'capture'); "
			"the worker keeps polling and the condition clears by itself once the max LSN moves.";
	}

	/* the warning's time is now, not the worker's start (see worker_begin_xact) */
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	changed = catalog_set_server_warning(server_name, on ? COND_CAPTURE_JOB_STALLED : NULL,
										 hint, message);
	if (changed && on)
		catalog_record_error_condition(server_name, 0, "01000", message, NULL, hint, 0,
									   COND_CAPTURE_JOB_STALLED);
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(caller_cxt);

	if (changed && on)
		ereport(WARNING,
				(errmsg("%s", message), errhint("%s", hint)));
	else if (changed)
		ereport(LOG,
				(errmsg("mssql_cdc source \"%s\": the capture job advances again", server_name)));
	warning_state = on ? STALL_WARNING_ON : STALL_WARNING_OFF;
}

void
capture_stall_observe(const char *server_name, const MssqlLsn *max_lsn)
{
	TimestampTz now = GetCurrentTimestamp();
	bool		moved;

	if (!have_seen)
	{
		have_seen = true;
		seen_null = (max_lsn == NULL);
		if (max_lsn)
			last_seen = *max_lsn;
		last_change = now;
		return;
	}
	if (max_lsn == NULL)
		moved = !seen_null;
	else
		moved = seen_null || mssql_lsn_cmp(max_lsn, &last_seen) != 0;
	seen_null = (max_lsn == NULL);
	if (max_lsn)
		last_seen = *max_lsn;

	if (moved)
	{
		last_change = now;
		if (warning_state != STALL_WARNING_OFF)
			set_warning(server_name, false, 0);
		return;
	}
	if (mssql_cdc_capture_stall_timeout > 0 && warning_state != STALL_WARNING_ON &&
		TimestampDifferenceExceeds(last_change, now, mssql_cdc_capture_stall_timeout * 1000))
		set_warning(server_name, true, (now - last_change) / USECS_PER_SEC);
}
