/*-------------------------------------------------------------------------
 *
 * api.c
 *		The SQL API: mssql_cdc.add_table, remove_table, pause, resume and
 *		resnapshot.
 *
 * add_table checks the source on SQL Server with the caller's user mapping
 * (table, CDC, capture instance), creates the staging table and, for
 * snapshot_mode 'never', records the position streaming starts from, all in
 * the caller's transaction.  Everything else only changes catalog rows and
 * wakes the launcher at commit; copying data is the workers' business.  An
 * aborted call therefore has no effect at all.
 *
 * Security model (see doc/sql-api.md):
 *  - EXECUTE is revoked from PUBLIC; an administrator grants it.
 *  - A non-superuser needs USAGE on the foreign server and a user mapping
 *    (own or PUBLIC) to add a table.
 *  - The first table of a server fixes the server's run_as role (the
 *    caller); every later change to that server needs the privileges of
 *    run_as, because the worker acts as that role.
 *  - The catalog tables grant nothing to other roles.  The C code writes
 *    them as the extension owner for the span of the SPI calls only
 *    (pg_cron's SetUserIdAndSecContext pattern), after all privilege checks
 *    were done against the caller.  No SECURITY DEFINER.
 *
 * IDENTIFICATION
 *		src/api.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "foreign/foreign.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/lsyscache.h"
#include "utils/varlena.h"

#include "api_common.h"
#include "catalog.h"
#include "column_selection.h"
#include "launcher.h"
#include "mirror.h"
#include "mssql_cdc.h"
#include "options.h"
#include "source_name.h"
#include "snapshot_filter.h"
#include "source_schema.h"
#include "staging.h"
#include "staging_partitions.h"
#include "start_point.h"
#include "tds_session.h"

PG_FUNCTION_INFO_V1(mssql_cdc_add_table);
PG_FUNCTION_INFO_V1(mssql_cdc_remove_table);
PG_FUNCTION_INFO_V1(mssql_cdc_pause);
PG_FUNCTION_INFO_V1(mssql_cdc_resume);
PG_FUNCTION_INFO_V1(mssql_cdc_resnapshot);
PG_FUNCTION_INFO_V1(mssql_cdc_set_table_option);

/*
 * A non-superuser must be able to use the server and have credentials for
 * it, or it could start a worker with someone else's access.
 */
static void
check_server_access(Oid caller, ForeignServer *server)
{
	/* a superuser's mapping is checked where it matters: run_as below */
	if (superuser_arg(caller))
		return;
	mssql_cdc_check_server_access(caller, server);
}

/*
 * Resolve the staging table's schema as the caller sees it (search_path,
 * "$user"), before switching to the extension owner.  The name is stored
 * fully qualified, so the worker does not depend on anyone's search_path.
 */
static Oid
resolve_staging_namespace(List *names, char **relname)
{
	RangeVar   *rv = makeRangeVarFromNameList(names);
	Oid			nspid;

	if (rv->catalogname != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("staging table name must be table or schema.table"),
				 errdetail("A database name is not allowed.")));
	rv->relpersistence = RELPERSISTENCE_PERMANENT;
	nspid = RangeVarGetCreationNamespace(rv);
	if (isAnyTempNamespace(nspid))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_SCHEMA_NAME),
				 errmsg("a staging table cannot be a temporary table")));
	*relname = rv->relname;
	return nspid;
}

/* Refuse staging names that are taken, now or by another captured table. */
static void
check_staging_name_free(Oid nspid, const char *relname, Oid run_as_oid,
						const char *run_as)
{
	char	   *nspname = get_namespace_name(nspid);
	Oid			types[2] = {NAMEOID, NAMEOID};
	Datum		args[2];

	if (pg_namespace_aclcheck(nspid, run_as_oid, ACL_CREATE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" cannot create tables in schema \"%s\"", run_as, nspname),
				 errdetail("The staging table is created as role \"%s\", the role the worker writes it as.", run_as),
				 errhint("Grant CREATE on the schema, or choose another staging_table.")));

	if (OidIsValid(get_relname_relid(relname, nspid)))
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_TABLE),
				 errmsg("relation \"%s.%s\" already exists", nspname, relname),
				 errhint("mssql_cdc creates the staging table itself; choose a free name with the staging_table argument.")));

	args[0] = api_name_datum(nspname);
	args[1] = api_name_datum(relname);
	if (SPI_execute_with_args("SELECT 1 FROM mssql_cdc.tables"
							  " WHERE staging_schema OPERATOR(pg_catalog.=) $1"
							  " AND staging_table OPERATOR(pg_catalog.=) $2",
							  2, types, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read mssql_cdc.tables");
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("staging table \"%s.%s\" is already used by another captured table",
						nspname, relname),
				 errhint("Choose another name with the staging_table argument.")));
}

/*
 * Check the source on SQL Server, as the caller (its user mapping): the
 * table exists, CDC is enabled, the capture instance is found.  For
 * snapshot_mode 'never' also the position streaming starts after: the
 * source's max LSN now, or just before the capture instance's first LSN
 * when it started later (otherwise the worker's retention check would see
 * "changes removed" where there never were any).  With start_at, the
 * position is the checkpoint just before that point instead (refused when
 * CDC no longer keeps it); a snapshot_filter is parsed by SQL Server.
 */
static MssqlSourceTable *
check_source(ForeignServer *server, Oid caller, const char *schema, const char *table,
			 const char *capture_instance, MssqlSnapshotMode mode, bool mirror,
			 const StartPoint *start_at, const char *snapshot_filter, MssqlLsn *start)
{
	MssqlServerOptions *opts = mssql_cdc_get_server_options(server->serverid, caller);
	TdsSession *volatile session = tds_session_open(opts);
	MssqlSourceTable *src;

	PG_TRY();
	{
		src = source_schema_describe(session, schema, table, capture_instance);

		/*
		 * A mirror needs the key whatever the snapshot mode: its refusal
		 * first, so that the copy's hint (snapshot_mode 'never') does not
		 * lead to a second refusal
		 */
		if (mirror)
			mirror_require_primary_key(src);

		/*
		 * Without a key a snapshot cannot be paged or resumed, and a copy
		 * that overlaps replayed changes could not be told apart from real
		 * duplicates: refuse instead of duplicating silently.
		 */
		if (mode == MSSQL_SNAPSHOT_INITIAL && src->nkey == 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("table %s of server \"%s\" has no primary key, so it cannot be snapshotted",
							mssql_display_name(schema, table), server->servername),
					 errdetail("snapshot_mode 'initial' pages the copy by primary key so that it can resume and hand over to streaming exactly."),
					 errhint("Add a primary key to the source table, or use snapshot_mode => 'never' to stream its changes from now on.")));
		if (snapshot_filter != NULL)
			snapshot_filter_validate(session, schema, table, snapshot_filter);
		if (start_at != NULL)
			start_point_resolve(session, src->capture_instance->name, start_at, start);
		else if (mode == MSSQL_SNAPSHOT_NEVER)
		{
			const MssqlCaptureInstance *ci = src->capture_instance;

			if (!tds_fetch_lsn(session, "SELECT sys.fn_cdc_get_max_lsn()", start))
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("the CDC capture job of server \"%s\" has not run yet",
								server->servername),
						 errdetail("sys.fn_cdc_get_max_lsn() returned NULL, so there is no position to stream from."),
						 errhint("Make sure SQL Server Agent runs the capture job (cdc.<database>_capture), then try again.")));
			if (!ci->has_start_lsn)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("capture instance \"%s\" has not been started by the capture job yet",
								ci->name),
						 errhint("Wait for the SQL Server capture job to run, then try again.")));
			if (mssql_lsn_cmp(&ci->start_lsn, start) > 0 && !mssql_lsn_is_zero(&ci->start_lsn))
				(void) mssql_lsn_decrement(&ci->start_lsn, start);
		}
	}
	PG_FINALLY();
	{
		tds_session_close(session);
	}
	PG_END_TRY();
	return src;
}

/*
 * mssql_cdc.add_table(server name, source_table text, staging_table text,
 *                     snapshot_mode text, capture_instance text,
 *                     on_retention_overrun text, start_at text,
 *                     snapshot_filter text, partition_interval interval,
 *                     retention interval, include_columns text[],
 *                     exclude_columns text[], update_before boolean,
 *                     mirror boolean, mirror_table text, changelog boolean) → integer
 */
Datum
mssql_cdc_add_table(PG_FUNCTION_ARGS)
{
	Oid			caller = GetUserId();
	char	   *server_name;
	char	   *source_input;
	char	   *source_schema;
	char	   *source_table;
	char	   *mode_name;
	MssqlSnapshotMode mode;
	MssqlOverrunPolicy overrun;
	char	   *capture_instance = NULL;
	ForeignServer *server;
	List	   *staging_names;
	Oid			staging_nspid;
	char	   *staging_relname;
	char	   *run_as;
	Oid			run_as_oid;
	int32		table_id;
	CatalogOwnerScope scope;
	MssqlSourceTable *src;
	MssqlLsn	start_lsn;
	StartPoint	start_point;
	StartPoint *start_at = NULL;
	char	   *snapshot_filter = NULL;
	Interval   *partition_interval = PG_ARGISNULL(8) ? NULL : PG_GETARG_INTERVAL_P(8);
	Interval   *retention = PG_ARGISNULL(9) ? NULL : PG_GETARG_INTERVAL_P(9);
	char	   *first_partition = NULL;
	bool		spatial_postgis;
	ColumnSelection selection;
	bool		selection_empty;
	bool		update_before;
	MirrorChoice mirror;
	Oid			mirror_nspid = InvalidOid;
	char	   *mirror_relname = NULL;

	api_require_argument(fcinfo, 0, "server");
	api_require_argument(fcinfo, 1, "source_table");
	api_require_argument(fcinfo, 3, "snapshot_mode");
	api_require_argument(fcinfo, 5, "on_retention_overrun");
	api_require_argument(fcinfo, 12, "update_before");
	update_before = PG_GETARG_BOOL(12);
	server_name = NameStr(*PG_GETARG_NAME(0));
	source_input = text_to_cstring(PG_GETARG_TEXT_PP(1));
	mode_name = text_to_cstring(PG_GETARG_TEXT_PP(3));

	api_parse_source_table(source_input, &source_schema, &source_table);

	if (!catalog_snapshot_mode_from_name(mode_name, &mode))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid snapshot_mode \"%s\"", mode_name),
				 errhint("Valid values are: initial (copy the table, then stream changes), never (stream changes from now on).")));
	overrun = api_parse_overrun_policy(text_to_cstring(PG_GETARG_TEXT_PP(5)), mode);

	if (!PG_ARGISNULL(4))
	{
		capture_instance = text_to_cstring(PG_GETARG_TEXT_PP(4));
		if (capture_instance[0] == '\0' ||
			pg_mbstrlen(capture_instance) > MSSQL_CAPTURE_INSTANCE_MAX_CHARS)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_NAME),
					 errmsg("invalid capture instance name \"%s\"", capture_instance),
					 errdetail("A capture instance name has 1 to %d characters.",
							   MSSQL_CAPTURE_INSTANCE_MAX_CHARS),
					 errhint("Pass NULL to use the table's current capture instance.")));
	}

	if (!PG_ARGISNULL(6))
	{
		start_point_parse(text_to_cstring(PG_GETARG_TEXT_PP(6)), &start_point);
		start_at = &start_point;
	}
	if (!PG_ARGISNULL(7))
	{
		snapshot_filter = text_to_cstring(PG_GETARG_TEXT_PP(7));
		api_check_snapshot_filter(snapshot_filter, mode);
	}

	api_check_partitioning(partition_interval, retention, false);

	column_selection_from_args(fcinfo, 10, 11, &selection, &selection_empty);
	if (selection_empty)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must name at least one column",
						PG_ARGISNULL(10) ? "exclude_columns" : "include_columns"),
				 errhint("Pass NULL (the default) to stage every captured column.")));

	mirror_choice_from_args(fcinfo, 13, 14, 15, &mirror);
	api_check_mirror_start(mirror.mirror, mode, start_at != NULL);

	server = mssql_cdc_get_server_by_name(server_name);
	check_server_access(caller, server);

	if (PG_ARGISNULL(2))
		staging_names = list_make1(makeString(staging_default_name(server_name,
																	source_schema,
																	source_table)));
	else
		staging_names = textToQualifiedNameList(PG_GETARG_TEXT_PP(2));
	staging_nspid = resolve_staging_namespace(staging_names, &staging_relname);
	if (mirror.mirror && mirror.names != NIL)
		mirror_nspid = resolve_staging_namespace(mirror.names, &mirror_relname);
	else if (mirror.mirror)
	{
		/* default: next to the staging table (doc/mirror.md) */
		mirror_nspid = staging_nspid;
		mirror_relname = mirror_default_name(staging_relname);
	}
	if (mirror.mirror && mirror_nspid == staging_nspid &&
		strcmp(mirror_relname, staging_relname) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_TABLE),
				 errmsg("the mirror table and the staging table cannot both be \"%s\"", staging_relname),
				 errhint("Choose another mirror_table, or leave it NULL for \"%s\".",
						 mirror_default_name(staging_relname))));

	api_begin_catalog_write(&scope);

	run_as = api_lock_server_row(server_name, NULL);
	if (run_as == NULL)
	{
		/* first table of this server: it will run as the caller */
		Oid			types[2] = {NAMEOID, NAMEOID};
		Datum		args[2];

		run_as = GetUserNameFromId(caller, false);
		if (!mssql_cdc_user_mapping_exists(caller, server->serverid))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("role \"%s\" has no user mapping for server \"%s\"",
							run_as, server_name),
					 errdetail("The first table of a server decides the role its worker runs as, and that role needs SQL Server credentials."),
					 errhint("CREATE USER MAPPING FOR %s SERVER %s OPTIONS (username '…', password '…');",
							 quote_identifier(run_as), quote_identifier(server_name))));

		args[0] = api_name_datum(server_name);
		args[1] = api_name_datum(run_as);
		if (SPI_execute_with_args("INSERT INTO mssql_cdc.servers (server_name, run_as)"
								  " VALUES ($1, $2) ON CONFLICT (server_name) DO NOTHING",
								  2, types, args, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not insert into mssql_cdc.servers");
		if (SPI_processed == 0)
		{
			/* a concurrent add_table created it first: its run_as rules */
			run_as = api_lock_server_row(server_name, NULL);
			if (run_as == NULL)
				elog(ERROR, "server row of \"%s\" vanished", server_name);
			api_check_run_as(caller, server_name, run_as);
		}
	}
	else
		api_check_run_as(caller, server_name, run_as);
	run_as_oid = get_role_oid(run_as, false);

	if (api_find_captured_table(server_name, source_schema, source_table) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("table %s of server \"%s\" is already captured",
						mssql_display_name(source_schema, source_table), server_name),
				 errhint("Use mssql_cdc.resnapshot() to copy it again.")));

	check_staging_name_free(staging_nspid, staging_relname, run_as_oid, run_as);
	if (mirror.mirror)
		check_staging_name_free(mirror_nspid, mirror_relname, run_as_oid, run_as);
	api_end_catalog_write(&scope);

	/*
	 * Only now, with every local check passed, ask SQL Server (a wrong
	 * argument should not cost a login).  The capture instance found is
	 * stored, so the worker keeps reading the one whose columns the staging
	 * table has, even when a second one is created for a schema change.
	 */
	src = check_source(server, caller, source_schema, source_table, capture_instance,
					   mode, mirror.mirror, start_at, snapshot_filter, &start_lsn);
	capture_instance = src->capture_instance->name;
	/* the columns left out get no staging column and are never read */
	column_selection_check(src, &selection);
	column_selection_apply(src, &selection);
	/* geometry/geography as PostGIS types when PostGIS is there now, for good */
	spatial_postgis = mssql_postgis_installed();
	mssql_columns_set_postgis(src->columns, src->ncolumns, spatial_postgis);

	/*
	 * Owned by run_as, the role the worker writes it as (the caller has its
	 * privileges: api_check_run_as), not by whichever member called.
	 */
	{
		Oid			save_userid;
		int			save_sec_context;

		GetUserIdAndSecContext(&save_userid, &save_sec_context);
		SetUserIdAndSecContext(run_as_oid, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
		staging_create_table(get_namespace_name(staging_nspid), staging_relname,
							 source_label(src), src->columns, src->ncolumns,
							 partition_interval ? STAGING_PARTITION_BY : NULL);
		if (partition_interval)
			first_partition = staging_partitions_create_first(get_namespace_name(staging_nspid),
															  staging_relname);
		if (mirror.mirror)
			mirror_create_table(get_namespace_name(mirror_nspid), mirror_relname,
								source_label(src), src->columns, src->ncolumns);
		SetUserIdAndSecContext(save_userid, save_sec_context);
	}

	api_begin_catalog_write(&scope);

	{
		Oid			types[15] = {NAMEOID, TEXTOID, TEXTOID, TEXTOID, NAMEOID, NAMEOID, TEXTOID, TEXTOID,
		TEXTOID, INTERVALOID, INTERVALOID, BOOLOID, TEXTARRAYOID, TEXTARRAYOID, BOOLOID};
		Datum		args[15];
		char		nulls[15] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
		bool		isnull;

		args[0] = api_name_datum(server_name);
		args[1] = CStringGetTextDatum(source_schema);
		args[2] = CStringGetTextDatum(source_table);
		args[3] = capture_instance ? CStringGetTextDatum(capture_instance) : (Datum) 0;
		if (capture_instance == NULL)
			nulls[3] = 'n';
		args[4] = api_name_datum(get_namespace_name(staging_nspid));
		args[5] = api_name_datum(staging_relname);
		args[6] = CStringGetTextDatum(catalog_snapshot_mode_name(mode));
		args[7] = CStringGetTextDatum(catalog_overrun_policy_name(overrun));
		args[8] = snapshot_filter ? CStringGetTextDatum(snapshot_filter) : (Datum) 0;
		if (snapshot_filter == NULL)
			nulls[8] = 'n';
		args[9] = partition_interval ? IntervalPGetDatum(partition_interval) : (Datum) 0;
		if (partition_interval == NULL)
			nulls[9] = 'n';
		args[10] = retention ? IntervalPGetDatum(retention) : (Datum) 0;
		if (retention == NULL)
			nulls[10] = 'n';
		args[11] = BoolGetDatum(spatial_postgis);
		args[12] = selection.include ? column_selection_array(selection.include) : (Datum) 0;
		if (selection.include == NIL)
			nulls[12] = 'n';
		args[13] = selection.exclude ? column_selection_array(selection.exclude) : (Datum) 0;
		if (selection.exclude == NIL)
			nulls[13] = 'n';
		args[14] = BoolGetDatum(update_before);
		if (SPI_execute_with_args("INSERT INTO mssql_cdc.tables (server_name, source_schema,"
								  " source_table, capture_instance, staging_schema,"
								  " staging_table, snapshot_mode, on_retention_overrun,"
								  " snapshot_filter, partition_interval, retention, spatial_postgis,"
								  " include_columns, exclude_columns, update_before)"
								  " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12,"
								  " $13, $14, $15) RETURNING table_id",
								  15, types, args, nulls, false, 0) != SPI_OK_INSERT_RETURNING ||
			SPI_processed != 1)
			elog(ERROR, "could not insert into mssql_cdc.tables");
		table_id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
											   SPI_tuptable->tupdesc, 1, &isnull));
		if (first_partition)
			staging_partitions_register_first(table_id, first_partition);
		if (mirror.mirror)
			mirror_set_catalog(table_id, get_namespace_name(mirror_nspid), mirror_relname,
							   mirror.changelog);
	}
	{
		Oid			types[2] = {INT4OID, TEXTOID};
		Datum		args[2];
		char		lsn_text[MSSQL_LSN_TEXT_SIZE];

		args[0] = Int32GetDatum(table_id);
		if (mode == MSSQL_SNAPSHOT_NEVER || start_at != NULL)
		{
			/* streams from here on: the worker's first window starts after it */
			mssql_lsn_format(&start_lsn, lsn_text);
			args[1] = CStringGetTextDatum(lsn_text);
			if (SPI_execute_with_args("INSERT INTO mssql_cdc.table_state (table_id, phase, checkpoint_lsn)"
									  " VALUES ($1, 'streaming', $2::mssql_cdc.lsn)",
									  2, types, args, NULL, false, 0) != SPI_OK_INSERT)
				elog(ERROR, "could not insert into mssql_cdc.table_state");
		}
		else if (SPI_execute_with_args("INSERT INTO mssql_cdc.table_state (table_id, phase)"
									   " VALUES ($1, 'pending')",
									   1, types, args, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not insert into mssql_cdc.table_state");
	}

	api_end_catalog_write(&scope);

	mssql_cdc_wake_launcher_at_commit();
	PG_RETURN_INT32(table_id);
}

/* mssql_cdc.remove_table(server name, source_table text) → void */
Datum
mssql_cdc_remove_table(PG_FUNCTION_ARGS)
{
	Oid			caller = GetUserId();
	char	   *server_name;
	int32		table_id;
	char	   *staging = NULL;
	char	   *run_as;
	char	   *mirror_schema = NULL;
	char	   *mirror_table = NULL;
	bool		last_table;
	MemoryContext caller_cxt = CurrentMemoryContext;
	CatalogOwnerScope scope;

	table_id = api_begin_table_change(fcinfo, caller, &scope, &server_name, &run_as);

	{
		Oid			types[1] = {INT4OID};
		Datum		args[1];

		args[0] = Int32GetDatum(table_id);
		if (SPI_execute_with_args("DELETE FROM mssql_cdc.tables"
								  " WHERE table_id OPERATOR(pg_catalog.=) $1"
								  " RETURNING staging_schema, staging_table, mirror_schema, mirror_table",
								  1, types, args, NULL, false, 0) != SPI_OK_DELETE_RETURNING)
			elog(ERROR, "could not delete from mssql_cdc.tables");
		if (SPI_processed == 1)
		{
			char	   *nspname = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
			char	   *relname = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
			Oid			nspid = get_namespace_oid(nspname, true);

			/* mention the staging table only if the worker had created it */
			if (OidIsValid(nspid) && OidIsValid(get_relname_relid(relname, nspid)))
				staging = MemoryContextStrdup(caller_cxt,
											  quote_qualified_identifier(nspname, relname));
			mirror_schema = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3);
			mirror_table = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4);
			if (mirror_schema != NULL && mirror_table != NULL)
			{
				mirror_schema = MemoryContextStrdup(caller_cxt, mirror_schema);
				mirror_table = MemoryContextStrdup(caller_cxt, mirror_table);
			}
		}
	}
	{
		/* the last table takes the server row (and its run_as) with it */
		Oid			types[1] = {NAMEOID};
		Datum		args[1];

		args[0] = api_name_datum(server_name);
		if (SPI_execute_with_args("DELETE FROM mssql_cdc.servers s"
								  " WHERE s.server_name OPERATOR(pg_catalog.=) $1"
								  " AND NOT EXISTS (SELECT 1 FROM mssql_cdc.tables t"
								  "  WHERE t.server_name OPERATOR(pg_catalog.=) $1)",
								  1, types, args, NULL, false, 0) != SPI_OK_DELETE)
			elog(ERROR, "could not delete from mssql_cdc.servers");
		last_table = (SPI_processed == 1);
	}

	run_as = MemoryContextStrdup(caller_cxt, run_as);
	api_end_catalog_write(&scope);

	/*
	 * A rebuild's half-filled shadow is of no use without the table (the
	 * mirror itself is kept, as the staging table is); the worker writes it
	 * only with the table's state row locked, which the DELETE above waited
	 * for, so no chunk can come after this.
	 */
	if (mirror_schema != NULL && mirror_table != NULL)
		mirror_drop_shadow(mirror_schema, mirror_table, get_role_oid(run_as, false));

	if (staging)
		ereport(NOTICE,
				(errmsg("staging table %s was kept", staging),
				 errhint("Drop it with DROP TABLE if its rows are no longer needed.")));
	if (last_table)
		ereport(DEBUG1,
				(errmsg("server \"%s\" has no captured tables any more", server_name)));

	mssql_cdc_wake_launcher_at_commit();
	PG_RETURN_VOID();
}

/* pause and resume: set servers.paused; repeating a call is a no-op with a NOTICE */
static void
set_server_paused(FunctionCallInfo fcinfo, bool pause)
{
	Oid			caller = GetUserId();
	char	   *server_name;
	char	   *run_as;
	bool		paused = false;
	bool		changed = false;
	CatalogOwnerScope scope;

	api_require_argument(fcinfo, 0, "server");
	server_name = NameStr(*PG_GETARG_NAME(0));

	/*
	 * Resuming a server whose foreign server was dropped would only start a
	 * worker that cannot connect; pausing it is harmless and stays allowed.
	 */
	if (!pause)
		(void) mssql_cdc_get_server_by_name(server_name);

	api_begin_catalog_write(&scope);

	run_as = api_lock_server_row(server_name, &paused);
	if (run_as == NULL)
		api_report_server_not_in_use(server_name);
	api_check_run_as(caller, server_name, run_as);

	if (paused != pause)
	{
		Oid			types[2] = {NAMEOID, BOOLOID};
		Datum		args[2];

		args[0] = api_name_datum(server_name);
		args[1] = BoolGetDatum(pause);
		if (SPI_execute_with_args("UPDATE mssql_cdc.servers SET paused = $2"
								  " WHERE server_name OPERATOR(pg_catalog.=) $1",
								  2, types, args, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not update mssql_cdc.servers");
		changed = true;
	}

	api_end_catalog_write(&scope);

	if (!changed)
	{
		ereport(NOTICE,
				(errmsg("server \"%s\" is already %s", server_name,
						pause ? "paused" : "running")));
		return;
	}
	mssql_cdc_wake_launcher_at_commit();
}

/* mssql_cdc.pause(server name) → void */
Datum
mssql_cdc_pause(PG_FUNCTION_ARGS)
{
	set_server_paused(fcinfo, true);
	PG_RETURN_VOID();
}

/* mssql_cdc.resume(server name) → void */
Datum
mssql_cdc_resume(PG_FUNCTION_ARGS)
{
	set_server_paused(fcinfo, false);
	PG_RETURN_VOID();
}

/*
 * mssql_cdc.resnapshot(server name, source_table text) → void
 *
 * Resets the table's progress to 'pending' (the checkpoint guard allows
 * clearing the checkpoint only together with that phase) and records when
 * it was asked for; the worker takes it from there.  A snapshot_mode
 * 'never' table keeps its position in snapshot_lsn: the worker continues
 * after it, or from the oldest change CDC still keeps with the gap
 * recorded (worker_retention_gap.c), instead of skipping to the max LSN.
 */
Datum
mssql_cdc_resnapshot(PG_FUNCTION_ARGS)
{
	Oid			caller = GetUserId();
	char	   *server_name;
	int32		table_id;
	CatalogOwnerScope scope;
	Oid			types[1] = {INT4OID};
	Datum		args[1];

	table_id = api_begin_table_change(fcinfo, caller, &scope, &server_name, NULL);

	/* upsert: after a restore the progress row is absent */
	args[0] = Int32GetDatum(table_id);
	if (SPI_execute_with_args("INSERT INTO mssql_cdc.table_state AS s"
							  " (table_id, phase, resnapshot_requested_at)"
							  " VALUES ($1, 'pending', pg_catalog.now())"
							  " ON CONFLICT (table_id) DO UPDATE SET"
							  " phase = 'pending', checkpoint_lsn = NULL,"
							  /*
							   * a 'never' table cannot be copied: it keeps where it
							   * was, and the worker continues from there, or from
							   * the oldest change CDC keeps (worker_retention_gap.c)
							   */
							  " snapshot_lsn = CASE WHEN (SELECT t.snapshot_mode FROM mssql_cdc.tables t"
							  "   WHERE t.table_id OPERATOR(pg_catalog.=) $1) OPERATOR(pg_catalog.=) 'never'"
							  "   THEN coalesce(s.checkpoint_lsn, s.snapshot_lsn) END,"
							  " snapshot_last_key = NULL, snapshot_rows = 0,"
							  " snapshot_total_estimate = NULL, snapshot_started_at = NULL,"
							  " last_error = NULL, last_error_at = NULL,"
							  " consecutive_failures = 0,"
							  " condition = NULL, hint = NULL, warning = NULL, warning_hint = NULL,"
							  " resnapshot_requested_at = pg_catalog.now(),"
							  " updated_at = pg_catalog.now()",
							  1, types, args, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not update mssql_cdc.table_state");

	api_end_catalog_write(&scope);

	mssql_cdc_wake_launcher_at_commit();
	PG_RETURN_VOID();
}

/*
 * mssql_cdc.set_table_option(server name, source_table text, option text,
 *                            value text) → void
 *
 * Change a per-table setting of a captured table; the same permission
 * rules as resnapshot.  Kept for 0.1 scripts: alter_table() is the
 * function for table settings now.  Options: on_retention_overrun ('error' |
 * 'resnapshot').  The worker reads it at its next poll.
 */
Datum
mssql_cdc_set_table_option(PG_FUNCTION_ARGS)
{
	Oid			caller = GetUserId();
	char	   *server_name;
	char	   *option;
	char	   *value;
	int32		table_id;
	MssqlSnapshotMode mode;
	MssqlOverrunPolicy policy;
	CatalogOwnerScope scope;
	Oid			types[2] = {INT4OID, TEXTOID};
	Datum		args[2];

	api_require_argument(fcinfo, 2, "option");
	api_require_argument(fcinfo, 3, "value");
	option = text_to_cstring(PG_GETARG_TEXT_PP(2));
	value = text_to_cstring(PG_GETARG_TEXT_PP(3));
	if (strcmp(option, "on_retention_overrun") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown table option \"%s\"", option),
				 errhint("Valid options are: on_retention_overrun.")));

	table_id = api_begin_table_change(fcinfo, caller, &scope, &server_name, NULL);

	args[0] = Int32GetDatum(table_id);
	if (SPI_execute_with_args("SELECT snapshot_mode FROM mssql_cdc.tables"
							  " WHERE table_id OPERATOR(pg_catalog.=) $1",
							  1, types, args, NULL, false, 0) != SPI_OK_SELECT ||
		SPI_processed != 1 ||
		!catalog_snapshot_mode_from_name(SPI_getvalue(SPI_tuptable->vals[0],
													  SPI_tuptable->tupdesc, 1), &mode))
		elog(ERROR, "could not read mssql_cdc.tables");
	policy = api_parse_overrun_policy(value, mode);

	/* like alter_table(on_retention_overrun => ...): from the next window on */
	(void) api_lock_table_for_change(table_id);
	args[1] = CStringGetTextDatum(catalog_overrun_policy_name(policy));
	if (SPI_execute_with_args("UPDATE mssql_cdc.tables SET on_retention_overrun = $2"
							  " WHERE table_id OPERATOR(pg_catalog.=) $1",
							  2, types, args, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not update mssql_cdc.tables");

	api_end_catalog_write(&scope);
	PG_RETURN_VOID();
}
