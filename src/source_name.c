/*-------------------------------------------------------------------------
 *
 * source_name.c
 *		Parsing and quoting of SQL Server object names.
 *
 * Users name source tables the way SQL Server Management Studio shows them,
 * so add_table() takes T-SQL syntax, not Postgres syntax.  Names are kept
 * exactly as written (SQL Server's case sensitivity depends on the
 * database collation, which we cannot know here); the worker matches them
 * against sys.tables.
 *
 * IDENTIFICATION
 *		src/source_name.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"

#include "source_name.h"

/* First character of a regular identifier: letter or underscore. */
static bool
is_regular_start(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
		c >= 0x80;				/* non-ASCII letters (any multibyte char) */
}

/* Later characters may also be digits, @, # and $ (T-SQL rules). */
static bool
is_regular_char(unsigned char c)
{
	return is_regular_start(c) || (c >= '0' && c <= '9') ||
		c == '@' || c == '#' || c == '$';
}

/*
 * Parse one name part starting at *p; on success store it in *part, advance
 * *p past it and return NULL, else return the problem.
 */
static char *
parse_part(const char **p, const char *start, char **part)
{
	const char *s = *p;
	StringInfoData buf;

	initStringInfo(&buf);

	if (*s == '[' || *s == '"')
	{
		char		close = (*s == '[') ? ']' : '"';

		s++;
		for (;;)
		{
			if (*s == '\0')
				return psprintf("unterminated %s identifier starting at position %d",
								close == ']' ? "bracket-quoted" : "double-quoted",
								(int) (*p - start) + 1);
			if (*s == close)
			{
				if (s[1] == close)	/* doubled closer = literal closer */
				{
					appendStringInfoChar(&buf, close);
					s += 2;
					continue;
				}
				s++;
				break;
			}
			appendStringInfoChar(&buf, *s);
			s++;
		}
		if (buf.len == 0)
			return psprintf("zero-length quoted identifier at position %d",
							(int) (*p - start) + 1);
	}
	else
	{
		if (*s == '\0' || *s == '.')
			return psprintf("empty name part at position %d", (int) (s - start) + 1);
		if (!is_regular_start((unsigned char) *s))
			return psprintf("unexpected character \"%c\" at position %d; quote the name with [brackets]",
							*s, (int) (s - start) + 1);
		while (*s != '\0' && *s != '.')
		{
			if (!is_regular_char((unsigned char) *s))
				return psprintf("unexpected character \"%c\" at position %d; quote the name with [brackets]",
								*s, (int) (s - start) + 1);
			appendStringInfoChar(&buf, *s);
			s++;
		}
	}

	if (pg_mbstrlen_with_len(buf.data, buf.len) > MSSQL_SYSNAME_MAX_CHARS)
		return psprintf("name part starting at position %d is longer than %d characters",
						(int) (*p - start) + 1, MSSQL_SYSNAME_MAX_CHARS);

	*part = buf.data;
	*p = s;
	return NULL;
}

char *
mssql_parse_qualified_name(const char *input, char **schema, char **table)
{
	const char *p = input;
	char	   *parts[3];
	int			nparts = 0;

	if (*input == '\0')
		return pstrdup("the name is empty");

	for (;;)
	{
		char	   *problem;

		if (nparts == 2)
			return pstrdup("too many name parts; give schema.table (the database is the server's \"database\" option)");
		problem = parse_part(&p, input, &parts[nparts]);
		if (problem)
			return problem;
		nparts++;
		if (*p == '\0')
			break;
		if (*p != '.')
			return psprintf("unexpected character \"%c\" at position %d after a quoted identifier",
							*p, (int) (p - input) + 1);
		p++;
		if (*p == '\0')
			return psprintf("empty name part at position %d", (int) (p - input) + 1);
	}

	if (nparts == 1)
	{
		*schema = pstrdup(MSSQL_DEFAULT_SCHEMA);
		*table = parts[0];
	}
	else
	{
		*schema = parts[0];
		*table = parts[1];
	}
	return NULL;
}

char *
mssql_quote_identifier(const char *name)
{
	StringInfoData buf;
	const char *s;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	for (s = name; *s; s++)
	{
		if (*s == ']')
			appendStringInfoChar(&buf, ']');
		appendStringInfoChar(&buf, *s);
	}
	appendStringInfoChar(&buf, ']');
	return buf.data;
}

/* A part needs brackets unless it is a regular identifier. */
static const char *
display_part(const char *name)
{
	const char *s;

	if (name[0] == '\0' || !is_regular_start((unsigned char) name[0]))
		return mssql_quote_identifier(name);
	for (s = name; *s; s++)
		if (!is_regular_char((unsigned char) *s))
			return mssql_quote_identifier(name);
	return name;
}

char *
mssql_display_name(const char *schema, const char *table)
{
	return psprintf("%s.%s", display_part(schema), display_part(table));
}
