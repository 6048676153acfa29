/*-------------------------------------------------------------------------
 *
 * source_identity.c
 *		The identity and history fingerprint of a source database (see
 *		source_identity.h): the SQL Server queries, the comparison, and
 *		their place in mssql_cdc.servers.
 *
 * Sources: page "sys.database_recovery_status" (database_guid: "RESTORE
 * always generates a new GUID when you restore a database that does not
 * yet exist"; recovery_fork_guid: "the current recovery fork"; the row is
 * visible only to the database owner and holders of VIEW ANY DATABASE /
 * ALTER ANY DATABASE, so a missing row is "not visible", not an error);
 * page "cdc.lsn_time_mapping" (start_lsn, tran_id, tran_end_time; tran_id
 * 0x00 rows are the capture job's own).
 *
 * IDENTIFICATION
 *		src/source_identity.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "catalog.h"
#include "source_identity.h"

static char *
lsn_text(const MssqlLsn *lsn)
{
	char	   *buf = palloc(MSSQL_LSN_TEXT_SIZE);

	mssql_lsn_format(lsn, buf);
	return buf;
}

/* a uniqueidentifier column as lower-case text (comparisons ignore case) */
static char *
col_guid(TdsSession *session, int col)
{
	char	   *text = tds_col_text(session, col);
	char	   *p;

	if (text == NULL)
		return NULL;
	for (p = text; *p; p++)
		*p = pg_tolower((unsigned char) *p);
	return text;
}

static Timestamp
parse_naive_time(const char *text)
{
	return DatumGetTimestamp(DirectFunctionCall3(timestamp_in, CStringGetDatum(text),
												 ObjectIdGetDatum(InvalidOid),
												 Int32GetDatum(-1)));
}

char *
source_fingerprint_sql(const MssqlLsn *window_end)
{
	return psprintf("SELECT TOP (1) start_lsn, tran_id, tran_end_time FROM cdc.lsn_time_mapping"
					" WHERE start_lsn <= %s AND tran_id <> 0x00 ORDER BY start_lsn DESC",
					tds_format_lsn_literal(window_end->bytes));
}

void
source_fingerprint_read(TdsSession *session, const MssqlLsn *window_end, SourceFingerprint *fp)
{
	memset(fp, 0, sizeof(*fp));
	fp->known = true;
	fp->window_end = *window_end;
	while (tds_next_row(session))
	{
		int			len;
		const uint8 *data;
		char	   *time_text;

		if (fp->has_tran)
			continue;			/* drain */
		tds_expect_num_cols(session, 3, "the transaction fingerprint");
		if (!tds_col_lsn(session, 1, &fp->lsn))
			continue;
		fp->has_tran = true;
		data = tds_col_data(session, 2, &len);
		if (data != NULL)
		{
			fp->tran_id_len = Min(len, SOURCE_TRAN_ID_MAX);
			memcpy(fp->tran_id, data, fp->tran_id_len);
		}
		time_text = tds_col_text(session, 3);
		fp->end_time = time_text ? parse_naive_time(time_text) : 0;
	}
}

void
source_identity_probe(TdsSession *session, const SourceFingerprint *stored, SourceProbe *probe)
{
	StringInfoData sql;
	int			result = 0;

	memset(probe, 0, sizeof(*probe));
	initStringInfo(&sql);
	appendStringInfoString(&sql,
						   "SELECT CONVERT(nvarchar(36), database_guid), CONVERT(nvarchar(36), recovery_fork_guid)"
						   " FROM sys.database_recovery_status"
						   " WHERE database_id = DB_ID()");
	if (stored->known)
		appendStringInfo(&sql, "; %s; SELECT MIN(start_lsn) FROM cdc.lsn_time_mapping",
						 source_fingerprint_sql(&stored->window_end));
	tds_exec(session, sql.data);
	while (tds_next_result(session))
	{
		result++;
		if (result == 2)
		{
			source_fingerprint_read(session, &stored->window_end, &probe->again);
			continue;
		}
		while (tds_next_row(session))
		{
			if (result == 1 && !probe->identity.known)
			{
				tds_expect_num_cols(session, 2, "sys.database_recovery_status");
				probe->identity.known = true;
				probe->identity.database_guid = col_guid(session, 1);
				probe->identity.recovery_fork_guid = col_guid(session, 2);
			}
			else if (result == 3 && !probe->has_mapping_min)
				probe->has_mapping_min = tds_col_lsn(session, 1, &probe->mapping_min);
		}
	}
}

static bool
same_text(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return pg_strcasecmp(a, b) == 0;
}

static bool
same_fingerprint(const SourceFingerprint *a, const SourceFingerprint *b)
{
	if (a->has_tran != b->has_tran)
		return false;
	if (!a->has_tran)
		return true;
	return mssql_lsn_cmp(&a->lsn, &b->lsn) == 0 &&
		a->tran_id_len == b->tran_id_len &&
		memcmp(a->tran_id, b->tran_id, a->tran_id_len) == 0 &&
		a->end_time == b->end_time;
}

static char *
describe_tran(const SourceFingerprint *fp)
{
	StringInfoData buf;
	int			i;

	if (!fp->has_tran)
		return pstrdup("none");
	initStringInfo(&buf);
	appendStringInfo(&buf, "%s (tran_id 0x", lsn_text(&fp->lsn));
	for (i = 0; i < fp->tran_id_len; i++)
		appendStringInfo(&buf, "%02X", fp->tran_id[i]);
	appendStringInfo(&buf, ", committed %s)",
					 fp->end_time ? DatumGetCString(DirectFunctionCall1(timestamp_out,
																		TimestampGetDatum(fp->end_time)))
					 : "?");
	return buf.data;
}

char *
source_identity_explain(const SourceIdentity *stored_id, const SourceFingerprint *stored_fp,
						const SourceProbe *probe, const char *server_name)
{
	if (stored_id->known && probe->identity.known)
	{
		if (!same_text(stored_id->database_guid, probe->identity.database_guid))
			return psprintf("The database of server \"%s\" is not the one its tables were copied from: sys.database_recovery_status.database_guid is %s, it was %s (the server now points to another database or copy, or the database was restored as a new one).",
							server_name, probe->identity.database_guid ? probe->identity.database_guid : "NULL",
							stored_id->database_guid ? stored_id->database_guid : "NULL");
		if (!same_text(stored_id->recovery_fork_guid, probe->identity.recovery_fork_guid))
			return psprintf("The database of server \"%s\" was restored: it is on a new recovery fork (sys.database_recovery_status.recovery_fork_guid is %s, it was %s), so changes after the restore point are gone and new ones reuse their LSNs.",
							server_name,
							probe->identity.recovery_fork_guid ? probe->identity.recovery_fork_guid : "NULL",
							stored_id->recovery_fork_guid ? stored_id->recovery_fork_guid : "NULL");
	}
	if (stored_fp->known && !same_fingerprint(stored_fp, &probe->again))
	{
		/*
		 * Cleanup deletes mapping rows from the bottom up: the fingerprint's
		 * transaction may be gone legitimately when nothing at or below it
		 * is left (or the mapping is empty: the last capture instance was
		 * dropped, which the capture-instance checks explain).
		 */
		if (stored_fp->has_tran && !probe->again.has_tran &&
			(!probe->has_mapping_min || mssql_lsn_cmp(&probe->mapping_min, &stored_fp->lsn) > 0))
			return NULL;
		return psprintf("Server \"%s\" has a different history at or below LSN %s than the one its tables were copied from: the last transaction there was %s, now it is %s (a failover that lost the end of the log, a restore, or another copy of the database); that transaction no longer exists as it was.",
						server_name, lsn_text(&stored_fp->window_end), describe_tran(stored_fp),
						describe_tran(&probe->again));
	}
	return NULL;
}

/* ---- catalog ------------------------------------------------------------ */

static char *
nullable_text(int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, &isnull);

	return isnull ? NULL : TextDatumGetCString(d);
}

void
source_identity_load(const char *server_name, SourceIdentity *id, SourceFingerprint *fp)
{
	Oid			types[1] = {NAMEOID};
	Datum		values[1];
	CatalogOwnerScope scope;
	MemoryContext caller = CurrentMemoryContext;

	memset(id, 0, sizeof(*id));
	memset(fp, 0, sizeof(*fp));
	values[0] = CStringGetDatum(server_name);
	catalog_become_owner(&scope);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("SELECT source_database_guid::text, source_recovery_fork_guid::text,"
							  " fingerprint_window_end::text, fingerprint_lsn::text,"
							  " fingerprint_tran_id, fingerprint_end_time"
							  " FROM mssql_cdc.servers WHERE server_name = $1",
							  1, types, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the source identity of server \"%s\"", server_name);
	if (SPI_processed == 1)
	{
		MemoryContext spi = MemoryContextSwitchTo(caller);
		char	   *end = nullable_text(3);
		char	   *lsn = nullable_text(4);
		bool		isnull;
		Datum		d;

		id->database_guid = nullable_text(1);
		id->recovery_fork_guid = nullable_text(2);
		id->known = id->database_guid != NULL || id->recovery_fork_guid != NULL;
		if (end != NULL && mssql_lsn_parse(end, &fp->window_end))
		{
			fp->known = true;
			fp->has_tran = lsn != NULL && mssql_lsn_parse(lsn, &fp->lsn);
			d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5, &isnull);
			if (!isnull)
			{
				bytea	   *b = DatumGetByteaPP(d);

				fp->tran_id_len = Min(VARSIZE_ANY_EXHDR(b), SOURCE_TRAN_ID_MAX);
				memcpy(fp->tran_id, VARDATA_ANY(b), fp->tran_id_len);
			}
			d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 6, &isnull);
			fp->end_time = isnull ? 0 : DatumGetTimestamp(d);
		}
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	catalog_restore_user(&scope);
}

static void
run_update(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls)
{
	CatalogOwnerScope scope;

	catalog_become_owner(&scope);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not update mssql_cdc.servers");
	SPI_finish();
	catalog_restore_user(&scope);
}

void
source_identity_store(const char *server_name, const SourceIdentity *id, bool clear_fingerprint)
{
	Oid			types[3] = {NAMEOID, TEXTOID, TEXTOID};
	Datum		values[3];
	char		nulls[3] = {' ', ' ', ' '};

	values[0] = CStringGetDatum(server_name);
	if (id->known && id->database_guid)
		values[1] = CStringGetTextDatum(id->database_guid);
	else
		nulls[1] = 'n';
	if (id->known && id->recovery_fork_guid)
		values[2] = CStringGetTextDatum(id->recovery_fork_guid);
	else
		nulls[2] = 'n';
	run_update(clear_fingerprint ?
			   "UPDATE mssql_cdc.servers SET source_database_guid = $2::uuid, source_recovery_fork_guid = $3::uuid,"
			   " fingerprint_window_end = NULL, fingerprint_lsn = NULL, fingerprint_tran_id = NULL,"
			   " fingerprint_end_time = NULL WHERE server_name = $1" :
			   "UPDATE mssql_cdc.servers SET source_database_guid = $2::uuid, source_recovery_fork_guid = $3::uuid"
			   " WHERE server_name = $1",
			   3, types, values, nulls);
}

void
source_fingerprint_lock(const char *server_name)
{
	Oid			types[1] = {NAMEOID};
	Datum		values[1];
	CatalogOwnerScope scope;

	values[0] = CStringGetDatum(server_name);
	catalog_become_owner(&scope);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("SELECT 1 FROM mssql_cdc.servers WHERE server_name = $1 FOR NO KEY UPDATE",
							  1, types, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not lock the mssql_cdc.servers row of server \"%s\"", server_name);
	SPI_finish();
	catalog_restore_user(&scope);
}

void
source_fingerprint_store(const char *server_name, const SourceFingerprint *fp)
{
	Oid			types[5] = {NAMEOID, TEXTOID, TEXTOID, BYTEAOID, TIMESTAMPOID};
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};

	values[0] = CStringGetDatum(server_name);
	values[1] = CStringGetTextDatum(lsn_text(&fp->window_end));
	if (fp->has_tran)
	{
		bytea	   *b = palloc(VARHDRSZ + fp->tran_id_len);

		SET_VARSIZE(b, VARHDRSZ + fp->tran_id_len);
		memcpy(VARDATA(b), fp->tran_id, fp->tran_id_len);
		values[2] = CStringGetTextDatum(lsn_text(&fp->lsn));
		values[3] = PointerGetDatum(b);
		if (fp->end_time)
			values[4] = TimestampGetDatum(fp->end_time);
		else
			nulls[4] = 'n';
	}
	else
		nulls[2] = nulls[3] = nulls[4] = 'n';
	run_update("UPDATE mssql_cdc.servers SET fingerprint_window_end = $2::mssql_cdc.lsn,"
			   " fingerprint_lsn = $3::mssql_cdc.lsn, fingerprint_tran_id = $4, fingerprint_end_time = $5"
			   " WHERE server_name = $1 AND (fingerprint_window_end IS NULL"
			   " OR fingerprint_window_end OPERATOR(mssql_cdc.<=) $2::mssql_cdc.lsn)",
			   5, types, values, nulls);
}
