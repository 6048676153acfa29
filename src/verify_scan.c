/*-------------------------------------------------------------------------
 *
 * verify_scan.c
 *		verify(): compare a table's source with its mirror chunk by chunk
 *		(see verify_scan.h).
 *
 * The scan reads the source read-only, chunk by chunk in primary-key order
 * with the snapshot's keyset paging and exact key literals (keyset.c),
 * each chunk one SNAPSHOT transaction on SQL Server.  Every value goes
 * through the worker's own conversion into the mirror column's type
 * (tds_col_datum with the mirror's type and typmod) and is compared with
 * the mirror's value as a binary image (verify_mirror.c).  The chunk's
 * keys are looked up in the mirror; their keys are also kept in a
 * temporary table, so that mirror rows no source chunk had are found at
 * the end (extra).  Neither side stands still, so whatever differs here is
 * only a candidate: verify_recheck.c settles each one.
 *
 * IDENTIFICATION
 *		src/verify_scan.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/memutils.h"

#include "verify_mirror.h"
#include "verify_runs.h"
#include "verify_scan.h"

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
	appendStringInfo(&sql, " FROM %s m WHERE NOT EXISTS (SELECT FROM %s s WHERE %s)",
					 vt->mirror_name, seen_table_name(vt), verify_key_join(vt));
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

void
verify_scan(TdsSession *session, VerifyTable *vt, int chunk_rows, bool nonatomic)
{
	MemoryContext chunk_cxt = AllocSetContextCreate(vt->run_cxt, "mssql_cdc verify chunk",
													ALLOCSET_DEFAULT_SIZES);
	List	   *last_key = NIL;
	bool		more = true;

	create_seen_table(vt);
	if (nonatomic)
		SPI_commit();
	while (more)
	{
		MemoryContext old = MemoryContextSwitchTo(chunk_cxt);

		CHECK_FOR_INTERRUPTS();
		more = scan_chunk(session, vt, chunk_rows, &last_key, vt->isolation, chunk_cxt);
		verify_report_progress(vt, "running", NULL);
		MemoryContextSwitchTo(old);
		MemoryContextReset(chunk_cxt);
		if (nonatomic)
			SPI_commit();
	}
	find_extra(vt);
	MemoryContextDelete(chunk_cxt);
}
