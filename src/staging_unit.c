/*-------------------------------------------------------------------------
 *
 * staging_unit.c
 *		The staging side of one unit of rows (see staging_unit.h): match
 *		the staging table's columns with the source's staged columns, open
 *		its writer as the server's run_as role, and turn LSNs and the
 *		operation labels into values of their staging columns.
 *
 * The writer (staging_writer.h) works with the privileges of run_as
 * (SECURITY_RESTRICTED_OPERATION, like autovacuum runs user code), so the
 * worker never writes a user table as superuser.  The _cdc_op labels are
 * converted once per unit, and the LSN columns are copied as bytes when
 * they are of type mssql_cdc.lsn.
 *
 * IDENTIFICATION
 *		src/staging_unit.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/rel.h"

#include "staging.h"
#include "staging_unit.h"
#include "type_map.h"

/* the input function of mssql_cdc.lsn (src/lsn.c) */
extern PGDLLEXPORT Datum mssql_cdc_lsn_in(PG_FUNCTION_ARGS);

/* the staging key's columns, which every staging table must have */
#define KEY_COLUMNS ((1 << FROM_LSN) | (1 << FROM_COMMAND_ID) | (1 << FROM_SEQVAL) | (1 << FROM_OPERATION))

/* the _cdc_op labels of op_datums */
static const char *const operation_labels[STAGING_OPERATIONS] = {
	"snapshot", "delete", "insert", "update_before", "update_after"
};

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

Relation
staging_unit_relation(const MssqlCdcTable *table)
{
	return staging_open(table->staging_schema, table->staging_table, RowExclusiveLock);
}

List *
staging_unit_source_columns(Relation rel, const MssqlSourceTable *src)
{
	StagingColumn *cols;
	List	   *source_cols;

	/* the first data column does not matter here */
	(void) describe_staging(rel, src, 1, &cols, &source_cols);
	return source_cols;
}

/*
 * Describe the staging table and open its writer as run_as; the labels of
 * _cdc_op are converted once here.
 */
StagingUnit *
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

void
staging_unit_open_writer(StagingUnit *unit, Relation rel, Oid run_as)
{
	unit->writer = staging_writer_open(RelationGetRelid(rel), run_as, unit->attnums,
									   unit->ncols);
}

StagingUnit *
staging_unit_open(Relation rel, const MssqlSourceTable *src, int first_data_col,
				  Oid run_as, List **source_cols)
{
	StagingUnit *unit = staging_unit_describe(rel, src, first_data_col, source_cols);

	staging_unit_open_writer(unit, rel, run_as);
	return unit;
}

void
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
void
staging_unit_check_types(TdsSession *session, StagingUnit *unit, const char *what)
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

Datum
staging_unit_lsn_datum(StagingUnit *unit, StagingColumn *col, const MssqlLsn *lsn)
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
