/*-------------------------------------------------------------------------
 *
 * tds_convert.c
 *		db-lib column values -> PostgreSQL text and Datums, exactly: the
 *		dispatch by type, and the types that are a copy or a byte reorder.
 *
 * Each SQL Server type is rendered from its binary form as db-lib hands it
 * over (dbdata): integers as integers, floats with the shortest round-trip
 * digits; decimal and money (tds_convert_numeric.c) from their integer
 * representation, date/time (tds_convert_datetime.c) from their fields.
 * Nothing goes through dbconvert()'s locale-dependent text or through a
 * double.  The rules, including the sub-microsecond rounding, are
 * documented in tds_convert.h.
 *
 * IDENTIFICATION
 *		src/tds_convert.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#define MSDBLIB 1				/* Microsoft field names, months 1-12 */
#include <sybfront.h>
#include <sybdb.h>

#include "catalog/pg_type.h"
#include "common/shortest_dec.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "port/pg_bswap.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/uuid.h"

#include "tds_convert.h"
#include "tds_convert_datetime.h"
#include "tds_convert_numeric.h"
#include "tds_type.h"

static char *
hex_bytea_text(const uint8 *data, int len)
{
	static const char hex[] = "0123456789abcdef";
	char	   *out = palloc(2 + 2 * (Size) len + 1);
	char	   *p = out;
	int			i;

	*p++ = '\\';
	*p++ = 'x';
	for (i = 0; i < len; i++)
	{
		*p++ = hex[data[i] >> 4];
		*p++ = hex[data[i] & 0xF];
	}
	*p = '\0';
	return out;
}

/*
 * Character data arrives in the client charset we log in with (UTF-8);
 * convert to the database encoding.  Postgres text cannot hold NUL.
 */
static char *
utf8_to_server_text(const uint8 *data, int len)
{
	char	   *copy;
	char	   *converted;

	if (memchr(data, '\0', len) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNTRANSLATABLE_CHARACTER),
				 errmsg("SQL Server sent a character value containing a NUL byte, which PostgreSQL text cannot store")));
	copy = pnstrdup((const char *) data, len);
	converted = pg_any_to_server(copy, len, PG_UTF8);
	if (converted != copy)
		pfree(copy);
	return converted;
}

static char *
uuid_to_text(int tds_type, const uint8 *data, int len)
{
	uint32		d1;
	uint16		d2,
				d3;

	/* libtds stores Data1..Data3 in host byte order, Data4 as sent */
	tds_value_expect_length(tds_type, len, 16);
	memcpy(&d1, data, 4);
	memcpy(&d2, data + 4, 2);
	memcpy(&d3, data + 6, 2);
	return psprintf("%08x-%04x-%04x-%02x%02x-%02x%02x%02x%02x%02x%02x",
					d1, d2, d3, data[8], data[9], data[10], data[11],
					data[12], data[13], data[14], data[15]);
}

char *
tds_value_to_text(void *dbproc, int tds_type, const uint8 *data, int len)
{
	if (data == NULL)
		return NULL;
	if (len < 0)
		tds_value_bad_length(tds_type, len);

	switch (tds_type)
	{
		case SYBBIT:
		case SYBBITN:
			tds_value_expect_length(tds_type, len, 1);
			return pstrdup(data[0] ? "true" : "false");
		case SYBINT1:
			tds_value_expect_length(tds_type, len, 1);
			return psprintf("%u", (unsigned) data[0]);	/* tinyint is unsigned */
		case SYBINT2:
			{
				int16		v;

				tds_value_expect_length(tds_type, len, 2);
				memcpy(&v, data, 2);
				return psprintf("%d", (int) v);
			}
		case SYBINT4:
			{
				int32		v;

				tds_value_expect_length(tds_type, len, 4);
				memcpy(&v, data, 4);
				return psprintf("%d", v);
			}
		case SYBINT8:
			{
				int64		v;

				tds_value_expect_length(tds_type, len, 8);
				memcpy(&v, data, 8);
				return psprintf(INT64_FORMAT, v);
			}
		case SYBREAL:
			{
				float		v;
				char		buf[FLOAT_SHORTEST_DECIMAL_LEN];

				tds_value_expect_length(tds_type, len, 4);
				memcpy(&v, data, 4);
				float_to_shortest_decimal_buf(v, buf);
				return pstrdup(buf);
			}
		case SYBFLT8:
			{
				double		v;
				char		buf[DOUBLE_SHORTEST_DECIMAL_LEN];

				tds_value_expect_length(tds_type, len, 8);
				memcpy(&v, data, 8);
				double_to_shortest_decimal_buf(v, buf);
				return pstrdup(buf);
			}
		case SYBNUMERIC:
		case SYBDECIMAL:
			return tds_decimal_to_text(tds_type, data, len);
		case SYBMONEY:
		case SYBMONEY4:
			return tds_money_to_text(tds_type, data, len);
		case SYBCHAR:
		case SYBVARCHAR:
		case SYBTEXT:
		case SYBNTEXT:
		case SYBNVARCHAR:
		case TDS_XSYBCHAR:
		case TDS_XSYBVARCHAR:
		case TDS_XSYBNCHAR:
		case TDS_XSYBNVARCHAR:
			return utf8_to_server_text(data, len);
		case SYBBINARY:
		case SYBVARBINARY:
		case SYBIMAGE:
		case TDS_XSYBBINARY:
		case TDS_XSYBVARBINARY:
			return hex_bytea_text(data, len);
		case SYBDATETIME:
		case SYBDATETIME4:
			return tds_datetime_to_text(tds_type, data, len);
		case SYBMSDATE:
		case SYBMSTIME:
		case SYBMSDATETIME2:
		case SYBMSDATETIMEOFFSET:
			return tds_msdate_to_text(dbproc, tds_type, data, len);
		case SYBUNIQUE:
			return uuid_to_text(tds_type, data, len);
		default:
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
					 errmsg("SQL Server type %s (db-lib type %d) is not supported",
							tds_type_name(tds_type), tds_type)));
	}
	return NULL;				/* keep compiler quiet */
}

/* ---- direct conversions: binary value -> Datum ------------------------- */

static Datum
bytea_datum(const uint8 *data, int len)
{
	bytea	   *b = palloc(VARHDRSZ + len);

	SET_VARSIZE(b, VARHDRSZ + len);
	memcpy(VARDATA(b), data, len);
	return PointerGetDatum(b);
}

/*
 * Character data in the client charset (UTF-8) as text in the database
 * encoding, checked as utf8_to_server_text checks it; varchar(n) and
 * char(n) get their length rule from the same coercion functions a cast
 * uses, which behave like their input functions.
 */
static Datum
character_to_datum(const uint8 *data, int len, const TdsDatumTarget *target)
{
	char	   *converted;
	Datum		d;

	if (memchr(data, '\0', len) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNTRANSLATABLE_CHARACTER),
				 errmsg("SQL Server sent a character value containing a NUL byte, which PostgreSQL text cannot store")));
	/* verifies the bytes; returns its input unchanged when nothing is converted */
	converted = pg_any_to_server((const char *) data, len, PG_UTF8);
	if (converted == (const char *) data)
		d = PointerGetDatum(cstring_to_text_with_len(converted, len));
	else
		d = PointerGetDatum(cstring_to_text(converted));
	if (target->typid == VARCHAROID && target->typmod >= 0)
		d = DirectFunctionCall3(varchar, d, Int32GetDatum(target->typmod), BoolGetDatum(false));
	else if (target->typid == BPCHAROID)
		d = DirectFunctionCall3(bpchar, d, Int32GetDatum(target->typmod), BoolGetDatum(false));
	return d;
}

static Datum
uuid_to_datum(int tds_type, const uint8 *data, int len)
{
	pg_uuid_t  *u = palloc(sizeof(pg_uuid_t));
	uint32		d1;
	uint16		d2,
				d3;

	/* libtds stores Data1..Data3 in host byte order, Data4 as sent */
	tds_value_expect_length(tds_type, len, 16);
	memcpy(&d1, data, 4);
	memcpy(&d2, data + 4, 2);
	memcpy(&d3, data + 6, 2);
	d1 = pg_hton32(d1);
	d2 = pg_hton16(d2);
	d3 = pg_hton16(d3);
	memcpy(u->data, &d1, 4);
	memcpy(u->data + 4, &d2, 2);
	memcpy(u->data + 6, &d3, 2);
	memcpy(u->data + 8, data + 8, 8);
	return UUIDPGetDatum(u);
}

/* An integer of a db-lib integer type, when it has that length */
static int64
int_value(int tds_type, const uint8 *data, int len)
{
	switch (tds_type)
	{
		case SYBINT1:
			tds_value_expect_length(tds_type, len, 1);
			return data[0];		/* tinyint is unsigned */
		case SYBINT2:
			{
				int16		v;

				tds_value_expect_length(tds_type, len, 2);
				memcpy(&v, data, 2);
				return v;
			}
		case SYBINT4:
			{
				int32		v;

				tds_value_expect_length(tds_type, len, 4);
				memcpy(&v, data, 4);
				return v;
			}
		default:
			{
				int64		v;

				tds_value_expect_length(tds_type, len, 8);
				memcpy(&v, data, 8);
				return v;
			}
	}
}

/* Widest PostgreSQL integer type each db-lib integer type always fits */
static bool
int_fits(int tds_type, Oid typid)
{
	switch (typid)
	{
		case INT2OID:
			return tds_type == SYBINT1 || tds_type == SYBINT2;
		case INT4OID:
			return tds_type != SYBINT8;
		case INT8OID:
			return true;
		default:
			return false;
	}
}

/*
 * The direct conversion of one non-NULL value, when the pair of types has
 * one; false sends the value down the text path.
 */
static bool
direct_datum(void *dbproc, int tds_type, const uint8 *data, int len,
			 const TdsDatumTarget *target, Datum *result)
{
	Oid			typid = target->typid;

	switch (tds_type)
	{
		case SYBBIT:
		case SYBBITN:
			if (typid != BOOLOID)
				return false;
			tds_value_expect_length(tds_type, len, 1);
			*result = BoolGetDatum(data[0] != 0);
			return true;
		case SYBINT1:
		case SYBINT2:
		case SYBINT4:
		case SYBINT8:
			{
				int64		v;

				if (!int_fits(tds_type, typid))
					return false;
				v = int_value(tds_type, data, len);
				*result = typid == INT2OID ? Int16GetDatum((int16) v) :
					typid == INT4OID ? Int32GetDatum((int32) v) : Int64GetDatum(v);
				return true;
			}
		case SYBREAL:
			{
				float4		v;

				/* not to float8: the text path rounds through the shortest digits */
				if (typid != FLOAT4OID)
					return false;
				tds_value_expect_length(tds_type, len, 4);
				memcpy(&v, data, 4);
				*result = Float4GetDatum(v);
				return true;
			}
		case SYBFLT8:
			{
				float8		v;

				if (typid != FLOAT8OID)
					return false;
				tds_value_expect_length(tds_type, len, 8);
				memcpy(&v, data, 8);
				*result = Float8GetDatum(v);
				return true;
			}
		case SYBMONEY:
		case SYBMONEY4:
			if (typid != NUMERICOID)
				return false;
			*result = tds_money_to_datum(tds_type, data, len, target->typmod);
			return true;
		case SYBNUMERIC:
		case SYBDECIMAL:
			return typid == NUMERICOID &&
				tds_decimal_to_datum(tds_type, data, len, target->typmod, result);
		case SYBCHAR:
		case SYBVARCHAR:
		case SYBTEXT:
		case SYBNTEXT:
		case SYBNVARCHAR:
		case TDS_XSYBCHAR:
		case TDS_XSYBVARCHAR:
		case TDS_XSYBNCHAR:
		case TDS_XSYBNVARCHAR:
			if (typid != TEXTOID && typid != VARCHAROID && typid != BPCHAROID)
				return false;
			*result = character_to_datum(data, len, target);
			return true;
		case SYBBINARY:
		case SYBVARBINARY:
		case SYBIMAGE:
		case TDS_XSYBBINARY:
		case TDS_XSYBVARBINARY:
			if (typid != BYTEAOID)
				return false;
			*result = bytea_datum(data, len);
			return true;
		case SYBDATETIME:
		case SYBDATETIME4:
			if (typid != TIMESTAMPOID)
				return false;
			*result = tds_datetime_to_datum(tds_type, data, len, target->typmod);
			return true;
		case SYBMSDATE:
		case SYBMSTIME:
		case SYBMSDATETIME2:
		case SYBMSDATETIMEOFFSET:
			return tds_msdate_to_datum(dbproc, tds_type, data, len, typid, target->typmod,
									   result);
		case SYBUNIQUE:
			if (typid != UUIDOID)
				return false;
			*result = uuid_to_datum(tds_type, data, len);
			return true;
	}
	return false;
}

void
tds_datum_target_init(TdsDatumTarget *target, Oid typid, int32 typmod)
{
	Oid			infunc;

	target->typid = typid;
	target->typmod = typmod;
	getTypeInputInfo(typid, &infunc, &target->ioparam);
	fmgr_info(infunc, &target->input);
}

Datum
tds_value_to_datum(void *dbproc, int tds_type, const uint8 *data, int len,
				   const TdsDatumTarget *target, bool *isnull)
{
	Datum		result;
	char	   *text;

	*isnull = (data == NULL);
	if (data == NULL)
		return (Datum) 0;
	if (len < 0)
		tds_value_bad_length(tds_type, len);
	if (direct_datum(dbproc, tds_type, data, len, target, &result))
		return result;
	text = tds_value_to_text(dbproc, tds_type, data, len);
	return InputFunctionCall((FmgrInfo *) &target->input, text, target->ioparam,
							 target->typmod);
}
