/*-------------------------------------------------------------------------
 *
 * staging_upgrade.c
 *		Moving existing staging tables to the current layout, for the
 *		extension's upgrade scripts.
 *
 * Staging tables belong to their users, not to the extension, so an
 * ALTER EXTENSION ... UPDATE script cannot name them: it calls
 * mssql_cdc_upgrade_staging_0_2() (created, called and dropped by
 * mssql_cdc--0.1--0.2.sql), which finds them through mssql_cdc.tables.
 * Written in C, like the rest, so that the upgrade does not need PL/pgSQL.
 *
 * 0.1 -> 0.2: _cdc_command_id integer NOT NULL, 0 for the rows already
 * staged (ADD COLUMN with a default, which PostgreSQL records without
 * rewriting the table; the default is dropped afterwards so the column is
 * the one a 0.2 add_table creates), and the primary key (_cdc_lsn,
 * _cdc_command_id, _cdc_seqval, _cdc_op) under the old key's name.  A
 * staging table that was dropped is skipped (the worker reports it); one
 * already in the new layout is left alone, so the call is idempotent.
 *
 * IDENTIFICATION
 *		src/staging_upgrade.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"


/* the 0.2 key (staging.c) */
#define KEY_0_2		"_cdc_lsn, _cdc_command_id, _cdc_seqval, _cdc_op"

static void
run_ddl(const char *sql)
{
	if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "staging table upgrade failed: %s", sql);
}

/* Name of the relation's primary key constraint, or NULL */
static char *
primary_key_name(Oid relid, bool *is_0_2)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	char	   *name = NULL;

	*is_0_2 = false;
	if (SPI_execute_with_args("SELECT c.conname::text,"
							  " pg_catalog.array_to_string(ARRAY(SELECT a.attname FROM"
							  "   pg_catalog.unnest(c.conkey) WITH ORDINALITY AS k(attnum, ord)"
							  "   JOIN pg_catalog.pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum"
							  "   ORDER BY k.ord), ', ') = '" KEY_0_2 "'"
							  " FROM pg_catalog.pg_constraint c"
							  " WHERE c.conrelid = $1 AND c.contype = 'p'",
							  1, types, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the primary key of relation %u", relid);
	if (SPI_processed == 1)
	{
		bool		isnull;

		name = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		*is_0_2 = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2,
											 &isnull));
	}
	return name;
}

static void
upgrade_one(Oid relid)
{
	char	   *qualified = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
													   get_rel_name(relid));
	char	   *pk;
	bool		pk_is_0_2;

	if (get_attnum(relid, "_cdc_command_id") == InvalidAttrNumber)
	{
		run_ddl(psprintf("ALTER TABLE %s ADD COLUMN _cdc_command_id pg_catalog.int4 NOT NULL DEFAULT 0",
						 qualified));
		run_ddl(psprintf("ALTER TABLE %s ALTER COLUMN _cdc_command_id DROP DEFAULT", qualified));
	}
	pk = primary_key_name(relid, &pk_is_0_2);
	if (pk == NULL)
		run_ddl(psprintf("ALTER TABLE %s ADD PRIMARY KEY (" KEY_0_2 ")", qualified));
	else if (!pk_is_0_2)
		run_ddl(psprintf("ALTER TABLE %s DROP CONSTRAINT %s, ADD CONSTRAINT %s PRIMARY KEY (" KEY_0_2 ")",
						 qualified, quote_identifier(pk), quote_identifier(pk)));
}

PG_FUNCTION_INFO_V1(mssql_cdc_upgrade_staging_0_2);

/* mssql_cdc.upgrade_staging_0_2() -> number of staging tables looked at */
Datum
mssql_cdc_upgrade_staging_0_2(PG_FUNCTION_ARGS)
{
	Oid		   *relids;
	uint64		n;
	uint64		i;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute("SELECT c.oid FROM mssql_cdc.tables t"
					" JOIN pg_catalog.pg_namespace s ON s.nspname = t.staging_schema"
					" JOIN pg_catalog.pg_class c ON c.relnamespace = s.oid AND c.relname = t.staging_table"
					" ORDER BY t.table_id", true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read mssql_cdc.tables");
	n = SPI_processed;
	relids = palloc(sizeof(Oid) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		bool		isnull;

		relids[i] = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1,
												   &isnull));
	}
	for (i = 0; i < n; i++)
		upgrade_one(relids[i]);
	SPI_finish();
	PG_RETURN_INT64((int64) n);
}
