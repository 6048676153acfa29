/*-------------------------------------------------------------------------
 *
 * apply.c
 *		Apply one CDC window to the staging tables (see apply.h).
 *
 * Rows are streamed from the TDS result straight into the staging table:
 * nothing of the window is buffered beyond the current row, whose memory
 * is reset per row.  Inserts go through one prepared SPI statement per
 * table and window, executed with the privileges of the server's run_as
 * role (SECURITY_RESTRICTED_OPERATION, like autovacuum runs user code), so
 * the worker never writes a user table as superuser.  The catalog rows
 * are written as the extension owner.
 *
 * Staging layout (staging.h): the staged source columns (named by
 * staging_column_name), then _cdc_lsn, _cdc_seqval, _cdc_op,
 * _cdc_commit_time, _cdc_update_mask.  Columns are matched by name, and
 * each source column is read with the type policy's select expression
 * (type_map.h), the same way the snapshot reads it.
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
#include "cdc_window.h"
#include "source_schema.h"
#include "staging.h"

/* Where the value of one staging column comes from */
typedef enum StagingSource
{
	FROM_DATA,					/* a captured source column */
	FROM_LSN,
	FROM_SEQVAL,
	FROM_OPERATION,
	FROM_COMMIT_TIME,
	FROM_UPDATE_MASK
} StagingSource;

typedef struct StagingColumn
{
	char	   *name;
	StagingSource source;
	int			tds_col;		/* result column, for FROM_DATA */
	Oid			typid;
	int32		typmod;
	FmgrInfo	input;
	Oid			ioparam;
} StagingColumn;

static Datum lsn_text(const MssqlLsn *lsn);

/* __$operation 1..4 as the staging table's _cdc_op labels */
static const char *const operation_labels[] = {
	NULL, "delete", "insert", "update_before", "update_after"
};

static StagingSource
metadata_source(const char *name, bool *known)
{
	*known = true;
	if (strcmp(name, "_cdc_lsn") == 0)
		return FROM_LSN;
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
 * *select_exprs (how the change query reads each matched source column, in
 * the order of their result columns).
 */
static int
describe_staging(Relation rel, const MssqlSourceTable *src, int first_data_col,
				 StagingColumn **columns, List **select_exprs)
{
	TupleDesc	desc = RelationGetDescr(rel);
	StagingColumn *cols = palloc0(sizeof(StagingColumn) * desc->natts);
	int			ncols = 0;
	int			seen_meta = 0;
	int			i;

	*select_exprs = NIL;
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		StagingColumn *col;
		bool		is_meta;
		Oid			infunc;

		if (att->attisdropped || att->attgenerated)
			continue;
		col = &cols[ncols];
		col->name = pstrdup(NameStr(att->attname));
		col->typid = att->atttypid;
		col->typmod = att->atttypmod;
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
			*select_exprs = lappend(*select_exprs, mssql_column_select_expr(match));
			col->tds_col = first_data_col + list_length(*select_exprs) - 1;
		}
		if (col->source == FROM_COMMIT_TIME && col->typid != TIMESTAMPTZOID)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column _cdc_commit_time of staging table \"%s\" must be of type timestamptz",
							RelationGetRelationName(rel))));
		getTypeInputInfo(col->typid, &infunc, &col->ioparam);
		fmgr_info(infunc, &col->input);
		ncols++;
	}

	if ((seen_meta & ((1 << FROM_LSN) | (1 << FROM_SEQVAL) | (1 << FROM_OPERATION))) !=
		((1 << FROM_LSN) | (1 << FROM_SEQVAL) | (1 << FROM_OPERATION)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("staging table \"%s\" lacks the columns _cdc_lsn, _cdc_seqval and _cdc_op",
						RelationGetRelationName(rel)),
				 errhint("Staging tables are created by mssql_cdc.add_table; do not drop their _cdc_ columns.")));
	*columns = cols;
	return ncols;
}

/* The table's staging relation, locked RowExclusive until commit. */
static Relation
open_staging(const MssqlCdcTable *table)
{
	Oid			nspid = get_namespace_oid(table->staging_schema, true);
	Oid			relid;

	relid = OidIsValid(nspid) ? get_relname_relid(table->staging_table, nspid) : InvalidOid;
	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("staging table %s.%s does not exist",
						quote_identifier(table->staging_schema),
						quote_identifier(table->staging_table)),
				 errhint("Remove the table with mssql_cdc.remove_table() and add it again.")));
	return table_open(relid, RowExclusiveLock);
}

static char *
build_insert(Relation rel, StagingColumn *cols, int ncols)
{
	StringInfoData sql;
	int			i;

	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s.%s (",
					 quote_identifier(get_namespace_name(RelationGetNamespace(rel))),
					 quote_identifier(RelationGetRelationName(rel)));
	for (i = 0; i < ncols; i++)
		appendStringInfo(&sql, "%s%s", i ? ", " : "", quote_identifier(cols[i].name));
	appendStringInfoString(&sql, ") VALUES (");
	for (i = 0; i < ncols; i++)
		appendStringInfo(&sql, "%s$%d", i ? ", " : "", i + 1);
	appendStringInfoChar(&sql, ')');
	return sql.data;
}

static bool
row_lsn(TdsSession *session, int col, MssqlLsn *lsn)
{
	int			len;
	const uint8 *data = tds_col_data(session, col, &len);

	if (data == NULL || len != MSSQL_LSN_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
				 errmsg("SQL Server (server \"%s\") returned a change row without a valid %s",
						tds_session_server_name(session),
						col == CDC_COL_START_LSN ? "__$start_lsn" : "__$seqval")));
	memcpy(lsn->bytes, data, MSSQL_LSN_BYTES);
	return true;
}

static Datum
input_text(StagingColumn *col, char *text)
{
	return InputFunctionCall(&col->input, text, col->ioparam, col->typmod);
}

/* One change row of the current TDS result as the statement's parameters */
static void
row_values(TdsSession *session, StagingColumn *cols, int ncols, int utc_offset,
		   const MssqlLsn *start_lsn, Datum *values, char *nulls)
{
	MssqlLsn	seqval;
	char		buf[MSSQL_LSN_TEXT_SIZE];
	int			op = 0;
	int			i;

	row_lsn(session, CDC_COL_SEQVAL, &seqval);
	{
		char	   *optext = tds_col_text(session, CDC_COL_OPERATION);

		if (optext != NULL)
			op = pg_strtoint32(optext);
		if (op < 1 || op > 4)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
					 errmsg("SQL Server (server \"%s\") returned an unknown __$operation %s",
							tds_session_server_name(session), optext ? optext : "NULL")));
	}

	for (i = 0; i < ncols; i++)
	{
		StagingColumn *col = &cols[i];
		char	   *text = NULL;

		nulls[i] = ' ';
		switch (col->source)
		{
			case FROM_DATA:
				text = tds_col_text(session, col->tds_col);
				break;
			case FROM_LSN:
				mssql_lsn_format(start_lsn, buf);
				text = buf;
				break;
			case FROM_SEQVAL:
				mssql_lsn_format(&seqval, buf);
				text = buf;
				break;
			case FROM_OPERATION:
				text = (char *) operation_labels[op];
				break;
			case FROM_UPDATE_MASK:
				text = tds_col_text(session, CDC_COL_UPDATE_MASK);
				break;
			case FROM_COMMIT_TIME:
				{
					TimestampTz t;

					if (cdc_col_local_time(session, CDC_COL_COMMIT_TIME, utc_offset, &t))
						values[i] = TimestampTzGetDatum(t);
					else
						nulls[i] = 'n';
					continue;
				}
		}
		if (text == NULL)
		{
			values[i] = (Datum) 0;
			nulls[i] = 'n';
		}
		else
			values[i] = input_text(col, text);
	}
}

ApplyResult
apply_capture_instance(TdsSession *session, const MssqlCdcTable *table,
					   const MssqlSourceTable *src, Oid run_as, int utc_offset_minutes,
					   const MssqlLsn *from, const MssqlLsn *to)
{
	ApplyResult result = {0, 0};
	List	   *select_exprs;
	const char *capture_instance = src->capture_instance->name;
	Relation	rel;
	StagingColumn *cols;
	int			ncols;
	Oid		   *argtypes;
	Datum	   *values;
	char	   *nulls;
	char	   *sql;
	SPIPlanPtr	plan;
	MemoryContext rowcxt;
	MemoryContext oldcxt;
	Oid			save_userid;
	int			save_sec_context;
	MssqlLsn	last_lsn;
	bool		have_last = false;
	int			i;

	/* the lock INSERT takes anyway; held to commit */
	rel = open_staging(table);
	ncols = describe_staging(rel, src, CDC_COL_FIRST_DATA, &cols, &select_exprs);
	sql = build_insert(rel, cols, ncols);
	table_close(rel, NoLock);

	argtypes = palloc(sizeof(Oid) * ncols);
	values = palloc(sizeof(Datum) * ncols);
	nulls = palloc(sizeof(char) * ncols);
	for (i = 0; i < ncols; i++)
		argtypes[i] = cols[i].typid;

	rowcxt = AllocSetContextCreate(CurrentMemoryContext, "mssql_cdc apply row",
								   ALLOCSET_DEFAULT_SIZES);

	/* every staging access with the run_as role's privileges */
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(run_as, save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	plan = SPI_prepare(sql, ncols, argtypes);
	if (plan == NULL)
		elog(ERROR, "could not prepare \"%s\": %s", sql, SPI_result_code_string(SPI_result));

	cdc_start_changes(session, capture_instance, select_exprs, from, to);
	while (tds_next_result(session))
	{
		if (tds_num_cols(session) < CDC_COL_FIRST_DATA - 1 + list_length(select_exprs))
		{
			while (tds_next_row(session))
				;
			continue;
		}
		while (tds_next_row(session))
		{
			MssqlLsn	start_lsn;
			int			rc;

			CHECK_FOR_INTERRUPTS();
			MemoryContextReset(rowcxt);
			oldcxt = MemoryContextSwitchTo(rowcxt);

			row_lsn(session, CDC_COL_START_LSN, &start_lsn);
			if (mssql_lsn_cmp(&start_lsn, from) < 0 || mssql_lsn_cmp(&start_lsn, to) > 0)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_ERROR),
						 errmsg("SQL Server (server \"%s\") returned a change outside the requested LSN range",
								tds_session_server_name(session))));
			if (!have_last || mssql_lsn_cmp(&start_lsn, &last_lsn) != 0)
			{
				result.transactions++;
				last_lsn = start_lsn;
				have_last = true;
			}
			row_values(session, cols, ncols, utc_offset_minutes, &start_lsn, values, nulls);
			MemoryContextSwitchTo(oldcxt);

			rc = SPI_execute_plan(plan, values, nulls, false, 0);
			if (rc != SPI_OK_INSERT)
				elog(ERROR, "insert into staging table failed: %s", SPI_result_code_string(rc));
			result.rows++;
		}
	}

	SPI_finish();
	SetUserIdAndSecContext(save_userid, save_sec_context);
	MemoryContextDelete(rowcxt);
	return result;
}

/* ---- snapshot rows ------------------------------------------------------- */

struct SnapshotInsert
{
	StagingColumn *cols;
	int			ncols;
	SPIPlanPtr	plan;
	Datum	   *values;
	char	   *nulls;
	MemoryContext rowcxt;
	Oid			save_userid;
	int			save_sec_context;
	MssqlLsn	lsn;			/* L0, the _cdc_lsn of every snapshot row */
	MssqlLsn	next_seqval;	/* big-endian row counter */
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
 * Runs as run_as inside the caller's SPI connection.
 */
static void
first_free_seqval(Relation rel, const MssqlLsn *l0, MssqlLsn *seqval)
{
	char	   *sql;
	Oid			types[1] = {TEXTOID};
	Datum		values[1];
	bool		isnull;

	memset(seqval->bytes, 0, MSSQL_LSN_BYTES);
	values[0] = lsn_text(l0);
	sql = psprintf("SELECT _cdc_seqval::text FROM %s.%s"
				   " WHERE _cdc_lsn OPERATOR(mssql_cdc.=) $1::mssql_cdc.lsn"
				   " AND _cdc_op OPERATOR(pg_catalog.=) 'snapshot'"
				   " ORDER BY _cdc_seqval DESC LIMIT 1",
				   quote_identifier(get_namespace_name(RelationGetNamespace(rel))),
				   quote_identifier(RelationGetRelationName(rel)));
	if (SPI_execute_with_args(sql, 1, types, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the staging table's snapshot rows");
	if (SPI_processed == 1)
	{
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull && !mssql_lsn_parse(TextDatumGetCString(d), seqval))
			elog(ERROR, "invalid _cdc_seqval in staging table");
	}
	seqval_increment(seqval);
}

SnapshotInsert *
apply_snapshot_prepare(const MssqlCdcTable *table, const MssqlSourceTable *src, Oid run_as,
					   const MssqlLsn *l0, List **select_exprs)
{
	SnapshotInsert *ins = palloc0(sizeof(SnapshotInsert));
	MemoryContext caller_cxt = CurrentMemoryContext;
	Relation	rel;
	Oid		   *argtypes;
	char	   *sql;
	int			i;

	rel = open_staging(table);
	/* the snapshot SELECT returns the staged columns from column 1 on */
	ins->ncols = describe_staging(rel, src, 1, &ins->cols, select_exprs);
	sql = build_insert(rel, ins->cols, ins->ncols);
	ins->values = palloc(sizeof(Datum) * ins->ncols);
	ins->nulls = palloc(sizeof(char) * ins->ncols);
	argtypes = palloc(sizeof(Oid) * ins->ncols);
	for (i = 0; i < ins->ncols; i++)
		argtypes[i] = ins->cols[i].typid;
	ins->lsn = *l0;
	ins->rowcxt = AllocSetContextCreate(CurrentMemoryContext, "mssql_cdc snapshot row",
										ALLOCSET_DEFAULT_SIZES);

	GetUserIdAndSecContext(&ins->save_userid, &ins->save_sec_context);
	SetUserIdAndSecContext(run_as, ins->save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	first_free_seqval(rel, l0, &ins->next_seqval);
	table_close(rel, NoLock);
	ins->plan = SPI_prepare(sql, ins->ncols, argtypes);
	if (ins->plan == NULL)
		elog(ERROR, "could not prepare \"%s\": %s", sql, SPI_result_code_string(SPI_result));

	/*
	 * Back to the caller's context: what the caller allocates until
	 * apply_snapshot_finish must survive SPI_finish (the plan lives in
	 * SPI's procedure context until then).
	 */
	MemoryContextSwitchTo(caller_cxt);
	return ins;
}

void
apply_snapshot_row(SnapshotInsert *ins, TdsSession *session)
{
	char		lsnbuf[MSSQL_LSN_TEXT_SIZE];
	char		seqbuf[MSSQL_LSN_TEXT_SIZE];
	MemoryContext oldcxt;
	int			rc;
	int			i;

	MemoryContextReset(ins->rowcxt);
	oldcxt = MemoryContextSwitchTo(ins->rowcxt);
	mssql_lsn_format(&ins->lsn, lsnbuf);
	mssql_lsn_format(&ins->next_seqval, seqbuf);
	for (i = 0; i < ins->ncols; i++)
	{
		StagingColumn *col = &ins->cols[i];
		char	   *text = NULL;

		switch (col->source)
		{
			case FROM_DATA:
				text = tds_col_text(session, col->tds_col);
				break;
			case FROM_LSN:
				text = lsnbuf;
				break;
			case FROM_SEQVAL:
				text = seqbuf;
				break;
			case FROM_OPERATION:
				text = "snapshot";
				break;
			case FROM_COMMIT_TIME:	/* no source commit made this row */
			case FROM_UPDATE_MASK:
				text = NULL;
				break;
		}
		ins->nulls[i] = text ? ' ' : 'n';
		ins->values[i] = text ? input_text(col, text) : (Datum) 0;
	}
	MemoryContextSwitchTo(oldcxt);

	rc = SPI_execute_plan(ins->plan, ins->values, ins->nulls, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "insert into staging table failed: %s", SPI_result_code_string(rc));
	seqval_increment(&ins->next_seqval);
}

void
apply_snapshot_finish(SnapshotInsert *ins)
{
	SPI_finish();
	SetUserIdAndSecContext(ins->save_userid, ins->save_sec_context);
	MemoryContextDelete(ins->rowcxt);
}

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

static Datum
lsn_text(const MssqlLsn *lsn)
{
	char		buf[MSSQL_LSN_TEXT_SIZE];

	mssql_lsn_format(lsn, buf);
	return CStringGetTextDatum(buf);
}

/*
 * Lock a table's state row when it still is where this worker left it (the
 * query names the phase and the LSN column); a concurrent remove_table or
 * resnapshot changed or deleted it otherwise, and the window or chunk must
 * then not be applied.  $1 is the table id, $2 the expected LSN.
 */
static bool
lock_state_row(const char *query, int32 table_id, const MssqlLsn *lsn)
{
	CatalogOwnerScope scope;
	Oid			types[2] = {INT4OID, TEXTOID};
	Datum		values[2];
	bool		found;

	values[0] = Int32GetDatum(table_id);
	values[1] = lsn_text(lsn);
	catalog_become_owner(&scope);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(query, 2, types, values, NULL, false, 0) != SPI_OK_SELECT)
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
						  table_id, checkpoint);
}

void
apply_commit_checkpoint(int32 table_id, const MssqlLsn *to, const ApplyResult *result,
						TimestampTz commit_time)
{
	Oid			types[5] = {INT4OID, TEXTOID, INT8OID, INT8OID, TIMESTAMPTZOID};
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};

	values[0] = Int32GetDatum(table_id);
	values[1] = lsn_text(to);
	values[2] = Int64GetDatum(result->rows);
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
	values[1] = lsn_text(start);
	run_catalog("INSERT INTO mssql_cdc.table_state AS s (table_id, phase, checkpoint_lsn)"
				" VALUES ($1, 'streaming', $2::mssql_cdc.lsn)"
				" ON CONFLICT (table_id) DO UPDATE"
				" SET phase = 'streaming', checkpoint_lsn = EXCLUDED.checkpoint_lsn,"
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
	values[1] = lsn_text(l0);
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

bool
apply_lock_snapshot(int32 table_id, const MssqlLsn *l0)
{
	return lock_state_row("SELECT 1 FROM mssql_cdc.table_state"
						  " WHERE table_id = $1 AND phase = 'snapshotting'"
						  " AND snapshot_lsn OPERATOR(mssql_cdc.=) $2::mssql_cdc.lsn"
						  " FOR UPDATE",
						  table_id, l0);
}

void
apply_snapshot_progress(int32 table_id, List *last_key, int64 rows, bool done,
						const MssqlLsn *l0)
{
	Oid			types[5] = {INT4OID, TEXTARRAYOID, INT8OID, BOOLOID, TEXTOID};
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};

	values[0] = Int32GetDatum(table_id);
	if (last_key != NIL)
	{
		Datum	   *elems = palloc(sizeof(Datum) * list_length(last_key));
		ListCell   *lc;
		int			n = 0;

		foreach(lc, last_key)
			elems[n++] = CStringGetTextDatum((char *) lfirst(lc));
		values[1] = PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
	}
	else
		nulls[1] = 'n';
	values[2] = Int64GetDatum(rows);
	values[3] = BoolGetDatum(done);
	values[4] = lsn_text(l0);

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

void
apply_set_table_error(int32 table_id, const char *message)
{
	Oid			types[2] = {INT4OID, TEXTOID};
	Datum		values[2];

	values[0] = Int32GetDatum(table_id);
	values[1] = CStringGetTextDatum(message);
	run_catalog("UPDATE mssql_cdc.table_state SET phase = 'error', last_error = $2,"
				" last_error_at = pg_catalog.now(), updated_at = pg_catalog.now()"
				" WHERE table_id = $1",
				2, types, values, NULL, SPI_OK_UPDATE);
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
