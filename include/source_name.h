/*-------------------------------------------------------------------------
 *
 * source_name.h
 *		SQL Server object names as users write them ('dbo.orders',
 *		'[my schema].[odd]]name]') and as T-SQL needs them quoted.
 *
 * IDENTIFICATION
 *		include/source_name.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_SOURCE_NAME_H
#define MSSQL_CDC_SOURCE_NAME_H

#include "postgres.h"

/* sysname is nvarchar(128) */
#define MSSQL_SYSNAME_MAX_CHARS		128

/* SQL Server limits capture instance names to 100 characters */
#define MSSQL_CAPTURE_INSTANCE_MAX_CHARS	100

#define MSSQL_DEFAULT_SCHEMA		"dbo"

/*
 * Split "schema.table" or "table" (schema defaults to dbo) in SQL Server
 * syntax: each part is a regular identifier, a [bracketed] identifier with
 * ]] for ], or a "double-quoted" identifier with "" for ".  On success sets
 * *schema and *table (unquoted, palloc'd) and returns NULL; otherwise returns
 * a palloc'd description of the problem for an error detail.
 */
extern char *mssql_parse_qualified_name(const char *input, char **schema, char **table);

/* [name] with ] doubled: safe to splice into T-SQL text */
extern char *mssql_quote_identifier(const char *name);

/* schema.table for messages, with brackets only where needed */
extern char *mssql_display_name(const char *schema, const char *table);

#endif							/* MSSQL_CDC_SOURCE_NAME_H */
