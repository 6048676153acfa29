/*-------------------------------------------------------------------------
 *
 * shmem.c
 *		Shared memory of mssql_cdc: launcher identity and worker slots.
 *
 * See include/shmem.h for the model and the locking rules.  Everything that
 * touches the shared structs lives in this file, so the locking discipline
 * can be checked in one place.
 *
 * IDENTIFICATION
 *		src/shmem.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "mssql_cdc.h"
#include "shmem.h"

#define CDC_SHMEM_NAME			"mssql_cdc"
#define CDC_LWLOCK_TRANCHE		"mssql_cdc"

/* First retry delay; doubled per consecutive failure up to the GUC cap. */
#define CDC_RETRY_BASE_MS		1000

typedef struct MssqlCdcSlot
{
	/* Ownership and lifecycle: protected by MssqlCdcControl->lock. */
	bool		in_use;
	uint32		generation;		/* bumped on every claim */
	NameData	server_name;
	Oid			run_as;
	pid_t		pid;
	PGPROC	   *proc;
	bool		stop_requested;
	int			consecutive_failures;
	TimestampTz next_attempt_at;
	TimestampTz crashed_at;

	/* Live progress: protected by mutex (written by the worker only). */
	slock_t		mutex;
	MssqlCdcPhase phase;
	bool		has_source_max_lsn;
	MssqlLsn	source_max_lsn;
	TimestampTz source_max_lsn_time;
	TimestampTz last_poll_at;
	bool		has_lag;
	MssqlLsn	lag_base_lsn;
	int64		lag_transactions;
	/* the open connection to SQL Server, if any (cdc_slot_report_connection) */
	bool		connected;
	bool		connection_encrypted;
	bool		certificate_validated;
	/* round trips of this run (cdc_slot_count_request, _poll, _chunk) */
	int64		requests_sent;
	int64		windows;
	int64		snapshot_chunks;
	int64		polls_ahead;
} MssqlCdcSlot;

typedef struct MssqlCdcControl
{
	LWLock	   *lock;			/* slot ownership, see shmem.h */

	/* Launcher identity and wake-up flag: protected by mutex. */
	slock_t		mutex;
	pid_t		launcher_pid;
	Latch	   *launcher_latch;
	bool		catalog_changed;

	int			slot_count;		/* mssql_cdc.max_workers at startup */
	MssqlCdcSlot slots[FLEXIBLE_ARRAY_MEMBER];
} MssqlCdcControl;

static MssqlCdcControl *CdcControl = NULL;

/* Slot this process (a source worker) is attached to, or -1. */
static int	MySlotIndex = -1;

static compat_shmem_request_fn prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static const char *const phase_names[] = {
	[CDC_PHASE_STARTING] = "starting",
	[CDC_PHASE_CONNECTING] = "connecting",
	[CDC_PHASE_SNAPSHOTTING] = "snapshotting",
	[CDC_PHASE_STREAMING] = "streaming",
	[CDC_PHASE_IDLE] = "idle",
	[CDC_PHASE_STOPPING] = "stopping",
	[CDC_PHASE_BACKOFF] = "backoff",
	[CDC_PHASE_STOPPED] = "stopped",
};

static Size
cdc_shmem_size(void)
{
	return add_size(offsetof(MssqlCdcControl, slots),
					mul_size(mssql_cdc_max_workers, sizeof(MssqlCdcSlot)));
}

static void
cdc_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();

	RequestAddinShmemSpace(cdc_shmem_size());
	RequestNamedLWLockTranche(CDC_LWLOCK_TRANCHE, 1);
}

/*
 * Create (postmaster, and again after a crash restart) or attach to
 * (EXEC_BACKEND children) the control block.
 */
static void
cdc_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);

	CdcControl = ShmemInitStruct(CDC_SHMEM_NAME, cdc_shmem_size(), &found);
	if (!found)
	{
		int			i;

		memset(CdcControl, 0, cdc_shmem_size());
		CdcControl->lock = &(GetNamedLWLockTranche(CDC_LWLOCK_TRANCHE))->lock;
		SpinLockInit(&CdcControl->mutex);
		CdcControl->slot_count = mssql_cdc_max_workers;
		for (i = 0; i < CdcControl->slot_count; i++)
		{
			SpinLockInit(&CdcControl->slots[i].mutex);
			CdcControl->slots[i].phase = CDC_PHASE_STOPPED;
		}
	}

	LWLockRelease(AddinShmemInitLock);
}

void
cdc_shmem_install_hooks(void)
{
	prev_shmem_request_hook = compat_install_shmem_request(cdc_shmem_request);
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = cdc_shmem_startup;
}

/*
 * Every entry point checks this: a function called in a process that never
 * attached (which cannot happen when _PG_init enforces preloading) must fail
 * cleanly instead of dereferencing NULL.
 */
static void
cdc_shmem_check(void)
{
	if (CdcControl == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("mssql_cdc shared memory is not initialized"),
				 errhint("Add mssql_cdc to shared_preload_libraries and restart the server.")));
}

const char *
cdc_phase_name(MssqlCdcPhase phase)
{
	if ((int) phase < 0 || (int) phase >= (int) lengthof(phase_names))
		return "unknown";
	return phase_names[phase];
}

/* ------------------------------------------------------------------------
 * Launcher identity
 * ------------------------------------------------------------------------
 */

static void
cdc_launcher_detach(int code, Datum arg)
{
	SpinLockAcquire(&CdcControl->mutex);
	if (CdcControl->launcher_pid == MyProcPid)
	{
		CdcControl->launcher_pid = 0;
		CdcControl->launcher_latch = NULL;
	}
	SpinLockRelease(&CdcControl->mutex);
}

bool
cdc_launcher_attach(void)
{
	bool		attached = false;

	cdc_shmem_check();

	SpinLockAcquire(&CdcControl->mutex);
	if (CdcControl->launcher_pid == 0)
	{
		CdcControl->launcher_pid = MyProcPid;
		CdcControl->launcher_latch = &MyProc->procLatch;

		/*
		 * Whatever happened while no launcher ran is unknown to us, so start
		 * by reading the catalog.
		 */
		CdcControl->catalog_changed = true;
		attached = true;
	}
	SpinLockRelease(&CdcControl->mutex);

	/*
	 * before_shmem_exit, not on_shmem_exit: the latch pointer must be gone
	 * before our PGPROC is released, or a backend could set a recycled latch.
	 */
	if (attached)
		before_shmem_exit(cdc_launcher_detach, (Datum) 0);

	return attached;
}

pid_t
cdc_launcher_pid(void)
{
	pid_t		pid;

	cdc_shmem_check();

	SpinLockAcquire(&CdcControl->mutex);
	pid = CdcControl->launcher_pid;
	SpinLockRelease(&CdcControl->mutex);

	return pid;
}

/*
 * Called from a commit callback, after the commit record is written: must
 * not fail, so it takes only the spinlock and never allocates.
 */
void
cdc_launcher_signal_catalog_changed(void)
{
	Latch	   *latch;

	if (CdcControl == NULL)
		return;

	SpinLockAcquire(&CdcControl->mutex);
	CdcControl->catalog_changed = true;
	latch = CdcControl->launcher_latch;
	SpinLockRelease(&CdcControl->mutex);

	/*
	 * Setting the latch outside the spinlock is safe: the launcher clears the
	 * pointer in its before_shmem_exit hook while its PGPROC, and so the
	 * latch, is still valid; a wake-up of a launcher that is leaving is
	 * harmless, and the flag is kept for the next launcher.
	 */
	if (latch)
		SetLatch(latch);
}

bool
cdc_launcher_take_catalog_changed(void)
{
	bool		changed;

	SpinLockAcquire(&CdcControl->mutex);
	changed = CdcControl->catalog_changed;
	CdcControl->catalog_changed = false;
	SpinLockRelease(&CdcControl->mutex);

	return changed;
}

/* Wake the launcher without raising catalog_changed (a worker exited). */
static void
cdc_launcher_wake(void)
{
	Latch	   *latch;

	SpinLockAcquire(&CdcControl->mutex);
	latch = CdcControl->launcher_latch;
	SpinLockRelease(&CdcControl->mutex);

	if (latch)
		SetLatch(latch);
}

/* ------------------------------------------------------------------------
 * Slots, launcher side
 * ------------------------------------------------------------------------
 */

int
cdc_slot_count(void)
{
	cdc_shmem_check();
	return CdcControl->slot_count;
}

/* Caller holds the LWLock (any mode). */
static void
cdc_slot_copy(int index, MssqlCdcSlotState *out)
{
	MssqlCdcSlot *slot = &CdcControl->slots[index];

	out->index = index;
	out->generation = slot->generation;
	out->server_name = slot->server_name;
	out->run_as = slot->run_as;
	out->pid = slot->pid;
	out->stop_requested = slot->stop_requested;
	out->consecutive_failures = slot->consecutive_failures;
	out->next_attempt_at = slot->next_attempt_at;
	out->crashed_at = slot->crashed_at;

	SpinLockAcquire(&slot->mutex);
	out->phase = slot->phase;
	out->has_source_max_lsn = slot->has_source_max_lsn;
	out->source_max_lsn = slot->source_max_lsn;
	out->source_max_lsn_time = slot->source_max_lsn_time;
	out->last_poll_at = slot->last_poll_at;
	out->has_lag = slot->has_lag;
	out->lag_base_lsn = slot->lag_base_lsn;
	out->lag_transactions = slot->lag_transactions;
	out->connected = slot->connected;
	out->connection_encrypted = slot->connection_encrypted;
	out->certificate_validated = slot->certificate_validated;
	out->requests_sent = slot->requests_sent;
	out->windows = slot->windows;
	out->snapshot_chunks = slot->snapshot_chunks;
	out->polls_ahead = slot->polls_ahead;
	SpinLockRelease(&slot->mutex);
}

int
cdc_slots_read(MssqlCdcSlotState *out)
{
	int			n = 0;
	int			i;

	cdc_shmem_check();

	LWLockAcquire(CdcControl->lock, LW_SHARED);
	for (i = 0; i < CdcControl->slot_count; i++)
	{
		if (CdcControl->slots[i].in_use)
			cdc_slot_copy(i, &out[n++]);
	}
	LWLockRelease(CdcControl->lock);

	return n;
}

/* Caller holds the LWLock exclusively; the slot is not attached. */
static void
cdc_slot_reset_progress(MssqlCdcSlot *slot, MssqlCdcPhase phase)
{
	SpinLockAcquire(&slot->mutex);
	slot->phase = phase;
	slot->has_source_max_lsn = false;
	memset(&slot->source_max_lsn, 0, sizeof(slot->source_max_lsn));
	slot->source_max_lsn_time = 0;
	slot->last_poll_at = 0;
	slot->has_lag = false;
	slot->lag_transactions = 0;
	slot->connected = false;
	slot->requests_sent = 0;
	slot->windows = 0;
	slot->snapshot_chunks = 0;
	slot->polls_ahead = 0;
	SpinLockRelease(&slot->mutex);
}

int
cdc_slot_claim(const char *server_name, Oid run_as, uint32 *generation)
{
	int			found = -1;
	int			i;

	cdc_shmem_check();

	LWLockAcquire(CdcControl->lock, LW_EXCLUSIVE);
	for (i = 0; i < CdcControl->slot_count; i++)
	{
		MssqlCdcSlot *slot = &CdcControl->slots[i];

		if (slot->in_use)
			continue;

		slot->in_use = true;
		slot->generation++;
		namestrcpy(&slot->server_name, server_name);
		slot->run_as = run_as;
		slot->pid = 0;
		slot->proc = NULL;
		slot->stop_requested = false;
		slot->consecutive_failures = 0;
		slot->next_attempt_at = 0;
		slot->crashed_at = 0;
		cdc_slot_reset_progress(slot, CDC_PHASE_STARTING);

		*generation = slot->generation;
		found = i;
		break;
	}
	LWLockRelease(CdcControl->lock);

	return found;
}

/* Caller holds the LWLock. */
static bool
cdc_slot_matches(int index, uint32 generation)
{
	return index >= 0 && index < CdcControl->slot_count &&
		CdcControl->slots[index].in_use &&
		CdcControl->slots[index].generation == generation;
}

void
cdc_slot_release(int index, uint32 generation)
{
	cdc_shmem_check();

	LWLockAcquire(CdcControl->lock, LW_EXCLUSIVE);
	if (cdc_slot_matches(index, generation))
	{
		MssqlCdcSlot *slot = &CdcControl->slots[index];

		slot->in_use = false;
		slot->pid = 0;
		slot->proc = NULL;
		cdc_slot_reset_progress(slot, CDC_PHASE_STOPPED);
	}
	LWLockRelease(CdcControl->lock);
}

/* Caller holds the LWLock exclusively. */
static void
cdc_slot_count_failure(MssqlCdcSlot *slot)
{
	TimestampTz now = GetCurrentTimestamp();

	if (slot->consecutive_failures < INT_MAX)
		slot->consecutive_failures++;
	slot->crashed_at = now;
	slot->next_attempt_at = TimestampTzPlusMilliseconds(now,
														cdc_retry_delay_ms(slot->consecutive_failures));
}

void
cdc_slot_record_launch_failure(int index, uint32 generation)
{
	cdc_shmem_check();

	LWLockAcquire(CdcControl->lock, LW_EXCLUSIVE);
	if (cdc_slot_matches(index, generation))
	{
		MssqlCdcSlot *slot = &CdcControl->slots[index];

		slot->pid = 0;
		slot->proc = NULL;
		cdc_slot_count_failure(slot);
		SpinLockAcquire(&slot->mutex);
		slot->phase = CDC_PHASE_BACKOFF;
		SpinLockRelease(&slot->mutex);
	}
	LWLockRelease(CdcControl->lock);
}

pid_t
cdc_slot_request_stop(int index, uint32 generation)
{
	pid_t		pid = 0;

	cdc_shmem_check();

	LWLockAcquire(CdcControl->lock, LW_EXCLUSIVE);
	if (cdc_slot_matches(index, generation))
	{
		MssqlCdcSlot *slot = &CdcControl->slots[index];

		slot->stop_requested = true;
		pid = slot->pid;
		if (pid != 0)
		{
			SpinLockAcquire(&slot->mutex);
			slot->phase = CDC_PHASE_STOPPING;
			SpinLockRelease(&slot->mutex);

			/*
			 * Signalled while we hold the lock: the worker clears its pid
			 * under this lock before exiting, so the pid cannot have been
			 * recycled.  SIGTERM interrupts even a worker blocked on SQL
			 * Server; its batch is one transaction, so stopping mid-batch
			 * loses nothing.
			 */
			if (kill(pid, SIGTERM) != 0 && errno != ESRCH)
				ereport(WARNING,
						(errmsg("could not send SIGTERM to mssql_cdc worker %d: %m",
								(int) pid)));
		}
	}
	LWLockRelease(CdcControl->lock);

	return pid;
}

/* ------------------------------------------------------------------------
 * Slots, worker side
 * ------------------------------------------------------------------------
 */

/*
 * Exit hook of a source worker.  A non-zero code means the worker failed
 * (ERROR caught at the top of its loop, FATAL, or SIGTERM through die()):
 * count it so the launcher backs off.  Runs before PGPROC is released, so
 * nobody can SetLatch a latch that belongs to the next process.
 */
static void
cdc_slot_detach(int code, Datum arg)
{
	int			index = DatumGetInt32(arg);
	MssqlCdcSlot *slot = &CdcControl->slots[index];

	LWLockAcquire(CdcControl->lock, LW_EXCLUSIVE);
	if (slot->pid == MyProcPid)
	{
		MssqlCdcPhase phase = CDC_PHASE_STOPPED;

		slot->pid = 0;
		slot->proc = NULL;
		if (code != 0 && !slot->stop_requested)
		{
			cdc_slot_count_failure(slot);
			phase = CDC_PHASE_BACKOFF;
		}
		else if (!slot->stop_requested)
		{
			/*
			 * A clean exit nobody asked for: normally the source was paused
			 * or removed and the launcher frees the slot when it sees that.
			 * If the source is still wanted, restart it, but not sooner than
			 * the first retry delay, so a worker that keeps exiting cannot
			 * make the launcher spin.
			 */
			slot->next_attempt_at =
				TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
											CDC_RETRY_BASE_MS);
		}
		SpinLockAcquire(&slot->mutex);
		slot->phase = phase;
		slot->connected = false;	/* the process held the connection */
		SpinLockRelease(&slot->mutex);
	}
	LWLockRelease(CdcControl->lock);

	MySlotIndex = -1;
	cdc_launcher_wake();
}

void
cdc_slot_attach(int index, uint32 generation)
{
	MssqlCdcSlot *slot;

	cdc_shmem_check();
	if (MySlotIndex >= 0)
		elog(ERROR, "mssql_cdc worker is already attached to slot %d", MySlotIndex);

	LWLockAcquire(CdcControl->lock, LW_EXCLUSIVE);
	if (!cdc_slot_matches(index, generation) ||
		CdcControl->slots[index].pid != 0)
	{
		LWLockRelease(CdcControl->lock);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("mssql_cdc worker slot %d (generation %u) is no longer assigned to this worker",
						index, generation)));
	}

	slot = &CdcControl->slots[index];
	slot->pid = MyProcPid;
	slot->proc = MyProc;
	SpinLockAcquire(&slot->mutex);
	slot->phase = CDC_PHASE_CONNECTING;
	SpinLockRelease(&slot->mutex);
	LWLockRelease(CdcControl->lock);

	MySlotIndex = index;
	before_shmem_exit(cdc_slot_detach, Int32GetDatum(index));
}

static MssqlCdcSlot *
cdc_my_slot(void)
{
	if (MySlotIndex < 0 || CdcControl == NULL)
		elog(ERROR, "mssql_cdc worker is not attached to a slot");
	return &CdcControl->slots[MySlotIndex];
}

void
cdc_slot_report_phase(MssqlCdcPhase phase)
{
	MssqlCdcSlot *slot = cdc_my_slot();

	SpinLockAcquire(&slot->mutex);
	slot->phase = phase;
	SpinLockRelease(&slot->mutex);
}

void
cdc_slot_report_poll(const MssqlLsn *source_max_lsn,
					 TimestampTz source_max_lsn_time)
{
	MssqlCdcSlot *slot = cdc_my_slot();
	TimestampTz now = GetCurrentTimestamp();

	SpinLockAcquire(&slot->mutex);
	slot->last_poll_at = now;
	slot->windows++;			/* one poll is one window */
	if (source_max_lsn)
	{
		slot->has_source_max_lsn = true;
		slot->source_max_lsn = *source_max_lsn;
		slot->source_max_lsn_time = source_max_lsn_time;
	}
	SpinLockRelease(&slot->mutex);
}

void
cdc_slot_report_lag(const MssqlLsn *base_lsn, int64 transactions)
{
	MssqlCdcSlot *slot = cdc_my_slot();

	SpinLockAcquire(&slot->mutex);
	slot->has_lag = true;
	slot->lag_base_lsn = *base_lsn;
	slot->lag_transactions = transactions;
	SpinLockRelease(&slot->mutex);
}

void
cdc_slot_report_connection(bool connected, bool encrypted, bool certificate_validated)
{
	MssqlCdcSlot *slot = cdc_my_slot();

	SpinLockAcquire(&slot->mutex);
	slot->connected = connected;
	slot->connection_encrypted = connected && encrypted;
	slot->certificate_validated = connected && certificate_validated;
	SpinLockRelease(&slot->mutex);
}

/*
 * A request (SQL batch) the worker sent to SQL Server: one network round
 * trip.  tds_session.c calls it for every session; only a worker attached
 * to a slot counts (a backend's sessions, for add_table's checks, do not).
 */
void
cdc_slot_count_request(void)
{
	MssqlCdcSlot *slot;

	if (MySlotIndex < 0 || CdcControl == NULL)
		return;
	slot = &CdcControl->slots[MySlotIndex];
	SpinLockAcquire(&slot->mutex);
	slot->requests_sent++;
	SpinLockRelease(&slot->mutex);
}

/* A snapshot chunk the worker read (worker_snapshot.c). */
void
cdc_slot_count_chunk(void)
{
	MssqlCdcSlot *slot = cdc_my_slot();

	SpinLockAcquire(&slot->mutex);
	slot->snapshot_chunks++;
	SpinLockRelease(&slot->mutex);
}

/* A poll whose reply came from the batch sent ahead (worker_poll_ahead.c) */
void
cdc_slot_count_poll_ahead(void)
{
	MssqlCdcSlot *slot = cdc_my_slot();

	SpinLockAcquire(&slot->mutex);
	slot->polls_ahead++;
	SpinLockRelease(&slot->mutex);
}

void
cdc_slot_report_success(void)
{
	MssqlCdcSlot *slot = cdc_my_slot();

	/* Cheap check first: a healthy worker must not take the lock per batch. */
	if (slot->consecutive_failures == 0 && slot->next_attempt_at == 0)
		return;

	LWLockAcquire(CdcControl->lock, LW_EXCLUSIVE);
	slot->consecutive_failures = 0;
	slot->next_attempt_at = 0;
	LWLockRelease(CdcControl->lock);
}

bool
cdc_slot_stop_requested(void)
{
	MssqlCdcSlot *slot = cdc_my_slot();
	bool		stop;

	LWLockAcquire(CdcControl->lock, LW_SHARED);
	stop = slot->stop_requested;
	LWLockRelease(CdcControl->lock);

	return stop;
}

/* ------------------------------------------------------------------------
 * Retry policy
 * ------------------------------------------------------------------------
 */

int64
cdc_retry_delay_ms(int consecutive_failures)
{
	int64		cap_ms = (int64) mssql_cdc_retry_max_backoff * 1000;
	int64		delay_ms = CDC_RETRY_BASE_MS;
	int			i;

	for (i = 1; i < consecutive_failures && delay_ms < cap_ms; i++)
		delay_ms *= 2;
	if (delay_ms > cap_ms)
		delay_ms = cap_ms;

	/* subtract 0..12.5 %, never going below zero */
	delay_ms -= (int64) (compat_random_fraction() * (delay_ms / 8));

	return delay_ms;
}
