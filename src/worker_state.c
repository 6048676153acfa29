/*-------------------------------------------------------------------------
 *
 * worker_state.c
 *		SQL view of the live, shared-memory state of the source workers.
 *
 * mssql_cdc.worker_state() returns one row per occupied worker slot; the
 * status view joins it with the catalog by server name.  The catalog holds
 * what survives a restart (checkpoints, errors); this function shows what
 * only the running system knows (pid, phase, last poll, retry schedule).
 *
 * IDENTIFICATION
 *		src/worker_state.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "compat.h"
#include "lsn.h"
#include "shmem.h"

#define WORKER_STATE_COLUMNS	16

PG_FUNCTION_INFO_V1(mssql_cdc_worker_state);
PG_FUNCTION_INFO_V1(mssql_cdc_launcher_pid);

static Datum
timestamp_or_null(TimestampTz ts, bool *isnull)
{
	*isnull = (ts == 0);
	return TimestampTzGetDatum(ts);
}

/*
 * mssql_cdc.worker_state(OUT server_name name, OUT pid integer,
 *		OUT phase text, OUT source_max_lsn mssql_cdc.lsn,
 *		OUT source_max_lsn_time timestamptz, OUT last_poll_at timestamptz,
 *		OUT consecutive_failures integer, OUT next_attempt_at timestamptz,
 *		OUT lag_base_lsn mssql_cdc.lsn, OUT lag_transactions bigint,
 *		OUT encrypted boolean, OUT certificate_validated boolean,
 *		OUT requests_sent bigint, OUT windows bigint, OUT snapshot_chunks bigint,
 *		OUT polls_ahead bigint)
 *
 * The slots are copied under their locks first and turned into tuples
 * afterwards, so no lock is held while allocating.
 */
Datum
mssql_cdc_worker_state(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MssqlCdcSlotState *slots;
	int			nslots;
	int			i;

	compat_init_materialized_srf(fcinfo);

	slots = palloc(sizeof(MssqlCdcSlotState) * cdc_slot_count());
	nslots = cdc_slots_read(slots);

	for (i = 0; i < nslots; i++)
	{
		const MssqlCdcSlotState *slot = &slots[i];
		Datum		values[WORKER_STATE_COLUMNS];
		bool		nulls[WORKER_STATE_COLUMNS];

		memset(nulls, 0, sizeof(nulls));

		values[0] = NameGetDatum(&slot->server_name);

		values[1] = Int32GetDatum((int32) slot->pid);
		nulls[1] = (slot->pid == 0);

		values[2] = CStringGetTextDatum(cdc_phase_name(slot->phase));

		if (slot->has_source_max_lsn)
		{
			MssqlLsn   *lsn = palloc(sizeof(MssqlLsn));

			*lsn = slot->source_max_lsn;
			values[3] = MssqlLsnPGetDatum(lsn);
		}
		else
			nulls[3] = true;

		values[4] = timestamp_or_null(slot->source_max_lsn_time, &nulls[4]);
		values[5] = timestamp_or_null(slot->last_poll_at, &nulls[5]);
		values[6] = Int32GetDatum(slot->consecutive_failures);
		values[7] = timestamp_or_null(slot->next_attempt_at, &nulls[7]);

		if (slot->has_lag)
		{
			MssqlLsn   *base = palloc(sizeof(MssqlLsn));

			*base = slot->lag_base_lsn;
			values[8] = MssqlLsnPGetDatum(base);
			values[9] = Int64GetDatum(slot->lag_transactions);
		}
		else
			nulls[8] = nulls[9] = true;

		/* how the worker's open session is protected; NULL without one */
		values[10] = BoolGetDatum(slot->connection_encrypted);
		values[11] = BoolGetDatum(slot->certificate_validated);
		nulls[10] = nulls[11] = !slot->connected || slot->pid == 0;

		/* round trips of the current (or last) run */
		values[12] = Int64GetDatum(slot->requests_sent);
		values[13] = Int64GetDatum(slot->windows);
		values[14] = Int64GetDatum(slot->snapshot_chunks);
		values[15] = Int64GetDatum(slot->polls_ahead);

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}

	return (Datum) 0;
}

/* mssql_cdc.launcher_pid(): the launcher's pid, NULL when none runs. */
Datum
mssql_cdc_launcher_pid(PG_FUNCTION_ARGS)
{
	pid_t		pid = cdc_launcher_pid();

	if (pid == 0)
		PG_RETURN_NULL();
	PG_RETURN_INT32((int32) pid);
}
