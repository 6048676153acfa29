/*-------------------------------------------------------------------------
 *
 * tds_type.c
 *		db-lib type codes: readable names, default PostgreSQL types, and
 *		the length check of a value (see tds_type.h).
 *
 * IDENTIFICATION
 *		src/tds_type.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#define MSDBLIB 1				/* Microsoft field names, months 1-12 */
#include <sybfront.h>
#include <sybdb.h>

#include "catalog/pg_type.h"

#include "tds_type.h"

void
tds_value_bad_length(int tds_type, int len)
{
	ereport(ERROR,
			(errcode(ERRCODE_FDW_INVALID_STRING_FORMAT),
			 errmsg("SQL Server sent a %s value of unexpected length %d",
					tds_type_name(tds_type), len)));
}

void
tds_value_expect_length(int tds_type, int len, int expected)
{
	if (len != expected)
		tds_value_bad_length(tds_type, len);
}

Oid
tds_type_pg_type(int tds_type)
{
	switch (tds_type)
	{
		case SYBBIT:
		case SYBBITN:
			return BOOLOID;
		case SYBINT1:			/* tinyint 0..255 does not fit "char" */
		case SYBINT2:
			return INT2OID;
		case SYBINT4:
			return INT4OID;
		case SYBINT8:
			return INT8OID;
		case SYBREAL:
			return FLOAT4OID;
		case SYBFLT8:
			return FLOAT8OID;
		case SYBNUMERIC:
		case SYBDECIMAL:
		case SYBMONEY:
		case SYBMONEY4:
			return NUMERICOID;
		case SYBCHAR:
		case SYBVARCHAR:
		case SYBTEXT:
		case SYBNTEXT:
		case SYBNVARCHAR:
		case TDS_XSYBCHAR:
		case TDS_XSYBVARCHAR:
		case TDS_XSYBNCHAR:
		case TDS_XSYBNVARCHAR:
			return TEXTOID;
		case SYBBINARY:
		case SYBVARBINARY:
		case SYBIMAGE:
		case TDS_XSYBBINARY:
		case TDS_XSYBVARBINARY:
			return BYTEAOID;
		case SYBDATETIME:
		case SYBDATETIME4:
		case SYBMSDATETIME2:
			return TIMESTAMPOID;
		case SYBMSDATE:
			return DATEOID;
		case SYBMSTIME:
			return TIMEOID;
		case SYBMSDATETIMEOFFSET:
			return TIMESTAMPTZOID;
		case SYBUNIQUE:
			return UUIDOID;
		default:
			return InvalidOid;
	}
}

const char *
tds_type_name(int tds_type)
{
	switch (tds_type)
	{
		case SYBBIT:
		case SYBBITN:
			return "bit";
		case SYBINT1:
			return "tinyint";
		case SYBINT2:
			return "smallint";
		case SYBINT4:
			return "int";
		case SYBINT8:
			return "bigint";
		case SYBINTN:
			return "intn";
		case SYBREAL:
			return "real";
		case SYBFLT8:
		case SYBFLTN:
			return "float";
		case SYBNUMERIC:
			return "numeric";
		case SYBDECIMAL:
			return "decimal";
		case SYBMONEY:
		case SYBMONEYN:
			return "money";
		case SYBMONEY4:
			return "smallmoney";
		case SYBCHAR:
		case TDS_XSYBCHAR:
			return "char";
		case SYBVARCHAR:
		case TDS_XSYBVARCHAR:
			return "varchar";
		case TDS_XSYBNCHAR:
			return "nchar";
		case SYBNVARCHAR:
		case TDS_XSYBNVARCHAR:
			return "nvarchar";
		case SYBTEXT:
			return "text";
		case SYBNTEXT:
			return "ntext";
		case SYBBINARY:
		case TDS_XSYBBINARY:
			return "binary";
		case SYBVARBINARY:
		case TDS_XSYBVARBINARY:
			return "varbinary";
		case SYBIMAGE:
			return "image";
		case SYBDATETIME:
		case SYBDATETIMN:
			return "datetime";
		case SYBDATETIME4:
			return "smalldatetime";
		case SYBMSDATE:
			return "date";
		case SYBMSTIME:
			return "time";
		case SYBMSDATETIME2:
			return "datetime2";
		case SYBMSDATETIMEOFFSET:
			return "datetimeoffset";
		case SYBUNIQUE:
			return "uniqueidentifier";
		default:
			return "unknown";
	}
}
