/*-------------------------------------------------------------------------
 *
 * mirror_alter.c
 *		alter_table's mirror arguments: give a captured table a mirror, drop
 *		it, or switch between mirror-only and mirror + changelog
 *		(doc/mirror.md "Adding and dropping a mirror").
 *
 * A mirror added to a table that already streams must be filled: the
 * mirror is created empty together with its rebuild shadow
 * (mirror_rebuild.c) and the table is resnapshotted, so the mirror stays
 * empty until the copy is complete and then becomes the whole table in one
 * commit, never a part of it.  Dropping a mirror only stops maintaining
 * it: the table is kept (like a staging table after remove_table).
 *
 * IDENTIFICATION
 *		src/mirror_alter.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/varlena.h"

#include "api_common.h"
#include "column_selection_alter.h"
#include "mirror.h"
#include "source_name.h"
#include "staging.h"

extern PGDLLEXPORT Datum mssql_cdc_resnapshot(PG_FUNCTION_ARGS);

void
mirror_alter_from_args(FunctionCallInfo fcinfo, int mirror_arg, int name_arg, int changelog_arg,
					   MirrorAlter *ma)
{
	memset(ma, 0, sizeof(*ma));
	ma->mirror_given = !PG_ARGISNULL(mirror_arg) || !PG_ARGISNULL(name_arg);
	ma->mirror = PG_ARGISNULL(mirror_arg) ? true : PG_GETARG_BOOL(mirror_arg);
	if (!PG_ARGISNULL(name_arg))
	{
		if (!ma->mirror)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("mirror => false cannot be combined with mirror_table")));
		ma->names = textToQualifiedNameList(PG_GETARG_TEXT_PP(name_arg));
	}
	ma->changelog_given = !PG_ARGISNULL(changelog_arg);
	ma->changelog = ma->changelog_given ? PG_GETARG_BOOL(changelog_arg) : true;
}

/* The table's mirror settings now (as the extension owner) */
static void
read_current(MirrorAlter *ma, int32 table_id)
{
	CatalogOwnerScope scope;
	Oid			types[1] = {INT4OID};
	Datum		args[1];
	MemoryContext caller_cxt = CurrentMemoryContext;
	bool		isnull;

	args[0] = Int32GetDatum(table_id);
	api_begin_catalog_write(&scope);
	if (SPI_execute_with_args("SELECT mirror_schema, mirror_table, changelog, spatial_postgis"
							  " FROM mssql_cdc.tables WHERE table_id OPERATOR(pg_catalog.=) $1",
							  1, types, args, NULL, true, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "could not read mssql_cdc.tables");
	{
		HeapTuple	tuple = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		char	   *schema = SPI_getvalue(tuple, desc, 1);
		char	   *table = SPI_getvalue(tuple, desc, 2);

		ma->cur_schema = schema ? MemoryContextStrdup(caller_cxt, schema) : NULL;
		ma->cur_table = table ? MemoryContextStrdup(caller_cxt, table) : NULL;
		ma->cur_changelog = DatumGetBool(SPI_getbinval(tuple, desc, 3, &isnull));
		ma->spatial_postgis = DatumGetBool(SPI_getbinval(tuple, desc, 4, &isnull));
	}
	api_end_catalog_write(&scope);
	MemoryContextSwitchTo(caller_cxt);
}

void
mirror_alter_prepare(MirrorAlter *ma, int32 table_id, const char *server_name, Oid run_as_oid,
					 const MirrorAlterTarget *t)
{
	bool		has_mirror;

	if (!ma->mirror_given && !ma->changelog_given)
		return;
	read_current(ma, table_id);
	has_mirror = ma->cur_table != NULL;
	ma->new_changelog = ma->changelog_given ? ma->changelog : ma->cur_changelog;
	ma->schema = ma->cur_schema;
	ma->relname = ma->cur_table;

	if (ma->mirror_given && !ma->mirror)
	{
		/* no mirror: the changelog is all that is left */
		if (ma->changelog_given && !ma->changelog)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("changelog => false needs a mirror table")));
		ma->new_changelog = true;
		ma->schema = ma->relname = NULL;
		return;
	}
	if (ma->mirror_given && has_mirror)
	{
		char	   *relname;
		Oid			nspid;

		if (ma->names == NIL)
			return;
		nspid = RangeVarGetCreationNamespace(makeRangeVarFromNameList(ma->names));
		relname = strVal(llast(ma->names));
		if (strcmp(get_namespace_name(nspid), ma->cur_schema) != 0 ||
			strcmp(relname, ma->cur_table) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("table %s already has mirror table \"%s.%s\"", t->display,
							ma->cur_schema, ma->cur_table),
					 errhint("Rename it with ALTER TABLE … RENAME and pass the new name, or drop the mirror with mirror => false first.")));
		return;
	}
	if (!ma->mirror_given)
	{
		if (!has_mirror && !ma->changelog)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("changelog => false needs a mirror table"),
					 errhint("Pass mirror => true as well for a mirror-only table.")));
		return;
	}

	/* a new mirror */
	if (t->mode == MSSQL_SNAPSHOT_NEVER)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a mirror cannot be added to table %s, which has snapshot_mode 'never'",
						t->display),
				 errdetail("A mirror added later is filled by a new snapshot of the table."),
				 errhint("Remove the table and add it again with mirror => true.")));
	if (ma->names != NIL)
	{
		RangeVar   *rv = makeRangeVarFromNameList(ma->names);

		rv->relpersistence = RELPERSISTENCE_PERMANENT;
		ma->schema = get_namespace_name(RangeVarGetCreationNamespace(rv));
		ma->relname = rv->relname;
	}
	else
	{
		ma->schema = pstrdup(t->staging_schema);
		ma->relname = mirror_default_name(t->staging_table);
	}
	if (OidIsValid(get_relname_relid(ma->relname, get_namespace_oid(ma->schema, false))))
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_TABLE),
				 errmsg("relation \"%s.%s\" already exists", ma->schema, ma->relname),
				 errhint("mssql_cdc creates the mirror table itself; choose a free name with the mirror_table argument.")));
	{
		ColumnSelection sel;

		if (!column_selection_of_table(server_name, t->source_schema, t->source_table, &sel))
			elog(ERROR, "table %s is no longer captured", t->display);
		ma->src = column_selection_describe(server_name, run_as_oid, t->source_schema,
											t->source_table, t->capture_instance, &sel);
	}
	mirror_require_primary_key(ma->src);
	mssql_columns_set_postgis(ma->src->columns, ma->src->ncolumns, ma->spatial_postgis);
	ma->create = true;
}

void
mirror_alter_commit(MirrorAlter *ma, int32 table_id, Oid run_as_oid)
{
	if (!ma->mirror_given && !ma->changelog_given)
		return;
	if (ma->create)
	{
		MssqlCdcTable t;
		Oid			save_userid;
		int			save_sec_context;

		/* owned by run_as, as add_table creates it */
		GetUserIdAndSecContext(&save_userid, &save_sec_context);
		SetUserIdAndSecContext(run_as_oid, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
		mirror_create_table(ma->schema, ma->relname,
							psprintf("%s of server \"%s\"",
									 mssql_display_name(ma->src->schema, ma->src->table),
									 ma->src->server_name),
							ma->src->columns, ma->src->ncolumns);
		SetUserIdAndSecContext(save_userid, save_sec_context);
		/* empty until the copy is whole (mirror_rebuild.c) */
		memset(&t, 0, sizeof(t));
		t.mirror_schema = ma->schema;
		t.mirror_table = ma->relname;
		mirror_start_rebuild(&t, run_as_oid);
	}
	else if (ma->cur_table != NULL && ma->relname == NULL)
	{
		/* dropped: a rebuild's half-filled shadow goes, the mirror stays */
		mirror_drop_shadow(ma->cur_schema, ma->cur_table, run_as_oid);
	}
	mirror_set_catalog(table_id, ma->schema, ma->relname, ma->new_changelog);
}

void
mirror_alter_finish(MirrorAlter *ma, FunctionCallInfo fcinfo)
{
	/* the new mirror is filled by a new snapshot of the table */
	if (ma->create)
		DirectFunctionCall2(mssql_cdc_resnapshot, PG_GETARG_DATUM(0), PG_GETARG_DATUM(1));
}

void
mirror_extend_columns(int32 table_id, const MssqlSourceTable *src, Oid run_as_oid)
{
	MirrorAlter ma;

	memset(&ma, 0, sizeof(ma));
	read_current(&ma, table_id);
	if (ma.cur_table != NULL)
		(void) column_selection_extend_staging(src, ma.cur_schema, ma.cur_table, run_as_oid);
}
