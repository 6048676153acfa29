/*-------------------------------------------------------------------------
 *
 * apply_state.c
 *		The catalog rows that commit with a window's or a chunk's rows (see
 *		apply.h): each table's state row locked where the worker left it,
 *		its checkpoint, snapshot progress and hand-over, and the errors and
 *		failure counts of its server.
 *
 * Every statement runs as the extension owner (CatalogOwnerScope), in the
 * caller's transaction: the rows and the position they reach commit or
 * abort together (invariant 1).
 *
 * IDENTIFICATION
 *		src/apply_state.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "apply.h"
#include "catalog.h"
#include "lsn.h"

static Datum key_array(List *key, char *isnull);

/* ---- catalog rows (as the extension owner) ------------------------------ */

/* Run one catalog statement as the extension owner; returns rows processed. */
static uint64
run_catalog(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls,
			int expected)
{
	CatalogOwnerScope scope;
	int			rc;
	uint64		processed;

	catalog_become_owner(&scope);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	rc = SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0);
	if (rc != expected)
		elog(ERROR, "catalog statement failed (%s): %s", SPI_result_code_string(rc), sql);
	processed = SPI_processed;
	SPI_finish();
	catalog_restore_user(&scope);
	return processed;
}

/*
 * Lock a table's state row when it still is where this worker left it (the
 * query names the phase and the LSN column); a concurrent remove_table or
 * resnapshot changed or deleted it otherwise, and the window or chunk must
 * then not be applied.  $1 is the table id, $2 the expected LSN, $3 the
 * expected snapshot resume key (for queries that name it).
 */

static bool
lock_state_row(const char *query, int32 table_id, const MssqlLsn *lsn, List *last_key)
{
	CatalogOwnerScope scope;
	Oid			types[3] = {INT4OID, TEXTOID, TEXTARRAYOID};
	Datum		values[3];
	char		nulls[3] = {' ', ' ', ' '};
	bool		found;

	values[0] = Int32GetDatum(table_id);
	values[1] = mssql_lsn_text_datum(lsn);
	values[2] = key_array(last_key, &nulls[2]);
	catalog_become_owner(&scope);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(query, 3, types, values, nulls, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not lock mssql_cdc.table_state");
	found = SPI_processed == 1;
	SPI_finish();
	catalog_restore_user(&scope);
	return found;
}

bool
apply_lock_table_state(int32 table_id, const MssqlLsn *checkpoint)
{
	return lock_state_row("SELECT 1 FROM mssql_cdc.table_state"
						  " WHERE table_id = $1 AND phase = 'streaming'"
						  " AND checkpoint_lsn OPERATOR(mssql_cdc.=) $2::mssql_cdc.lsn"
						  " FOR UPDATE",
						  table_id, checkpoint, NIL);
}

/* table ids as an int4[] parameter */
static Datum
id_array(const int32 *table_ids, int n)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));
	int			i;

	for (i = 0; i < n; i++)
		elems[i] = Int32GetDatum(table_ids[i]);
	return PointerGetDatum(construct_array(elems, n, INT4OID, sizeof(int32), true,
										   TYPALIGN_INT));
}

void
apply_mark_table_ids(const char *sql, int nargs, Oid *types, Datum *values,
					 const int32 *table_ids, int n, bool *found)
{
	CatalogOwnerScope scope;
	uint64		r;
	int			i;

	memset(found, 0, sizeof(bool) * n);
	if (n == 0)
		return;
	catalog_become_owner(&scope);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(sql, nargs, types, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "catalog statement failed: %s", sql);
	for (r = 0; r < SPI_processed; r++)
	{
		bool		isnull;
		int32		id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[r],
													 SPI_tuptable->tupdesc, 1, &isnull));

		for (i = 0; i < n; i++)
			if (table_ids[i] == id)
				found[i] = true;
	}
	SPI_finish();
	catalog_restore_user(&scope);
}

void
apply_lock_table_states(const int32 *table_ids, int n, const MssqlLsn *checkpoint, bool *locked)
{
	Oid			types[2] = {INT4ARRAYOID, TEXTOID};
	Datum		values[2];

	values[0] = id_array(table_ids, n);
	values[1] = mssql_lsn_text_datum(checkpoint);
	apply_mark_table_ids("SELECT table_id FROM mssql_cdc.table_state"
						 " WHERE table_id = ANY ($1) AND phase = 'streaming'"
						 " AND checkpoint_lsn OPERATOR(mssql_cdc.=) $2::mssql_cdc.lsn"
						 " ORDER BY table_id FOR UPDATE",
						 2, types, values, table_ids, n, locked);
}

void
apply_commit_checkpoints_without_rows(const int32 *table_ids, int n, const MssqlLsn *to,
									  TimestampTz commit_time)
{
	Oid			types[3] = {INT4ARRAYOID, TEXTOID, TIMESTAMPTZOID};
	Datum		values[3];
	char		nulls[3] = {' ', ' ', ' '};

	if (n == 0)
		return;
	values[0] = id_array(table_ids, n);
	values[1] = mssql_lsn_text_datum(to);
	values[2] = TimestampTzGetDatum(commit_time);
	if (commit_time == 0)
		nulls[2] = 'n';
	/* apply_commit_checkpoint's update with no rows and no transactions */
	if (run_catalog("UPDATE mssql_cdc.table_state SET"
					" checkpoint_lsn = $2::mssql_cdc.lsn,"
					" last_commit_time = coalesce($3, last_commit_time),"
					" consecutive_failures = 0,"
					" updated_at = pg_catalog.now()"
					" WHERE table_id = ANY ($1)",
					3, types, values, nulls, SPI_OK_UPDATE) != (uint64) n)
		elog(ERROR, "table_state rows of tables without rows vanished during their window");
}

void
apply_commit_checkpoint(int32 table_id, const MssqlLsn *to, const ApplyResult *result,
						TimestampTz commit_time)
{
	Oid			types[5] = {INT4OID, TEXTOID, INT8OID, INT8OID, TIMESTAMPTZOID};
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};

	values[0] = Int32GetDatum(table_id);
	values[1] = mssql_lsn_text_datum(to);
	/* the changes the table keeps: not the before-images read for its mirror only */
	values[2] = Int64GetDatum(result->rows - result->mirror_only_rows);
	values[3] = Int64GetDatum(result->transactions);
	values[4] = TimestampTzGetDatum(commit_time);
	if (commit_time == 0)
		nulls[4] = 'n';
	if (run_catalog("UPDATE mssql_cdc.table_state SET"
				" checkpoint_lsn = $2::mssql_cdc.lsn,"
				" rows_applied = rows_applied + $3,"
				" transactions_applied = transactions_applied + $4,"
				" last_commit_time = coalesce($5, last_commit_time),"
				" consecutive_failures = 0,"
				" updated_at = pg_catalog.now()"
				" WHERE table_id = $1",
				5, types, values, nulls, SPI_OK_UPDATE) != 1)
		elog(ERROR, "table_state row of table %d vanished during its window", table_id);
}

void
apply_start_streaming(int32 table_id, const MssqlLsn *start)
{
	Oid			types[2] = {INT4OID, TEXTOID};
	Datum		values[2];

	values[0] = Int32GetDatum(table_id);
	values[1] = mssql_lsn_text_datum(start);
	run_catalog("INSERT INTO mssql_cdc.table_state AS s (table_id, phase, checkpoint_lsn)"
				" VALUES ($1, 'streaming', $2::mssql_cdc.lsn)"
				" ON CONFLICT (table_id) DO UPDATE"
				" SET phase = 'streaming', checkpoint_lsn = EXCLUDED.checkpoint_lsn,"
				"     snapshot_lsn = NULL,"
				"     updated_at = pg_catalog.now()"
				" WHERE s.phase = 'pending' AND s.checkpoint_lsn IS NULL",
				2, types, values, NULL, SPI_OK_INSERT);
}

bool
apply_snapshot_begin(int32 table_id, const MssqlLsn *l0, int64 total_estimate)
{
	Oid			types[3] = {INT4OID, TEXTOID, INT8OID};
	Datum		values[3];
	char		nulls[3] = {' ', ' ', ' '};

	values[0] = Int32GetDatum(table_id);
	values[1] = mssql_lsn_text_datum(l0);
	values[2] = Int64GetDatum(total_estimate);
	if (total_estimate < 0)
		nulls[2] = 'n';
	/* only from 'pending': a concurrent remove_table or pause wins */
	return run_catalog("INSERT INTO mssql_cdc.table_state AS s (table_id, phase, snapshot_lsn,"
					   " snapshot_last_key, snapshot_rows, snapshot_total_estimate,"
					   " snapshot_started_at)"
					   " VALUES ($1, 'snapshotting', $2::mssql_cdc.lsn, NULL, 0, $3, pg_catalog.now())"
					   " ON CONFLICT (table_id) DO UPDATE"
					   " SET phase = 'snapshotting', snapshot_lsn = EXCLUDED.snapshot_lsn,"
					   "     snapshot_last_key = NULL, snapshot_rows = 0,"
					   "     snapshot_total_estimate = EXCLUDED.snapshot_total_estimate,"
					   "     snapshot_started_at = EXCLUDED.snapshot_started_at,"
					   "     updated_at = pg_catalog.now()"
					   " WHERE s.phase = 'pending' AND s.checkpoint_lsn IS NULL",
					   3, types, values, nulls, SPI_OK_INSERT) == 1;
}

/* a snapshot resume key (text forms) as a text[] datum; *isnull for NIL */
static Datum
key_array(List *key, char *isnull)
{
	Datum	   *elems;
	ListCell   *lc;
	int			n = 0;

	*isnull = key == NIL ? 'n' : ' ';
	if (key == NIL)
		return (Datum) 0;
	elems = palloc(sizeof(Datum) * list_length(key));
	foreach(lc, key)
		elems[n++] = CStringGetTextDatum((char *) lfirst(lc));
	return PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
}

bool
apply_lock_snapshot(int32 table_id, const MssqlLsn *l0, List *last_key)
{
	/*
	 * L0 and the key the chunk continues from: a resnapshot() committed
	 * since the worker read them (the same L0 on an idle source, the key
	 * reset) makes the chunk stand aside instead of resuming the old copy.
	 */
	return lock_state_row("SELECT 1 FROM mssql_cdc.table_state"
						  " WHERE table_id = $1 AND phase = 'snapshotting'"
						  " AND snapshot_lsn OPERATOR(mssql_cdc.=) $2::mssql_cdc.lsn"
						  " AND snapshot_last_key IS NOT DISTINCT FROM $3"
						  " FOR UPDATE",
						  table_id, l0, last_key);
}

void
apply_snapshot_progress(int32 table_id, List *last_key, int64 rows, bool done,
						const MssqlLsn *l0)
{
	Oid			types[5] = {INT4OID, TEXTARRAYOID, INT8OID, BOOLOID, TEXTOID};
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};

	values[0] = Int32GetDatum(table_id);
	values[1] = key_array(last_key, &nulls[1]);
	values[2] = Int64GetDatum(rows);
	values[3] = BoolGetDatum(done);
	values[4] = mssql_lsn_text_datum(l0);

	/*
	 * The last chunk also hands over to streaming: from L0 on, in the same
	 * transaction as the chunk's rows (invariant 4).
	 */
	if (run_catalog("UPDATE mssql_cdc.table_state SET"
					" snapshot_last_key = coalesce($2, snapshot_last_key),"
					" snapshot_rows = snapshot_rows + $3,"
					" phase = CASE WHEN $4 THEN 'streaming' ELSE phase END,"
					" checkpoint_lsn = CASE WHEN $4 THEN $5::mssql_cdc.lsn ELSE checkpoint_lsn END,"
					" consecutive_failures = 0,"
					" updated_at = pg_catalog.now()"
					" WHERE table_id = $1 AND phase = 'snapshotting'",
					5, types, values, nulls, SPI_OK_UPDATE) != 1)
		elog(ERROR, "table_state row of table %d left phase snapshotting during a chunk", table_id);
}

bool
apply_set_table_error(const MssqlCdcTable *table, const char *message)
{
	Oid			types[4] = {INT4OID, TEXTOID, TEXTOID, TEXTOID};
	Datum		values[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};

	values[0] = Int32GetDatum(table->table_id);
	values[1] = CStringGetTextDatum(message);
	values[2] = CStringGetTextDatum(catalog_phase_name(table->phase));
	if (table->has_checkpoint_lsn)
		values[3] = mssql_lsn_text_datum(&table->checkpoint_lsn);
	else
		nulls[3] = 'n';

	/*
	 * Only from the phase and checkpoint the worker decided on: a
	 * resnapshot(), reset_table() or resume committed since then wins.
	 */
	return run_catalog("UPDATE mssql_cdc.table_state SET phase = 'error', last_error = $2,"
					   " last_error_at = pg_catalog.now(), updated_at = pg_catalog.now()"
					   " WHERE table_id = $1 AND phase = $3"
					   " AND (checkpoint_lsn OPERATOR(mssql_cdc.=) $4::mssql_cdc.lsn"
					   "      OR (checkpoint_lsn IS NULL AND $4 IS NULL))",
					   4, types, values, nulls, SPI_OK_UPDATE) == 1;
}

void
apply_reset_server_failures(const char *server_name)
{
	Oid			types[1] = {NAMEOID};
	Datum		values[1];

	values[0] = DirectFunctionCall1(namein, CStringGetDatum(server_name));
	run_catalog("UPDATE mssql_cdc.servers SET consecutive_failures = 0"
				" WHERE server_name = $1 AND consecutive_failures <> 0",
				1, types, values, NULL, SPI_OK_UPDATE);
}

void
apply_record_failure(const char *server_name, int32 table_id, const char *message)
{
	Oid			types[3] = {NAMEOID, TEXTOID, INT4OID};
	Datum		values[3];

	values[0] = DirectFunctionCall1(namein, CStringGetDatum(server_name));
	values[1] = CStringGetTextDatum(message);
	values[2] = Int32GetDatum(table_id);
	run_catalog("UPDATE mssql_cdc.servers SET last_error = $2,"
				" last_error_at = pg_catalog.now(),"
				" consecutive_failures = consecutive_failures + 1"
				" WHERE server_name = $1",
				3, types, values, NULL, SPI_OK_UPDATE);
	if (table_id > 0)
		run_catalog("UPDATE mssql_cdc.table_state SET last_error = $2,"
					" last_error_at = pg_catalog.now(),"
					" consecutive_failures = consecutive_failures + 1"
					" WHERE table_id = $3 AND $1 IS NOT NULL",
					3, types, values, NULL, SPI_OK_UPDATE);
}

bool
apply_park_failing_table(int32 table_id, const MssqlLsn *checkpoint, int min_failures,
						 const char *condition, const char *hint)
{
	Oid			types[5] = {INT4OID, TEXTOID, INT4OID, TEXTOID, TEXTOID};
	Datum		values[5];

	values[0] = Int32GetDatum(table_id);
	values[1] = mssql_lsn_text_datum(checkpoint);
	values[2] = Int32GetDatum(min_failures);
	values[3] = CStringGetTextDatum(condition);
	values[4] = CStringGetTextDatum(hint);
	return run_catalog("UPDATE mssql_cdc.table_state SET phase = 'error',"
					   " condition = $4, hint = $5, updated_at = pg_catalog.now()"
					   " WHERE table_id = $1 AND phase = 'streaming'"
					   " AND checkpoint_lsn OPERATOR(mssql_cdc.=) $2::mssql_cdc.lsn"
					   " AND consecutive_failures >= $3",
					   5, types, values, NULL, SPI_OK_UPDATE) == 1;
}
