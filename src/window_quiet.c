/*-------------------------------------------------------------------------
 *
 * window_quiet.c
 *		What the worker knows about quiet tables across windows (issue 16
 *		point 5): a capture instance whose change table had no row in
 *		[from, upto] when the window end's batch asked (cdc_window.c, the
 *		EXISTS probe) and whose low watermark, read after that probe, was
 *		at most from, has no row in that range, ever.
 *
 * Why that holds: change rows up to the max LSN are in the change table
 * when the probe runs (the capture job writes a transaction's rows before
 * its cdc.lsn_time_mapping row), and CDC cleanup only deletes, raising the
 * low watermark first, so a mark at most from after the probe means no
 * row of the range had been deleted when it looked.  Later windows of the
 * table inside the range need no probe, no retention check (there is no
 * row to lose) and no recheck: their window end's batch leaves the table
 * out, its checkpoint moves with the window as before.  A window of the
 * group ends at the proof's upto at the latest, so the proof covers it
 * (worker_window.c); the next one asks again.
 *
 * A proof is about one history of the source database: it is forgotten
 * on every new connection (a restore or failover breaks it) and when the
 * worker finds that the source went back (worker_timeline.c), and with
 * the worker's memory when it exits after a failure.  It names the
 * capture instance, so a table that switched instance, and a table whose
 * checkpoint was moved before the proof's from (reset_table), is probed.
 *
 * IDENTIFICATION
 *		src/window_quiet.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "worker_internal.h"

#define QUIET_CI_LEN 256

typedef struct QuietProof
{
	int32		table_id;		/* hash key */
	char		capture_instance[QUIET_CI_LEN];
	MssqlLsn	from;
	MssqlLsn	upto;
} QuietProof;

static HTAB *proofs = NULL;

bool
window_quiet_proven(int32 table_id, const char *ci, const MssqlLsn *from, MssqlLsn *upto)
{
	QuietProof *p;

	if (proofs == NULL)
		return false;
	p = hash_search(proofs, &table_id, HASH_FIND, NULL);
	if (p == NULL || strcmp(p->capture_instance, ci) != 0 ||
		mssql_lsn_cmp(&p->from, from) > 0 || mssql_lsn_cmp(&p->upto, from) < 0)
		return false;
	*upto = p->upto;
	return true;
}

void
window_quiet_note(int32 table_id, const char *ci, const MssqlLsn *from, const MssqlLsn *upto)
{
	QuietProof *p;

	if (strlen(ci) >= QUIET_CI_LEN)
		return;					/* longer than a sysname: not kept, probed */
	if (proofs == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(int32);
		ctl.entrysize = sizeof(QuietProof);
		ctl.hcxt = TopMemoryContext;
		proofs = hash_create("mssql_cdc quiet tables", 256, &ctl,
							 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	p = hash_search(proofs, &table_id, HASH_ENTER, NULL);
	strlcpy(p->capture_instance, ci, QUIET_CI_LEN);
	p->from = *from;
	p->upto = *upto;
}

void
window_quiet_forget(void)
{
	if (proofs != NULL)
		hash_destroy(proofs);
	proofs = NULL;
}
