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
 * table as superuser.  The catalog rows that commit with the rows (state,
 * checkpoint, snapshot progress, errors) are apply_state.c's.
 *
 * Values are converted from their TDS binary form straight to Datums where
 * the column type allows it (tds_convert.h), the LSN columns are copied as
 * bytes and the operation labels are looked up once per unit.
 *
 * Staging layout (staging.h): the staged source columns (named by
 * staging_column_name), then _cdc_lsn, _cdc_seqval, _cdc_op,
 * _cdc_commit_time, _cdc_update_mask, _cdc_command_id.  Columns are matched
 * by name, and each source column is read with the type policy's select
 * expression (type_map.h), the same way the snapshot reads it.
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

#include "access/relation.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "apply.h"
#include "catalog.h"
#include "cdc_clock.h"
#include "change_query.h"
#include "mirror.h"
#include "source_schema.h"
#include "staging.h"
#include "staging_writer.h"
#include "tds_convert.h"

/* the input function of mssql_cdc.lsn (src/lsn.c) */
extern PGDLLEXPORT Datum mssql_cdc_lsn_in(PG_FUNCTION_ARGS);

/* Where the value of one staging column comes from */
typedef enum StagingSource
{
	FROM_DATA,					/* a captured source column */
	FROM_LSN,
	FROM_COMMAND_ID,
	FROM_SEQVAL,
	FROM_OPERATION,
	FROM_COMMIT_TIME,
	FROM_UPDATE_MASK
} StagingSource;

/* the staging key's columns, which every staging table must have */
#define KEY_COLUMNS ((1 << FROM_LSN) | (1 << FROM_COMMAND_ID) | (1 << FROM_SEQVAL) | (1 << FROM_OPERATION))

typedef struct StagingColumn
{
	char	   *name;
	AttrNumber	attnum;
	StagingSource source;
	int			tds_col;		/* result column, for FROM_DATA */
	/* FROM_DATA read as is: its SQL Server type; NULL when read converted */
	const char *plain_source_type;
	TdsDatumTarget target;		/* the staging column's type */
} StagingColumn;

/* __$operation 1..4 as the staging table's _cdc_op labels; 0: snapshot */
#define OPERATION_SNAPSHOT	0
static const char *const operation_labels[] = {
	"snapshot", "delete", "insert", "update_before", "update_after"
};

/*
 * The staging side of one unit (a window or a chunk): the columns, the
 * writer, and the values of the row being built.
 */
typedef struct StagingUnit
{
	StagingColumn *cols;
	int			ncols;
	AttrNumber *attnums;
	StagingWriter *writer;		/* NULL: the rows are not staged */
	Datum	   *values;
	bool	   *nulls;
	Datum		op_datums[lengthof(operation_labels)];
	bool		lsn_binary;		/* _cdc_lsn/_cdc_seqval are mssql_cdc.lsn */
} StagingUnit;


static StagingSource
metadata_source(const char *name, bool *known)
{
	*known = true;
	if (strcmp(name, "_cdc_lsn") == 0)
		return FROM_LSN;
	if (strcmp(name, "_cdc_command_id") == 0)
		return FROM_COMMAND_ID;
	if (strcmp(name, "_cdc_seqval") == 0)
		return FROM_SEQVAL;
	if (strcmp(name, "_cdc_op") == 0)
		return FROM_OPERATION;
	if (strcmp(name, "_cdc_commit_time") == 0)
		return FROM_COMMIT_TIME;
	if (strcmp(name, "_cdc_update_mask") == 0)
		return FROM_UPDATE_MASK;
	*known = false;
	return FROM_DATA;
}

/*
 * Match the staging table's columns with the source's staged columns
 * (captured, not computed); fills *columns (in staging order) and
 * *source_cols (the matched source columns, const MssqlColumn *, in the
 * order of their result columns).
 */
static int
describe_staging(Relation rel, const MssqlSourceTable *src, int first_data_col,
				 StagingColumn **columns, List **source_cols)
{
	TupleDesc	desc = RelationGetDescr(rel);
	StagingColumn *cols = palloc0(sizeof(StagingColumn) * Max(desc->natts, 1));
	int			ncols = 0;
	int			seen_meta = 0;
	int			i;

	*source_cols = NIL;
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		StagingColumn *col;
		bool		is_meta;

		if (att->attisdropped || att->attgenerated)
			continue;
		col = &cols[ncols];
		col->name = pstrdup(NameStr(att->attname));
		col->attnum = att->attnum;
		col->source = metadata_source(col->name, &is_meta);
		if (is_meta)
			seen_meta |= 1 << col->source;
		else
		{
			const MssqlColumn *match = NULL;
			int			j;

			for (j = 0; j < src->ncolumns; j++)
			{
				if (source_column_is_staged(&src->columns[j]) &&
					strcmp(src->columns[j].pg_name, col->name) == 0)
				{
					match = &src->columns[j];
					break;
				}
			}
			if (match == NULL)
				continue;		/* a user-added column: its default applies */
			{
				char	   *pg_type;
				char	   *conversion;

				mssql_type_to_pg(match, &pg_type, &conversion);
				col->plain_source_type = conversion ? NULL : match->type_name;
			}
			*source_cols = lappend(*source_cols, (void *) match);
			col->tds_col = first_data_col + list_length(*source_cols) - 1;
		}
		if (col->source == FROM_COMMIT_TIME && att->atttypid != TIMESTAMPTZOID)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column _cdc_commit_time of staging table \"%s\" must be of type timestamptz",
							RelationGetRelationName(rel))));
		if (col->source == FROM_COMMAND_ID && att->atttypid != INT4OID)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column _cdc_command_id of staging table \"%s\" must be of type integer",
							RelationGetRelationName(rel))));
		tds_datum_target_init(&col->target, att->atttypid, att->atttypmod);
		ncols++;
	}

	if ((seen_meta & KEY_COLUMNS) != KEY_COLUMNS)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("staging table \"%s\" lacks the key columns _cdc_lsn, _cdc_command_id, _cdc_seqval and _cdc_op",
						RelationGetRelationName(rel)),
				 errhint("Staging tables are created by mssql_cdc.add_table; do not drop their _cdc_ columns.")));
	*columns = cols;
	return ncols;
}

/* The table's staging relation, locked RowExclusive until commit. */
static Relation
open_staging(const MssqlCdcTable *table)
{
	return staging_open(table->staging_schema, table->staging_table, RowExclusiveLock);
}

/*
 * Describe the staging table and open its writer as run_as; the labels of
 * _cdc_op are converted once here.
 */
static StagingUnit *
staging_unit_describe(Relation rel, const MssqlSourceTable *src, int first_data_col,
					  List **source_cols)
{
	StagingUnit *unit = palloc0(sizeof(StagingUnit));
	AttrNumber *attnums;
	int			i;

	unit->ncols = describe_staging(rel, src, first_data_col, &unit->cols, source_cols);
	attnums = palloc(sizeof(AttrNumber) * Max(unit->ncols, 1));
	unit->values = palloc(sizeof(Datum) * Max(unit->ncols, 1));
	unit->nulls = palloc(sizeof(bool) * Max(unit->ncols, 1));
	for (i = 0; i < unit->ncols; i++)
	{
		StagingColumn *col = &unit->cols[i];

		attnums[i] = col->attnum;
		if (col->source == FROM_OPERATION)
		{
			int			op;

			for (op = 0; op < lengthof(operation_labels); op++)
				unit->op_datums[op] = InputFunctionCall(&col->target.input,
														(char *) operation_labels[op],
														col->target.ioparam,
														col->target.typmod);
		}
		if (col->source == FROM_LSN)
			unit->lsn_binary = col->target.input.fn_addr == mssql_cdc_lsn_in;
	}
	for (i = 0; i < unit->ncols; i++)
		if (unit->cols[i].source == FROM_SEQVAL &&
			unit->cols[i].target.input.fn_addr != mssql_cdc_lsn_in)
			unit->lsn_binary = false;
	unit->attnums = attnums;
	return unit;
}

static void
staging_unit_open_writer(StagingUnit *unit, Relation rel, Oid run_as)
{
	unit->writer = staging_writer_open(RelationGetRelid(rel), run_as, unit->attnums,
									   unit->ncols);
}

static StagingUnit *
staging_unit_open(Relation rel, const MssqlSourceTable *src, int first_data_col,
				  Oid run_as, List **source_cols)
{
	StagingUnit *unit = staging_unit_describe(rel, src, first_data_col, source_cols);

	staging_unit_open_writer(unit, rel, run_as);
	return unit;
}

static void
staging_unit_close(StagingUnit *unit)
{
	if (unit->writer != NULL)
		staging_writer_close(unit->writer);
}

/*
 * Each data column of the current result must be of a type its source
 * column can arrive as (tds_expect_col_source_type): a server that sends,
 * say, text where an int was asked for is broken, and reading that text
 * could store wrong values.
 */
static void
check_data_types(TdsSession *session, StagingUnit *unit, const char *what)
{
	int			i;

	for (i = 0; i < unit->ncols; i++)
	{
		StagingColumn *col = &unit->cols[i];

		if (col->source == FROM_DATA)
			tds_expect_col_source_type(session, col->tds_col, col->plain_source_type,
									   col->name, what);
	}
}

/* An LSN as a value of the staging column (in the current context) */
static Datum
lsn_datum(StagingUnit *unit, StagingColumn *col, const MssqlLsn *lsn)
{
	char		buf[MSSQL_LSN_TEXT_SIZE];

	if (unit->lsn_binary)
	{
		/* mssql_cdc.lsn is the 10 bytes themselves, passed by reference */
		MssqlLsn   *copy = palloc(sizeof(MssqlLsn));

		*copy = *lsn;
		return MssqlLsnPGetDatum(copy);
	}
	mssql_lsn_format(lsn, buf);
	return InputFunctionCall(&col->target.input, buf, col->target.ioparam,
							 col->target.typmod);
}

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
				*value = lsn_datum(unit, col, start_lsn);
				break;
			case FROM_COMMAND_ID:
				*value = Int32GetDatum(key->command_id);
				break;
			case FROM_SEQVAL:
				*value = lsn_datum(unit, col, seqval);
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

char *
apply_change_query(const MssqlCdcTable *table, const MssqlSourceTable *src,
				   const char *server_zone, MssqlDataQueryMode mode,
				   const MssqlLsn *from, const MssqlLsn *to, const ApplyLimits *limits)
{
	Relation	rel;
	StagingColumn *cols;
	List	   *source_cols;

	/* the columns the staging table has (the same as apply_read_changes finds) */
	rel = open_staging(table);
	(void) describe_staging(rel, src, CDC_COL_FIRST_DATA, &cols, &source_cols);
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

	memset(&result, 0, sizeof(result));
	/* the lock INSERT takes anyway; held to commit */
	rel = open_staging(table);
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
	check_data_types(session, unit, "reading changes");
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

		staging_writer_add(unit->writer, unit->values, unit->nulls);
		result.rows++;
	}

	staging_unit_close(unit);
	return result;
}

/* ---- snapshot rows ------------------------------------------------------- */

struct SnapshotInsert
{
	StagingUnit *unit;
	MirrorSink *mirror;			/* the rows straight into the mirror, or NULL */
	MssqlLsn	lsn;			/* L0, the _cdc_lsn of every snapshot row */
	MssqlLsn	next_seqval;	/* big-endian row counter */
	MssqlLsn	first_seqval;	/* the chunk's first row (its mirror applies from it) */
	bool		types_checked;
};

/* 80-bit big-endian +1; a snapshot never gets near 2^80 rows */
static void
seqval_increment(MssqlLsn *seqval)
{
	int			i;

	for (i = MSSQL_LSN_BYTES - 1; i >= 0; i--)
		if (++seqval->bytes[i] != 0)
			break;
}

/*
 * The first free _cdc_seqval for snapshot rows at L0: after the highest
 * one a previous (interrupted or earlier) snapshot with the same L0 left,
 * so a resumed or repeated snapshot can never collide on the primary key.
 * Runs as run_as, like the inserts.
 */
static void
first_free_seqval(Relation rel, Oid run_as, const MssqlLsn *l0, MssqlLsn *seqval)
{
	char	   *sql;
	Oid			types[1] = {TEXTOID};
	Datum		values[1];
	bool		isnull;
	Oid			save_userid;
	int			save_sec_context;
	MemoryContext caller_cxt = CurrentMemoryContext;

	memset(seqval->bytes, 0, MSSQL_LSN_BYTES);
	values[0] = mssql_lsn_text_datum(l0);
	/*
	 * Qualified names: a bare "ORDER BY _cdc_seqval" would sort by the
	 * output column (the text), which no index provides, so every chunk
	 * would read and sort all snapshot rows at L0.  With _cdc_lsn and
	 * _cdc_command_id (0 for every snapshot row) both fixed this is one
	 * backward step in the primary key (_cdc_lsn, _cdc_command_id,
	 * _cdc_seqval, _cdc_op); without the second, every chunk sorted all the
	 * snapshot rows staged so far (quadratic in the table's size).
	 */
	sql = psprintf("SELECT s._cdc_seqval::text FROM %s.%s s"
				   " WHERE s._cdc_lsn OPERATOR(mssql_cdc.=) $1::mssql_cdc.lsn"
				   " AND s._cdc_command_id OPERATOR(pg_catalog.=) 0"
				   " AND s._cdc_op OPERATOR(pg_catalog.=) 'snapshot'"
				   " ORDER BY s._cdc_seqval DESC LIMIT 1",
				   quote_identifier(get_namespace_name(RelationGetNamespace(rel))),
				   quote_identifier(RelationGetRelationName(rel)));

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(run_as, save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(sql, 1, types, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the staging table's snapshot rows");
	if (SPI_processed == 1)
	{
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
		{
			MemoryContext spicxt = MemoryContextSwitchTo(caller_cxt);
			bool		ok = mssql_lsn_parse(TextDatumGetCString(d), seqval);

			MemoryContextSwitchTo(spicxt);
			if (!ok)
				elog(ERROR, "invalid _cdc_seqval in staging table");
		}
	}
	SPI_finish();
	MemoryContextSwitchTo(caller_cxt);
	SetUserIdAndSecContext(save_userid, save_sec_context);
	seqval_increment(seqval);
}

/* The chunk's mirror writer (mirror_snapshot.c) over the unit's converted values */
static MirrorSink *
open_mirror_sink(const MssqlCdcTable *table, Oid run_as, StagingUnit *unit)
{
	char	  **names = palloc0(sizeof(char *) * Max(unit->ncols, 1));
	Oid		   *types = palloc0(sizeof(Oid) * Max(unit->ncols, 1));
	int32	   *typmods = palloc0(sizeof(int32) * Max(unit->ncols, 1));
	int			i;

	for (i = 0; i < unit->ncols; i++)
	{
		if (unit->cols[i].source != FROM_DATA)
			continue;
		names[i] = unit->cols[i].name;
		types[i] = unit->cols[i].target.typid;
		typmods[i] = unit->cols[i].target.typmod;
	}
	return mirror_sink_open(table, run_as, !table->changelog, unit->ncols, names, types,
							typmods);
}

SnapshotInsert *
apply_snapshot_prepare(const MssqlCdcTable *table, const MssqlSourceTable *src, Oid run_as,
					   const MssqlLsn *l0, List **select_exprs)
{
	SnapshotInsert *ins = palloc0(sizeof(SnapshotInsert));
	Relation	rel;
	List	   *source_cols;
	ListCell   *lc;

	rel = open_staging(table);
	ins->lsn = *l0;
	first_free_seqval(rel, run_as, l0, &ins->next_seqval);
	ins->first_seqval = ins->next_seqval;
	/* the snapshot SELECT returns the staged columns from column 1 on */
	ins->unit = staging_unit_describe(rel, src, 1, &source_cols);
	/* opened first, closed last: each writer restores the user it found */
	ins->mirror = open_mirror_sink(table, run_as, ins->unit);
	/* mirror only: the staging table gets nothing */
	if (ins->mirror == NULL || table->changelog)
		staging_unit_open_writer(ins->unit, rel, run_as);
	table_close(rel, NoLock);
	*select_exprs = NIL;
	foreach(lc, source_cols)
		*select_exprs = lappend(*select_exprs,
								mssql_column_select_expr((const MssqlColumn *) lfirst(lc)));
	return ins;
}

void
apply_snapshot_check_types(SnapshotInsert *ins, TdsSession *session)
{
	/* a chunk is one result: its column types are checked at its first row */
	if (!ins->types_checked)
	{
		check_data_types(session, ins->unit, "reading a snapshot chunk");
		ins->types_checked = true;
	}
}

void
apply_snapshot_row(SnapshotInsert *ins, TdsSession *session, const TdsRowBuffer *kept,
				   int row)
{
	StagingUnit *unit = ins->unit;
	MemoryContext oldcxt;
	int			i;

	if (kept == NULL)
		apply_snapshot_check_types(ins, session);
	else if (!ins->types_checked)
		elog(ERROR, "kept snapshot rows whose types were not checked");
	oldcxt = MemoryContextSwitchTo(unit->writer ? staging_writer_row_context(unit->writer)
								   : mirror_sink_row_context(ins->mirror));
	for (i = 0; i < unit->ncols; i++)
	{
		StagingColumn *col = &unit->cols[i];

		unit->nulls[i] = false;
		switch (col->source)
		{
			case FROM_DATA:
				unit->values[i] = kept
					? tds_row_buffer_datum(kept, session, row, col->tds_col, &col->target,
										   &unit->nulls[i])
					: tds_col_datum(session, col->tds_col, &col->target, &unit->nulls[i]);
				break;
			case FROM_LSN:
				unit->values[i] = lsn_datum(unit, col, &ins->lsn);
				break;
			case FROM_COMMAND_ID:	/* no source command made this row */
				unit->values[i] = Int32GetDatum(0);
				break;
			case FROM_SEQVAL:
				unit->values[i] = lsn_datum(unit, col, &ins->next_seqval);
				break;
			case FROM_OPERATION:
				unit->values[i] = unit->op_datums[OPERATION_SNAPSHOT];
				break;
			case FROM_COMMIT_TIME:	/* no source commit made this row */
			case FROM_UPDATE_MASK:
				unit->values[i] = (Datum) 0;
				unit->nulls[i] = true;
				break;
		}
	}
	MemoryContextSwitchTo(oldcxt);

	/* both from the same converted values */
	if (ins->mirror)
		mirror_sink_add(ins->mirror, unit->values, unit->nulls, unit->writer != NULL);
	if (unit->writer)
		staging_writer_add(unit->writer, unit->values, unit->nulls);
	seqval_increment(&ins->next_seqval);
}

void
apply_snapshot_finish(SnapshotInsert *ins)
{
	staging_unit_close(ins->unit);
	if (ins->mirror)
		mirror_sink_close(ins->mirror);
}

bool
apply_snapshot_wrote_mirror(const SnapshotInsert *ins)
{
	return ins->mirror != NULL;
}

const MssqlLsn *
apply_snapshot_first_seqval(const SnapshotInsert *ins)
{
	return &ins->first_seqval;
}
