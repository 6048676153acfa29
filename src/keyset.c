/*-------------------------------------------------------------------------
 *
 * keyset.c
 *		Keyset paging by primary key with exact T-SQL key literals (see
 *		keyset.h), shared by the initial snapshot and verify().
 *
 * The key is compared by SQL Server itself, so a key value is stored as
 * T-SQL literals built from what SQL Server sent for the raw key columns
 * (not from the converted Postgres values, which can be rounded or
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
 *		src/keyset.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/memutils.h"

#include "keyset.h"
#include "mssql_cdc.h"
#include "tds_convert.h"
#include "type_map.h"

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

KeyColumn *
keyset_columns(const MssqlSourceTable *src, const char **refusal)
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

char *
keyset_select_expr(const KeyColumn *key)
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

void
keyset_save_value(TdsSession *session, const KeyColumn *key, int col, RawKeyValue *raw,
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

char *
keyset_binary_literal(const uint8 *data, int len)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "0x");
	for (i = 0; i < len; i++)
		appendStringInfo(&buf, "%02X", data[i]);
	return buf.data;
}

char *
keyset_literal_from_text(const KeyColumn *key, const char *text)
{
	switch (key->kind)
	{
		case KEY_VARCHAR:
			return varchar_literal(key, text);
		case KEY_NVARCHAR:
			return quote_string("N", text);
		case KEY_TEMPORAL:
			return temporal_literal(key, text);
		case KEY_CAST_TEXT:
			return psprintf("CAST(%s AS %s)", quote_string("N", text),
							mssql_type_display(key->col));
		case KEY_BIT:
		case KEY_BINARY:
			break;
	}
	elog(ERROR, "key column %s has no literal from text", key->col->name);
	return NULL;				/* keep compiler quiet */
}

char *
keyset_literal(const KeyColumn *key, const RawKeyValue *raw)
{
	switch (key->kind)
	{
		case KEY_BINARY:
			return keyset_binary_literal(raw->data, raw->len);
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
	return keyset_literal_from_text(key, tds_value_to_text(NULL, raw->tds_type, raw->data,
														   raw->len));
}

void
keyset_append_after(StringInfo sql, const KeyColumn *keys, int nkey, List *last_key)
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
void
keyset_append_equal(StringInfo sql, const KeyColumn *keys, int nkey, char **values)
{
	int			i;

	for (i = 0; i < nkey; i++)
		appendStringInfo(sql, "%s%s = %s", i ? " AND " : "", tds_quote_ident(keys[i].col->name),
						 values[i]);
}

void
keyset_append_names(StringInfo sql, const KeyColumn *keys, int nkey)
{
	int			i;

	for (i = 0; i < nkey; i++)
		appendStringInfo(sql, "%s%s", i ? ", " : "", tds_quote_ident(keys[i].col->name));
}

void
keyset_append_chunk_select(StringInfo sql, const MssqlSourceTable *src, List *select_exprs,
						   const KeyColumn *keys, int nkey, int top, const char *filter,
						   List *last_key)
{
	ListCell   *lc;
	int			i;

	appendStringInfo(sql, "SELECT TOP (%d) ", top);
	foreach(lc, select_exprs)
		appendStringInfo(sql, "%s, ", (const char *) lfirst(lc));
	for (i = 0; i < nkey; i++)
		appendStringInfo(sql, "%s%s", i ? ", " : "", keyset_select_expr(&keys[i]));
	appendStringInfo(sql, " FROM %s.%s", tds_quote_ident(src->schema), tds_quote_ident(src->table));
	if (filter != NULL)
		appendStringInfo(sql, " WHERE (%s)", filter);
	if (last_key != NIL)
	{
		appendStringInfoString(sql, filter != NULL ? " AND (" : " WHERE ");
		keyset_append_after(sql, keys, nkey, last_key);
		if (filter != NULL)
			appendStringInfoChar(sql, ')');
	}
	appendStringInfoString(sql, " ORDER BY ");
	keyset_append_names(sql, keys, nkey);
}
