/*-------------------------------------------------------------------------
 *
 * verify.c
 *		CALL mssql_cdc.verify(server, source_table, ...): compare captured
 *		SQL Server tables with their mirror tables (doc/mirror.md,
 *		"verify()").
 *
 * A procedure, not a function, so that it can commit after every chunk:
 * its progress row in mssql_cdc.verify_runs is visible from any session
 * while it runs, and no transaction (no snapshot holding back vacuum of
 * the mirror) lasts as long as a scan of a big table.
 *
 * The scan reads the source read-only, chunk by chunk in primary-key order
 * with the snapshot's keyset paging and exact key literals (keyset.c),
 * each chunk one SNAPSHOT transaction on SQL Server.  Every value goes
 * through the worker's own conversion into the mirror column's type
 * (tds_col_datum with the mirror's type and typmod) and is compared with
 * the mirror's value as a binary image (datum_image_eq): no text rendering
 * can hide a difference, and a NULL never equals an empty string.  The
 * chunk's keys are looked up in the mirror; their keys are also kept in a
 * temporary table, so that mirror rows no source chunk had are found at
 * the end (extra).  Neither side stands still, so whatever differs here is
 * only a candidate: verify_recheck.c settles each one.
 *
 * IDENTIFICATION
 *		src/verify.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
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

PG_FUNCTION_INFO_V1(mssql_cdc_verify);

static const char *const kind_names[] = {"missing", "extra", "different", "unconfirmed"};

bool
verify_values_equal(const VerifyColumn *col, Datum a, bool anull, Datum b, bool bnull)
{
	if (anull || bnull)
		return anull && bnull;
	return datum_image_eq(a, b, col->typbyval, col->typlen);
}

char *
verify_mirror_columns(VerifyTable *vt)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	for (i = 0; i < vt->ncols; i++)
		appendStringInfo(&buf, "%sm.%s", i ? ", " : "", quote_identifier(vt->cols[i].pg_name));
	return buf.data;
}

char *
verify_key_join(VerifyTable *vt)
{
	StringInfoData buf;
	int			k;

	initStringInfo(&buf);
	for (k = 0; k < vt->nkey; k++)
		appendStringInfo(&buf, "%sm.%s OPERATOR(pg_catalog.=) s._k%d", k ? " AND " : "",
						 quote_identifier(vt->cols[vt->key_col[k]].pg_name), k + 1);
	return buf.data;
}

char *
verify_key_unnest(VerifyTable *vt, int first_param)
{
	StringInfoData buf;
	int			k;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "pg_catalog.unnest(");
	for (k = 0; k < vt->nkey; k++)
		appendStringInfo(&buf, "%s$%d", k ? ", " : "", first_param + k);
	appendStringInfoString(&buf, ") WITH ORDINALITY AS s(");
	for (k = 0; k < vt->nkey; k++)
		appendStringInfo(&buf, "_k%d, ", k + 1);
	appendStringInfoString(&buf, "_ord)");
	return buf.data;
}

void
verify_key_arrays(VerifyTable *vt, Datum **keys, int nrows, Datum *arrays, Oid *array_types)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(nrows, 1));
	int			k;
	int			r;

	for (k = 0; k < vt->nkey; k++)
	{
		const VerifyColumn *col = &vt->cols[vt->key_col[k]];

		for (r = 0; r < nrows; r++)
			elems[r] = keys[r][k];
		arrays[k] = PointerGetDatum(construct_array(elems, nrows, col->typid, col->typlen,
													col->typbyval, col->typalign));
		array_types[k] = get_array_type(col->typid);
	}
}

/* ---- the result tables ---------------------------------------------------- */

void
verify_report_progress(VerifyTable *vt, const char *state, const char *message)
{
	CatalogOwnerScope scope;
	Oid			types[13] = {INT8OID, INT4OID, TEXTOID, INT8OID, INT8OID, INT8OID, INT8OID,
	INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, TEXTOID};
	Datum		values[13];
	char		nulls[13];
	int			i;

	memset(nulls, ' ', sizeof(nulls));
	values[0] = Int64GetDatum(vt->run_id);
	values[1] = Int32GetDatum(vt->table->table_id);
	values[2] = CStringGetTextDatum(state);
	values[3] = Int64GetDatum(vt->chunks);
	values[4] = Int64GetDatum(vt->source_rows);
	values[5] = Int64GetDatum(vt->mirror_rows);
	values[6] = Int64GetDatum(vt->ncandidates);
	values[7] = Int64GetDatum(vt->rechecked);
	for (i = 0; i < 4; i++)
		values[8 + i] = Int64GetDatum(vt->counts[i]);
	if (message != NULL)
		values[12] = CStringGetTextDatum(message);
	else
		nulls[12] = 'n';

	catalog_become_owner(&scope);
	if (SPI_execute_with_args("UPDATE mssql_cdc.verify_runs SET state = $3, chunks = $4,"
							  " source_rows = $5, mirror_rows = $6, candidates = $7, rechecked = $8,"
							  " missing = $9, extra = $10, different = $11, unconfirmed = $12,"
							  " message = coalesce($13, message),"
							  " elapsed = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) started_at,"
							  " finished_at = CASE WHEN $3 IN ('done', 'failed') THEN pg_catalog.clock_timestamp() END"
							  " WHERE run_id = $1 AND table_id = $2",
							  13, types, values, nulls, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not update mssql_cdc.verify_runs");
	catalog_restore_user(&scope);
}

void
verify_record(VerifyTable *vt, VerifyKind kind, const Datum *key, List *columns,
			  const MssqlLsn *mirror_lsn)
{
	StringInfoData sql;
	CatalogOwnerScope scope;
	int			nargs = 5 + vt->nkey;
	Oid		   *types = palloc(sizeof(Oid) * nargs);
	Datum	   *values = palloc(sizeof(Datum) * nargs);
	char	   *nulls = palloc(nargs);
	char		lsn_text[MSSQL_LSN_TEXT_SIZE];
	int			k;

	memset(nulls, ' ', nargs);
	types[0] = INT8OID;
	values[0] = Int64GetDatum(vt->run_id);
	types[1] = INT4OID;
	values[1] = Int32GetDatum(vt->table->table_id);
	types[2] = TEXTOID;
	values[2] = CStringGetTextDatum(kind_names[kind]);
	types[3] = TEXTARRAYOID;
	if (columns != NIL)
	{
		Datum	   *elems = palloc(sizeof(Datum) * list_length(columns));
		ListCell   *lc;
		int			n = 0;

		foreach(lc, columns)
			elems[n++] = CStringGetTextDatum((char *) lfirst(lc));
		values[3] = PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
	}
	else
		nulls[3] = 'n';
	types[4] = TEXTOID;
	if (mirror_lsn != NULL)
	{
		mssql_lsn_format(mirror_lsn, lsn_text);
		values[4] = CStringGetTextDatum(lsn_text);
	}
	else
		nulls[4] = 'n';

	initStringInfo(&sql);
	appendStringInfoString(&sql, "INSERT INTO mssql_cdc.verify_mismatches"
						   " (run_id, table_id, kind, columns, mirror_lsn, key)"
						   " VALUES ($1, $2, $3, $4, $5::mssql_cdc.lsn, pg_catalog.jsonb_build_object(");
	for (k = 0; k < vt->nkey; k++)
	{
		const VerifyColumn *col = &vt->cols[vt->key_col[k]];

		types[5 + k] = col->typid;
		values[5 + k] = key[k];
		appendStringInfo(&sql, "%s%s, $%d", k ? ", " : "",
						 quote_literal_cstr(col->pg_name), 6 + k);
	}
	appendStringInfoString(&sql, "))");
	catalog_become_owner(&scope);
	if (SPI_execute_with_args(sql.data, nargs, types, values, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not insert into mssql_cdc.verify_mismatches");
	catalog_restore_user(&scope);
	vt->counts[kind]++;
}

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

static char *
seen_table_name(VerifyTable *vt)
{
	return psprintf("pg_temp.mssql_cdc_verify_seen_%d", vt->table->table_id);
}

/* The temporary table of the keys the scan saw at the source */
static void
create_seen_table(VerifyTable *vt)
{
	StringInfoData sql;
	int			k;

	/* one left behind by a verify() of this session that failed */
	if (SPI_execute(psprintf("SELECT FROM pg_catalog.pg_class WHERE oid = pg_catalog.to_regclass(%s)",
							 quote_literal_cstr(seen_table_name(vt))), false, 0) == SPI_OK_SELECT &&
		SPI_processed > 0)
		SPI_execute(psprintf("DROP TABLE %s", seen_table_name(vt)), false, 0);
	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TEMPORARY TABLE %s (", seen_table_name(vt));
	for (k = 0; k < vt->nkey; k++)
	{
		const VerifyColumn *col = &vt->cols[vt->key_col[k]];

		appendStringInfo(&sql, "%s_k%d %s", k ? ", " : "", k + 1,
						 format_type_with_typemod(col->typid, col->typmod));
	}
	appendStringInfoString(&sql, ") ON COMMIT PRESERVE ROWS");
	if (SPI_execute(sql.data, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not create the table of verified keys");
}

/* ---- the scan --------------------------------------------------------------- */

static void
add_candidate(VerifyTable *vt, const Datum *key)
{
	MemoryContext old;
	VerifyCandidate *c;
	int			k;

	vt->ncandidates++;
	if (list_length(vt->candidates) >= VERIFY_MAX_CANDIDATES)
	{
		vt->candidates_full = true;
		vt->counts[VERIFY_UNCONFIRMED]++;
		return;
	}
	old = MemoryContextSwitchTo(vt->run_cxt);
	c = palloc(sizeof(VerifyCandidate));
	c->key = palloc(sizeof(Datum) * vt->nkey);
	for (k = 0; k < vt->nkey; k++)
	{
		const VerifyColumn *col = &vt->cols[vt->key_col[k]];

		c->key[k] = datumCopy(key[k], col->typbyval, col->typlen);
	}
	vt->candidates = lappend(vt->candidates, c);
	MemoryContextSwitchTo(old);
}

/*
 * Compare the rows of one source chunk (values[r][i], nulls[r][i]) with
 * the mirror rows of their keys, and remember the keys.
 */
static void
compare_chunk(VerifyTable *vt, Datum **values, bool **nulls, int nrows)
{
	int			nkey = vt->nkey;
	Datum	  **keys = palloc(sizeof(Datum *) * Max(nrows, 1));
	Datum	   *arrays = palloc(sizeof(Datum) * nkey);
	Oid		   *types = palloc(sizeof(Oid) * nkey);
	bool	   *matched = palloc0(sizeof(bool) * Max(nrows, 1));
	char	   *sql;
	uint64		i;
	int			r;
	int			k;

	for (r = 0; r < nrows; r++)
	{
		keys[r] = palloc(sizeof(Datum) * nkey);
		for (k = 0; k < nkey; k++)
			keys[r][k] = values[r][vt->key_col[k]];
	}
	verify_key_arrays(vt, keys, nrows, arrays, types);

	sql = psprintf("SELECT s._ord, %s FROM %s JOIN %s m ON %s", verify_mirror_columns(vt),
				   verify_key_unnest(vt, 1), vt->mirror_name, verify_key_join(vt));
	if (SPI_execute_with_args(sql, nkey, types, arrays, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read mirror table %s", vt->mirror_name);
	vt->mirror_rows += SPI_processed;
	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		int64		ord = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		bool		equal = true;
		int			c;

		r = (int) ord - 1;
		if (r < 0 || r >= nrows || matched[r])
			continue;			/* cannot happen: one mirror row per key */
		matched[r] = true;
		for (c = 0; c < vt->ncols && equal; c++)
		{
			Datum		m = SPI_getbinval(tup, desc, c + 2, &isnull);

			equal = verify_values_equal(&vt->cols[c], values[r][c], nulls[r][c], m, isnull);
		}
		if (!equal)
			add_candidate(vt, keys[r]);
	}
	for (r = 0; r < nrows; r++)
		if (!matched[r])
			add_candidate(vt, keys[r]);

	/* the ordinality column is not stored */
	{
		StringInfoData cols;

		initStringInfo(&cols);
		for (k = 0; k < nkey; k++)
			appendStringInfo(&cols, "%ss._k%d", k ? ", " : "", k + 1);
		sql = psprintf("INSERT INTO %s SELECT %s FROM %s", seen_table_name(vt), cols.data,
					   verify_key_unnest(vt, 1));
	}
	if (SPI_execute_with_args(sql, nkey, types, arrays, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not remember the verified keys");
}

/*
 * Read and compare the next chunk after *last_key (NIL: from the start);
 * returns false when the source had no more rows.
 */
static bool
scan_chunk(TdsSession *session, VerifyTable *vt, int chunk_rows, List **last_key,
		   SnapshotIsolation isolation, MemoryContext chunk_cxt)
{
	StringInfoData sql;
	int			ncols = vt->ncols;
	int			nkey = vt->nkey;
	Datum	  **values = palloc(sizeof(Datum *) * chunk_rows);
	bool	  **nulls = palloc(sizeof(bool *) * chunk_rows);
	RawKeyValue *raw = palloc0(sizeof(RawKeyValue) * nkey);
	int			nrows = 0;
	int			k;

	initStringInfo(&sql);
	if (isolation == SNAPSHOT_ISOLATION_ALLOWED)
		appendStringInfoString(&sql, "SET TRANSACTION ISOLATION LEVEL SNAPSHOT; ");
	appendStringInfoString(&sql, "BEGIN TRANSACTION; ");
	keyset_append_chunk_select(&sql, vt->src, vt->select_exprs, vt->keys, nkey, chunk_rows,
							   NULL, *last_key);
	appendStringInfoString(&sql, "; COMMIT TRANSACTION;");
	if (isolation == SNAPSHOT_ISOLATION_ALLOWED)
		appendStringInfoString(&sql, " SET TRANSACTION ISOLATION LEVEL READ COMMITTED;");

	tds_exec(session, sql.data);
	while (tds_next_result(session))
	{
		if (tds_num_cols(session) == 0)
			continue;
		tds_expect_num_cols(session, ncols + nkey, "reading a chunk to verify");
		while (tds_next_row(session))
		{
			int			c;

			CHECK_FOR_INTERRUPTS();
			if (nrows >= chunk_rows)
			{
				tds_mark_malformed(session);
				ereport(ERROR,
						(errcode(ERRCODE_FDW_ERROR),
						 errmsg("SQL Server (server \"%s\") sent more rows than the query's TOP (%d)",
								tds_session_server_name(session), chunk_rows)));
			}
			values[nrows] = palloc(sizeof(Datum) * ncols);
			nulls[nrows] = palloc(sizeof(bool) * ncols);
			for (c = 0; c < ncols; c++)
				values[nrows][c] = tds_col_datum(session, c + 1, &vt->cols[c].target,
												 &nulls[nrows][c]);
			for (k = 0; k < nkey; k++)
				keyset_save_value(session, &vt->keys[k], ncols + 1 + k, &raw[k], chunk_cxt);
			nrows++;
		}
	}
	if (nrows == 0)
		return false;
	compare_chunk(vt, values, nulls, nrows);
	vt->chunks++;
	vt->source_rows += nrows;

	/* the resume point outlives the chunk */
	{
		MemoryContext old = MemoryContextSwitchTo(vt->run_cxt);

		*last_key = NIL;
		for (k = 0; k < nkey; k++)
			*last_key = lappend(*last_key, keyset_literal(&vt->keys[k], &raw[k]));
		MemoryContextSwitchTo(old);
	}
	return nrows == chunk_rows;
}

/* Mirror rows whose key no source chunk had: candidates of kind extra */
static void
find_extra(VerifyTable *vt)
{
	StringInfoData sql;
	uint64		i;
	int			k;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	for (k = 0; k < vt->nkey; k++)
		appendStringInfo(&sql, "%sm.%s", k ? ", " : "",
						 quote_identifier(vt->cols[vt->key_col[k]].pg_name));
	appendStringInfo(&sql, " FROM %s m WHERE NOT EXISTS (SELECT FROM %s s WHERE ",
					 vt->mirror_name, seen_table_name(vt));
	for (k = 0; k < vt->nkey; k++)
		appendStringInfo(&sql, "%sm.%s OPERATOR(pg_catalog.=) s._k%d", k ? " AND " : "",
						 quote_identifier(vt->cols[vt->key_col[k]].pg_name), k + 1);
	appendStringInfoChar(&sql, ')');
	if (SPI_execute(sql.data, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read mirror table %s", vt->mirror_name);
	vt->mirror_rows += SPI_processed;
	for (i = 0; i < SPI_processed; i++)
	{
		Datum	   *key = palloc(sizeof(Datum) * vt->nkey);
		bool		isnull;

		for (k = 0; k < vt->nkey; k++)
			key[k] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, k + 1, &isnull);
		add_candidate(vt, key);
	}
	SPI_execute(psprintf("DROP TABLE %s", seen_table_name(vt)), false, 0);
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
	MemoryContext chunk_cxt = AllocSetContextCreate(vt->run_cxt, "mssql_cdc verify chunk",
													ALLOCSET_DEFAULT_SIZES);
	SnapshotIsolation isolation = snapshot_isolation_check(session);
	List	   *last_key = NIL;
	bool		more = true;
	TimestampTz deadline;

	vt->isolation = isolation;
	create_seen_table(vt);
	commit_if(nonatomic);
	while (more)
	{
		MemoryContext old = MemoryContextSwitchTo(chunk_cxt);

		CHECK_FOR_INTERRUPTS();
		more = scan_chunk(session, vt, chunk_rows, &last_key, isolation, chunk_cxt);
		verify_report_progress(vt, "running", NULL);
		MemoryContextSwitchTo(old);
		MemoryContextReset(chunk_cxt);
		commit_if(nonatomic);
	}
	find_extra(vt);
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
	MemoryContextDelete(chunk_cxt);
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
	{
		char	   *problem = mssql_parse_qualified_name(source_table, &schema, &table);

		if (problem)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_NAME),
					 errmsg("invalid SQL Server table name \"%s\"", source_table),
					 errdetail("%s", problem)));
	}
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

static void
insert_run_row(int64 run_id, const MssqlCdcTable *t)
{
	CatalogOwnerScope scope;
	Oid			types[7] = {INT8OID, INT4OID, NAMEOID, TEXTOID, TEXTOID, NAMEOID, NAMEOID};
	Datum		values[7];

	values[0] = Int64GetDatum(run_id);
	values[1] = Int32GetDatum(t->table_id);
	values[2] = DirectFunctionCall1(namein, CStringGetDatum(t->server_name));
	values[3] = CStringGetTextDatum(t->source_schema);
	values[4] = CStringGetTextDatum(t->source_table);
	values[5] = DirectFunctionCall1(namein, CStringGetDatum(t->mirror_schema));
	values[6] = DirectFunctionCall1(namein, CStringGetDatum(t->mirror_table));
	catalog_become_owner(&scope);
	if (SPI_execute_with_args("INSERT INTO mssql_cdc.verify_runs (run_id, table_id, server_name,"
							  " source_schema, source_table, mirror_schema, mirror_table)"
							  " VALUES ($1, $2, $3, $4, $5, $6, $7)",
							  7, types, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not insert into mssql_cdc.verify_runs");
	catalog_restore_user(&scope);
}

static int64
next_run_id(void)
{
	CatalogOwnerScope scope;
	bool		isnull;
	int64		id;

	catalog_become_owner(&scope);
	if (SPI_execute("SELECT pg_catalog.nextval('mssql_cdc.verify_run_id_seq')", false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read mssql_cdc.verify_run_id_seq");
	id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	catalog_restore_user(&scope);
	return id;
}

/*
 * A run whose rows were committed failed: roll its transaction back and
 * mark every row of the run that has not finished 'failed', with the
 * error, in a transaction of its own (the run's progress was committed
 * chunk by chunk, so the abort of the caller's transaction would leave
 * them 'running').  The error goes on to the caller as it was.  Only in
 * a nonatomic call (SPI_rollback), from the run's own SPI level: the run
 * opens no other one.
 */
static void
record_failure(int64 run_id, MemoryContext run_cxt)
{
	ErrorData  *edata;
	CatalogOwnerScope scope;
	Oid			types[2] = {INT8OID, TEXTOID};
	Datum		values[2];

	MemoryContextSwitchTo(run_cxt);
	edata = CopyErrorData();
	FlushErrorState();
	SPI_rollback();
	values[0] = Int64GetDatum(run_id);
	values[1] = CStringGetTextDatum(edata->message ? edata->message : "unknown error");
	catalog_become_owner(&scope);
	if (SPI_execute_with_args("UPDATE mssql_cdc.verify_runs SET state = 'failed', message = $2,"
							  " elapsed = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) started_at,"
							  " finished_at = pg_catalog.clock_timestamp()"
							  " WHERE run_id = $1 AND finished_at IS NULL",
							  2, types, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(WARNING, "could not record the failure of verify() run " INT64_FORMAT, run_id);
	catalog_restore_user(&scope);
	SPI_commit();
	ReThrowError(edata);
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

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("server must not be NULL")));
	server_name = pstrdup(NameStr(*PG_GETARG_NAME(0)));
	source_table = PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	chunk_rows = PG_ARGISNULL(2) ? mssql_cdc_snapshot_chunk_rows : PG_GETARG_INT32(2);
	if (chunk_rows < 1 || chunk_rows > 1000000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("chunk_rows must be between 1 and 1000000"),
				 errhint("Leave it NULL for mssql_cdc.snapshot_chunk_rows.")));
	if (PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("recheck_timeout must not be NULL")));
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
		run_id = next_run_id();

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
			insert_run_row(run_id, vt->table);
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
				record_failure(run_id, run_cxt);
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
