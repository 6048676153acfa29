/*-------------------------------------------------------------------------
 *
 * staging_partitions.c
 *		Partitioned staging tables: the first partition, the rollover at a
 *		window boundary, and the bookkeeping in mssql_cdc.staging_partitions
 *		(see include/staging_partitions.h).  Retention, which drops whole
 *		old partitions, is in staging_retention.c.
 *
 * IDENTIFICATION
 *		src/staging_partitions.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "staging_partitions.h"
#include "staging_partitions_internal.h"

/* "_p" + digits; the staging name is cut so that it fits */
char *
staging_partition_name(const char *staging_table, int n)
{
	char		suffix[16];
	int			keep;

	snprintf(suffix, sizeof(suffix), "_p%d", n);
	keep = pg_mbcliplen(staging_table, strlen(staging_table),
						NAMEDATALEN - 1 - (int) strlen(suffix));
	return psprintf("%.*s%s", keep, staging_table, suffix);
}

void
staging_partitions_run_as(const char *sql, Oid run_as)
{
	Oid			save_userid;
	int			save_sec_context;

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(run_as, save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute(sql, false, 0) < 0)
		elog(ERROR, "could not run: %s", sql);
	SPI_finish();
	SetUserIdAndSecContext(save_userid, save_sec_context);
}

char *
staging_partitions_create_first(const char *staging_schema, const char *staging_table)
{
	char	   *name = staging_partition_name(staging_table, 1);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute(psprintf("CREATE TABLE %s PARTITION OF %s FOR VALUES FROM (MINVALUE) TO (MAXVALUE)",
							 quote_qualified_identifier(staging_schema, name),
							 quote_qualified_identifier(staging_schema, staging_table)),
					false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not create the first partition of staging table %s",
			 quote_qualified_identifier(staging_schema, staging_table));
	SPI_finish();
	return name;
}

void
staging_partitions_register_first(int32 table_id, const char *partition_name)
{
	Oid			types[2] = {INT4OID, NAMEOID};
	Datum		args[2];

	args[0] = Int32GetDatum(table_id);
	args[1] = DirectFunctionCall1(namein, CStringGetDatum(partition_name));
	if (SPI_execute_with_args("INSERT INTO mssql_cdc.staging_partitions"
							  " (table_id, partition_number, partition_name, from_lsn, opened_at)"
							  " VALUES ($1, 1, $2, NULL, pg_catalog.now())",
							  2, types, args, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not insert into mssql_cdc.staging_partitions");
}

/* One catalog statement as the extension owner; returns SPI_processed */
uint64
staging_partitions_catalog(const char *sql, int nargs, Oid *types, Datum *args,
						   int expected, List **rows, int ncols)
{
	CatalogOwnerScope scope;
	uint64		processed;
	MemoryContext caller_cxt = CurrentMemoryContext;

	catalog_become_owner(&scope);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(sql, nargs, types, args, NULL, false, 0) != expected)
		elog(ERROR, "catalog statement failed: %s", sql);
	processed = SPI_processed;
	if (rows != NULL)
	{
		uint64		i;

		*rows = NIL;
		for (i = 0; i < processed; i++)
		{
			MemoryContext spi_cxt = MemoryContextSwitchTo(caller_cxt);
			char	  **values = palloc0(sizeof(char *) * ncols);
			int			c;

			for (c = 0; c < ncols; c++)
			{
				char	   *v = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, c + 1);

				values[c] = v ? pstrdup(v) : NULL;
			}
			*rows = lappend(*rows, values);
			MemoryContextSwitchTo(spi_cxt);
		}
	}
	SPI_finish();
	catalog_restore_user(&scope);
	return processed;
}

bool
staging_partitions_has_rows(const char *schema, const char *relname, Oid run_as)
{
	Oid			save_userid;
	int			save_sec_context;
	bool		found;

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(run_as, save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute(psprintf("SELECT 1 FROM %s LIMIT 1", quote_qualified_identifier(schema, relname)),
					true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read partition %s", relname);
	found = SPI_processed > 0;
	SPI_finish();
	SetUserIdAndSecContext(save_userid, save_sec_context);
	return found;
}

bool
staging_partitions_lock(const char *schema, const char *relname)
{
	Oid			nspid = get_namespace_oid(schema, true);
	Oid			relid = OidIsValid(nspid) ? get_relname_relid(relname, nspid) : InvalidOid;

	/* a missing relation fails later with a clear error of the DDL itself */
	if (!OidIsValid(relid))
		return true;
	return ConditionalLockRelationOid(relid, AccessExclusiveLock);
}

/* Close the open partition when due (staging_partitions.h) */
bool
staging_partitions_rollover(const MssqlCdcTable *table, Oid run_as)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1];
	List	   *rows;
	char	  **open;
	char	  **state;
	const char *schema = table->staging_schema;
	const char *parent;
	const char *part;
	int			next_number;
	char	   *next_name;
	MssqlLsn	checkpoint;
	MssqlLsn	close_at;
	char		close_text[MSSQL_LSN_TEXT_SIZE];
	StringInfoData ddl;
	instr_time	start;
	instr_time	duration;

	args[0] = Int32GetDatum(table->table_id);
	staging_partitions_catalog("SELECT p.partition_name, p.from_lsn, p.partition_number"
							   " FROM mssql_cdc.staging_partitions p"
							   " JOIN mssql_cdc.tables t USING (table_id)"
							   " WHERE p.table_id = $1 AND p.to_lsn IS NULL"
							   " AND (p.opened_at OPERATOR(pg_catalog.+) t.partition_interval)"
							   "     OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp()",
							   1, types, args, SPI_OK_SELECT, &rows, 3);
	if (rows == NIL)
		return false;
	open = linitial(rows);

	/* the window boundary: every staged change is at or below the checkpoint */
	staging_partitions_catalog("SELECT checkpoint_lsn FROM mssql_cdc.table_state"
							   " WHERE table_id = $1 AND phase = 'streaming'"
							   " AND checkpoint_lsn IS NOT NULL FOR UPDATE",
							   1, types, args, SPI_OK_SELECT, &rows, 1);
	if (rows == NIL)
		return false;
	state = linitial(rows);
	if (!mssql_lsn_parse(state[0], &checkpoint) || !mssql_lsn_increment(&checkpoint, &close_at))
		return false;
	mssql_lsn_format(&close_at, close_text);
	if (open[1] != NULL && strcmp(open[1], close_text) >= 0)
		return false;			/* nothing above its lower bound yet */

	parent = table->staging_table;
	part = open[0];
	/* an empty partition stays open: every closed one holds changes */
	if (!staging_partitions_has_rows(schema, part, run_as))
		return false;
	if (!staging_partitions_lock(schema, parent) || !staging_partitions_lock(schema, part))
	{
		ereport(DEBUG1,
				(errmsg_internal("mssql_cdc: staging table %s is in use, its partition is closed later",
								 quote_qualified_identifier(schema, parent))));
		return false;
	}
	next_number = atoi(open[2]) + 1;
	next_name = staging_partition_name(parent, next_number);

	/*
	 * The CHECK proves the final bounds (its one scan), so ATTACH needs no
	 * scan of its own; between DETACH and ATTACH nobody can see the
	 * partition missing, this transaction holds both tables exclusively.
	 */
	initStringInfo(&ddl);
	appendStringInfo(&ddl, "ALTER TABLE %s ADD CONSTRAINT mssql_cdc_closing CHECK (",
					 quote_qualified_identifier(schema, part));
	if (open[1] != NULL)
		appendStringInfo(&ddl, "_cdc_lsn OPERATOR(mssql_cdc.>=) '%s'::mssql_cdc.lsn AND ", open[1]);
	appendStringInfo(&ddl, "_cdc_lsn OPERATOR(mssql_cdc.<) '%s'::mssql_cdc.lsn);", close_text);
	appendStringInfo(&ddl, " ALTER TABLE %s DETACH PARTITION %s;",
					 quote_qualified_identifier(schema, parent),
					 quote_qualified_identifier(schema, part));
	appendStringInfo(&ddl, " ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (%s) TO ('%s');",
					 quote_qualified_identifier(schema, parent),
					 quote_qualified_identifier(schema, part),
					 open[1] ? psprintf("'%s'", open[1]) : "MINVALUE", close_text);
	appendStringInfo(&ddl, " ALTER TABLE %s DROP CONSTRAINT mssql_cdc_closing;",
					 quote_qualified_identifier(schema, part));
	appendStringInfo(&ddl, " CREATE TABLE %s PARTITION OF %s FOR VALUES FROM ('%s') TO (MAXVALUE);",
					 quote_qualified_identifier(schema, next_name),
					 quote_qualified_identifier(schema, parent), close_text);
	INSTR_TIME_SET_CURRENT(start);
	staging_partitions_run_as(ddl.data, run_as);
	INSTR_TIME_SET_CURRENT(duration);
	INSTR_TIME_SUBTRACT(duration, start);

	{
		Oid			types3[4] = {INT4OID, NAMEOID, TEXTOID, INT4OID};
		Datum		args3[4];

		args3[0] = Int32GetDatum(table->table_id);
		args3[1] = DirectFunctionCall1(namein, CStringGetDatum(part));
		args3[2] = CStringGetTextDatum(close_text);
		args3[3] = Int32GetDatum(next_number);
		staging_partitions_catalog("UPDATE mssql_cdc.staging_partitions SET"
								   " to_lsn = $3::mssql_cdc.lsn, closed_at = pg_catalog.clock_timestamp(),"
								   " newest_commit_time = coalesce((SELECT last_commit_time"
								   "   FROM mssql_cdc.table_state s WHERE s.table_id = $1), pg_catalog.clock_timestamp())"
								   " WHERE table_id = $1 AND partition_name = $2",
								   3, types3, args3, SPI_OK_UPDATE, NULL, 0);
		args3[1] = DirectFunctionCall1(namein, CStringGetDatum(next_name));
		staging_partitions_catalog("INSERT INTO mssql_cdc.staging_partitions"
								   " (table_id, partition_number, partition_name, from_lsn, opened_at)"
								   " VALUES ($1, $4, $2, $3::mssql_cdc.lsn, pg_catalog.clock_timestamp())",
								   4, types3, args3, SPI_OK_INSERT, NULL, 0);
	}
	ereport(LOG,
			(errmsg("mssql_cdc: staging table %s: partition %s closed below LSN %s in %.1f ms, new partition %s",
					quote_qualified_identifier(schema, parent), part, close_text,
					INSTR_TIME_GET_MILLISEC(duration), next_name)));
	return true;
}

bool
staging_partitions_lowest_lsn(int32 table_id, MssqlLsn *lowest)
{
	Oid			types[1] = {INT4OID};
	Datum		args[1];
	bool		isnull;
	Datum		d;

	args[0] = Int32GetDatum(table_id);
	if (SPI_execute_with_args("SELECT from_lsn FROM mssql_cdc.staging_partitions"
							  " WHERE table_id = $1 ORDER BY partition_number LIMIT 1",
							  1, types, args, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read mssql_cdc.staging_partitions");
	if (SPI_processed == 0)
		return false;
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		return false;
	memcpy(lowest, DatumGetPointer(d), sizeof(MssqlLsn));
	return true;
}
