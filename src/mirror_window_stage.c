/*-------------------------------------------------------------------------
 *
 * mirror_window_stage.c
 *		Where a mirror-only table's window is staged: a temporary table of
 *		the worker, not the user's staging table (mirror.h).
 *
 * The mirror is applied set-based from the window's rows (mirror_apply.c),
 * so they must be in a table first.  The user's staging table would take
 * them and have them deleted again in the same transaction: dead tuples,
 * WAL, and for a subscriber of a publication of the staging table an
 * insert and a delete of every change.  So the window goes into
 * pg_temp.mssql_cdc_window_<table_id> instead: the staging table's
 * columns (same names, types and collations, so the rows are written
 * exactly as they would be there) and its key (_cdc_lsn, _cdc_command_id,
 * _cdc_seqval, _cdc_op, which refuses a change row sent twice as the
 * staging key does), ON COMMIT DELETE ROWS.  A temporary table writes no
 * WAL and is no one else's; its rows of an aborted window go with the
 * abort, those of a committed one with the commit.
 *
 * It is created by the worker's own user (a security-restricted operation
 * may not create temporary tables) and granted to run_as, who writes and
 * reads it like the staging table.  It is made once per worker process and
 * table and made again when the staging table's columns change (a
 * capture-instance switch, a new column selection).
 *
 * IDENTIFICATION
 *		src/mirror_window_stage.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/namespace.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"

#include "mirror.h"

/* one table's temporary table in this process */
typedef struct WindowStage
{
	int32		table_id;
	Oid			relid;
	char	   *ddl;			/* the CREATE it was made with */
} WindowStage;

static List *stages = NIL;

char *
mirror_window_stage_name(int32 table_id)
{
	return psprintf("mssql_cdc_window_%d", table_id);
}

/* CREATE TEMP TABLE with the staging table's columns and key */
static char *
stage_ddl(Relation staging, const char *name)
{
	TupleDesc	desc = RelationGetDescr(staging);
	StringInfoData sql;
	int			i;

	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TEMPORARY TABLE %s (", quote_identifier(name));
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		/* the writer supplies no generated column */
		if (att->attisdropped || att->attgenerated)
			continue;
		appendStringInfo(&sql, "%s %s", quote_identifier(NameStr(att->attname)),
						 format_type_with_typemod(att->atttypid, att->atttypmod));
		if (OidIsValid(att->attcollation) &&
			att->attcollation != get_typcollation(att->atttypid))
			appendStringInfo(&sql, " COLLATE %s", generate_collation_name(att->attcollation));
		appendStringInfoString(&sql, ", ");
	}
	appendStringInfoString(&sql, "PRIMARY KEY (_cdc_lsn, _cdc_command_id, _cdc_seqval, _cdc_op))"
						   " ON COMMIT DELETE ROWS");
	return sql.data;
}

static WindowStage *
find_stage(int32 table_id)
{
	ListCell   *lc;

	foreach(lc, stages)
	{
		WindowStage *s = lfirst(lc);

		if (s->table_id == table_id)
			return s;
	}
	return NULL;
}

/* (re)create it in the current transaction; returns its OID */
static Oid
create_stage(const char *name, const char *ddl, Oid run_as)
{
	char	   *qname = psprintf("pg_temp.%s", quote_identifier(name));
	Oid			relid;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute(psprintf("DROP TABLE IF EXISTS %s; %s; GRANT SELECT, INSERT ON %s TO %s",
							 qname, ddl, qname,
							 quote_identifier(GetUserNameFromId(run_as, false))),
					false, 0) < 0)
		elog(ERROR, "could not create the temporary table \"%s\" for a mirror-only window",
			 name);
	SPI_finish();
	relid = get_relname_relid(name, LookupExplicitNamespace("pg_temp", false));
	if (!OidIsValid(relid))
		elog(ERROR, "temporary table \"%s\" vanished", name);
	return relid;
}

Relation
mirror_window_stage_open(const MssqlCdcTable *table, Relation staging, Oid run_as)
{
	char	   *name = mirror_window_stage_name(table->table_id);
	char	   *ddl = stage_ddl(staging, name);
	WindowStage *stage = find_stage(table->table_id);
	MemoryContext oldcxt;

	/*
	 * Made before with these columns, and still there (its creation may
	 * have been rolled back with an aborted window)?
	 */
	if (stage != NULL && strcmp(stage->ddl, ddl) == 0 &&
		SearchSysCacheExists1(RELOID, ObjectIdGetDatum(stage->relid)))
	{
		char	   *relname = get_rel_name(stage->relid);

		if (relname != NULL && strcmp(relname, name) == 0 &&
			isTempNamespace(get_rel_namespace(stage->relid)))
			return table_open(stage->relid, RowExclusiveLock);
	}

	oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	if (stage == NULL)
	{
		stage = palloc0(sizeof(WindowStage));
		stage->table_id = table->table_id;
		stages = lappend(stages, stage);
	}
	else
		pfree(stage->ddl);
	stage->ddl = pstrdup(ddl);
	MemoryContextSwitchTo(oldcxt);
	stage->relid = create_stage(name, ddl, run_as);
	return table_open(stage->relid, RowExclusiveLock);
}
