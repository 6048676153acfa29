/*-------------------------------------------------------------------------
 *
 * tds_result.c
 *		The columns of the current result of a TDS session, and the checks
 *		that a result has the shape its query asked for (a broken or
 *		hostile server's defence).
 *
 * IDENTIFICATION
 *		src/tds_result.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "tds_convert.h"
#include "tds_session_internal.h"
#include "tds_type.h"

/* ---- columns ------------------------------------------------------------ */

static void
check_column(TdsSession *session, int col)
{
	tds_check_usable(session);
	if (col < 1 || col > dbnumcols(session->dbproc))
		elog(ERROR, "column %d out of range of the SQL Server result (%d columns)",
			 col, dbnumcols(session->dbproc));
}

int
tds_num_cols(TdsSession *session)
{
	tds_check_usable(session);
	return dbnumcols(session->dbproc);
}

int
tds_col_type(TdsSession *session, int col)
{
	check_column(session, col);
	return dbcoltype(session->dbproc, col);
}

const char *
tds_col_name(TdsSession *session, int col)
{
	const char *name;

	check_column(session, col);
	name = dbcolname(session->dbproc, col);
	return name ? name : "";
}

void
tds_col_typeinfo(TdsSession *session, int col, int *precision, int *scale)
{
	DBTYPEINFO *ti;

	check_column(session, col);
	ti = dbcoltypeinfo(session->dbproc, col);
	*precision = ti ? ti->precision : 0;
	*scale = ti ? ti->scale : 0;
}

const uint8 *
tds_col_data(TdsSession *session, int col, int *len)
{
	BYTE	   *data;
	DBINT		datlen;

	check_column(session, col);
	data = dbdata(session->dbproc, col);
	datlen = dbdatlen(session->dbproc, col);
	if (data == NULL || datlen < 0)
	{
		/* NULL, but a zero-length non-NULL string also has datlen 0 */
		*len = 0;
		return NULL;
	}
	*len = datlen;
	return (const uint8 *) data;
}

char *
tds_col_text(TdsSession *session, int col)
{
	int			len;
	const uint8 *data = tds_col_data(session, col, &len);

	return tds_value_to_text(session->dbproc, tds_col_type(session, col), data, len);
}

Datum
tds_col_datum(TdsSession *session, int col, const struct TdsDatumTarget *target,
			  bool *isnull)
{
	int			len;
	const uint8 *data = tds_col_data(session, col, &len);

	return tds_value_to_datum(session->dbproc, tds_col_type(session, col), data, len,
							  target, isnull);
}

/* ---- checking the shape of a result ------------------------------------- */

void
tds_mark_malformed(TdsSession *session)
{
	tds_close_dbproc(session);
	session->err.kind = TDS_ERROR_PROTOCOL;
	session->err.malformed = true;
}

/*
 * A result that does not have the shape the query asked for cannot come
 * from SQL Server running our query: close the connection (whatever else
 * it sends is untrustworthy too) and raise PROTOCOL_VIOLATION, marked as
 * a malformed response.
 */
static void
unexpected_result(TdsSession *session, const char *what, const char *fmt,...)
	pg_attribute_printf(3, 4);

static void
unexpected_result(TdsSession *session, const char *what, const char *fmt,...)
{
	char		detail[256];
	va_list		args;

	va_start(args, fmt);
	vsnprintf(detail, sizeof(detail), fmt, args);
	va_end(args);
	tds_mark_malformed(session);
	ereport(ERROR,
			(errcode(ERRCODE_PROTOCOL_VIOLATION),
			 errmsg("SQL Server (server \"%s\") sent an unexpected result while %s",
					session->server_name, what),
			 errdetail_internal("%s", detail),
			 errhint("The connection was closed and is reopened on the next attempt.  If this repeats, check "
					 "that the host and port options of server \"%s\" lead to SQL Server itself.",
					 session->server_name)));
}

void
tds_expect_num_cols(TdsSession *session, int ncols, const char *what)
{
	int			got = tds_num_cols(session);

	if (got != ncols)
		unexpected_result(session, what, "The result has %d columns; the query selects %d.", got, ncols);
}

void
tds_expect_col_kind(TdsSession *session, int col, TdsColKind kind, const char *colname,
					const char *what)
{
	int			type = tds_col_type(session, col);
	bool		ok;

	switch (kind)
	{
		case TDS_COL_BINARY:
			ok = type == SYBBINARY || type == SYBVARBINARY;
			break;
		case TDS_COL_INTEGER:
			ok = type == SYBINT1 || type == SYBINT2 || type == SYBINT4 || type == SYBINT8 ||
				type == SYBINTN;
			break;
		default:
			ok = false;
			break;
	}
	if (!ok)
		unexpected_result(session, what, "Column %d (%s) is of type %s, which the query cannot produce.",
						  col, colname, tds_type_name(type));
}

static bool
name_in(const char *name, const char *const *list)
{
	for (; *list != NULL; list++)
		if (strcmp(*list, name) == 0)
			return true;
	return false;
}

/* db-lib types a plainly selected column of SQL Server type `name` arrives as */
static bool
source_type_allows(const char *name, int type)
{
	static const char *const integers[] = {"tinyint", "smallint", "int", "bigint", NULL};
	static const char *const strings[] = {"char", "varchar", "nchar", "nvarchar", "text", "ntext",
	"sysname", NULL};
	static const char *const binaries[] = {"binary", "varbinary", "image", "rowversion", "timestamp", NULL};
	static const char *const datetimes[] = {"date", "time", "datetime2", "datetimeoffset", "datetime",
	"smalldatetime", NULL};

	if (name_in(name, integers))
		return type == SYBINT1 || type == SYBINT2 || type == SYBINT4 || type == SYBINT8 ||
			type == SYBINTN;
	if (name_in(name, strings))
		return type == SYBCHAR || type == SYBVARCHAR || type == SYBTEXT || type == SYBNTEXT ||
			type == SYBNVARCHAR || type == TDS_XSYBCHAR || type == TDS_XSYBVARCHAR ||
			type == TDS_XSYBNCHAR || type == TDS_XSYBNVARCHAR;
	if (name_in(name, binaries))
		return type == SYBBINARY || type == SYBVARBINARY || type == SYBIMAGE ||
			type == TDS_XSYBBINARY || type == TDS_XSYBVARBINARY;
	if (name_in(name, datetimes))
		return type == SYBMSDATE || type == SYBMSTIME || type == SYBMSDATETIME2 ||
			type == SYBMSDATETIMEOFFSET || type == SYBDATETIME || type == SYBDATETIME4 ||
			type == SYBDATETIMN;
	if (strcmp(name, "bit") == 0)
		return type == SYBBIT || type == SYBBITN;
	if (strcmp(name, "decimal") == 0 || strcmp(name, "numeric") == 0)
		return type == SYBDECIMAL || type == SYBNUMERIC;
	if (strcmp(name, "money") == 0 || strcmp(name, "smallmoney") == 0)
		return type == SYBMONEY || type == SYBMONEY4 || type == SYBMONEYN;
	if (strcmp(name, "float") == 0 || strcmp(name, "real") == 0)
		return type == SYBFLT8 || type == SYBREAL || type == SYBFLTN;
	if (strcmp(name, "uniqueidentifier") == 0)
		return type == SYBUNIQUE;
	return true;				/* xml, sql_variant, CLR types...: not checked */
}

void
tds_expect_col_source_type(TdsSession *session, int col, const char *sqlserver_type,
						   const char *colname, const char *what)
{
	int			type = tds_col_type(session, col);

	if (sqlserver_type != NULL && !source_type_allows(sqlserver_type, type))
		unexpected_result(session, what, "Column %d (%s) is of type %s; the source column is %s.",
						  col, colname, tds_type_name(type), sqlserver_type);
}

/* ---- helpers ------------------------------------------------------------ */

bool
tds_col_lsn(TdsSession *session, int col, MssqlLsn *lsn)
{
	int			len;
	const uint8 *data;
	int			type;

	type = tds_col_type(session, col);
	data = tds_col_data(session, col, &len);
	if (data == NULL)
		return false;
	if ((type != SYBBINARY && type != SYBVARBINARY) || len != MSSQL_LSN_BYTES)
	{
		tds_mark_malformed(session);
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
				 errmsg("SQL Server (server \"%s\") returned a %s value of %d bytes where a binary(10) LSN was expected",
						session->server_name, tds_type_name(type), len)));
	}
	memcpy(lsn->bytes, data, MSSQL_LSN_BYTES);
	return true;
}

bool
tds_fetch_lsn(TdsSession *session, const char *sql, MssqlLsn *lsn)
{
	bool		found = false;
	bool		seen = false;

	tds_exec(session, sql);
	while (tds_next_result(session))
	{
		while (tds_next_row(session))
		{
			if (seen || tds_num_cols(session) < 1)
				continue;		/* drain the rest */
			seen = true;
			found = tds_col_lsn(session, 1, lsn);
		}
	}
	return found;
}
