/*-------------------------------------------------------------------------
 *
 * catalog.c
 *		Typed reads of the mssql_cdc catalog tables for the launcher and the
 *		workers, and the bounded error log.
 *
 * SPI with parameterised, fully schema-qualified statements: the catalog is
 * tiny and read once per reconcile or per batch, so planning cost does not
 * matter, while a search_path-independent query text does.
 *
 * IDENTIFICATION
 *		src/catalog.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "catalog.h"
#include "mssql_cdc.h"

Oid
catalog_extension_owner(void)
{
	Oid			extoid = get_extension_oid(MSSQL_CDC_EXTENSION_NAME, true);
	Oid			owner = InvalidOid;
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;

	if (!OidIsValid(extoid))
		return InvalidOid;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(extoid));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
		owner = ((Form_pg_extension) GETSTRUCT(tuple))->extowner;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return owner;
}

void
catalog_become_owner(CatalogOwnerScope *scope)
{
	Oid			owner = catalog_extension_owner();

	if (!OidIsValid(owner))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"%s\" is not installed in this database",
						MSSQL_CDC_EXTENSION_NAME)));
	GetUserIdAndSecContext(&scope->saved_userid, &scope->saved_sec_context);
	SetUserIdAndSecContext(owner,
						   scope->saved_sec_context | SECURITY_LOCAL_USERID_CHANGE);
}

void
catalog_restore_user(const CatalogOwnerScope *scope)
{
	SetUserIdAndSecContext(scope->saved_userid, scope->saved_sec_context);
}

/* SPI session as the extension owner, for the read and log functions below */
static void
catalog_spi_begin(CatalogOwnerScope *scope)
{
	catalog_become_owner(scope);
	SPI_connect();
}

static void
catalog_spi_end(CatalogOwnerScope *scope)
{
	SPI_finish();
	catalog_restore_user(scope);
}

const char *
catalog_snapshot_mode_name(MssqlSnapshotMode mode)
{
	return mode == MSSQL_SNAPSHOT_NEVER ? "never" : "initial";
}

bool
catalog_snapshot_mode_from_name(const char *name, MssqlSnapshotMode *mode)
{
	if (strcmp(name, "initial") == 0)
		*mode = MSSQL_SNAPSHOT_INITIAL;
	else if (strcmp(name, "never") == 0)
		*mode = MSSQL_SNAPSHOT_NEVER;
	else
		return false;
	return true;
}

const char *
catalog_phase_name(MssqlTablePhase phase)
{
	switch (phase)
	{
		case MSSQL_PHASE_PENDING:
			return "pending";
		case MSSQL_PHASE_SNAPSHOTTING:
			return "snapshotting";
		case MSSQL_PHASE_STREAMING:
			return "streaming";
		case MSSQL_PHASE_ERROR:
			return "error";
	}
	return "pending";			/* keep compiler quiet */
}

const char *
catalog_overrun_policy_name(MssqlOverrunPolicy policy)
{
	return policy == MSSQL_OVERRUN_RESNAPSHOT ? "resnapshot" : "error";
}

bool
catalog_overrun_policy_from_name(const char *name, MssqlOverrunPolicy *policy)
{
	if (name == NULL)
		return false;
	if (strcmp(name, "error") == 0)
		*policy = MSSQL_OVERRUN_ERROR;
	else if (strcmp(name, "resnapshot") == 0)
		*policy = MSSQL_OVERRUN_RESNAPSHOT;
	else
		return false;
	return true;
}

static MssqlTablePhase
phase_from_name(const char *name)
{
	if (strcmp(name, "snapshotting") == 0)
		return MSSQL_PHASE_SNAPSHOTTING;
	if (strcmp(name, "streaming") == 0)
		return MSSQL_PHASE_STREAMING;
	if (strcmp(name, "error") == 0)
		return MSSQL_PHASE_ERROR;
	return MSSQL_PHASE_PENDING;
}

/* A text column of the current SPI row, copied into cxt; NULL stays NULL. */
static char *
spi_text(HeapTuple tuple, TupleDesc desc, int attno, MemoryContext cxt)
{
	char	   *value = SPI_getvalue(tuple, desc, attno);
	char	   *copy;

	if (value == NULL)
		return NULL;
	copy = MemoryContextStrdup(cxt, value);
	pfree(value);
	return copy;
}

List *
catalog_get_server_names(void)
{
	MemoryContext caller_cxt = CurrentMemoryContext;
	List	   *result = NIL;
	uint64		i;
	CatalogOwnerScope scope;

	catalog_spi_begin(&scope);
	if (SPI_execute("SELECT server_name FROM mssql_cdc.servers ORDER BY server_name",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read mssql_cdc.servers");
	for (i = 0; i < SPI_processed; i++)
	{
		char	   *name = spi_text(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1,
									caller_cxt);
		MemoryContext old = MemoryContextSwitchTo(caller_cxt);

		result = lappend(result, name);
		MemoryContextSwitchTo(old);
	}
	catalog_spi_end(&scope);
	return result;
}

MssqlCdcServer *
catalog_get_server(const char *server_name, bool missing_ok)
{
	MemoryContext caller_cxt = CurrentMemoryContext;
	MssqlCdcServer *result = NULL;
	Oid			argtypes[1] = {NAMEOID};
	Datum		args[1];
	CatalogOwnerScope scope;

	args[0] = DirectFunctionCall1(namein, CStringGetDatum(server_name));

	catalog_spi_begin(&scope);
	if (SPI_execute_with_args("SELECT server_name, run_as, paused, consecutive_failures,"
							  " window_transactions"
							  " FROM mssql_cdc.servers"
							  " WHERE server_name OPERATOR(pg_catalog.=) $1",
							  1, argtypes, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read mssql_cdc.servers");
	if (SPI_processed == 1)
	{
		HeapTuple	tuple = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;

		result = MemoryContextAllocZero(caller_cxt, sizeof(MssqlCdcServer));
		result->server_name = spi_text(tuple, desc, 1, caller_cxt);
		result->run_as = spi_text(tuple, desc, 2, caller_cxt);
		result->run_as_oid = get_role_oid(result->run_as, true);
		result->paused = DatumGetBool(SPI_getbinval(tuple, desc, 3, &isnull));
		result->consecutive_failures =
			DatumGetInt32(SPI_getbinval(tuple, desc, 4, &isnull));
		result->window_transactions =
			DatumGetInt32(SPI_getbinval(tuple, desc, 5, &isnull));
		if (isnull)
			result->window_transactions = 0;
	}
	catalog_spi_end(&scope);

	if (result == NULL && !missing_ok)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("server \"%s\" has no captured tables", server_name),
				 errhint("Start capturing with mssql_cdc.add_table().")));
	return result;
}

/* Copy an LSN column; returns false for NULL. */
static bool
spi_lsn(HeapTuple tuple, TupleDesc desc, int attno, MssqlLsn *out)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tuple, desc, attno, &isnull);

	if (isnull)
		return false;
	memcpy(out, DatumGetPointer(d), sizeof(MssqlLsn));
	return true;
}

static List *
spi_text_array(HeapTuple tuple, TupleDesc desc, int attno, MemoryContext cxt)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tuple, desc, attno, &isnull);
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int			i;
	List	   *result = NIL;
	MemoryContext old;

	if (isnull)
		return NIL;
	deconstruct_array(DatumGetArrayTypeP(d), TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &nulls, &n);
	old = MemoryContextSwitchTo(cxt);
	for (i = 0; i < n; i++)
		result = lappend(result, nulls[i] ? NULL : TextDatumGetCString(elems[i]));
	MemoryContextSwitchTo(old);
	return result;
}

List *
catalog_get_server_tables(const char *server_name)
{
	MemoryContext caller_cxt = CurrentMemoryContext;
	List	   *result = NIL;
	Oid			argtypes[1] = {NAMEOID};
	Datum		args[1];
	uint64		i;
	CatalogOwnerScope scope;

	args[0] = DirectFunctionCall1(namein, CStringGetDatum(server_name));

	catalog_spi_begin(&scope);
	if (SPI_execute_with_args("SELECT t.table_id, t.server_name, t.source_schema,"
							  " t.source_table, t.capture_instance, t.staging_schema,"
							  " t.staging_table, t.snapshot_mode,"
							  " coalesce(s.phase, 'pending'), s.checkpoint_lsn,"
							  " s.snapshot_lsn, s.snapshot_last_key,"
							  " coalesce(s.snapshot_rows, 0), t.on_retention_overrun,"
							  " t.paused, t.snapshot_filter, t.settings_version,"
							  " t.partition_interval IS NOT NULL, t.spatial_postgis,"
							  " t.include_columns, t.exclude_columns, t.update_before,"
							  " t.mirror_schema, t.mirror_table, t.changelog"
							  " FROM mssql_cdc.tables t"
							  " LEFT JOIN mssql_cdc.table_state s"
							  " ON s.table_id OPERATOR(pg_catalog.=) t.table_id"
							  " WHERE t.server_name OPERATOR(pg_catalog.=) $1"
							  " ORDER BY t.table_id",
							  1, argtypes, args, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read mssql_cdc.tables");

	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		MssqlCdcTable *t = MemoryContextAllocZero(caller_cxt, sizeof(MssqlCdcTable));
		bool		isnull;
		char	   *mode;
		char	   *phase;
		MemoryContext old;

		t->table_id = DatumGetInt32(SPI_getbinval(tuple, desc, 1, &isnull));
		t->server_name = spi_text(tuple, desc, 2, caller_cxt);
		t->source_schema = spi_text(tuple, desc, 3, caller_cxt);
		t->source_table = spi_text(tuple, desc, 4, caller_cxt);
		t->capture_instance = spi_text(tuple, desc, 5, caller_cxt);
		t->staging_schema = spi_text(tuple, desc, 6, caller_cxt);
		t->staging_table = spi_text(tuple, desc, 7, caller_cxt);
		mode = SPI_getvalue(tuple, desc, 8);
		if (!catalog_snapshot_mode_from_name(mode, &t->snapshot_mode))
			elog(ERROR, "unexpected snapshot mode \"%s\" in mssql_cdc.tables", mode);
		phase = SPI_getvalue(tuple, desc, 9);
		t->phase = phase_from_name(phase);
		t->has_checkpoint_lsn = spi_lsn(tuple, desc, 10, &t->checkpoint_lsn);
		t->has_snapshot_lsn = spi_lsn(tuple, desc, 11, &t->snapshot_lsn);
		t->snapshot_last_key = spi_text_array(tuple, desc, 12, caller_cxt);
		t->snapshot_rows = DatumGetInt64(SPI_getbinval(tuple, desc, 13, &isnull));
		if (!catalog_overrun_policy_from_name(SPI_getvalue(tuple, desc, 14),
											  &t->on_retention_overrun))
			elog(ERROR, "unexpected on_retention_overrun in mssql_cdc.tables");
		t->paused = DatumGetBool(SPI_getbinval(tuple, desc, 15, &isnull));
		t->snapshot_filter = spi_text(tuple, desc, 16, caller_cxt);
		t->settings_version = DatumGetInt64(SPI_getbinval(tuple, desc, 17, &isnull));
		t->partitioned = DatumGetBool(SPI_getbinval(tuple, desc, 18, &isnull));
		t->spatial_postgis = DatumGetBool(SPI_getbinval(tuple, desc, 19, &isnull));
		t->include_columns = spi_text_array(tuple, desc, 20, caller_cxt);
		t->exclude_columns = spi_text_array(tuple, desc, 21, caller_cxt);
		t->update_before = DatumGetBool(SPI_getbinval(tuple, desc, 22, &isnull));
		t->mirror_schema = spi_text(tuple, desc, 23, caller_cxt);
		t->mirror_table = spi_text(tuple, desc, 24, caller_cxt);
		t->changelog = DatumGetBool(SPI_getbinval(tuple, desc, 25, &isnull));

		old = MemoryContextSwitchTo(caller_cxt);
		result = lappend(result, t);
		MemoryContextSwitchTo(old);
	}
	catalog_spi_end(&scope);
	return result;
}

void
catalog_record_error(const char *server_name, int32 table_id,
					 const char *sqlstate, const char *message,
					 const char *detail, const char *hint,
					 int remote_error_number)
{
	catalog_record_error_condition(server_name, table_id, sqlstate, message, detail, hint,
								   remote_error_number, NULL);
}

void
catalog_record_error_condition(const char *server_name, int32 table_id,
							   const char *sqlstate, const char *message,
							   const char *detail, const char *hint,
							   int remote_error_number, const char *condition)
{
	Oid			argtypes[8] = {NAMEOID, INT4OID, BPCHAROID, TEXTOID, TEXTOID, TEXTOID, INT4OID, TEXTOID};
	Datum		args[8];
	char		nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	Oid			trim_types[2] = {NAMEOID, INT8OID};
	Datum		trim_args[2];
	CatalogOwnerScope scope;

	args[0] = DirectFunctionCall1(namein, CStringGetDatum(server_name));
	args[1] = Int32GetDatum(table_id);
	if (table_id <= 0)
		nulls[1] = 'n';
	args[2] = sqlstate ? CStringGetTextDatum(sqlstate) : (Datum) 0;
	if (sqlstate == NULL)
		nulls[2] = 'n';
	args[3] = CStringGetTextDatum(message);
	args[4] = detail ? CStringGetTextDatum(detail) : (Datum) 0;
	if (detail == NULL)
		nulls[4] = 'n';
	args[5] = hint ? CStringGetTextDatum(hint) : (Datum) 0;
	if (hint == NULL)
		nulls[5] = 'n';
	args[6] = Int32GetDatum(remote_error_number);
	if (remote_error_number == 0)
		nulls[6] = 'n';
	args[7] = condition ? CStringGetTextDatum(condition) : (Datum) 0;
	if (condition == NULL)
		nulls[7] = 'n';

	catalog_spi_begin(&scope);
	if (SPI_execute_with_args("INSERT INTO mssql_cdc.errors (server_name, table_id, sqlstate,"
							  " message, detail, hint, remote_error_number, condition)"
							  " VALUES ($1, $2, $3::pg_catalog.bpchar, $4, $5, $6, $7, $8)",
							  8, argtypes, args, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not insert into mssql_cdc.errors");

	/* Keep the log bounded: drop everything older than the newest N rows. */
	trim_args[0] = args[0];
	trim_args[1] = Int64GetDatum(MSSQL_CDC_ERRORS_KEPT_PER_SERVER);
	if (SPI_execute_with_args("DELETE FROM mssql_cdc.errors"
							  " WHERE server_name OPERATOR(pg_catalog.=) $1"
							  " AND error_id OPERATOR(pg_catalog.<) ("
							  "  SELECT pg_catalog.min(error_id) FROM ("
							  "   SELECT error_id FROM mssql_cdc.errors"
							  "   WHERE server_name OPERATOR(pg_catalog.=) $1"
							  "   ORDER BY error_id DESC LIMIT $2) newest)",
							  2, trim_types, trim_args, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not trim mssql_cdc.errors");
	catalog_spi_end(&scope);
}

/* Run one catalog UPDATE as the extension owner; returns the row count. */
static uint64
catalog_update(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls)
{
	CatalogOwnerScope scope;
	uint64		processed;

	catalog_spi_begin(&scope);
	if (SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not update the mssql_cdc catalog");
	processed = SPI_processed;
	catalog_spi_end(&scope);
	return processed;
}

static void
text_or_null(const char *value, Datum *datum, char *null)
{
	*datum = value ? CStringGetTextDatum(value) : (Datum) 0;
	*null = value ? ' ' : 'n';
}

void
catalog_set_server_condition(const char *server_name, const char *condition, const char *hint)
{
	Oid			types[3] = {NAMEOID, TEXTOID, TEXTOID};
	Datum		values[3];
	char		nulls[3] = {' ', ' ', ' '};

	values[0] = DirectFunctionCall1(namein, CStringGetDatum(server_name));
	text_or_null(condition, &values[1], &nulls[1]);
	text_or_null(hint, &values[2], &nulls[2]);
	catalog_update("UPDATE mssql_cdc.servers SET condition = $2, hint = $3"
				   " WHERE server_name OPERATOR(pg_catalog.=) $1",
				   3, types, values, nulls);
}

void
catalog_set_server_window_transactions(const char *server_name, int transactions)
{
	Oid			types[2] = {NAMEOID, INT4OID};
	Datum		values[2];
	char		nulls[2] = {' ', ' '};

	values[0] = DirectFunctionCall1(namein, CStringGetDatum(server_name));
	values[1] = Int32GetDatum(transactions);
	if (transactions <= 0)
		nulls[1] = 'n';
	catalog_update("UPDATE mssql_cdc.servers SET window_transactions = $2"
				   " WHERE server_name OPERATOR(pg_catalog.=) $1",
				   2, types, values, nulls);
}

void
catalog_set_table_condition(int32 table_id, const char *condition, const char *hint)
{
	Oid			types[3] = {INT4OID, TEXTOID, TEXTOID};
	Datum		values[3];
	char		nulls[3] = {' ', ' ', ' '};

	values[0] = Int32GetDatum(table_id);
	text_or_null(condition, &values[1], &nulls[1]);
	text_or_null(hint, &values[2], &nulls[2]);
	catalog_update("UPDATE mssql_cdc.table_state SET condition = $2, hint = $3"
				   " WHERE table_id OPERATOR(pg_catalog.=) $1",
				   3, types, values, nulls);
}

bool
catalog_set_server_warning(const char *server_name, const char *warning,
						   const char *hint, const char *message)
{
	Oid			types[4] = {NAMEOID, TEXTOID, TEXTOID, TEXTOID};
	Datum		values[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};

	values[0] = DirectFunctionCall1(namein, CStringGetDatum(server_name));
	text_or_null(warning, &values[1], &nulls[1]);
	text_or_null(hint, &values[2], &nulls[2]);
	text_or_null(message, &values[3], &nulls[3]);
	return catalog_update("UPDATE mssql_cdc.servers SET warning = $2, warning_hint = $3,"
						  " last_error = coalesce($4, last_error),"
						  " last_error_at = CASE WHEN $4 IS NULL THEN last_error_at"
						  "  ELSE pg_catalog.now() END"
						  " WHERE server_name OPERATOR(pg_catalog.=) $1"
						  " AND warning IS DISTINCT FROM $2",
						  4, types, values, nulls) > 0;
}

void
catalog_set_table_warning(int32 table_id, const char *warning, const char *hint,
						  bool keep_other)
{
	Oid			types[4] = {INT4OID, TEXTOID, TEXTOID, BOOLOID};
	Datum		values[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};

	values[0] = Int32GetDatum(table_id);
	text_or_null(warning, &values[1], &nulls[1]);
	text_or_null(hint, &values[2], &nulls[2]);
	values[3] = BoolGetDatum(keep_other);
	catalog_update("UPDATE mssql_cdc.table_state SET warning = $2, warning_hint = $3"
				   " WHERE table_id OPERATOR(pg_catalog.=) $1"
				   " AND NOT ($4 AND warning IS NOT NULL)",
				   4, types, values, nulls);
}

bool
catalog_resnapshot_after_overrun(int32 table_id, const char *message, const char *hint)
{
	Oid			types[3] = {INT4OID, TEXTOID, TEXTOID};
	Datum		values[3];

	values[0] = Int32GetDatum(table_id);
	values[1] = CStringGetTextDatum(message);
	values[2] = CStringGetTextDatum(hint);

	/*
	 * The same reset as mssql_cdc.resnapshot() (the checkpoint guard allows
	 * clearing the checkpoint only together with phase 'pending'), but only
	 * from 'streaming': a concurrent remove_table, pause or resnapshot wins.
	 * last_error keeps the overrun so status explains the new snapshot.
	 */
	return catalog_update("UPDATE mssql_cdc.table_state SET"
						  " phase = 'pending', checkpoint_lsn = NULL, snapshot_lsn = NULL,"
						  " snapshot_last_key = NULL, snapshot_rows = 0,"
						  " snapshot_total_estimate = NULL, snapshot_started_at = NULL,"
						  " last_error = $2, last_error_at = pg_catalog.now(),"
						  " condition = NULL, hint = NULL, consecutive_failures = 0,"
						  " warning = 'retention_overrun', warning_hint = $3,"
						  " resnapshot_requested_at = pg_catalog.now(),"
						  " updated_at = pg_catalog.now()"
						  " WHERE table_id OPERATOR(pg_catalog.=) $1"
						  " AND phase OPERATOR(pg_catalog.=) 'streaming'",
						  3, types, values, NULL) > 0;
}
