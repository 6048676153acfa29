/*-------------------------------------------------------------------------
 *
 * staging_spi_writer.c
 *		Row-by-row staging inserts through one prepared SPI statement (see
 *		staging_spi_writer.h).  Slow, but it is a real INSERT: triggers,
 *		rules, row-level security and partition routing all apply.
 *
 * IDENTIFICATION
 *		src/staging_spi_writer.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "staging_spi_writer.h"

struct StagingSpiWriter
{
	int			ncols;
	SPIPlanPtr	plan;
	char	   *nulls;			/* SPI's ' ' / 'n' form */
	MemoryContext rowcxt;
};

static char *
build_insert(Relation rel, const AttrNumber *attnums, int ncols)
{
	TupleDesc	desc = RelationGetDescr(rel);
	StringInfoData sql;
	int			i;

	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s.%s (",
					 quote_identifier(get_namespace_name(RelationGetNamespace(rel))),
					 quote_identifier(RelationGetRelationName(rel)));
	for (i = 0; i < ncols; i++)
		appendStringInfo(&sql, "%s%s", i ? ", " : "",
						 quote_identifier(NameStr(TupleDescAttr(desc, attnums[i] - 1)->attname)));
	appendStringInfoString(&sql, ") VALUES (");
	for (i = 0; i < ncols; i++)
		appendStringInfo(&sql, "%s$%d", i ? ", " : "", i + 1);
	appendStringInfoChar(&sql, ')');
	return sql.data;
}

StagingSpiWriter *
staging_spi_writer_open(Relation rel, const AttrNumber *attnums, int ncols)
{
	MemoryContext caller_cxt = CurrentMemoryContext;
	StagingSpiWriter *w = palloc0(sizeof(StagingSpiWriter));
	TupleDesc	desc = RelationGetDescr(rel);
	Oid		   *argtypes = palloc(sizeof(Oid) * Max(ncols, 1));
	char	   *sql = build_insert(rel, attnums, ncols);
	int			i;

	for (i = 0; i < ncols; i++)
		argtypes[i] = TupleDescAttr(desc, attnums[i] - 1)->atttypid;
	w->ncols = ncols;
	w->nulls = palloc(Max(ncols, 1));
	w->rowcxt = AllocSetContextCreate(caller_cxt, "mssql_cdc staging row",
									  ALLOCSET_DEFAULT_SIZES);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	w->plan = SPI_prepare(sql, ncols, argtypes);
	if (w->plan == NULL)
		elog(ERROR, "could not prepare \"%s\": %s", sql, SPI_result_code_string(SPI_result));

	/*
	 * Back to the caller's context: what the caller allocates until close
	 * must survive SPI_finish (the plan lives in SPI's procedure context
	 * until then).
	 */
	MemoryContextSwitchTo(caller_cxt);
	return w;
}

MemoryContext
staging_spi_writer_row_context(StagingSpiWriter *w)
{
	return w->rowcxt;
}

void
staging_spi_writer_add(StagingSpiWriter *w, const Datum *values, const bool *nulls)
{
	MemoryContext cxt = CurrentMemoryContext;
	int			rc;
	int			i;

	for (i = 0; i < w->ncols; i++)
		w->nulls[i] = nulls[i] ? 'n' : ' ';
	rc = SPI_execute_plan(w->plan, (Datum *) values, w->nulls, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "insert into staging table failed: %s", SPI_result_code_string(rc));
	/* SPI leaves its procedure context current, which SPI_finish deletes */
	MemoryContextSwitchTo(cxt);
	MemoryContextReset(w->rowcxt);
}

void
staging_spi_writer_close(StagingSpiWriter *w)
{
	MemoryContext cxt = CurrentMemoryContext;

	SPI_finish();				/* switches to the context of SPI_connect */
	MemoryContextSwitchTo(cxt);
	MemoryContextDelete(w->rowcxt);
	pfree(w->nulls);
	pfree(w);
}
