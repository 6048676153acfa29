/*-------------------------------------------------------------------------
 *
 * catalog_guard.c
 *		BEFORE UPDATE trigger on mssql_cdc.table_state that refuses to move a
 *		checkpoint backwards (design invariant 5).
 *
 * The worker never intends to do this; the trigger turns a bug (or a hand
 * edit) that would silently re-apply or skip changes into a loud error that
 * rolls the whole batch back.  Written in C so that the extension does not
 * depend on PL/pgSQL being installed.
 *
 * IDENTIFICATION
 *		src/catalog_guard.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "lsn.h"

PG_FUNCTION_INFO_V1(mssql_cdc_table_state_guard);

/*
 * mssql_cdc.reset_table() moves a checkpoint to a chosen point, backwards
 * too, and says so by setting reset_at in the same update (it removes the
 * staging rows after that point in the same transaction).  A catalog from
 * before 0.2 has no reset_at: no reset then.
 */
static bool
is_reset(TupleDesc desc, HeapTuple oldtuple, HeapTuple newtuple)
{
	int			attno = SPI_fnumber(desc, "reset_at");
	bool		old_null;
	bool		new_null;
	Datum		old_at;
	Datum		new_at;

	if (attno <= 0)
		return false;
	old_at = heap_getattr(oldtuple, attno, desc, &old_null);
	new_at = heap_getattr(newtuple, attno, desc, &new_null);
	if (new_null)
		return false;
	return old_null || DatumGetTimestampTz(old_at) != DatumGetTimestampTz(new_at);
}

Datum
mssql_cdc_table_state_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	TupleDesc	desc;
	HeapTuple	oldtuple;
	HeapTuple	newtuple;
	int			lsn_attno;
	int			phase_attno;
	bool		old_null;
	bool		new_null;
	Datum		old_lsn;
	Datum		new_lsn;

	if (!CALLED_AS_TRIGGER(fcinfo) ||
		!TRIGGER_FIRED_BEFORE(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
		elog(ERROR, "mssql_cdc_table_state_guard must be a BEFORE UPDATE FOR EACH ROW trigger");

	desc = RelationGetDescr(trigdata->tg_relation);
	oldtuple = trigdata->tg_trigtuple;
	newtuple = trigdata->tg_newtuple;

	lsn_attno = SPI_fnumber(desc, "checkpoint_lsn");
	phase_attno = SPI_fnumber(desc, "phase");
	if (lsn_attno <= 0 || phase_attno <= 0)
		elog(ERROR, "mssql_cdc.table_state lacks checkpoint_lsn or phase");

	old_lsn = heap_getattr(oldtuple, lsn_attno, desc, &old_null);
	new_lsn = heap_getattr(newtuple, lsn_attno, desc, &new_null);

	if (old_null)
		return PointerGetDatum(newtuple);

	if (new_null)
	{
		bool		phase_null;
		Datum		phase = heap_getattr(newtuple, phase_attno, desc, &phase_null);

		/* clearing is the re-snapshot reset, and only that */
		if (!phase_null && strcmp(TextDatumGetCString(phase), "pending") == 0)
			return PointerGetDatum(newtuple);
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("checkpoint_lsn of mssql_cdc table %d cannot be cleared",
						DatumGetInt32(heap_getattr(newtuple, 1, desc, &new_null))),
				 errdetail("Only a re-snapshot (phase 'pending') may discard a checkpoint."),
				 errhint("Use mssql_cdc.resnapshot().")));
	}

	if (mssql_lsn_cmp(DatumGetMssqlLsnP(new_lsn), DatumGetMssqlLsnP(old_lsn)) < 0 &&
		!is_reset(desc, oldtuple, newtuple))
	{
		char		oldbuf[MSSQL_LSN_TEXT_SIZE];
		char		newbuf[MSSQL_LSN_TEXT_SIZE];
		bool		isnull;

		mssql_lsn_format(DatumGetMssqlLsnP(old_lsn), oldbuf);
		mssql_lsn_format(DatumGetMssqlLsnP(new_lsn), newbuf);
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("checkpoint_lsn of mssql_cdc table %d cannot move backwards",
						DatumGetInt32(heap_getattr(newtuple, 1, desc, &isnull))),
				 errdetail("The checkpoint is %s; the update would set it to %s.",
						   oldbuf, newbuf),
				 errhint("To start the table over, use mssql_cdc.resnapshot(); to move it to a point CDC still keeps, mssql_cdc.reset_table().")));
	}
	return PointerGetDatum(newtuple);
}
