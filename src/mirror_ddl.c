/*-------------------------------------------------------------------------
 *
 * mirror_ddl.c
 *		Mirror tables: their default name, the refusal of sources without a
 *		primary key, their DDL and their catalog entry (mirror.h,
 *		doc/mirror.md).  add_table's refusal of a mirror without a copy to
 *		start from is an argument check (api_check_mirror_start).
 *
 * IDENTIFICATION
 *		src/mirror_ddl.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/varlena.h"

#include "api_common.h"
#include "mirror.h"
#include "source_name.h"
#include "staging.h"
#include "type_map.h"

void
mirror_choice_from_args(FunctionCallInfo fcinfo, int mirror_arg, int name_arg,
						int changelog_arg, MirrorChoice *choice)
{
	api_require_argument(fcinfo, mirror_arg, "mirror");
	api_require_argument(fcinfo, changelog_arg, "changelog");
	choice->mirror = PG_GETARG_BOOL(mirror_arg);
	choice->changelog = PG_GETARG_BOOL(changelog_arg);
	choice->names = NIL;
	if (!PG_ARGISNULL(name_arg))
	{
		choice->names = textToQualifiedNameList(PG_GETARG_TEXT_PP(name_arg));
		choice->mirror = true;
	}
	if (!choice->mirror && !choice->changelog)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("changelog => false needs a mirror table"),
				 errdetail("Without a changelog and without a mirror nothing of the table would be kept."),
				 errhint("Pass mirror => true for a mirror-only table, or keep changelog => true.")));
}

char *
mirror_default_name(const char *staging_table)
{
	/* the column-name rule is the same cut: NAMEDATALEN, hash of the full name */
	return staging_column_name(psprintf("%s%s", staging_table, MIRROR_DEFAULT_SUFFIX));
}

void
mirror_require_primary_key(const MssqlSourceTable *src)
{
	if (src->nkey > 0)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("table %s of server \"%s\" has no primary key, so it cannot have a mirror table",
					mssql_display_name(src->schema, src->table), src->server_name),
			 errdetail("A mirror applies every update and delete to the one row with the same primary key; without a key a change cannot be matched to exactly one row."),
			 errhint("Add a primary key to the source table (and call mssql_cdc.resnapshot() if the capture instance must change), or capture it with a changelog only: mirror => false.")));
}

char *
mirror_build_ddl(const char *schema, const char *table, const char *source_label,
				 const MssqlColumn *cols, int ncols)
{
	const char *qualified = quote_qualified_identifier(schema, table);
	StringInfoData ddl;
	int			i;
	int			k;
	int			nkey = 0;

	initStringInfo(&ddl);
	appendStringInfo(&ddl, "CREATE TABLE %s (\n", qualified);
	/* as in the staging table: only key columns are NOT NULL */
	staging_append_column_defs(&ddl, cols, ncols);
	for (i = 0; i < ncols; i++)
		if (source_column_is_staged(&cols[i]) && cols[i].is_key)
			nkey++;
	/* the source's key, in key order: also the replica identity (default) */
	appendStringInfoString(&ddl, "    PRIMARY KEY (");
	for (k = 1; k <= nkey; k++)
		for (i = 0; i < ncols; i++)
			if (cols[i].is_key && cols[i].key_ordinal == k)
				appendStringInfo(&ddl, "%s%s", k > 1 ? ", " : "",
								 quote_identifier(staging_column_of(&cols[i])));
	appendStringInfoString(&ddl, ")\n);\n");
	appendStringInfo(&ddl, "COMMENT ON TABLE %s IS %s;\n", qualified,
					 quote_literal_cstr(psprintf("mssql_cdc mirror of SQL Server table %s",
												 source_label)));
	return ddl.data;
}

void
mirror_create_table(const char *schema, const char *table, const char *source_label,
					const MssqlColumn *cols, int ncols)
{
	Oid			nspid = get_namespace_oid(schema, false);

	if (OidIsValid(get_relname_relid(table, nspid)))
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_TABLE),
				 errmsg("relation \"%s.%s\" already exists", schema, table),
				 errhint("mssql_cdc creates the mirror table itself; choose a free name with the mirror_table argument.")));
	staging_execute_ddl(mirror_build_ddl(schema, table, source_label, cols, ncols),
						psprintf("create mirror table \"%s.%s\"", schema, table));
}

void
mirror_set_catalog(int32 table_id, const char *schema, const char *table, bool changelog)
{
	Oid			types[4] = {INT4OID, NAMEOID, NAMEOID, BOOLOID};
	Datum		args[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};
	CatalogOwnerScope scope;

	args[0] = Int32GetDatum(table_id);
	args[1] = schema ? api_name_datum(schema) : (Datum) 0;
	args[2] = table ? api_name_datum(table) : (Datum) 0;
	if (schema == NULL)
		nulls[1] = nulls[2] = 'n';
	args[3] = BoolGetDatum(changelog);
	catalog_become_owner(&scope);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("UPDATE mssql_cdc.tables SET mirror_schema = $2, mirror_table = $3,"
							  " changelog = $4 WHERE table_id OPERATOR(pg_catalog.=) $1",
							  4, types, args, nulls, false, 0) != SPI_OK_UPDATE ||
		SPI_processed != 1)
		elog(ERROR, "could not update mssql_cdc.tables");
	SPI_finish();
	catalog_restore_user(&scope);
}
