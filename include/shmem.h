/*-------------------------------------------------------------------------
 *
 * shmem.h
 *		Shared state of the launcher and the source workers.
 *
 * One control block per cluster holds the launcher's identity, a
 * "catalog changed" flag that API calls raise at commit time, and an array
 * of mssql_cdc.max_workers slots.  A slot belongs to one foreign server
 * (source) for as long as the launcher wants that source to run: it outlives
 * individual worker processes, so the retry state (consecutive failures,
 * next attempt) survives the worker that failed.
 *
 * Locking: the LWLock protects slot ownership and lifecycle fields (in_use,
 * server, generation, pid, retry state); each slot's spinlock protects the
 * live progress fields a worker updates many times a second (phase, source
 * max LSN, poll time).  Readers that need both take the LWLock first.
 *
 * Who calls what:
 *	- _PG_init: cdc_shmem_install_hooks()
 *	- launcher: cdc_launcher_attach(), cdc_launcher_take_catalog_changed(),
 *	  cdc_slot_claim(), cdc_slot_release(), cdc_slot_record_launch_failure(),
 *	  cdc_slot_request_stop(), cdc_slots_read()
 *	- any backend at commit: cdc_launcher_signal_catalog_changed()
 *	- source worker: cdc_slot_attach() and the cdc_slot_report_*() family
 *	- SQL functions: cdc_slots_read(), cdc_launcher_pid()
 *
 * IDENTIFICATION
 *		include/shmem.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_SHMEM_H
#define MSSQL_CDC_SHMEM_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "lsn.h"

/*
 * What a source's worker is doing, as shown by mssql_cdc.worker_state().
 * Only CDC_PHASE_STARTING and CDC_PHASE_BACKOFF/STOPPED are set by the
 * launcher and the exit hook; the rest are reported by the worker itself.
 */
typedef enum MssqlCdcPhase
{
	CDC_PHASE_STARTING,			/* launcher registered a process, not attached */
	CDC_PHASE_CONNECTING,		/* logging in to SQL Server */
	CDC_PHASE_SNAPSHOTTING,		/* copying initial table contents */
	CDC_PHASE_STREAMING,		/* reading and applying a window of changes */
	CDC_PHASE_IDLE,				/* caught up, waiting for the next poll */
	CDC_PHASE_STOPPING,			/* asked to stop (paused, removed, shutdown) */
	CDC_PHASE_BACKOFF,			/* no process: last one failed, retry later */
	CDC_PHASE_STOPPED			/* no process: last one exited normally */
} MssqlCdcPhase;

/* Name shown in SQL for a phase ("streaming", "backoff", ...). */
extern const char *cdc_phase_name(MssqlCdcPhase phase);

/* A consistent copy of one occupied slot, for readers. */
typedef struct MssqlCdcSlotState
{
	int			index;
	uint32		generation;
	NameData	server_name;
	Oid			run_as;
	pid_t		pid;			/* 0 when no process is attached */
	MssqlCdcPhase phase;
	bool		stop_requested;
	bool		has_source_max_lsn;
	MssqlLsn	source_max_lsn;
	TimestampTz source_max_lsn_time;	/* 0 = unknown */
	TimestampTz last_poll_at;	/* 0 = never */
	bool		has_lag;		/* lag_* below were reported */
	MssqlLsn	lag_base_lsn;	/* checkpoint the count starts after */
	int64		lag_transactions;	/* source transactions in (base, max] */
	bool		connected;		/* the worker has a session open; then: */
	bool		connection_encrypted;	/* the whole session is in TLS */
	bool		certificate_validated;	/* and SQL Server's certificate was checked */
	int64		requests_sent;	/* requests sent to SQL Server by this run */
	int64		windows;		/* polls (windows) of this run */
	int64		snapshot_chunks;	/* snapshot chunks read by this run */
	int64		polls_ahead;	/* polls of this run sent ahead */
	int			consecutive_failures;
	TimestampTz next_attempt_at;	/* 0 = may start now */
	TimestampTz crashed_at;		/* 0 = no failure recorded */
} MssqlCdcSlotState;

/* _PG_init, while preloading: size and create the shared state. */
extern void cdc_shmem_install_hooks(void);

/* ---- launcher identity and wake-ups ---- */

/*
 * Record the calling process as the launcher.  Returns false, changing
 * nothing, if another live launcher is registered.  Clears itself at exit.
 */
extern bool cdc_launcher_attach(void);

/* Launcher pid, or 0 when no launcher runs. */
extern pid_t cdc_launcher_pid(void);

/* Raise the "catalog changed" flag and wake the launcher (no-op if none). */
extern void cdc_launcher_signal_catalog_changed(void);

/* Launcher: read and clear the "catalog changed" flag. */
extern bool cdc_launcher_take_catalog_changed(void);

/* ---- slots, launcher side ---- */

/* Capacity (mssql_cdc.max_workers at server start). */
extern int	cdc_slot_count(void);

/*
 * Copy every occupied slot into out[] (room for cdc_slot_count() entries);
 * returns how many were copied.  Takes the locks itself.
 */
extern int	cdc_slots_read(MssqlCdcSlotState *out);

/*
 * Claim a free slot for server_name, in phase STARTING with no retry state.
 * Returns the slot index and its new generation, or -1 when all slots are
 * taken.  Callers must have checked that the server has no slot yet.
 */
extern int	cdc_slot_claim(const char *server_name, Oid run_as,
						   uint32 *generation);

/* Give a slot back.  Ignored if the generation no longer matches. */
extern void cdc_slot_release(int index, uint32 generation);

/*
 * A worker for this slot could not be started, or stopped before it
 * attached: count a failure and schedule the next attempt with backoff.
 */
extern void cdc_slot_record_launch_failure(int index, uint32 generation);

/*
 * Ask the slot's worker to stop: set stop_requested and send it SIGTERM.
 * Returns the pid signalled, 0 if no process was attached (a launch in
 * flight sees the flag right after attaching).  A worker that exits after a
 * stop request is not counted as failed.
 */
extern pid_t cdc_slot_request_stop(int index, uint32 generation);

/* ---- slots, worker side (the worker attaches to the slot it was given) ---- */

/*
 * Bind the calling process to slot index, which must still carry
 * generation (a stale launch must not take over a reused slot).  Registers
 * an exit hook that detaches, records a failure on a non-zero exit code and
 * wakes the launcher.  ERROR if the slot is not ours.
 */
extern void cdc_slot_attach(int index, uint32 generation);

extern void cdc_slot_report_phase(MssqlCdcPhase phase);

/*
 * After each poll of the source: its max LSN (NULL if unknown) and time.
 * Each poll is one window (worker_state().windows).
 */
extern void cdc_slot_report_poll(const MssqlLsn *source_max_lsn,
								 TimestampTz source_max_lsn_time);

/*
 * After a poll's windows: how many source transactions committed after
 * base_lsn (the checkpoint the streaming tables reached) up to the source
 * max LSN last polled.  Shown as status.lag_transactions for the tables
 * whose checkpoint is base_lsn.
 */
extern void cdc_slot_report_lag(const MssqlLsn *base_lsn, int64 transactions);

/*
 * The worker opened a session to SQL Server (connected, with how it is
 * protected) or has none (connected false, e.g. while logging in again).
 * Shown as status.encrypted and status.certificate_validated.
 */
extern void cdc_slot_report_connection(bool connected, bool encrypted,
									   bool certificate_validated);

/*
 * Round trips: a request sent to SQL Server (any session of this process;
 * a no-op outside a worker) and a snapshot chunk read.  Shown by
 * worker_state() as requests_sent and snapshot_chunks, per worker run.
 */
extern void cdc_slot_count_request(void);
extern void cdc_slot_count_chunk(void);

/* A poll whose reply was read from the batch sent ahead (polls_ahead) */
extern void cdc_slot_count_poll_ahead(void);

/* After a committed batch: the failure streak is over. */
extern void cdc_slot_report_success(void);

/* True once the launcher asked this worker to stop. */
extern bool cdc_slot_stop_requested(void);

/* ---- retry policy ---- */

/*
 * Delay before the next attempt after the given number of consecutive
 * failures (>= 1): 1 s doubling per failure, capped at
 * mssql_cdc.retry_max_backoff, with up to 12.5 % random jitter subtracted so
 * many failing sources do not retry in lockstep.
 */
extern int64 cdc_retry_delay_ms(int consecutive_failures);

#endif							/* MSSQL_CDC_SHMEM_H */
