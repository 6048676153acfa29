/*-------------------------------------------------------------------------
 *
 * column_selection.c
 *		Per-table include/exclude lists of source columns (see
 *		include/column_selection.h).
 *
 * Names are matched as SQL Server spells them; when no column has exactly
 * that spelling, a single case-insensitive match is taken (most databases
 * have a case-insensitive collation, so "SSN" and "ssn" are the same
 * column there).
 *
 * IDENTIFICATION
 *		src/column_selection.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "catalog.h"
#include "column_selection.h"
#include "source_name.h"
#include "tds_session.h"

static List *
text_array_to_list(ArrayType *arr, const char *argname)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int			i;
	List	   *result = NIL;

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a one-dimensional array of column names", argname)));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	for (i = 0; i < n; i++)
	{
		char	   *name;
		ListCell   *lc;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not contain NULL", argname)));
		name = TextDatumGetCString(elems[i]);
		if (name[0] == '\0')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must not contain an empty column name", argname)));
		foreach(lc, result)
			if (pg_strcasecmp((const char *) lfirst(lc), name) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("column \"%s\" is named twice in %s", name, argname)));
		result = lappend(result, name);
	}
	return result;
}

void
column_selection_from_args(FunctionCallInfo fcinfo, int include_argno, int exclude_argno,
						   ColumnSelection *sel, bool *cleared)
{
	sel->include = NIL;
	sel->exclude = NIL;
	if (cleared)
		*cleared = false;
	if (!PG_ARGISNULL(include_argno) && !PG_ARGISNULL(exclude_argno))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("include_columns and exclude_columns cannot both be given"),
				 errhint("Name the columns to stage with include_columns, or the columns to leave out with exclude_columns.")));
	if (!PG_ARGISNULL(include_argno))
	{
		sel->include = text_array_to_list(PG_GETARG_ARRAYTYPE_P(include_argno), "include_columns");
		if (sel->include == NIL && cleared)
			*cleared = true;
	}
	if (!PG_ARGISNULL(exclude_argno))
	{
		sel->exclude = text_array_to_list(PG_GETARG_ARRAYTYPE_P(exclude_argno), "exclude_columns");
		if (sel->exclude == NIL && cleared)
			*cleared = true;
	}
}

/* The column named name: exact spelling first, else one case-insensitive match */
static MssqlColumn *
find_column(const MssqlSourceTable *src, const char *name, bool *ambiguous)
{
	MssqlColumn *found = NULL;
	int			matches = 0;
	int			i;

	*ambiguous = false;
	for (i = 0; i < src->ncolumns; i++)
		if (strcmp(src->columns[i].name, name) == 0)
			return &src->columns[i];
	for (i = 0; i < src->ncolumns; i++)
		if (pg_strcasecmp(src->columns[i].name, name) == 0)
		{
			found = &src->columns[i];
			matches++;
		}
	if (matches > 1)
	{
		*ambiguous = true;
		return NULL;
	}
	return found;
}

/* "[id], [name], ..." of the captured columns, for hints */
static char *
captured_column_names(const MssqlSourceTable *src)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	for (i = 0; i < src->ncolumns; i++)
		if (src->columns[i].captured)
			appendStringInfo(&buf, "%s%s", buf.len ? ", " : "",
							 tds_quote_ident(src->columns[i].name));
	return buf.data;
}

static MssqlColumn *
check_name(const MssqlSourceTable *src, const char *name, const char *argname)
{
	bool		ambiguous;
	MssqlColumn *col = find_column(src, name, &ambiguous);

	if (col == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("%s names column \"%s\", which table %s does not have",
						argname, name, mssql_display_name(src->schema, src->table)),
				 ambiguous ? errdetail("Several columns differ from it only in case; write the name as SQL Server spells it.") : 0,
				 errhint("The columns of capture instance \"%s\" are: %s.",
						 src->capture_instance->name, captured_column_names(src))));
	return col;
}

void
column_selection_check(const MssqlSourceTable *src, ColumnSelection *sel)
{
	ListCell   *lc;
	int			i;

	foreach(lc, sel->include)
	{
		MssqlColumn *col = check_name(src, lfirst(lc), "include_columns");

		if (!col->captured || col->is_computed)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("column %s of table %s cannot be included: %s",
							tds_quote_ident(col->name), mssql_display_name(src->schema, src->table),
							col->is_computed ? "it is computed, and CDC delivers no values for computed columns"
							: psprintf("capture instance \"%s\" does not capture it",
									   src->capture_instance->name)),
					 errhint("The columns of capture instance \"%s\" are: %s.",
							 src->capture_instance->name, captured_column_names(src))));
		lfirst(lc) = col->name;
	}
	foreach(lc, sel->exclude)
	{
		MssqlColumn *col = check_name(src, lfirst(lc), "exclude_columns");

		if (col->is_key)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
					 errmsg("key column %s of table %s cannot be excluded",
							tds_quote_ident(col->name), mssql_display_name(src->schema, src->table)),
					 errdetail("The snapshot pages the table by its primary key, and the staged rows identify source rows by it."),
					 errhint("Remove %s from exclude_columns.", col->name)));
		lfirst(lc) = col->name;
	}
	if (sel->include == NIL)
		return;
	for (i = 0; i < src->ncolumns; i++)
	{
		const MssqlColumn *col = &src->columns[i];
		bool		named = false;

		if (!col->is_key)
			continue;
		foreach(lc, sel->include)
			if (strcmp(lfirst(lc), col->name) == 0)
				named = true;
		if (!named)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
					 errmsg("key column %s of table %s cannot be excluded",
							tds_quote_ident(col->name), mssql_display_name(src->schema, src->table)),
					 errdetail("include_columns must name every primary key column: the snapshot pages the table by its primary key, and the staged rows identify source rows by it."),
					 errhint("Add %s to include_columns.", col->name)));
	}
}

static bool
named_in(List *names, const char *name)
{
	ListCell   *lc;

	foreach(lc, names)
		if (pg_strcasecmp((const char *) lfirst(lc), name) == 0)
			return true;
	return false;
}

void
column_selection_apply(MssqlSourceTable *src, const ColumnSelection *sel)
{
	int			i;

	for (i = 0; i < src->ncolumns; i++)
	{
		MssqlColumn *col = &src->columns[i];

		if (col->is_key)
			col->excluded = false;
		else if (sel->include != NIL)
			col->excluded = !named_in(sel->include, col->name);
		else
			col->excluded = named_in(sel->exclude, col->name);
	}
}

Datum
column_selection_array(List *names)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(list_length(names), 1));
	ListCell   *lc;
	int			n = 0;

	foreach(lc, names)
		elems[n++] = CStringGetTextDatum((const char *) lfirst(lc));
	return PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
}

static List *
spi_names(int attno, MemoryContext cxt)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, attno, &isnull);
	MemoryContext old;
	List	   *names;

	if (isnull)
		return NIL;
	old = MemoryContextSwitchTo(cxt);
	names = text_array_to_list(DatumGetArrayTypePCopy(d), "the column selection");
	MemoryContextSwitchTo(old);
	return names;
}

bool
column_selection_of_table(const char *server_name, const char *schema, const char *table,
						  ColumnSelection *sel)
{
	MemoryContext caller_cxt = CurrentMemoryContext;
	CatalogOwnerScope scope;
	Oid			types[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		args[3];
	bool		found;

	sel->include = NIL;
	sel->exclude = NIL;
	args[0] = CStringGetTextDatum(server_name);
	args[1] = CStringGetTextDatum(schema);
	args[2] = CStringGetTextDatum(table);
	catalog_become_owner(&scope);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("SELECT include_columns, exclude_columns FROM mssql_cdc.tables"
							  " WHERE server_name OPERATOR(pg_catalog.=) $1::pg_catalog.name"
							  " AND source_schema OPERATOR(pg_catalog.=) $2"
							  " AND source_table OPERATOR(pg_catalog.=) $3",
							  3, types, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read mssql_cdc.tables");
	found = SPI_processed == 1;
	if (found)
	{
		sel->include = spi_names(1, caller_cxt);
		sel->exclude = spi_names(2, caller_cxt);
	}
	SPI_finish();
	catalog_restore_user(&scope);
	return found;
}
