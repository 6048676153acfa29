/*-------------------------------------------------------------------------
 *
 * verify.c
 *		CALL mssql_cdc.verify(server, source_table, ...): compare captured
 *		SQL Server tables with their mirror tables (doc/mirror.md,
 *		"verify()"): the procedure, and the setting up of a table's run.
 *
 * A procedure, not a function, so that it can commit after every chunk:
 * its progress row in mssql_cdc.verify_runs (verify_runs.c) is visible
 * from any session while it runs, and no transaction (no snapshot holding
 * back vacuum of the mirror) lasts as long as a scan of a big table.
 *
 * Each table is scanned chunk by chunk (verify_scan.c); whatever differs
 * there is only a candidate, which verify_recheck.c settles.
 *
 * IDENTIFICATION
 *		src/verify.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/namespace.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "api_common.h"
#include "column_selection.h"
#include "mssql_cdc.h"
#include "options.h"
#include "source_name.h"
#include "type_map.h"
#include "verify.h"
#include "verify_recheck.h"
#include "verify_runs.h"
#include "verify_scan.h"

PG_FUNCTION_INFO_V1(mssql_cdc_verify);

/* ---- setting a table up ----------------------------------------------------- */

/* A table of the run: its catalog row, refused when it cannot be verified */
static void
check_verifiable(const MssqlCdcTable *t)
{
	char	   *name = mssql_display_name(t->source_schema, t->source_table);

	if (t->mirror_table == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s of server \"%s\" has no mirror table", name, t->server_name),
				 errdetail("verify() compares a mirror table with its source table; this table keeps a changelog only."),
				 errhint("Keep a mirror with mssql_cdc.add_table(..., mirror => true), or verify another table.")));
	if (t->phase != MSSQL_PHASE_STREAMING)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s of server \"%s\" is not streaming (phase %s)", name, t->server_name,
						catalog_phase_name(t->phase)),
				 errdetail("Until its snapshot is done (or while it is in error) its mirror does not follow the source."),
				 errhint("Wait until mssql_cdc.status shows the table streaming.")));
}

/* The source table as the worker stages it */
static MssqlSourceTable *
describe_as_staged(TdsSession *session, const MssqlCdcTable *t)
{
	MssqlSourceTable *src = source_schema_describe(session, t->source_schema, t->source_table,
												   t->capture_instance);
	ColumnSelection sel;
	const char *refusal;

	mssql_columns_set_postgis(src->columns, src->ncolumns, t->spatial_postgis);
	sel.include = t->include_columns;
	sel.exclude = t->exclude_columns;
	column_selection_apply(src, &sel);

	if (src->nkey == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table %s has no primary key, so verify() cannot compare it", source_label(src)),
				 errdetail("Rows are read in key order and matched with the mirror's rows by key."),
				 errhint("Add a primary key to the source table and call mssql_cdc.resnapshot().")));
	(void) keyset_columns(src, &refusal);
	if (refusal != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("verify() cannot page %s by its primary key", source_label(src)),
				 errdetail("%s", refusal)));
	return src;
}

/* Match the staged source columns with the mirror's columns */
static void
describe_mirror(VerifyTable *vt)
{
	const MssqlCdcTable *t = vt->table;
	Oid			relid = RangeVarGetRelid(makeRangeVar(t->mirror_schema, t->mirror_table, -1),
										 AccessShareLock, false);
	Relation	rel = table_open(relid, NoLock);
	TupleDesc	desc = RelationGetDescr(rel);
	AclResult	acl = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT);
	int			i;
	int			k;

	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_TABLE, t->mirror_table);
	vt->mirror_name = psprintf("%s.%s", quote_identifier(t->mirror_schema),
							   quote_identifier(t->mirror_table));
	vt->cols = palloc0(sizeof(VerifyColumn) * Max(vt->src->ncolumns, 1));
	vt->key_col = palloc(sizeof(int) * vt->nkey);
	for (k = 0; k < vt->nkey; k++)
		vt->key_col[k] = -1;
	for (i = 0; i < vt->src->ncolumns; i++)
	{
		const MssqlColumn *sc = &vt->src->columns[i];
		int			a;

		if (!source_column_is_staged(sc))
			continue;
		for (a = 0; a < desc->natts; a++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, a);
			VerifyColumn *col;

			if (att->attisdropped || strcmp(NameStr(att->attname), sc->pg_name) != 0)
				continue;
			col = &vt->cols[vt->ncols];
			col->src = sc;
			col->pg_name = pstrdup(sc->pg_name);
			col->typid = att->atttypid;
			col->typmod = att->atttypmod;
			get_typlenbyvalalign(col->typid, &col->typlen, &col->typbyval, &col->typalign);
			tds_datum_target_init(&col->target, col->typid, col->typmod);
			for (k = 0; k < vt->nkey; k++)
				if (vt->keys[k].col == sc)
					vt->key_col[k] = vt->ncols;
			vt->select_exprs = lappend(vt->select_exprs, mssql_column_select_expr(sc));
			vt->ncols++;
			break;
		}
	}
	for (k = 0; k < vt->nkey; k++)
		if (vt->key_col[k] < 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("mirror table %s lacks the primary key column \"%s\" of %s",
							vt->mirror_name, vt->keys[k].col->pg_name, source_label(vt->src)),
					 errhint("Rebuild the mirror with mssql_cdc.resnapshot().")));
	table_close(rel, NoLock);
}

static void
commit_if(bool nonatomic)
{
	if (nonatomic)
		SPI_commit();
}

/* Verify one table, committing its progress after every chunk */
static void
verify_table(TdsSession *session, VerifyTable *vt, int chunk_rows, Interval *timeout,
			 bool nonatomic)
{
	TimestampTz deadline;

	vt->isolation = snapshot_isolation_check(session);
	verify_scan(session, vt, chunk_rows, nonatomic);
	verify_report_progress(vt, "rechecking", NULL);
	commit_if(nonatomic);

	deadline = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
													   TimestampTzGetDatum(GetCurrentTimestamp()),
													   PointerGetDatum(timeout)));
	verify_recheck(session, vt, deadline, nonatomic);
	verify_report_progress(vt, "done",
						   vt->candidates_full
						   ? psprintf("more than %d keys differed at first sight; the keys beyond that were not re-checked and count as unconfirmed",
									  VERIFY_MAX_CANDIDATES)
						   : NULL);
	commit_if(nonatomic);
}

/* The run's tables: the one named, or every table of the server with a mirror */
static List *
tables_of_run(const char *server_name, const char *source_table)
{
	List	   *all = catalog_get_server_tables(server_name);
	List	   *result = NIL;
	char	   *schema = NULL;
	char	   *table = NULL;
	ListCell   *lc;

	if (source_table != NULL)
		api_parse_source_table(source_table, &schema, &table);
	if (all == NIL)
		api_report_server_not_in_use(server_name);
	foreach(lc, all)
	{
		MssqlCdcTable *t = lfirst(lc);

		if (source_table != NULL)
		{
			if (strcmp(t->source_schema, schema) != 0 || strcmp(t->source_table, table) != 0)
				continue;
		}
		else if (t->mirror_table == NULL)
			continue;
		check_verifiable(t);
		result = lappend(result, t);
	}
	if (result == NIL && source_table != NULL)
		api_report_table_not_captured(server_name, schema, table);
	if (result == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("server \"%s\" has no table with a mirror table", server_name),
				 errhint("Keep a mirror with mssql_cdc.add_table(..., mirror => true).")));
	return result;
}

/*
 * CALL mssql_cdc.verify(server name, source_table text, chunk_rows int,
 *		recheck_timeout interval, INOUT run_id ..., INOUT elapsed interval)
 */
Datum
mssql_cdc_verify(PG_FUNCTION_ARGS)
{
	bool		nonatomic = fcinfo->context && IsA(fcinfo->context, CallContext) &&
		!castNode(CallContext, fcinfo->context)->atomic;
	char	   *server_name;
	char	   *source_table;
	int			chunk_rows;
	Interval   *timeout;
	ForeignServer *server;
	MssqlServerOptions *opts;
	MemoryContext run_cxt;
	MemoryContext old;
	TdsSession *volatile session = NULL;
	List	   *tables;
	List	   *vts = NIL;
	TimestampTz started = GetCurrentTimestamp();
	int64		run_id;
	int64		totals[6] = {0, 0, 0, 0, 0, 0};
	TupleDesc	tupdesc;
	Datum		out[9];
	bool		outnulls[9] = {false, false, false, false, false, false, false, false, false};
	ListCell   *lc;
	const char *refusal;

	api_require_argument(fcinfo, 0, "server");
	server_name = pstrdup(NameStr(*PG_GETARG_NAME(0)));
	source_table = PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	chunk_rows = PG_ARGISNULL(2) ? mssql_cdc_snapshot_chunk_rows : PG_GETARG_INT32(2);
	if (chunk_rows < 1 || chunk_rows > 1000000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("chunk_rows must be between 1 and 1000000"),
				 errhint("Leave it NULL for mssql_cdc.snapshot_chunk_rows.")));
	api_require_argument(fcinfo, 3, "recheck_timeout");
	if (PG_GETARG_INTERVAL_P(3)->month < 0 || PG_GETARG_INTERVAL_P(3)->day < 0 ||
		PG_GETARG_INTERVAL_P(3)->time < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("recheck_timeout must not be negative")));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "verify() must be called as a procedure with its outputs");
	tupdesc = BlessTupleDesc(CreateTupleDescCopy(tupdesc));

	/* everything the run keeps lives here, across the chunks' commits */
	run_cxt = AllocSetContextCreate(TopMemoryContext, "mssql_cdc verify", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(run_cxt);
	timeout = (Interval *) palloc(sizeof(Interval));
	*timeout = *PG_GETARG_INTERVAL_P(3);
	PG_TRY();
	{
		server = mssql_cdc_get_server_by_name(server_name);
		mssql_cdc_check_server_access(GetUserId(), server);
		if (SPI_connect_ext(nonatomic ? SPI_OPT_NONATOMIC : 0) != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		MemoryContextSwitchTo(run_cxt);
		tables = tables_of_run(server_name, source_table);
		opts = mssql_cdc_get_server_options(server->serverid, GetUserId());
		run_id = verify_run_next_id();

		session = tds_session_open(opts);
		foreach(lc, tables)
		{
			VerifyTable *vt = palloc0(sizeof(VerifyTable));

			vt->run_id = run_id;
			vt->run_cxt = run_cxt;
			vt->table = lfirst(lc);
			vt->src = describe_as_staged(session, vt->table);
			vt->nkey = vt->src->nkey;
			vt->keys = keyset_columns(vt->src, &refusal);	/* checked above */
			describe_mirror(vt);
			verify_run_insert(run_id, vt->table);
			vts = lappend(vts, vt);
		}
		commit_if(nonatomic);
		MemoryContextSwitchTo(run_cxt);
		PG_TRY();
		{
			foreach(lc, vts)
			{
				VerifyTable *vt = lfirst(lc);
				int			i;

				verify_table(session, vt, chunk_rows, timeout, nonatomic);
				MemoryContextSwitchTo(run_cxt);
				totals[0] += vt->source_rows;
				totals[1] += vt->mirror_rows;
				for (i = 0; i < 4; i++)
					totals[2 + i] += vt->counts[i];
			}
		}
		PG_CATCH();
		{
			/* the run's rows are committed: they must not stay 'running' */
			if (nonatomic)
				verify_run_record_failure(run_id, run_cxt);
			PG_RE_THROW();
		}
		PG_END_TRY();
		SPI_finish();
	}
	PG_FINALLY();
	{
		MemoryContextSwitchTo(old);
		tds_session_close(session);
		MemoryContextDelete(run_cxt);
	}
	PG_END_TRY();

	out[0] = Int64GetDatum(run_id);
	out[1] = Int32GetDatum(list_length(vts));
	out[2] = Int64GetDatum(totals[0]);
	out[3] = Int64GetDatum(totals[1]);
	out[4] = Int64GetDatum(totals[2]);
	out[5] = Int64GetDatum(totals[3]);
	out[6] = Int64GetDatum(totals[4]);
	out[7] = Int64GetDatum(totals[5]);
	out[8] = DirectFunctionCall2(timestamp_mi, TimestampTzGetDatum(GetCurrentTimestamp()),
								 TimestampTzGetDatum(started));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, out, outnulls)));
}
