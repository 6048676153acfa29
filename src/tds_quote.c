/*-------------------------------------------------------------------------
 *
 * tds_quote.c
 *		T-SQL quoting of identifiers and strings, and LSN literals.
 *
 * IDENTIFICATION
 *		src/tds_quote.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "tds_session.h"

/*
 * T-SQL quoting is one rule twice: open, the text with every closing
 * character doubled, close.  Both work on UTF-8 bytes: ']' and '\'' never
 * occur inside a multibyte character.
 */
static char *
quote_doubling(const char *open, char close, const char *text)
{
	StringInfoData buf;
	const char *p;

	initStringInfo(&buf);
	appendStringInfoString(&buf, open);
	for (p = text; *p; p++)
	{
		if (*p == close)
			appendStringInfoChar(&buf, close);
		appendStringInfoChar(&buf, *p);
	}
	appendStringInfoChar(&buf, close);
	return buf.data;
}

char *
tds_quote_ident(const char *ident)
{
	return quote_doubling("[", ']', ident);
}

char *
tds_quote_nstring(const char *str)
{
	return quote_doubling("N'", '\'', str);
}

char *
tds_format_lsn_literal(const uint8 *bytes)
{
	MssqlLsn	lsn;
	char	   *buf = palloc(MSSQL_LSN_TEXT_SIZE);

	memcpy(lsn.bytes, bytes, MSSQL_LSN_BYTES);
	mssql_lsn_format(&lsn, buf);
	return buf;
}
