/*-------------------------------------------------------------------------
 *
 * staging.c
 *		Staging (changelog) tables: default names, DDL, creation and the
 *		shape check the worker runs before applying changes.
 *
 * The DDL is built as text with every identifier through quote_identifier
 * and run through SPI in the caller's transaction, so the table belongs to
 * the role that runs it and disappears with an aborted add_table.  The same
 * text is what mssql_cdc.staging_ddl() shows.
 *
 * IDENTIFICATION
 *		src/staging.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_index.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "parser/parse_type.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/syscache.h"

#include "staging.h"

/* "_" + 8 hex digits appended to a shortened name */
#define HASH_SUFFIX_LEN		9

typedef struct MetadataColumn
{
	const char *name;
	const char *type_sql;		/* as parseTypeString reads it */
	bool		not_null;
} MetadataColumn;

/*
 * After the source columns, in this order (include/staging.h).
 * _cdc_command_id came in 0.2 and is last so that a table created by 0.1
 * and moved by ALTER EXTENSION ... UPDATE has the same layout.
 */
static const MetadataColumn metadata_columns[] = {
	{"_cdc_lsn", "mssql_cdc.lsn", true},
	{"_cdc_seqval", "mssql_cdc.lsn", true},
	{"_cdc_op", "mssql_cdc.operation", true},
	{"_cdc_commit_time", "timestamp with time zone", false},
	{"_cdc_update_mask", "bytea", false},
	{"_cdc_command_id", "integer", true},
};

/*
 * The primary key: source commit order and, inside a transaction, execution
 * order (SQL Server's __$command_id); the replica identity.
 */
static const char *const primary_key_columns[] = {"_cdc_lsn", "_cdc_command_id", "_cdc_seqval", "_cdc_op"};
#define PRIMARY_KEY_TEXT "(_cdc_lsn, _cdc_command_id, _cdc_seqval, _cdc_op)"

/*
 * 32-bit FNV-1a: tiny, and the same on every platform and release (unlike
 * hash_bytes, whose result is not promised to stay stable), which a name
 * that users write into their queries must be.
 */
static uint32
fnv1a(uint32 hash, const char *data, size_t len)
{
	size_t		i;

	for (i = 0; i < len; i++)
	{
		hash ^= (unsigned char) data[i];
		hash *= 16777619u;
	}
	return hash;
}

#define FNV1A_INIT	2166136261u

/*
 * Resolve the unqualified type names of the DDL (text, bytea, uuid, xml)
 * in pg_catalog only, whatever the caller's search_path: a same-named type
 * in another schema must not end up in a staging table.  Undone by
 * AtEOXact_GUC(true, nestlevel), or by the abort on error.
 */
static int
use_catalog_search_path(void)
{
	int			nestlevel = NewGUCNestLevel();

	(void) set_config_option("search_path", "pg_catalog", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return nestlevel;
}

/* Cut name to NAMEDATALEN - 1 bytes at a character boundary, with the hash */
static char *
shorten_with_hash(const char *name, uint32 hash)
{
	int			keep = pg_mbcliplen(name, strlen(name), NAMEDATALEN - 1 - HASH_SUFFIX_LEN);

	return psprintf("%.*s_%08x", keep, name, hash);
}

char *
staging_default_name(const char *server_name, const char *source_schema,
					 const char *source_table)
{
	char	   *raw = psprintf("%s_%s_%s", server_name, source_schema, source_table);
	StringInfoData buf;
	const char *s = raw;
	uint32		hash;

	initStringInfo(&buf);
	while (*s)
	{
		int			len = pg_mblen(s);
		unsigned char c = (unsigned char) *s;

		if (len == 1 && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
			appendStringInfoChar(&buf, c);
		else if (len == 1 && c >= 'A' && c <= 'Z')
			appendStringInfoChar(&buf, pg_ascii_tolower(c));
		else
			appendStringInfoChar(&buf, '_');
		s += len;
	}
	if (buf.len <= NAMEDATALEN - 1)
		return buf.data;

	/* NUL separators: ("a_b", "c") and ("a", "b_c") hash differently */
	hash = fnv1a(FNV1A_INIT, server_name, strlen(server_name) + 1);
	hash = fnv1a(hash, source_schema, strlen(source_schema) + 1);
	hash = fnv1a(hash, source_table, strlen(source_table));
	return shorten_with_hash(buf.data, hash);
}

char *
staging_column_name(const char *source_name)
{
	size_t		len = strlen(source_name);

	if (len <= NAMEDATALEN - 1)
		return pstrdup(source_name);
	return shorten_with_hash(source_name, fnv1a(FNV1A_INIT, source_name, len));
}

static const char *
pg_column_name(const MssqlColumn *col)
{
	return col->pg_name ? col->pg_name : staging_column_name(col->name);
}

const char *
staging_column_of(const MssqlColumn *col)
{
	return pg_column_name(col);
}

void
staging_execute_ddl(const char *ddl, const char *what)
{
	int			nestlevel = use_catalog_search_path();

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute(ddl, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not %s", what);
	SPI_finish();
	AtEOXact_GUC(true, nestlevel);
}

/* Reserved and duplicate names, before any DDL is attempted */
static void
check_column_names(const MssqlColumn *cols, int ncols)
{
	int			i,
				j,
				staged = 0;

	for (i = 0; i < ncols; i++)
	{
		const char *name;

		if (!source_column_is_staged(&cols[i]))
			continue;
		staged++;
		name = pg_column_name(&cols[i]);
		if (strncmp(name, STAGING_METADATA_PREFIX, strlen(STAGING_METADATA_PREFIX)) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_RESERVED_NAME),
					 errmsg("source column \"%s\" collides with the staging table's metadata columns",
							cols[i].name),
					 errdetail("Staging column names starting with \"%s\" are reserved for mssql_cdc.",
							   STAGING_METADATA_PREFIX),
					 errhint("Rename the column on SQL Server, or leave it out of the capture instance "
							 "(@captured_column_list of sys.sp_cdc_enable_table).")));
		for (j = 0; j < i; j++)
			if (source_column_is_staged(&cols[j]) &&
				strcmp(name, pg_column_name(&cols[j])) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("source columns \"%s\" and \"%s\" get the same staging column name \"%s\"",
								cols[j].name, cols[i].name, name)));
	}
	if (staged == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the capture instance has no column that can be staged"),
				 errdetail("Computed columns are never staged: change data capture records them as NULL.")));
}

void
staging_append_column_defs(StringInfo ddl, const MssqlColumn *cols, int ncols)
{
	int			i;

	for (i = 0; i < ncols; i++)
	{
		char	   *pg_type;
		char	   *select_expr;

		if (!source_column_is_staged(&cols[i]))
			continue;
		mssql_type_to_pg(&cols[i], &pg_type, &select_expr);
		/*
		 * Only key columns keep NOT NULL: CDC sends NULL for unchanged and
		 * text/ntext/image LOBs, whatever the source's nullability.
		 */
		appendStringInfo(ddl, "    %s %s%s,\n", quote_identifier(pg_column_name(&cols[i])),
						 pg_type, cols[i].is_key ? " NOT NULL" : "");
	}
}

char *
staging_build_ddl(const char *staging_schema, const char *staging_table,
				  const char *source_label, const MssqlColumn *cols, int ncols,
				  const char *partition_by)
{
	const char *qualified = quote_qualified_identifier(staging_schema, staging_table);
	StringInfoData ddl;
	int			i;

	check_column_names(cols, ncols);

	initStringInfo(&ddl);
	appendStringInfo(&ddl, "CREATE TABLE %s (\n", qualified);
	staging_append_column_defs(&ddl, cols, ncols);
	for (i = 0; i < lengthof(metadata_columns); i++)
		appendStringInfo(&ddl, "    %s %s%s,\n", quote_identifier(metadata_columns[i].name),
						 metadata_columns[i].type_sql,
						 metadata_columns[i].not_null ? " NOT NULL" : "");
	appendStringInfoString(&ddl, "    PRIMARY KEY (");
	for (i = 0; i < lengthof(primary_key_columns); i++)
		appendStringInfo(&ddl, "%s%s", i > 0 ? ", " : "", quote_identifier(primary_key_columns[i]));
	appendStringInfo(&ddl, ")\n)%s%s;\n", partition_by ? " PARTITION BY " : "",
					 partition_by ? partition_by : "");
	appendStringInfo(&ddl, "COMMENT ON TABLE %s IS %s;\n", qualified,
					 quote_literal_cstr(psprintf("mssql_cdc changelog of SQL Server table %s",
												 source_label)));
	return ddl.data;
}

void
staging_create_table(const char *staging_schema, const char *staging_table,
					 const char *source_label, const MssqlColumn *cols, int ncols,
					 const char *partition_by)
{
	Oid			nspid = get_namespace_oid(staging_schema, false);
	char	   *ddl;
	int			nestlevel;

	if (OidIsValid(get_relname_relid(staging_table, nspid)))
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_TABLE),
				 errmsg("relation \"%s.%s\" already exists", staging_schema, staging_table),
				 errhint("mssql_cdc creates the staging table itself; choose a free name.")));

	ddl = staging_build_ddl(staging_schema, staging_table, source_label, cols, ncols,
							partition_by);

	nestlevel = use_catalog_search_path();
	SPI_connect();
	if (SPI_execute(ddl, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not create staging table \"%s.%s\"", staging_schema, staging_table);
	SPI_finish();
	AtEOXact_GUC(true, nestlevel);
}

/* ---- shape check ---------------------------------------------------------- */

static void
check_column(Relation rel, const char *where, const char *name, const char *type_sql)
{
	AttrNumber	attnum = get_attnum(RelationGetRelid(rel), name);
	Form_pg_attribute attr;
	Oid			typid;
	int32		typmod;

	if (attnum == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of staging table %s is missing", name, where),
				 errhint("Staging tables must not be altered; add the column back, or remove the table with "
						 "mssql_cdc.remove_table() and add it again.")));
	attr = TupleDescAttr(RelationGetDescr(rel), attnum - 1);
	parseTypeString(type_sql, &typid, &typmod, false);
	if (attr->atttypid != typid || attr->atttypmod != typmod)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("column \"%s\" of staging table %s has type %s, but mssql_cdc expects %s",
						name, where, format_type_with_typemod(attr->atttypid, attr->atttypmod),
						format_type_with_typemod(typid, typmod)),
				 errhint("Staging tables must not be altered; change the type back, or remove the table with "
						 "mssql_cdc.remove_table() and add it again.")));
}

static bool
is_expected_column(const char *name, const MssqlColumn *cols, int ncols)
{
	int			i;

	for (i = 0; i < lengthof(metadata_columns); i++)
		if (strcmp(name, metadata_columns[i].name) == 0)
			return true;
	for (i = 0; i < ncols; i++)
		if (source_column_is_staged(&cols[i]) && strcmp(name, pg_column_name(&cols[i])) == 0)
			return true;
	return false;
}

static void
check_primary_key(Relation rel, const char *where)
{
	Oid			pkoid = RelationGetPrimaryKeyIndex(rel);
	HeapTuple	tuple;
	Form_pg_index index;
	bool		ok;
	int			i;

	ok = OidIsValid(pkoid);
	if (ok)
	{
		tuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(pkoid));
		if (!HeapTupleIsValid(tuple))
			elog(ERROR, "cache lookup failed for index %u", pkoid);
		index = (Form_pg_index) GETSTRUCT(tuple);
		ok = index->indnkeyatts == lengthof(primary_key_columns);
		for (i = 0; ok && i < lengthof(primary_key_columns); i++)
			ok = index->indkey.values[i] == get_attnum(RelationGetRelid(rel), primary_key_columns[i]);
		ReleaseSysCache(tuple);
	}
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("staging table %s lacks its primary key " PRIMARY_KEY_TEXT, where),
				 errdetail("The key orders rows in source commit order and execution order, and makes re-applied changes detectable."),
				 errhint("ALTER TABLE %s ADD PRIMARY KEY " PRIMARY_KEY_TEXT ";", where)));
}

Relation
staging_open(const char *staging_schema, const char *staging_table, LOCKMODE lockmode)
{
	Oid			nspid = get_namespace_oid(staging_schema, true);
	Oid			relid = OidIsValid(nspid) ? get_relname_relid(staging_table, nspid) : InvalidOid;

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("staging table %s does not exist",
						quote_qualified_identifier(staging_schema, staging_table)),
				 errhint("It was dropped or renamed.  Remove the table with mssql_cdc.remove_table() and add it again.")));
	return table_open(relid, lockmode);
}

void
staging_check_table(const char *staging_schema, const char *staging_table,
					const MssqlColumn *cols, int ncols)
{
	const char *where = quote_qualified_identifier(staging_schema, staging_table);
	Relation	rel;
	TupleDesc	desc;
	int			nestlevel;
	int			i;

	rel = staging_open(staging_schema, staging_table, AccessShareLock);
	if (rel->rd_rel->relkind != RELKIND_RELATION && rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("staging table %s is not a table", where)));

	nestlevel = use_catalog_search_path();
	for (i = 0; i < ncols; i++)
	{
		char	   *pg_type;
		char	   *select_expr;

		if (!source_column_is_staged(&cols[i]))
			continue;
		mssql_type_to_pg(&cols[i], &pg_type, &select_expr);
		check_column(rel, where, pg_column_name(&cols[i]), pg_type);
	}
	for (i = 0; i < lengthof(metadata_columns); i++)
		check_column(rel, where, metadata_columns[i].name, metadata_columns[i].type_sql);
	AtEOXact_GUC(true, nestlevel);

	/* the worker's INSERTs name their columns: others must be omittable */
	desc = RelationGetDescr(rel);
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);

		if (attr->attisdropped || is_expected_column(NameStr(attr->attname), cols, ncols))
			continue;
		if (attr->attnotnull && !attr->atthasdef)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("column \"%s\" of staging table %s is NOT NULL without a default",
							NameStr(attr->attname), where),
					 errdetail("mssql_cdc does not fill columns that it did not create."),
					 errhint("Give the column a default or drop its NOT NULL constraint.")));
	}

	check_primary_key(rel, where);
	table_close(rel, AccessShareLock);
}

/* ---- schema evolution: a new capture instance ------------------------------ */

void
staging_compare(const char *staging_schema, const char *staging_table,
				const MssqlColumn *cols, int ncols, StagingDiff *diff)
{
	Relation	rel;
	Oid			relid;
	TupleDesc	desc;
	int			nestlevel;
	int			i;

	memset(diff, 0, sizeof(*diff));
	rel = staging_open(staging_schema, staging_table, AccessShareLock);
	relid = RelationGetRelid(rel);
	desc = RelationGetDescr(rel);

	nestlevel = use_catalog_search_path();
	for (i = 0; i < ncols; i++)
	{
		const char *name;
		AttrNumber	attnum;
		char	   *pg_type;
		char	   *select_expr;
		Oid			typid;
		int32		typmod;
		Form_pg_attribute attr;

		if (!source_column_is_staged(&cols[i]))
			continue;
		name = pg_column_name(&cols[i]);
		mssql_type_to_pg(&cols[i], &pg_type, &select_expr);
		attnum = get_attnum(relid, name);
		if (attnum == InvalidAttrNumber)
		{
			if (strncmp(name, STAGING_METADATA_PREFIX, strlen(STAGING_METADATA_PREFIX)) == 0 &&
				diff->reserved == NULL)
				diff->reserved = &cols[i];
			diff->missing = lappend(diff->missing, (void *) &cols[i]);
			continue;
		}
		attr = TupleDescAttr(desc, attnum - 1);
		parseTypeString(pg_type, &typid, &typmod, false);
		if ((attr->atttypid != typid || attr->atttypmod != typmod) && diff->conflict == NULL)
		{
			diff->conflict = &cols[i];
			diff->conflict_staging_type = format_type_with_typemod(attr->atttypid, attr->atttypmod);
			diff->conflict_new_type = format_type_with_typemod(typid, typmod);
		}
	}
	AtEOXact_GUC(true, nestlevel);

	/* staged before, not any more: stays, NULL from now on */
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);

		if (attr->attisdropped || is_expected_column(NameStr(attr->attname), cols, ncols))
			continue;
		diff->not_captured = lappend(diff->not_captured, pstrdup(NameStr(attr->attname)));
	}
	table_close(rel, AccessShareLock);
}

char *
staging_add_columns_ddl(const char *staging_schema, const char *staging_table, List *columns)
{
	StringInfoData ddl;
	ListCell   *lc;

	initStringInfo(&ddl);
	appendStringInfo(&ddl, "ALTER TABLE %s",
					 quote_qualified_identifier(staging_schema, staging_table));
	foreach(lc, columns)
	{
		const MssqlColumn *col = lfirst(lc);
		char	   *pg_type;
		char	   *select_expr;

		mssql_type_to_pg(col, &pg_type, &select_expr);
		/* nullable, unlike key columns at creation: older rows have no value */
		appendStringInfo(&ddl, "%s ADD COLUMN %s %s", foreach_current_index(lc) > 0 ? "," : "",
						 quote_identifier(pg_column_name(col)), pg_type);
	}
	return ddl.data;
}

void
staging_add_columns(const char *staging_schema, const char *staging_table, List *columns,
					Oid run_as)
{
	char	   *ddl;
	Oid			save_userid;
	int			save_sec_context;
	int			nestlevel;

	if (columns == NIL)
		return;
	ddl = staging_add_columns_ddl(staging_schema, staging_table, columns);

	/* as the role that owns the staging table (add_table created it as run_as) */
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(run_as, save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	nestlevel = use_catalog_search_path();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute(ddl, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not add columns to staging table \"%s.%s\"", staging_schema, staging_table);
	SPI_finish();
	AtEOXact_GUC(true, nestlevel);
	SetUserIdAndSecContext(save_userid, save_sec_context);
}
