/*-------------------------------------------------------------------------
 *
 * capture_instance_switch.c
 *		Schema evolution through capture instances (see
 *		capture_instance_switch.h and doc/schema-evolution.md).
 *
 * Why the switch is at the new instance's start_lsn S and nowhere else:
 * both instances carry every change logged at or after S, and only the
 * old one has the changes before it.  A transaction open across
 * sys.sp_cdc_enable_table (began before S, commits after it) is the
 * exception: its changes before S may be missing from the new instance, so
 * such transactions are routed to the old one while it exists
 * (ci_route_open_transactions, by cdc.lsn_time_mapping.tran_begin_lsn).  Reading the old one below S and the
 * new one from S on therefore gives every change exactly once.  The
 * window is cut (its end moved to S - 1) rather than split into two reads
 * of two instances, so one window still reads one instance per table and
 * the switch coincides with a window boundary: the checkpoint S - 1 says
 * "old instance complete", and a crash anywhere leaves either that or the
 * finished switch.  Cleanup may raise the new instance's start_lsn later;
 * any point at or above the original S is an equally correct switch point,
 * so the worker simply uses the start_lsn it sees.
 *
 * The poll reads sys.sp_cdc_help_change_data_capture without arguments:
 * one call lists every capture instance the login may read (exactly what
 * the worker can use), through the documented interface rather than the
 * cdc.change_tables system table, and the same way on the stand-in.
 *
 * IDENTIFICATION
 *		src/capture_instance_switch.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "capture_instance_switch.h"
#include "column_selection.h"
#include "error_condition.h"
#include "source_name.h"
#include "staging.h"

char *
ci_source_state_batch(const CdcPoll *poll)
{
	StringInfoData sql;

	/*
	 * The procedure raises an error on a database without CDC, so it runs
	 * only where sys.databases says CDC is on (the IF reads it again)
	 */
	initStringInfo(&sql);
	appendStringInfoString(&sql,
						   "SELECT name, is_cdc_enabled FROM sys.databases WHERE database_id = DB_ID();"
						   " IF EXISTS (SELECT 1 FROM sys.databases WHERE database_id = DB_ID() AND is_cdc_enabled = 1)"
						   " EXEC sys.sp_cdc_help_change_data_capture");
	if (poll != NULL)
		appendStringInfo(&sql, "; %s", cdc_poll_max_lsn_sql(poll->server_zone));
	return sql.data;
}

void
ci_read_source_state_reply(TdsSession *session, SourceCdcState *state, CdcPoll *poll)
{
	static const char *const db_names[] = {"name", "is_cdc_enabled"};
	static const char *const ci_names[] = {"source_schema", "source_table", "capture_instance",
	"start_lsn"};
	List	   *rows;
	ListCell   *lc;
	int			nresult = 0;
	bool		listed = false;
	bool		usable;

	memset(state, 0, sizeof(*state));
	state->cdc_enabled = true;	/* unless sys.databases says otherwise */
	if (poll != NULL)
		poll->read = poll->found = false;
	while (tds_next_result(session))
	{
		if (tds_num_cols(session) == 0)
			continue;
		if (++nresult == 1)
		{
			rows = source_schema_result_rows(session, db_names, lengthof(db_names), 1, &usable);
			if (rows != NIL)
			{
				char	  **v = linitial(rows);

				state->database = v[0] ? v[0] : "?";
				state->cdc_enabled = v[1] != NULL &&
					(strcmp(v[1], "true") == 0 || strcmp(v[1], "1") == 0);
			}
			while (!usable && tds_next_row(session))
				;				/* drain */
			continue;
		}
		rows = source_schema_result_rows(session, ci_names, lengthof(ci_names), 0, &usable);
		if (usable)
		{
			listed = true;
			foreach(lc, rows)
			{
				char	  **v = lfirst(lc);
				SourceInstance *inst;

				if (v[0] == NULL || v[1] == NULL || v[2] == NULL)
					continue;
				inst = palloc0(sizeof(SourceInstance));
				inst->source_schema = v[0];
				inst->source_table = v[1];
				inst->name = v[2];
				inst->has_start_lsn = source_schema_parse_binary_lsn(v[3], &inst->start_lsn);
				state->instances = lappend(state->instances, inst);
			}
			continue;
		}
		/* the poll's result set (its columns are not the procedure's) */
		if (poll != NULL && !poll->read)
		{
			poll->read = true;
			poll->found = cdc_read_max_lsn(session, &poll->max_lsn, &poll->max_time);
		}
		while (tds_next_row(session))
			;					/* drain */
	}
	state->known = true;

	/*
	 * CDC enabled between the two reads of sys.databases leaves the list
	 * out: never take that for "no capture instance" (which parks tables)
	 */
	if (state->cdc_enabled && !listed)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("SQL Server (server \"%s\") did not list the capture instances of a database with CDC enabled",
						tds_session_server_name(session)),
				 errhint("CDC was probably enabled on the database while the worker polled; it polls again.")));
	if (poll != NULL && !poll->read)
	{
		tds_mark_malformed(session);
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("SQL Server (server \"%s\") did not return the max LSN of the poll",
						tds_session_server_name(session))));
	}
}

/* SQL Server compares names under the database collation: usually case-insensitive */
static bool
same_name(const char *a, const char *b)
{
	return pg_strcasecmp(a, b) == 0;
}

static bool
instance_of(const SourceInstance *inst, const MssqlCdcTable *table)
{
	return same_name(inst->source_schema, table->source_schema) &&
		same_name(inst->source_table, table->source_table);
}

CiPlan
ci_plan_for_window(const SourceCdcState *state, const MssqlCdcTable *table,
				   const MssqlLsn *from)
{
	CiPlan		plan = {CI_READ_CURRENT, NULL, NULL, NULL};
	ListCell   *lc;

	if (table->capture_instance == NULL)
		return plan;			/* describe picks one; nothing to switch from */

	foreach(lc, state->instances)
	{
		SourceInstance *inst = lfirst(lc);

		if (instance_of(inst, table) && same_name(inst->name, table->capture_instance))
			plan.current = inst;
	}
	foreach(lc, state->instances)
	{
		SourceInstance *inst = lfirst(lc);

		if (!instance_of(inst, table) || inst == plan.current)
			continue;
		/* only forward: an older instance never replaces the recorded one */
		if (plan.current != NULL && plan.current->has_start_lsn && inst->has_start_lsn &&
			mssql_lsn_cmp(&inst->start_lsn, &plan.current->start_lsn) <= 0)
		{
			/* but it still has transactions open across the switch */
			plan.predecessor = inst;
			continue;
		}
		/* SQL Server allows two instances per table: at most one other */
		if (plan.successor == NULL ||
			(inst->has_start_lsn && (!plan.successor->has_start_lsn ||
									 mssql_lsn_cmp(&inst->start_lsn, &plan.successor->start_lsn) > 0)))
			plan.successor = inst;
	}

	if (plan.current != NULL)
	{
		if (plan.successor == NULL || !plan.successor->has_start_lsn)
			plan.kind = CI_READ_CURRENT;
		else if (mssql_lsn_cmp(from, &plan.successor->start_lsn) >= 0)
			plan.kind = CI_SWITCH;
		else
			plan.kind = CI_READ_UNTIL_SUCCESSOR;
		return plan;
	}
	if (plan.successor == NULL)
		plan.kind = CI_NOT_VISIBLE;
	else if (!plan.successor->has_start_lsn)
		plan.kind = CI_WAIT;
	else if (mssql_lsn_cmp(from, &plan.successor->start_lsn) >= 0)
		plan.kind = CI_SWITCH;
	else
		plan.kind = CI_LOST_CHANGES;
	return plan;
}

void
ci_route_open_transactions(TdsSession *session, CiPlan *plan, const MssqlLsn *from,
						   MssqlLsn *window_max)
{
	const SourceInstance *newer;
	StringInfoData sql;
	char	   *start;
	bool		seen = false;
	bool		has_first = false;
	bool		has_straggler = false;
	MssqlLsn	first;
	MssqlLsn	straggler;

	/* the two readable instances: the one before S and the one from S */
	if (plan->kind == CI_SWITCH && plan->current != NULL)
		newer = plan->successor;
	else if (plan->kind == CI_READ_CURRENT && plan->predecessor != NULL &&
			 plan->current != NULL && plan->current->has_start_lsn &&
			 plan->predecessor->has_start_lsn)
		newer = plan->current;
	else
		return;
	if (mssql_lsn_cmp(from, window_max) > 0)
		return;

	start = tds_format_lsn_literal(newer->start_lsn.bytes);
	initStringInfo(&sql);
	appendStringInfo(&sql,
					 "SELECT MIN(start_lsn),"
					 " MIN(CASE WHEN tran_begin_lsn IS NULL OR tran_begin_lsn < %s THEN start_lsn END)"
					 " FROM cdc.lsn_time_mapping"
					 " WHERE start_lsn >= %s AND start_lsn <= %s AND tran_id <> 0x00",
					 start, tds_format_lsn_literal(from->bytes), tds_format_lsn_literal(window_max->bytes));
	tds_exec(session, sql.data);
	while (tds_next_result(session))
		while (tds_next_row(session))
		{
			if (seen)
				continue;
			seen = true;
			tds_expect_num_cols(session, 2, "the transactions open across a capture-instance switch");
			has_first = tds_col_lsn(session, 1, &first);
			has_straggler = tds_col_lsn(session, 2, &straggler);
		}
	if (!has_straggler)
		return;
	if (has_first && mssql_lsn_cmp(&first, &straggler) == 0)
	{
		/* the window starts with such a transaction: it alone, from the older instance */
		*window_max = straggler;
		plan->kind = plan->kind == CI_SWITCH ? CI_READ_CURRENT : CI_READ_PREDECESSOR;
		return;
	}
	/* the newer instance up to just before it */
	(void) ci_lsn_decrement(&straggler, window_max);
}

bool
ci_still_listed(const SourceCdcState *state, const char *source_schema,
				const char *source_table, const MssqlCaptureInstance *ci)
{
	ListCell   *lc;

	foreach(lc, state->instances)
	{
		SourceInstance *inst = lfirst(lc);

		if (!same_name(inst->source_schema, source_schema) ||
			!same_name(inst->source_table, source_table) || !same_name(inst->name, ci->name))
			continue;
		if (inst->has_start_lsn != ci->has_start_lsn)
			return false;
		return !ci->has_start_lsn || mssql_lsn_cmp(&inst->start_lsn, &ci->start_lsn) == 0;
	}
	return false;
}

static char *
table_display(const MssqlCdcTable *table)
{
	return mssql_display_name(table->source_schema, table->source_table);
}

char *
ci_hint_source_table_missing(const MssqlCdcTable *table)
{
	return psprintf("Restore the table and enable a capture instance for it (EXEC sys.sp_cdc_enable_table @source_schema = %s, @source_name = %s, @role_name = NULL), or, if the login lost its permission, GRANT SELECT ON %s.%s TO the login; then call mssql_cdc.resnapshot() to copy it again. Or stop capturing it with mssql_cdc.remove_table().",
					tds_quote_nstring(table->source_schema), tds_quote_nstring(table->source_table),
					tds_quote_ident(table->source_schema), tds_quote_ident(table->source_table));
}

const char *
ci_explain_not_visible(TdsSession *session, const MssqlCdcTable *table,
					   const char *server_name, char **message, char **hint)
{
	SourceCdcTracking tracking = source_schema_cdc_tracking(session, table->source_schema,
															table->source_table);

	switch (tracking)
	{
		case SOURCE_TABLE_TRACKED:
			*message = psprintf("Table %s of server \"%s\" is still enabled for change data capture, but the login may not read its capture instance \"%s\" any more.",
								table_display(table), server_name, table->capture_instance);
			*hint = psprintf("Grant the login SELECT on the table and membership in the capture instance's gating role (@role_name of sys.sp_cdc_enable_table), or for an instance without a gating role GRANT SELECT ON [cdc].%s, then call mssql_cdc.resnapshot(); mssql_cdc.check_server() names the missing permission.",
							 tds_quote_ident(psprintf("fn_cdc_get_all_changes_%s", table->capture_instance)));
			return COND_CAPTURE_INSTANCE_MISSING;
		case SOURCE_TABLE_NOT_FOUND:

			/*
			 * A dropped table takes its capture instances with it, so what is
			 * missing is the table (or the login's view of it: metadata
			 * visibility hides a table without permission), and enabling a
			 * capture instance cannot be the first step.
			 */
			*message = psprintf("Table %s does not exist on server \"%s\" any more, or the login cannot see it (dropped, or not visible to this login): its capture instance \"%s\" is gone with it, and its changes can no longer be read.",
								table_display(table), server_name, table->capture_instance);
			*hint = ci_hint_source_table_missing(table);
			return COND_SOURCE_TABLE_MISSING;
		case SOURCE_TABLE_NOT_TRACKED:
			break;
	}
	*message = psprintf("Capture instance \"%s\" of table %s was dropped on server \"%s\" (sys.sp_cdc_disable_table), and the table has no other capture instance: its changes can no longer be read.",
						table->capture_instance, table_display(table), server_name);
	*hint = psprintf("Enable a new capture instance (EXEC sys.sp_cdc_enable_table @source_schema = %s, @source_name = %s, @role_name = NULL) and call mssql_cdc.resnapshot() to copy the table again, or stop capturing it with mssql_cdc.remove_table().",
					 tds_quote_nstring(table->source_schema), tds_quote_nstring(table->source_table));
	return COND_CAPTURE_INSTANCE_MISSING;
}

void
ci_explain_lost_changes(const MssqlCdcTable *table, const CiPlan *plan, const MssqlLsn *from,
						char **message, char **hint)
{
	char		from_text[MSSQL_LSN_TEXT_SIZE];
	char		start_text[MSSQL_LSN_TEXT_SIZE];

	mssql_lsn_format(from, from_text);
	mssql_lsn_format(&plan->successor->start_lsn, start_text);
	*message = psprintf("Capture instance \"%s\" of table %s was dropped before its changes were copied up to the start of capture instance \"%s\": the changes from %s to just before %s exist in neither and are lost.",
						table->capture_instance, table_display(table), plan->successor->name,
						from_text, start_text);
	*hint = psprintf("Call mssql_cdc.resnapshot() to copy the table again (it then reads \"%s\"). Drop an old capture instance only after mssql_cdc.capture_instance_switches shows the switch.",
					 plan->successor->name);
}

void
ci_explain_cdc_disabled(const SourceCdcState *state, const char *server_name,
						char **message, char **hint)
{
	*message = psprintf("Change data capture was disabled on database \"%s\" of server \"%s\" (sys.sp_cdc_disable_db): its capture instances and their changes are gone.",
						state->database ? state->database : "?", server_name);
	*hint = pstrdup("Run EXEC sys.sp_cdc_enable_db and sys.sp_cdc_enable_table for the table on SQL Server, then call mssql_cdc.resnapshot() to copy it again.");
}

char *
ci_check_staging(const MssqlCdcTable *table, const MssqlSourceTable *new_src,
				 StagingDiff *diff, char **hint)
{
	const char *staging = quote_qualified_identifier(table->staging_schema, table->staging_table);

	staging_compare(table->staging_schema, table->staging_table,
					new_src->columns, new_src->ncolumns, diff);
	if (diff->conflict != NULL)
	{
		*hint = psprintf("Either change the staging column yourself (ALTER TABLE %s ALTER COLUMN %s TYPE %s) and call mssql_cdc.resnapshot(), or remove the table with mssql_cdc.remove_table() and add it again.",
						 staging, quote_identifier(diff->conflict->pg_name), diff->conflict_new_type);
		return psprintf("Column \"%s\" of table %s changed type: staging table %s has %s, but capture instance \"%s\" has %s, which maps to %s. mssql_cdc does not change staging column types by itself.",
						diff->conflict->name, table_display(table), staging,
						diff->conflict_staging_type, new_src->capture_instance->name,
						mssql_type_display(diff->conflict), diff->conflict_new_type);
	}
	if (diff->reserved != NULL)
	{
		*hint = pstrdup("Rename the column on SQL Server, or leave it out of the capture instance (@captured_column_list of sys.sp_cdc_enable_table), then call mssql_cdc.resnapshot().");
		return psprintf("Column \"%s\" of capture instance \"%s\" collides with the staging table's metadata columns (names starting with \"%s\" are reserved).",
						diff->reserved->name, new_src->capture_instance->name,
						STAGING_METADATA_PREFIX);
	}
	return NULL;
}


static Datum
lsn_text(const MssqlLsn *lsn)
{
	char		buf[MSSQL_LSN_TEXT_SIZE];

	mssql_lsn_format(lsn, buf);
	return CStringGetTextDatum(buf);
}

void
ci_switch_commit(const MssqlCdcTable *table, const char *old_instance,
				 const MssqlSourceTable *new_src, const StagingDiff *diff,
				 const MssqlLsn *switch_lsn, Oid run_as)
{
	const MssqlCaptureInstance *ci = new_src->capture_instance;
	List	   *added = NIL;
	ListCell   *lc;
	Oid			types[7] = {INT4OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTARRAYOID, TEXTARRAYOID};
	Datum		values[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
	CatalogOwnerScope scope;

	staging_add_columns(table->staging_schema, table->staging_table, diff->missing, run_as);
	/* the mirror gets the same columns (NULL in the rows it has) */
	if (table->mirror_table != NULL)
		staging_add_columns(table->mirror_schema, table->mirror_table, diff->missing, run_as);
	foreach(lc, diff->missing)
		added = lappend(added, ((const MssqlColumn *) lfirst(lc))->pg_name);

	values[0] = Int32GetDatum(table->table_id);
	if (old_instance)
		values[1] = CStringGetTextDatum(old_instance);
	else
		nulls[1] = 'n';
	values[2] = CStringGetTextDatum(ci->name);
	if (switch_lsn)
		values[3] = lsn_text(switch_lsn);
	else
		nulls[3] = 'n';
	if (ci->has_start_lsn)
		values[4] = lsn_text(&ci->start_lsn);
	else
		nulls[4] = 'n';
	values[5] = column_selection_array(added);
	values[6] = column_selection_array(diff->not_captured);

	catalog_become_owner(&scope);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("UPDATE mssql_cdc.tables SET capture_instance = $3 WHERE table_id = $1",
							  7, types, values, nulls, false, 0) != SPI_OK_UPDATE ||
		SPI_processed != 1)
		elog(ERROR, "mssql_cdc.tables row of table %d vanished during its capture-instance switch",
			 table->table_id);
	if (SPI_execute_with_args("INSERT INTO mssql_cdc.capture_instance_switches"
							  " (table_id, old_capture_instance, new_capture_instance, switch_lsn,"
							  "  new_start_lsn, columns_added, columns_not_captured)"
							  " VALUES ($1, $2, $3, $4::mssql_cdc.lsn, $5::mssql_cdc.lsn, $6, $7)",
							  7, types, values, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not record the capture-instance switch of table %d", table->table_id);
	SPI_finish();
	catalog_restore_user(&scope);
}

bool
ci_lsn_decrement(const MssqlLsn *lsn, MssqlLsn *result)
{
	int			i;

	if (mssql_lsn_is_zero(lsn))
		return false;
	*result = *lsn;
	for (i = MSSQL_LSN_BYTES - 1; i >= 0; i--)
	{
		if (result->bytes[i]-- != 0)
			break;
	}
	return true;
}
