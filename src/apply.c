/*-------------------------------------------------------------------------
 *
 * apply.c
 *		Apply one CDC window to the staging tables (see apply.h).
 *
 * Rows are streamed from the TDS result into the staging table through a
 * StagingWriter (staging_writer.h): in bulk batches of at most
 * mssql_cdc.insert_batch_rows rows (and about 1 MB), or row by row through
 * SPI where a bulk insert would not behave like INSERT.  Nothing of a
 * window is kept beyond the current batch.  The writer works with the
 * privileges of the server's run_as role (SECURITY_RESTRICTED_OPERATION,
 * like autovacuum runs user code), so the worker never writes a user
 * table as superuser.  The staging side of a unit (columns, writer) is
 * staging_unit.c's, snapshot rows are apply_snapshot.c's, and the catalog
 * rows that commit with the rows (state, checkpoint, snapshot progress,
 * errors) are apply_state.c's.
 *
 * Values are converted from their TDS binary form straight to Datums where
 * the column type allows it (tds_convert.h), the LSN columns are copied as
 * bytes and the operation labels are looked up once per unit.
 *
 * Staging layout: staging_unit.h.
 *
 * The change query returns rows in the staging key's order (lsn, command
 * id, seqval, operation; change_query.h), and every row is checked to come
 * after the one before: a server that repeats or reorders rows fails the
 * window instead of staging it in another order.
 *
 * IDENTIFICATION
 *		src/apply.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "apply.h"
#include "cdc_clock.h"
#include "change_query.h"
#include "mirror.h"
#include "staging_unit.h"

static void
row_lsn(TdsSession *session, int col, MssqlLsn *lsn)
{
	int			len;
	const uint8 *data = tds_col_data(session, col, &len);

	if (data == NULL || len != MSSQL_LSN_BYTES)
	{
		tds_mark_malformed(session);
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
				 errmsg("SQL Server (server \"%s\") returned a change row without a valid %s",
						tds_session_server_name(session),
						col == CDC_COL_START_LSN ? "__$start_lsn" : "__$seqval")));
	}
	memcpy(lsn->bytes, data, MSSQL_LSN_BYTES);
}

/* An int column of the current change row; *isnull for NULL */
static int32
row_int(TdsSession *session, int col, bool *isnull)
{
	static TdsDatumTarget int4_target;
	static bool ready = false;

	if (!ready)
	{
		/* kept for the life of the process */
		MemoryContext oldcxt = MemoryContextSwitchTo(TopMemoryContext);

		tds_datum_target_init(&int4_target, INT4OID, -1);
		MemoryContextSwitchTo(oldcxt);
		ready = true;
	}
	return DatumGetInt32(tds_col_datum(session, col, &int4_target, isnull));
}

/* __$command_id of the current change row (the query makes NULL 0) */
static int32
row_command_id(TdsSession *session)
{
	bool		isnull;
	int32		id = row_int(session, CDC_COL_COMMAND_ID, &isnull);

	if (isnull || id < 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
				 errmsg("SQL Server (server \"%s\") returned an invalid __$command_id %s",
						tds_session_server_name(session),
						isnull ? "NULL" : psprintf("%d", id))));
	return id;
}

/* __$operation of the current change row, 1..4 */
static int
row_operation(TdsSession *session)
{
	bool		isnull;
	int32		op = row_int(session, CDC_COL_OPERATION, &isnull);

	if (isnull || op < 1 || op > 4)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
				 errmsg("SQL Server (server \"%s\") returned an unknown __$operation %s",
						tds_session_server_name(session),
						isnull ? "NULL" : psprintf("%d", op))));
	return op;
}

/* What orders change rows: the staging key, which the change query sorts by */
typedef struct ChangeKey
{
	MssqlLsn	start_lsn;
	int32		command_id;
	MssqlLsn	seqval;
	int			op;
} ChangeKey;

static int
change_key_cmp(const ChangeKey *a, const ChangeKey *b)
{
	int			c = mssql_lsn_cmp(&a->start_lsn, &b->start_lsn);

	if (c == 0)
		c = (a->command_id > b->command_id) - (a->command_id < b->command_id);
	if (c == 0)
		c = mssql_lsn_cmp(&a->seqval, &b->seqval);
	if (c == 0)
		c = (a->op > b->op) - (a->op < b->op);
	return c;
}

/*
 * One change row of the current TDS result as the unit's values; *key
 * gets its position (key->start_lsn is already set by the caller).
 */
static void
change_row_values(TdsSession *session, StagingUnit *unit, ChangeKey *key)
{
	const MssqlLsn *start_lsn = &key->start_lsn;
	const MssqlLsn *seqval = &key->seqval;
	int			op;
	int			i;

	key->command_id = row_command_id(session);
	row_lsn(session, CDC_COL_SEQVAL, &key->seqval);
	op = key->op = row_operation(session);

	for (i = 0; i < unit->ncols; i++)
	{
		StagingColumn *col = &unit->cols[i];
		bool	   *isnull = &unit->nulls[i];
		Datum	   *value = &unit->values[i];

		*isnull = false;
		switch (col->source)
		{
			case FROM_DATA:
				*value = tds_col_datum(session, col->tds_col, &col->target, isnull);
				break;
			case FROM_LSN:
				*value = staging_unit_lsn_datum(unit, col, start_lsn);
				break;
			case FROM_COMMAND_ID:
				*value = Int32GetDatum(key->command_id);
				break;
			case FROM_SEQVAL:
				*value = staging_unit_lsn_datum(unit, col, seqval);
				break;
			case FROM_OPERATION:
				*value = unit->op_datums[op];
				break;
			case FROM_UPDATE_MASK:
				*value = tds_col_datum(session, CDC_COL_UPDATE_MASK, &col->target, isnull);
				break;
			case FROM_COMMIT_TIME:
				{
					TimestampTz t;

					*isnull = !cdc_col_commit_time(session, CDC_COL_COMMIT_TIME, &t);
					*value = TimestampTzGetDatum(t);
				}
				break;
		}
	}
}

/*
 * A mirror needs a before-image (operation 3) where the update moved the
 * row to another key: the 3 holds the old key, which the mirror deletes,
 * and the LOB columns the update did not assign have their values there
 * (mirror_apply.c, mirror_moves.c).  So each 3 of a mirrored table is
 * compared with the next row: when that is its 4 with the same key, the
 * update kept the key; otherwise the window may have moved a row
 * (ApplyResult.key_moves), and only such windows pay for following moves.
 * When the changelog keeps no before-images, one whose 4 has the same key
 * is of no use to the mirror (the 4 comes after it in execution order and
 * is the key's change), so it is held back until the next row and dropped
 * when that is its 4 with the same key: it is neither written to the
 * staging table (or the window's temporary table) nor deleted from it
 * again.  Keys are compared as their TDS bytes: equal bytes are the same
 * key, and a key equal in other bytes (a case-insensitive collation) only
 * costs a before-image kept or a window applied as one with moves.  The
 * held row's values stay in the writer's row context, which only a write
 * resets (staging_writer.h).
 */
typedef struct HeldBefore
{
	bool		mirrored;		/* false: before-images are not looked at */
	bool		hold;			/* the changelog keeps none: hold them */
	int			nkey;			/* 0: keys cannot be compared */
	int		   *key_cols;		/* the key's TDS result columns */
	bool		pending;		/* a 3 whose 4 has not been read yet */
	bool		held;			/* ... whose row is held back */
	ChangeKey	key;
	Datum	   *values;
	bool	   *nulls;
	StringInfoData *bytes;		/* the 3's key columns, as read */
	bool	   *key_nulls;
} HeldBefore;

static void
held_init(HeldBefore *h, const MssqlCdcTable *table, const MssqlSourceTable *src,
		  List *source_cols, const StagingUnit *unit)
{
	ListCell   *lc;
	int			n = 0;
	int			i;

	memset(h, 0, sizeof(*h));
	if (!mirror_enabled(table) || src->nkey <= 0)
		return;
	h->mirrored = true;
	h->hold = !(table->changelog && table->update_before);
	h->key_cols = palloc(sizeof(int) * list_length(source_cols));
	foreach(lc, source_cols)
		if (((const MssqlColumn *) lfirst(lc))->is_key)
			h->key_cols[n++] = CDC_COL_FIRST_DATA + foreach_current_index(lc);
	/* a key column not read: nothing to compare */
	if (n != src->nkey)
		return;
	h->nkey = n;
	h->values = palloc(sizeof(Datum) * unit->ncols);
	h->nulls = palloc(sizeof(bool) * unit->ncols);
	h->key_nulls = palloc(sizeof(bool) * n);
	h->bytes = palloc(sizeof(StringInfoData) * n);
	for (i = 0; i < n; i++)
		initStringInfo(&h->bytes[i]);
}

/*
 * Take the current row, a 3 (its values are unit's): its key is kept for
 * the next row, and the row held back or written
 */
static void
held_take(HeldBefore *h, TdsSession *session, StagingUnit *unit, const ChangeKey *key)
{
	int			i;

	for (i = 0; i < h->nkey; i++)
	{
		int			len;
		const uint8 *data = tds_col_data(session, h->key_cols[i], &len);

		resetStringInfo(&h->bytes[i]);
		h->key_nulls[i] = data == NULL;
		if (data != NULL)
			appendBinaryStringInfo(&h->bytes[i], (const char *) data, len);
	}
	h->key = *key;
	h->pending = true;
	if (!h->hold)
	{
		staging_writer_add(unit->writer, unit->values, unit->nulls);
		return;
	}
	memcpy(h->values, unit->values, sizeof(Datum) * unit->ncols);
	memcpy(h->nulls, unit->nulls, sizeof(bool) * unit->ncols);
	h->held = true;
}

/* Whether the current row is the pending 3's 4 with the same key */
static bool
held_pair(const HeldBefore *h, TdsSession *session, const MssqlLsn *start_lsn)
{
	MssqlLsn	seqval;
	int			i;

	if (mssql_lsn_cmp(start_lsn, &h->key.start_lsn) != 0 || row_operation(session) != 4 ||
		row_command_id(session) != h->key.command_id)
		return false;
	row_lsn(session, CDC_COL_SEQVAL, &seqval);
	if (mssql_lsn_cmp(&seqval, &h->key.seqval) != 0)
		return false;
	for (i = 0; i < h->nkey; i++)
	{
		int			len;
		const uint8 *data = tds_col_data(session, h->key_cols[i], &len);

		if ((data == NULL) != h->key_nulls[i] ||
			(data != NULL && (len != h->bytes[i].len || memcmp(data, h->bytes[i].data, len) != 0)))
			return false;
	}
	return true;
}

/*
 * Settle the pending 3 (if any) at the current row (NULL: the end of the
 * result): dropped when the row is its 4 with the same key, else written
 * if held, and the window may have moved a row
 */
static void
held_settle(HeldBefore *h, TdsSession *session, const MssqlLsn *start_lsn, StagingUnit *unit,
			ApplyResult *result)
{
	if (!h->pending)
		return;
	if (start_lsn == NULL || !held_pair(h, session, start_lsn))
	{
		result->key_moves = true;
		if (h->held)
			staging_writer_add(unit->writer, h->values, h->nulls);
	}
	h->pending = h->held = false;
}

char *
apply_change_query(const MssqlCdcTable *table, const MssqlSourceTable *src,
				   const char *server_zone, MssqlDataQueryMode mode,
				   const MssqlLsn *from, const MssqlLsn *to, const ApplyLimits *limits)
{
	Relation	rel;
	List	   *source_cols;

	/* the columns the staging table has (the same as apply_read_changes finds) */
	rel = staging_unit_relation(table);
	source_cols = staging_unit_source_columns(rel, src);
	table_close(rel, NoLock);

	/*
	 * A mirror needs the before-images even when the changelog keeps none:
	 * a primary-key change may arrive as an update pair 3/4, whose 3 holds
	 * the old key (mirror_apply.c removes them from the changelog again)
	 */
	return cdc_change_query_sql(mode, server_zone, src->capture_instance->name, source_cols,
								table->update_before || mirror_enabled(table),
								!limits->one_transaction, from, to);
}

ApplyResult
apply_read_changes(TdsSession *session, const MssqlCdcTable *table,
				   const MssqlSourceTable *src, Oid run_as,
				   const MssqlLsn *from, const MssqlLsn *to, const MssqlLsn *keep_to,
				   const ApplyLimits *limits)
{
	ApplyResult result;
	List	   *source_cols;
	Relation	rel;
	StagingUnit *unit;
	MemoryContext oldcxt;
	ChangeKey	last;
	ChangeKey	first;
	bool		have_last = false;
	bool		drain = false;	/* the rest of the result is not this window's */
	int			expected_cols;
	bool		ordered = !limits->one_transaction;
	HeldBefore	held;

	memset(&result, 0, sizeof(result));
	/* the lock INSERT takes anyway; held to commit */
	rel = staging_unit_relation(table);
	if (mirror_enabled(table) && !table->changelog)
	{
		/* mirror only: the window is staged for the mirror, not in the changelog */
		Relation	stage = mirror_window_stage_open(table, rel, run_as);

		table_close(rel, NoLock);
		rel = stage;
	}
	unit = staging_unit_open(rel, src, CDC_COL_FIRST_DATA, run_as, &source_cols);
	table_close(rel, NoLock);
	expected_cols = CDC_COL_FIRST_DATA - 1 + list_length(source_cols);
	held_init(&held, table, src, source_cols, unit);

	/* the next result set of the batch is this table's (statements without one skipped) */
	do
	{
		if (!tds_next_result(session))
		{
			tds_mark_malformed(session);
			ereport(ERROR,
					(errcode(ERRCODE_FDW_ERROR),
					 errmsg("SQL Server (server \"%s\") returned fewer result sets than the window's batch has change queries",
							tds_session_server_name(session))));
		}
	} while (tds_num_cols(session) == 0);

	/*
	 * The change query has exactly one result of this shape; another shape
	 * would be another statement's (or a broken server's) result.
	 */
	tds_expect_num_cols(session, expected_cols, "reading changes");
	tds_expect_col_kind(session, CDC_COL_START_LSN, TDS_COL_BINARY, "__$start_lsn",
						"reading changes");
	tds_expect_col_kind(session, CDC_COL_COMMAND_ID, TDS_COL_INTEGER, "__$command_id",
						"reading changes");
	tds_expect_col_kind(session, CDC_COL_SEQVAL, TDS_COL_BINARY, "__$seqval",
						"reading changes");
	tds_expect_col_kind(session, CDC_COL_OPERATION, TDS_COL_INTEGER, "__$operation",
						"reading changes");
	tds_expect_col_kind(session, CDC_COL_UPDATE_MASK, TDS_COL_BINARY, "__$update_mask",
						"reading changes");
	staging_unit_check_types(session, unit, "reading changes");
	while (tds_next_row(session))
	{
		ChangeKey	key;

		CHECK_FOR_INTERRUPTS();
		if (drain)
			continue;
		oldcxt = MemoryContextSwitchTo(staging_writer_row_context(unit->writer));

		row_lsn(session, CDC_COL_START_LSN, &key.start_lsn);
		if (mssql_lsn_cmp(&key.start_lsn, from) < 0 || mssql_lsn_cmp(&key.start_lsn, to) > 0)
		{
			tds_mark_malformed(session);
			ereport(ERROR,
					(errcode(ERRCODE_FDW_ERROR),
					 errmsg("SQL Server (server \"%s\") returned a change outside the requested LSN range",
							tds_session_server_name(session))));
		}

		/*
		 * Beyond the window's end as cut by an earlier table of the batch:
		 * not this window's, and in the ordered read neither is anything
		 * after it (the next window reads it)
		 */
		if (mssql_lsn_cmp(&key.start_lsn, keep_to) > 0)
		{
			drain = ordered;
			MemoryContextSwitchTo(oldcxt);
			continue;
		}
		if (!have_last || mssql_lsn_cmp(&key.start_lsn, &last.start_lsn) != 0)
		{
			/*
			 * A transaction ended: when the window's row budget is spent,
			 * the window ends with it (the rest of this result is read and
			 * dropped, the batch goes on; the next window starts here).
			 */
			if (have_last && limits->row_budget > 0 && result.rows >= limits->row_budget)
			{
				result.cut = true;
				drain = true;
				MemoryContextSwitchTo(oldcxt);
				continue;
			}
			result.transactions++;
			if (!cdc_col_commit_time(session, CDC_COL_COMMIT_TIME, &result.last_commit_time))
				result.last_commit_time = 0;
		}
		/* before the row's values: writing the held row may reset their memory */
		held_settle(&held, session, &key.start_lsn, unit, &result);
		change_row_values(session, unit, &key);
		/* asked for by the mirror only: not a change the table keeps */
		if (key.op == 3 && !table->update_before)
			result.mirror_only_rows++;

		/*
		 * The ordered query sorts by these: a repeat or a step back is a
		 * broken server.  The unordered read of one transaction has them
		 * in any order; its rows must share one LSN, and the staging key
		 * refuses a repeat.
		 */
		/*
		 * unordered: the first or the previous row again is a result sent
		 * twice (a repeat elsewhere meets the staging key)
		 */
		if (have_last && !ordered &&
			(change_key_cmp(&key, &first) == 0 || change_key_cmp(&key, &last) == 0))
		{
			tds_mark_malformed(session);
			ereport(ERROR,
					(errcode(ERRCODE_FDW_ERROR),
					 errmsg("SQL Server (server \"%s\") returned a malformed change result: the same change row twice in one transaction",
							tds_session_server_name(session))));
		}
		if (!have_last)
			first = key;
		if (have_last && (ordered ? change_key_cmp(&key, &last) <= 0
						  : mssql_lsn_cmp(&key.start_lsn, &last.start_lsn) != 0))
		{
			tds_mark_malformed(session);
			ereport(ERROR,
					(errcode(ERRCODE_FDW_ERROR),
					 errmsg(ordered ? "SQL Server (server \"%s\") returned change rows out of order"
							: "SQL Server (server \"%s\") returned change rows of several transactions for a window of one",
							tds_session_server_name(session))));
		}
		last = key;
		have_last = true;
		result.last_lsn = key.start_lsn;
		MemoryContextSwitchTo(oldcxt);

		if (key.op == 3 && held.nkey > 0)
			held_take(&held, session, unit, &key);
		else
		{
			/* a 3 whose key cannot be compared may be a move */
			if (key.op == 3 && held.mirrored)
				result.key_moves = true;
			staging_writer_add(unit->writer, unit->values, unit->nulls);
		}
		result.rows++;
	}

	held_settle(&held, session, NULL, unit, &result);
	staging_unit_close(unit);
	return result;
}
