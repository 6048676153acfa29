/*-------------------------------------------------------------------------
 *
 * worker_retention_gap.c
 *		Restart a table that cannot be copied (snapshot_mode 'never', every
 *		table without a key) after resnapshot(): from where it was, or,
 *		when CDC cleanup removed changes it still needed, from the oldest
 *		change CDC keeps, with the lost LSN range recorded.
 *
 * A new copy is what resnapshot() gives a table with a key.  Without one
 * there is nothing to copy, and jumping to the current max LSN would skip
 * every change CDC still keeps as well as the lost ones.  So the table
 * continues with the first retained change, and the gap (the changes
 * committed after the old checkpoint and before the capture instance's
 * low watermark) is written as an mssql_cdc.errors row and kept as the
 * table's warning 'retention_gap' until the next resnapshot()/reset_table().
 *
 * IDENTIFICATION
 *		src/worker_retention_gap.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "apply.h"
#include "capture_instance_switch.h"
#include "catalog.h"
#include "cdc_window.h"
#include "error_condition.h"
#include "lsn.h"
#include "mssql_cdc.h"

#include "worker_internal.h"

/*
 * table: phase 'pending', no checkpoint, resumed from table->snapshot_lsn
 * (the checkpoint it had when resnapshot() was called).  Starts it
 * streaming; false when it must wait (capture instance not listed or not
 * processed by the capture job yet).
 */
bool
worker_continue_after_gap(MssqlCdcTable *table)
{
	MssqlLsn	from;
	MssqlLsn	min_lsn;
	MssqlLsn	start;
	CiPlan		plan;
	bool		gap;
	char		after[MSSQL_LSN_TEXT_SIZE];
	char		before[MSSQL_LSN_TEXT_SIZE];

	if (!mssql_lsn_increment(&table->snapshot_lsn, &from))
		from = table->snapshot_lsn;
	plan = ci_plan_for_window(&worker_source_cdc, table, &from);
	if (plan.current == NULL)
		return false;
	if (!cdc_get_min_lsn(worker_session, plan.current->name, &min_lsn))
		return false;
	/* the change at min_lsn is kept: start just before it */
	gap = mssql_lsn_cmp(&min_lsn, &from) > 0;
	start = table->snapshot_lsn;
	if (gap && !ci_lsn_decrement(&min_lsn, &start))
		return false;

	worker_begin_xact();
	worker_timeline_fingerprint_at(&start);
	apply_start_streaming(table->table_id, &start);
	if (gap)
	{
		char	   *message;
		char	   *hint;

		mssql_lsn_format(&table->snapshot_lsn, after);
		mssql_lsn_format(&min_lsn, before);
		message = psprintf("Changes of capture instance \"%s\" committed after LSN %s and before LSN %s were removed by CDC cleanup before they were copied: they are missing from the staging table.",
						   plan.current->name, after, before);
		hint = psprintf("The table has no primary key (or snapshot_mode 'never') and cannot be copied again: it streams on from the oldest change CDC keeps (LSN %s). The changes committed after LSN %s and before LSN %s are lost; raise the CDC retention (sys.sp_cdc_change_job @retention) so the worker can keep up.",
						before, after, before);
		catalog_record_error_condition(worker_server_name, table->table_id, "55000", message, NULL,
									   hint, 0, COND_RETENTION_GAP);
		catalog_set_table_warning(table->table_id, COND_RETENTION_GAP, hint, false);
		worker_commit_xact();
		ereport(WARNING,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("mssql_cdc: table %s.%s of source \"%s\": %s",
						table->source_schema, table->source_table, worker_server_name, message),
				 errhint("%s", hint)));
	}
	else
		worker_commit_xact();
	table->phase = MSSQL_PHASE_STREAMING;
	table->has_checkpoint_lsn = true;
	table->checkpoint_lsn = start;
	table->has_snapshot_lsn = false;
	return true;
}
