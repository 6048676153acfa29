/*-------------------------------------------------------------------------
 *
 * verify_runs.c
 *		verify(): the run's rows in mssql_cdc.verify_runs and
 *		mssql_cdc.verify_mismatches (see verify_runs.h).
 *
 * The caller may not write the catalog tables, so every row is written as
 * the catalog owner (catalog_become_owner).  A run commits its progress
 * after every chunk, so these rows are visible from any session while it
 * runs, and a run that fails must mark them itself: the abort of the
 * caller's transaction would leave them 'running'.
 *
 * IDENTIFICATION
 *		src/verify_runs.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "verify_runs.h"

static const char *const kind_names[] = {"missing", "extra", "different", "unconfirmed"};

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

void
verify_run_insert(int64 run_id, const MssqlCdcTable *t)
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

int64
verify_run_next_id(void)
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
void
verify_run_record_failure(int64 run_id, MemoryContext run_cxt)
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
