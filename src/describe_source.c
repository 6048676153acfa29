/*-------------------------------------------------------------------------
 *
 * describe_source.c
 *		The SQL functions built on source discovery and the staging layout:
 *		mssql_cdc.describe_source() (a dry run of add_table) and
 *		mssql_cdc.staging_ddl() (the DDL add_table would run).  They log in
 *		with the caller's user mapping.
 *
 * IDENTIFICATION
 *		src/describe_source.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "fmgr.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"
#include "utils/varlena.h"

#include "column_selection.h"
#include "compat.h"
#include "options.h"
#include "source_name.h"
#include "source_schema.h"
#include "staging.h"

PG_FUNCTION_INFO_V1(mssql_cdc_describe_source);
PG_FUNCTION_INFO_V1(mssql_cdc_staging_ddl);

static char *
text_arg_or_null(FunctionCallInfo fcinfo, int argno)
{
	return PG_ARGISNULL(argno) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(argno));
}

/*
 * The rule of the other API functions (src/api.c): USAGE on the server and
 * a user mapping, whose credentials are the ones used.
 */
static MssqlServerOptions *
caller_server_options(const char *server_name)
{
	ForeignServer *server = mssql_cdc_get_server_by_name(server_name);
	Oid			caller = GetUserId();

	mssql_cdc_check_server_access(caller, server);
	return mssql_cdc_get_server_options(server->serverid, caller);
}

/* Connect as the caller, describe the table, disconnect (also on error). */
static MssqlSourceTable *
describe_for_caller(const char *server_name, const char *source_input,
					const char *capture_instance)
{
	char	   *schema;
	char	   *table;
	char	   *problem = mssql_parse_qualified_name(source_input, &schema, &table);
	MssqlServerOptions *opts;
	TdsSession *volatile session;
	MssqlSourceTable *volatile src = NULL;

	if (problem)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("invalid SQL Server table name \"%s\"", source_input),
				 errdetail("%s", problem),
				 errhint("Write the name as SQL Server does: dbo.orders, or [my schema].[my table]; a name without schema means dbo.")));

	opts = caller_server_options(server_name);
	session = tds_session_open(opts);
	PG_TRY();
	{
		src = source_schema_describe(session, schema, table, capture_instance);
		/* as add_table would stage it now */
		mssql_columns_set_postgis(src->columns, src->ncolumns, mssql_postgis_installed());
	}
	PG_FINALLY();
	{
		tds_session_close(session);
	}
	PG_END_TRY();
	return src;
}

/*
 * mssql_cdc.describe_source(server name, source_table text, capture_instance
 * text) -> one row per source column: what add_table would stage and how.
 */
Datum
mssql_cdc_describe_source(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MssqlSourceTable *src;
	ColumnSelection sel;
	int			i;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("server and source_table must not be NULL")));
	src = describe_for_caller(NameStr(*PG_GETARG_NAME(0)),
							  text_to_cstring(PG_GETARG_TEXT_PP(1)),
							  text_arg_or_null(fcinfo, 2));
	/* a captured table: as its column selection stages it */
	if (column_selection_of_table(src->server_name, src->schema, src->table, &sel))
		column_selection_apply(src, &sel);

	compat_init_materialized_srf(fcinfo);
	for (i = 0; i < src->ncolumns; i++)
	{
		const MssqlColumn *col = &src->columns[i];
		Datum		values[9];
		bool		nulls[9] = {false, false, false, false, false, false, false, false, false};

		values[0] = CStringGetTextDatum(col->name);
		values[2] = CStringGetTextDatum(mssql_type_display(col));
		values[4] = BoolGetDatum(col->nullable);
		if (col->is_key)
			values[5] = Int32GetDatum(col->key_ordinal);
		else
			nulls[5] = true;
		values[6] = BoolGetDatum(col->captured);
		values[8] = BoolGetDatum(col->excluded);
		if (source_column_is_staged(col))
		{
			char	   *pg_type;
			char	   *select_expr;

			mssql_type_to_pg(col, &pg_type, &select_expr);
			values[1] = CStringGetTextDatum(col->pg_name);
			values[3] = CStringGetTextDatum(pg_type);
			values[7] = CStringGetTextDatum(mssql_column_select_expr(col));
		}
		else
			nulls[1] = nulls[3] = nulls[7] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * mssql_cdc.staging_ddl(server name, source_table text, staging_table text,
 * capture_instance text) -> the statements that would create the staging
 * table.  The staging name resolves like add_table's: a name without schema
 * goes where CREATE TABLE would put it (search_path).
 */
Datum
mssql_cdc_staging_ddl(PG_FUNCTION_ARGS)
{
	MssqlSourceTable *src;
	const char *server_name;
	List	   *names;
	RangeVar   *rv;
	Oid			nspid;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("server and source_table must not be NULL")));
	server_name = NameStr(*PG_GETARG_NAME(0));
	src = describe_for_caller(server_name, text_to_cstring(PG_GETARG_TEXT_PP(1)),
							  text_arg_or_null(fcinfo, 3));

	if (PG_ARGISNULL(2))
		names = list_make1(makeString(staging_default_name(server_name, src->schema, src->table)));
	else
		names = textToQualifiedNameList(PG_GETARG_TEXT_PP(2));
	rv = makeRangeVarFromNameList(names);
	if (rv->catalogname != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("staging table name must be table or schema.table")));
	rv->relpersistence = RELPERSISTENCE_PERMANENT;
	nspid = RangeVarGetCreationNamespace(rv);

	PG_RETURN_TEXT_P(cstring_to_text(staging_build_ddl(get_namespace_name(nspid), rv->relname,
													   source_label(src),
													   src->columns, src->ncolumns, NULL)));
}
