/*-------------------------------------------------------------------------
 *
 * apply_snapshot.c
 *		Snapshot rows into the staging table and/or the mirror (see
 *		apply.h): one SnapshotInsert per chunk.
 *
 * Every snapshot row gets _cdc_lsn L0, _cdc_command_id 0, _cdc_op
 * 'snapshot' and the next _cdc_seqval of a big-endian row counter that
 * starts after the highest one an earlier snapshot at L0 left, so a
 * resumed or repeated snapshot never collides on the staging key.  A
 * table with a mirror gets the same converted values straight into the
 * mirror (mirror_snapshot.c); a mirror-only table stages nothing.
 *
 * IDENTIFICATION
 *		src/apply_snapshot.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "apply.h"
#include "mirror.h"
#include "staging_unit.h"
#include "type_map.h"

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

	rel = staging_unit_relation(table);
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
		staging_unit_check_types(session, ins->unit, "reading a snapshot chunk");
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
				unit->values[i] = staging_unit_lsn_datum(unit, col, &ins->lsn);
				break;
			case FROM_COMMAND_ID:	/* no source command made this row */
				unit->values[i] = Int32GetDatum(0);
				break;
			case FROM_SEQVAL:
				unit->values[i] = staging_unit_lsn_datum(unit, col, &ins->next_seqval);
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
