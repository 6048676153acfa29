/*-------------------------------------------------------------------------
 *
 * snapshot.c
 *		Keyset-paged initial snapshot of one table (see snapshot.h and
 *		doc/snapshot.md).
 *
 * Correctness comes from L0 and replay, not from the isolation level: L0
 * is read before the first chunk, so every change the chunks do not see
 * has an LSN above L0 and is streamed afterwards.  SNAPSHOT isolation only
 * makes each chunk a consistent, non-blocking read; where the database
 * does not allow it, chunks run under READ COMMITTED (logged once per
 * connection) with the same guarantees.
 *
 * Paging: each chunk is SELECT TOP (n) ... WHERE key > last ORDER BY key,
 * with the key compared by SQL Server itself.  The last key is therefore
 * stored as T-SQL literals built from what SQL Server sent for the raw key
 * columns (not from the converted Postgres values, which can be rounded or
 * case-folded): date/time keys are read as CONVERT(nvarchar, k, 121) (all
 * 7 fractional digits) and cast back to their exact type, strings keep
 * their case and are compared under the column's collation, binary keys
 * are hex literals, uniqueidentifiers are cast back from their canonical
 * text so SQL Server's own (byte-group) ordering decides.
 *
 * The literals must not depend on the session.  A 'yyyy-mm-dd hh:mi:ss'
 * string is read through SET DATEFORMAT / the session language for
 * datetime and smalldatetime (y-d-m for a British or German login, page
 * "datetime", Supported String Literal Formats), so date/time keys go back
 * through CONVERT(type, N'...', 121), the style they were read with, which
 * fixes the order.  A non-Unicode literal '...' converts through the
 * database's code page, not the column's, so a char/varchar key of another
 * collation would arrive with '?' in it: it is sent as N'...' with the
 * column's collation and cast to varchar, which converts through that
 * collation's code page and compares under it (and keeps the comparison on
 * the column's own type, so SQL Server can seek the index).
 *
 * IDENTIFICATION
 *		src/snapshot.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "apply.h"
#include "mirror.h"
#include "mssql_cdc.h"
#include "snapshot.h"
#include "tds_convert.h"

/* How a key value travels back into the keyset predicate */
typedef enum KeyLiteralKind
{
	KEY_CAST_TEXT,				/* CAST(N'<exact text>' AS <type>) */
	KEY_TEMPORAL,				/* read as style-121 text, converted back with 121 */
	KEY_BIT,					/* 0 / 1 */
	KEY_VARCHAR,				/* N'...' COLLATE <column's> cast to varchar */
	KEY_NVARCHAR,				/* N'...' */
	KEY_BINARY					/* 0x... from the raw bytes */
} KeyLiteralKind;

typedef struct KeyColumn
{
	const MssqlColumn *col;
	KeyLiteralKind kind;
} KeyColumn;

static bool
type_is(const MssqlColumn *col, const char *const *names)
{
	for (; *names; names++)
		if (strcmp(col->type_name, *names) == 0)
			return true;
	return false;
}

/* false for key types that cannot be paged exactly */
static bool
key_literal_kind(const MssqlColumn *col, KeyLiteralKind *kind)
{
	static const char *const temporal[] = {"date", "time", "datetime2", "datetimeoffset",
	"datetime", "smalldatetime", NULL};
	static const char *const exact_text[] = {"tinyint", "smallint", "int", "bigint",
		"decimal", "numeric", "money", "smallmoney", "float", "real",
	"uniqueidentifier", NULL};
	static const char *const varchar[] = {"char", "varchar", NULL};
	static const char *const nvarchar[] = {"nchar", "nvarchar", NULL};
	static const char *const binary[] = {"binary", "varbinary", NULL};

	if (type_is(col, temporal))
		*kind = KEY_TEMPORAL;
	else if (strcmp(col->type_name, "bit") == 0)
		*kind = KEY_BIT;
	else if (type_is(col, exact_text))
		*kind = KEY_CAST_TEXT;
	else if (type_is(col, varchar))
		*kind = KEY_VARCHAR;
	else if (type_is(col, nvarchar))
		*kind = KEY_NVARCHAR;
	else if (type_is(col, binary))
		*kind = KEY_BINARY;
	else
		return false;
	return true;
}

/* The primary key columns in key order; nkey == 0 for a table without one. */
static KeyColumn *
key_columns(const MssqlSourceTable *src, const char **refusal)
{
	KeyColumn  *keys = palloc0(sizeof(KeyColumn) * Max(src->nkey, 1));
	int			found = 0;
	int			i;

	*refusal = NULL;
	for (i = 0; i < src->ncolumns; i++)
	{
		const MssqlColumn *col = &src->columns[i];
		int			k = col->key_ordinal - 1;

		if (!col->is_key || k < 0 || k >= src->nkey)
			continue;
		keys[k].col = col;
		if (!key_literal_kind(col, &keys[k].kind))
			*refusal = psprintf("Primary key column %s of type %s cannot be used to page a snapshot.",
								tds_quote_ident(col->name), mssql_type_display(col));
		found++;
	}
	if (*refusal == NULL && found != src->nkey)
		*refusal = psprintf("The primary key of %s could not be read completely (%d of %d columns).",
							source_label(src), found, src->nkey);
	return keys;
}

const char *
snapshot_refusal(const MssqlSourceTable *src)
{
	const char *refusal;

	if (src->nkey == 0)
		return psprintf("Table %s has no primary key, so snapshot_mode 'initial' cannot copy it without risking duplicates.",
						source_label(src));
	(void) key_columns(src, &refusal);
	return refusal;
}

/* the expression that reads key column k as the literal builder needs it */
static char *
key_select_expr(const KeyColumn *key)
{
	char	   *ident = tds_quote_ident(key->col->name);

	if (key->kind == KEY_TEMPORAL)
		return psprintf("CONVERT(nvarchar(40), %s, 121)", ident);
	return ident;
}

static char *
quote_string(const char *prefix, const char *text)
{
	StringInfoData buf;
	const char *p;

	initStringInfo(&buf);
	appendStringInfo(&buf, "%s'", prefix);
	for (p = text; *p; p++)
	{
		if (*p == '\'')
			appendStringInfoChar(&buf, '\'');
		appendStringInfoChar(&buf, *p);
	}
	appendStringInfoChar(&buf, '\'');
	return buf.data;
}

/* A collation name as SQL Server spells them: letters, digits, underscores */
static bool
plain_collation_name(const char *name)
{
	const char *p;

	if (name == NULL || *name == '\0')
		return false;
	for (p = name; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
			  (*p >= '0' && *p <= '9') || *p == '_'))
			return false;
	return true;
}

/* A date/time key's style-121 text as a literal of the column's type */
static char *
temporal_literal(const KeyColumn *key, const char *text)
{
	/* time has no date part to misread; style 121 is for dates */
	if (strcmp(key->col->type_name, "time") == 0)
		return psprintf("CAST(%s AS %s)", quote_string("N", text), mssql_type_display(key->col));
	return psprintf("CONVERT(%s, %s, 121)", mssql_type_display(key->col), quote_string("N", text));
}

/* A char/varchar key as exactly the column's characters, in its collation */
static char *
varchar_literal(const KeyColumn *key, const char *text)
{
	if (!plain_collation_name(key->col->collation))
		return quote_string("N", text);
	return psprintf("CAST(%s COLLATE %s AS varchar(8000))", quote_string("N", text),
					key->col->collation);
}

/*
 * A key value of the last row copied, as the bytes db-lib delivered: kept
 * per row (a copy, no conversion) and turned into a literal once per chunk.
 */
typedef struct RawKeyValue
{
	int			tds_type;
	int			len;
	int			cap;
	uint8	   *data;
} RawKeyValue;

/* Keep the key value in result column `col` of the current row */
static void
save_key_value(TdsSession *session, const KeyColumn *key, int col, RawKeyValue *raw,
			   MemoryContext cxt)
{
	int			len;
	const uint8 *data = tds_col_data(session, col, &len);

	if (data == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("SQL Server (server \"%s\") returned NULL for primary key column %s",
						tds_session_server_name(session), tds_quote_ident(key->col->name))));
	if (len > raw->cap)
	{
		raw->cap = Max(len, 64);
		raw->data = raw->data ? repalloc(raw->data, raw->cap) : MemoryContextAlloc(cxt, raw->cap);
	}
	raw->tds_type = tds_col_type(session, col);
	raw->len = len;
	memcpy(raw->data, data, len);
}

/* A kept key value as a T-SQL literal */
static char *
key_literal(const KeyColumn *key, const RawKeyValue *raw)
{
	char	   *text;

	switch (key->kind)
	{
		case KEY_BINARY:
			{
				StringInfoData buf;
				int			i;

				initStringInfo(&buf);
				appendStringInfoString(&buf, "0x");
				for (i = 0; i < raw->len; i++)
					appendStringInfo(&buf, "%02X", raw->data[i]);
				return buf.data;
			}
		case KEY_BIT:
			return pstrdup(raw->len > 0 && raw->data[0] ? "1" : "0");
		default:
			break;
	}

	/*
	 * Key columns arrive as numbers, uuids or strings (temporal keys are
	 * read as text): none needs the connection to be rendered, which a
	 * NULL dbproc makes sure of.
	 */
	text = tds_value_to_text(NULL, raw->tds_type, raw->data, raw->len);
	switch (key->kind)
	{
		case KEY_VARCHAR:
			return varchar_literal(key, text);
		case KEY_NVARCHAR:
			return quote_string("N", text);
		case KEY_TEMPORAL:
			return temporal_literal(key, text);
		default:
			return psprintf("CAST(%s AS %s)", quote_string("N", text),
							mssql_type_display(key->col));
	}
}

/*
 * The condition "after the last key" (k1, ..., kn) = (v1, ..., vn):
 * (k1 > v1) OR (k1 = v1 AND k2 > v2) OR ...
 */
static void
append_keyset_predicate(StringInfo sql, const KeyColumn *keys, int nkey, List *last_key)
{
	int			i;
	int			j;

	for (i = 0; i < nkey; i++)
	{
		appendStringInfoString(sql, i ? " OR (" : "(");
		for (j = 0; j < i; j++)
			appendStringInfo(sql, "%s = %s AND ", tds_quote_ident(keys[j].col->name),
							 (char *) list_nth(last_key, j));
		appendStringInfo(sql, "%s > %s)", tds_quote_ident(keys[i].col->name),
						 (char *) list_nth(last_key, i));
	}
}

static int64
parse_int64_or(const char *text, int64 fallback)
{
	char	   *end;
	long long	v;

	if (text == NULL)
		return fallback;
	errno = 0;
	v = strtoll(text, &end, 10);
	if (errno != 0 || *end != '\0' || v < 0)
		return fallback;
	return (int64) v;
}

/* The partition row count: cheap and approximate, like SQL Server's own */
static int64
estimate_rows(TdsSession *session, const MssqlSourceTable *src)
{
	char	   *name = psprintf("%s.%s", tds_quote_ident(src->schema), tds_quote_ident(src->table));
	char	   *sql = psprintf("SELECT SUM(rows) FROM sys.partitions"
							   " WHERE object_id = OBJECT_ID(%s) AND index_id IN (0, 1)",
							   tds_quote_nstring(name));
	int64		estimate = -1;
	bool		seen = false;

	/* progress is a nicety: a login that may not read sys.partitions still snapshots */
	if (!tds_exec_try(session, sql))
		return -1;
	for (;;)
	{
		TdsStep		r = tds_next_result_try(session);

		if (r != TDS_STEP_MORE)
			break;
		while (tds_next_row_try(session) == TDS_STEP_MORE)
		{
			if (!seen && tds_num_cols(session) >= 1)
				estimate = parse_int64_or(tds_col_text(session, 1), -1);
			seen = true;
		}
	}
	return estimate;
}

/* The LSN just before lsn (80-bit -1 with borrow); lsn must not be zero. */
static void
lsn_decrement(MssqlLsn *lsn)
{
	int			i;

	for (i = MSSQL_LSN_BYTES - 1; i >= 0; i--)
		if (lsn->bytes[i]-- != 0)
			break;
}

bool
snapshot_read_start(TdsSession *session, const MssqlSourceTable *src, MssqlLsn *l0,
					int64 *total_estimate)
{
	const MssqlCaptureInstance *ci = src->capture_instance;

	if (!ci->has_start_lsn)
		return false;
	if (!tds_fetch_lsn(session, "SELECT sys.fn_cdc_get_max_lsn()", l0))
		return false;

	/*
	 * A capture instance that starts after L0 has no changes at or before
	 * its start: stream from just before it (its min LSN), or the retention
	 * check would see a gap where there never were changes.  Everything
	 * committed before its start is in the snapshot, read later.
	 */
	if (!mssql_lsn_is_zero(&ci->start_lsn) && mssql_lsn_cmp(&ci->start_lsn, l0) > 0)
	{
		*l0 = ci->start_lsn;
		lsn_decrement(l0);
	}
	*total_estimate = estimate_rows(session, src);
	return true;
}

static SnapshotIsolation
check_isolation(TdsSession *session)
{
	bool		allowed = false;

	/* a login that cannot read the setting gets the fallback, not a failure */
	if (tds_exec_try(session, "SELECT snapshot_isolation_state FROM sys.databases WHERE name = DB_NAME()"))
	{
		while (tds_next_result_try(session) == TDS_STEP_MORE)
			while (tds_next_row_try(session) == TDS_STEP_MORE)
			{
				char	   *text = tds_num_cols(session) >= 1 ? tds_col_text(session, 1) : NULL;

				/* 1 = ON; 2/3 (in transition) still refuse snapshot transactions */
				if (text != NULL && strcmp(text, "1") == 0)
					allowed = true;
			}
	}
	if (!allowed)
		ereport(LOG,
				(errmsg("mssql_cdc source \"%s\": the database does not allow snapshot isolation, snapshot chunks read under READ COMMITTED",
						tds_session_server_name(session)),
				 errdetail("The copy stays complete: changes after the recorded start LSN are replayed after the snapshot."),
				 errhint("ALTER DATABASE ... SET ALLOW_SNAPSHOT_ISOLATION ON makes each chunk a consistent read that does not block writers.")));
	return allowed ? SNAPSHOT_ISOLATION_ALLOWED : SNAPSHOT_ISOLATION_NOT_ALLOWED;
}

bool
snapshot_copy_chunk(TdsSession *session, MssqlCdcTable *table,
					const MssqlSourceTable *src, Oid run_as,
					SnapshotIsolation *isolation, int64 *rows)
{
	MemoryContext callercxt = CurrentMemoryContext;
	const char *refusal;
	KeyColumn  *keys = key_columns(src, &refusal);
	int			nkey = src->nkey;
	int			chunk_rows = mssql_cdc_snapshot_chunk_rows;
	List	   *select_exprs;
	SnapshotInsert *ins;
	StringInfoData sql;
	ListCell   *lc;
	int			first_key_col;
	int64		copied = 0;
	List	   *last_key = NIL;
	MemoryContext keycxt;
	MemoryContext oldcxt;
	RawKeyValue *raw_keys;
	bool		done;
	int			i;

	if (refusal != NULL || nkey == 0)
		elog(ERROR, "snapshot of a table that cannot be paged");	/* worker checked */
	if (!table->has_snapshot_lsn)
		elog(ERROR, "table %d is snapshotting without a snapshot LSN", table->table_id);
	if (table->snapshot_last_key != NIL && list_length(table->snapshot_last_key) != nkey)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the primary key of %s changed during its snapshot", source_label(src)),
				 errhint("Call mssql_cdc.resnapshot() for this table.")));

	if (*isolation == SNAPSHOT_ISOLATION_UNKNOWN)
		*isolation = check_isolation(session);

	ins = apply_snapshot_prepare(table, src, run_as, &table->snapshot_lsn, &select_exprs);
	first_key_col = list_length(select_exprs) + 1;

	initStringInfo(&sql);
	if (*isolation == SNAPSHOT_ISOLATION_ALLOWED)
		appendStringInfoString(&sql, "SET TRANSACTION ISOLATION LEVEL SNAPSHOT; ");
	appendStringInfo(&sql, "BEGIN TRANSACTION; SELECT TOP (%d) ", chunk_rows);
	foreach(lc, select_exprs)
		appendStringInfo(&sql, "%s, ", (const char *) lfirst(lc));
	for (i = 0; i < nkey; i++)
		appendStringInfo(&sql, "%s%s", i ? ", " : "", key_select_expr(&keys[i]));
	appendStringInfo(&sql, " FROM %s.%s", tds_quote_ident(src->schema), tds_quote_ident(src->table));
	/* the row filter (checked as one condition when it was set: snapshot_filter.h) */
	if (table->snapshot_filter != NULL)
		appendStringInfo(&sql, " WHERE (%s)", table->snapshot_filter);
	if (table->snapshot_last_key != NIL)
	{
		appendStringInfoString(&sql, table->snapshot_filter != NULL ? " AND (" : " WHERE ");
		append_keyset_predicate(&sql, keys, nkey, table->snapshot_last_key);
		if (table->snapshot_filter != NULL)
			appendStringInfoChar(&sql, ')');
	}
	appendStringInfoString(&sql, " ORDER BY ");
	for (i = 0; i < nkey; i++)
		appendStringInfo(&sql, "%s%s", i ? ", " : "", tds_quote_ident(keys[i].col->name));
	appendStringInfoString(&sql, "; COMMIT TRANSACTION;");
	if (*isolation == SNAPSHOT_ISOLATION_ALLOWED)
		appendStringInfoString(&sql, " SET TRANSACTION ISOLATION LEVEL READ COMMITTED;");

	keycxt = AllocSetContextCreate(CurrentMemoryContext, "mssql_cdc snapshot key",
								   ALLOCSET_SMALL_SIZES);
	raw_keys = MemoryContextAllocZero(keycxt, sizeof(RawKeyValue) * nkey);
	tds_exec(session, sql.data);
	while (tds_next_result(session))
	{
		int			ncols = tds_num_cols(session);

		if (ncols == 0)
			continue;			/* SET / BEGIN / COMMIT: no result set */

		/*
		 * The batch has exactly one result of this shape; skipping another
		 * shape would end the snapshot with rows missing.
		 */
		tds_expect_num_cols(session, first_key_col - 1 + nkey, "reading a snapshot chunk");
		while (tds_next_row(session))
		{
			CHECK_FOR_INTERRUPTS();
			if (copied >= chunk_rows)
			{
				tds_mark_malformed(session);
				ereport(ERROR,
						(errcode(ERRCODE_FDW_ERROR),
						 errmsg("SQL Server (server \"%s\") sent more rows than the snapshot query's TOP (%d)",
								tds_session_server_name(session), chunk_rows)));
			}
			apply_snapshot_row(ins, session);

			/* only the last row's key is kept: one row's worth of memory */
			for (i = 0; i < nkey; i++)
				save_key_value(session, &keys[i], first_key_col + i, &raw_keys[i], keycxt);
			copied++;
		}
	}
	apply_snapshot_finish(ins);
	mirror_apply_snapshot(table, src, run_as, &table->snapshot_lsn,
						  apply_snapshot_first_seqval(ins));
	if (copied > 0)
	{
		/* in the caller's context: it becomes the table's resume point */
		oldcxt = MemoryContextSwitchTo(callercxt);
		for (i = 0; i < nkey; i++)
			last_key = lappend(last_key, key_literal(&keys[i], &raw_keys[i]));
		MemoryContextSwitchTo(oldcxt);
	}

	/* a short chunk means the keyset is exhausted: hand over to streaming */
	done = copied < chunk_rows;
	apply_snapshot_progress(table->table_id, last_key, copied, done, &table->snapshot_lsn);
	if (done)
		mirror_snapshot_done(table, src, run_as);
	MemoryContextDelete(keycxt);

	/*
	 * The caller's copy of the state row now says what the catalog will say
	 * once the chunk's transaction commits, so it may copy the next chunk
	 * without reading the catalog again (if the commit fails, the worker's
	 * error path discards this copy with the iteration).
	 */
	if (copied > 0)
		table->snapshot_last_key = last_key;
	table->snapshot_rows += copied;
	*rows = copied;
	return done;
}
