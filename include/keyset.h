/*-------------------------------------------------------------------------
 *
 * keyset.h
 *		Keyset paging of a SQL Server table by its primary key, with the
 *		key compared by SQL Server itself: the key columns, the expressions
 *		that read them, the exact T-SQL literals of a key value, and the
 *		"after this key" predicate.  Used by the initial snapshot
 *		(snapshot.c) and by verify() (verify.c); see doc/snapshot.md "Key
 *		types and exact paging".
 *
 * IDENTIFICATION
 *		include/keyset.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_KEYSET_H
#define MSSQL_CDC_KEYSET_H

#include "postgres.h"

#include "lib/stringinfo.h"
#include "nodes/pg_list.h"

#include "source_schema.h"
#include "tds_session.h"

/* How a key value travels back into a T-SQL predicate */
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

/*
 * A key value as the bytes db-lib delivered: kept per row (a copy, no
 * conversion) and turned into a literal only when needed.
 */
typedef struct RawKeyValue
{
	int			tds_type;
	int			len;
	int			cap;
	uint8	   *data;
} RawKeyValue;

/*
 * The primary key columns of src in key order (src->nkey of them; at
 * least one element is allocated).  *refusal gets why the key cannot be
 * paged (a column type without an exact literal, a key not read
 * completely), or NULL.
 */
extern KeyColumn *keyset_columns(const MssqlSourceTable *src, const char **refusal);

/* The expression that reads a key column as keyset_literal needs it */
extern char *keyset_select_expr(const KeyColumn *key);

/*
 * Keep the key value of result column col of the current row in *raw
 * (grown in cxt); a NULL key value is an error (SQL Server never sends one).
 */
extern void keyset_save_value(TdsSession *session, const KeyColumn *key, int col,
							  RawKeyValue *raw, MemoryContext cxt);

/* A kept key value as a T-SQL literal of the column's type */
extern char *keyset_literal(const KeyColumn *key, const RawKeyValue *raw);

/* Raw bytes as a binary literal 0x... */
extern char *keyset_binary_literal(const uint8 *data, int len);

/*
 * A key value given as text (what keyset_select_expr reads, rendered the
 * way tds_value_to_text renders it) as a T-SQL literal; not for KEY_BINARY
 * and KEY_BIT, whose literals come from bytes.
 */
extern char *keyset_literal_from_text(const KeyColumn *key, const char *text);

/*
 * Append "after the last key" (k1, ..., kn) > (v1, ..., vn), literals in
 * last_key (char *): (k1 > v1) OR (k1 = v1 AND k2 > v2) OR ...
 */
extern void keyset_append_after(StringInfo sql, const KeyColumn *keys, int nkey, List *last_key);

/* Append "k1 = v1 AND k2 = v2 ..." for literals in values (char *[nkey]) */
extern void keyset_append_equal(StringInfo sql, const KeyColumn *keys, int nkey, char **values);

/* Append "[k1], [k2], ..." (the ORDER BY of a keyset read) */
extern void keyset_append_names(StringInfo sql, const KeyColumn *keys, int nkey);

/*
 * Append one chunk's read: SELECT TOP (top) <select_exprs>, <key select
 * expressions> FROM [schema].[table] [WHERE (filter)] [AND after last_key]
 * ORDER BY <key>: the select_exprs' columns first, then the nkey keys.
 */
extern void keyset_append_chunk_select(StringInfo sql, const MssqlSourceTable *src,
									   List *select_exprs, const KeyColumn *keys, int nkey,
									   int top, const char *filter, List *last_key);

#endif							/* MSSQL_CDC_KEYSET_H */
