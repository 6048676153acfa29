/*-------------------------------------------------------------------------
 *
 * capture_stall.c
 *		The capture-job watchdog of a source worker (see capture_stall.h).
 *
 * State lives in the worker process: the max LSN seen last and when it
 * last changed, and what the evidence said.  A new worker process starts
 * its clock afresh; a warning left in the catalog by an earlier process is
 * cleared at the first move of the max LSN (or the first scan session)
 * this process sees, and otherwise confirmed when its own judgement says
 * so.  Catalog writes happen only on a change of the warning, never per
 * poll.
 *
 * Judging: only after the max LSN has been frozen for the timeout, and at
 * most every PROBE_INTERVAL_MS, is SQL Server asked.  With the scan-session
 * view, the job runs if a session ended within the timeout or the view's
 * sessions changed within it (consecutive empty scans may be folded into
 * one row).  Without it, the row counts of the captured tables are taken
 * when the max LSN stops moving and watched while it stays put; a table
 * whose count changed longer than the timeout ago, with the max LSN still
 * frozen, is a change the job did not capture.
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
#include "source_name.h"

/* How often SQL Server is asked at least apart (see probe_due) */
#define PROBE_INTERVAL_MS	2000

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

/* The scan-session view: readable until it says otherwise (per process) */
static bool view_known = false;
static bool view_denied = false;
static TimestampTz last_probe = 0;	/* of the view */
static bool have_signature = false;
static int64 last_signature = 0;
static TimestampTz signature_changed_at = 0;

/* Row-count evidence, taken afresh whenever the max LSN stops moving */
static MemoryContext counts_cxt = NULL;
static TableRowCount *baseline = NULL;
static int	nbaseline = 0;
static TimestampTz changed_at = 0;	/* first difference seen; 0 = none */
static char *changed_table = NULL;

void
capture_stall_define_gucs(void)
{
	DefineCustomIntVariable("mssql_cdc.capture_stall_timeout",
							"Time after which a source whose max LSN does not move is checked for a "
							"stalled capture job.",
							"Once sys.fn_cdc_get_max_lsn() has stayed put for this long, the worker "
							"asks SQL Server whether the capture job still scans the log "
							"(sys.dm_cdc_log_scan_sessions) or, without that permission, whether a "
							"captured table changed without being captured; if so, mssql_cdc.status "
							"shows condition capture_job_stalled until it moves again.  An idle "
							"database alone is never reported.  0 turns the check off.",
							&mssql_cdc_capture_stall_timeout,
							300, 0, INT_MAX / 1000,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);
}

static void
set_warning(const char *server_name, bool on, const char *message)
{
	MemoryContext caller_cxt = CurrentMemoryContext;
	bool		changed;
	const char *hint = NULL;

	if (on)
		hint = "Start SQL Server Agent and the capture job (EXEC sys.sp_cdc_start_job @job_type = N'capture'); "
			"the worker keeps polling and the condition clears by itself once the job runs again.";

	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	changed = catalog_set_server_warning(server_name, on ? COND_CAPTURE_JOB_STALLED : NULL,
										 hint, on ? message : NULL);
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

static void
clear_warning(const char *server_name)
{
	if (warning_state != STALL_WARNING_OFF)
		set_warning(server_name, false, NULL);
}

static int64
seconds_since(TimestampTz then, TimestampTz now)
{
	return (now - then) / USECS_PER_SEC;
}

/* The max LSN moved (or first seen): forget the evidence of the last freeze */
static void
forget_evidence(void)
{
	if (counts_cxt != NULL)
		MemoryContextReset(counts_cxt);
	baseline = NULL;
	nbaseline = 0;
	changed_at = 0;
	changed_table = NULL;
}

/*
 * Without the scan-session view: take the row counts once the max LSN has
 * stopped moving, and note the first table whose count differs from them.
 */
static void
watch_row_counts(TdsSession *session, List *tables, TimestampTz now)
{
	TableRowCount *counts;
	MemoryContext old;
	int			i;

	if (counts_cxt == NULL)
		counts_cxt = AllocSetContextCreate(TopMemoryContext, "mssql_cdc capture stall",
										   ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(counts_cxt);
	counts = capture_stall_probe_row_counts(session, tables);
	MemoryContextSwitchTo(old);
	if (baseline == NULL || nbaseline != list_length(tables))
	{
		baseline = counts;
		nbaseline = list_length(tables);
		changed_at = 0;
		return;
	}
	if (changed_at != 0)
		return;
	for (i = 0; i < nbaseline; i++)
		if (counts[i].rows >= 0 && baseline[i].rows >= 0 && counts[i].rows != baseline[i].rows)
		{
			changed_at = now;
			changed_table = MemoryContextStrdup(counts_cxt,
												mssql_display_name(counts[i].schema, counts[i].table));
			return;
		}
}

/* With the view: NULL when the job runs, else the warning's message */
static char *
judge_by_scan_sessions(const char *server_name, int64 age, int64 signature,
					   int64 frozen_for, TimestampTz now)
{
	int64		timeout = mssql_cdc_capture_stall_timeout;

	if (!have_signature || signature != last_signature)
	{
		have_signature = true;
		last_signature = signature;
		signature_changed_at = now;
	}
	if (age >= 0 && age <= timeout)
		return NULL;
	if (seconds_since(signature_changed_at, now) <= timeout)
		return NULL;
	if (age < 0)
		return psprintf("The capture job of SQL Server (server \"%s\") is not advancing: sys.fn_cdc_get_max_lsn() has not moved for %lld seconds and sys.dm_cdc_log_scan_sessions shows no log scan since SQL Server started.",
						server_name, (long long) frozen_for);
	return psprintf("The capture job of SQL Server (server \"%s\") is not advancing: sys.fn_cdc_get_max_lsn() has not moved for %lld seconds and its last log scan (sys.dm_cdc_log_scan_sessions) ended %lld seconds ago.",
					server_name, (long long) frozen_for, (long long) age);
}

/* SQL Server is asked at most this often: every 2 s, or a tenth of the timeout */
static bool
probe_due(TimestampTz *last, TimestampTz now)
{
	int			interval_ms = Max(PROBE_INTERVAL_MS, mssql_cdc_capture_stall_timeout * 100);

	if (*last != 0 && !TimestampDifferenceExceeds(*last, now, interval_ms))
		return false;
	*last = now;
	return true;
}

void
capture_stall_observe(TdsSession *session, const char *server_name,
					  const MssqlLsn *max_lsn, List *tables)
{
	static TimestampTz last_count_probe = 0;
	TimestampTz now = GetCurrentTimestamp();
	bool		moved;
	int64		frozen_for;
	char	   *message = NULL;

	if (!have_seen)
	{
		have_seen = true;
		seen_null = (max_lsn == NULL);
		if (max_lsn)
			last_seen = *max_lsn;
		last_change = now;
		forget_evidence();
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
		forget_evidence();
		clear_warning(server_name);
		return;
	}
	if (mssql_cdc_capture_stall_timeout <= 0)
		return;

	/*
	 * Whether the view is readable is learned at the first freeze, so that
	 * without it the row counts are watched from the start of a freeze.
	 */
	if (!view_known)
	{
		int64		age;
		int64		signature;

		view_known = true;
		if (capture_stall_probe_scan_sessions(session, &age, &signature) != SCAN_SESSIONS_READ)
		{
			view_denied = true;
			ereport(LOG,
					(errmsg("mssql_cdc source \"%s\": the login may not read sys.dm_cdc_log_scan_sessions, so a stopped capture job is noticed only once a captured table changes without being captured",
							server_name),
					 errhint("GRANT VIEW DATABASE STATE TO the login for the exact check (doc/sql-server-setup.md).")));
		}
	}

	/*
	 * Without the view, the row counts are watched for the whole freeze:
	 * taken at its start, compared every probe interval, so a change is
	 * dated to within an interval of when it happened.
	 */
	if (view_denied && (baseline == NULL || probe_due(&last_count_probe, now)))
		watch_row_counts(session, tables, now);

	frozen_for = seconds_since(last_change, now);
	if (!TimestampDifferenceExceeds(last_change, now, mssql_cdc_capture_stall_timeout * 1000))
		return;

	if (view_denied)
	{
		if (changed_at == 0)
		{
			/* no evidence: idle, as far as this login can tell */
			clear_warning(server_name);
			return;
		}
		if (!TimestampDifferenceExceeds(changed_at, now, mssql_cdc_capture_stall_timeout * 1000))
			return;
		message = psprintf("The capture job of SQL Server (server \"%s\") is not advancing: sys.fn_cdc_get_max_lsn() has not moved for %lld seconds although table %s changed %lld seconds ago (its row count in sys.partitions).",
						   server_name, (long long) frozen_for, changed_table,
						   (long long) seconds_since(changed_at, now));
	}
	else
	{
		int64		age;
		int64		signature;

		if (!probe_due(&last_probe, now))
			return;
		if (capture_stall_probe_scan_sessions(session, &age, &signature) != SCAN_SESSIONS_READ)
		{
			/* readable before, not any more (a REVOKE): watch from now on */
			view_denied = true;
			forget_evidence();
			return;
		}
		message = judge_by_scan_sessions(server_name, age, signature, frozen_for, now);
		if (message == NULL)
		{
			/* the job scans the log: the database is just idle */
			clear_warning(server_name);
			return;
		}
	}
	if (warning_state != STALL_WARNING_ON)
		set_warning(server_name, true, message);
}
