/*-------------------------------------------------------------------------
 *
 * tds_convert.c
 *		db-lib column values -> PostgreSQL text and Datums, exactly.
 *
 * Each SQL Server type is rendered from its binary form as db-lib hands it
 * over (dbdata): integers and money as integers, decimal from its magnitude
 * bytes, date/time from dbanydatecrack fields, floats with the shortest
 * round-trip digits.  Nothing goes through dbconvert()'s locale-dependent
 * text or through a double.  The rules, including the sub-microsecond
 * rounding, are documented in tds_convert.h.
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
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "port/pg_bswap.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "tds_convert.h"

/* Type codes libtds uses that sybdb.h does not name */
#ifndef SYBUNIQUE
#define SYBUNIQUE		36
#endif
#define TDS_XSYBVARBINARY	165
#define TDS_XSYBBINARY		173
#define TDS_XSYBVARCHAR		167
#define TDS_XSYBCHAR		175
#define TDS_XSYBNVARCHAR	231
#define TDS_XSYBNCHAR		239

#define USECS_PER_SEC_I		INT64CONST(1000000)
#define USECS_PER_DAY_I		(INT64CONST(86400) * USECS_PER_SEC_I)

/*
 * Bytes (sign byte included) FreeTDS uses for a DBNUMERIC of a given
 * precision; the magnitude is array[1 .. n-1], big-endian.  Same table as
 * libtds's tds_numeric_bytes_per_prec (precision 1..77).
 */
static const int numeric_bytes_per_prec[] = {
	1,
	2, 2, 3, 3, 4, 4, 4, 5, 5,
	6, 6, 6, 7, 7, 8, 8, 9, 9, 9,
	10, 10, 11, 11, 11, 12, 12, 13, 13, 14,
	14, 14, 15, 15, 16, 16, 16, 17, 17, 18,
	18, 19, 19, 19, 20, 20, 21, 21, 21, 22,
	22, 23, 23, 24, 24, 24, 25, 25, 26, 26,
	26, 27, 27, 28, 28, 28, 29, 29, 30, 30,
	31, 31, 31, 32, 32, 33, 33, 33
};
#define NUMERIC_MAX_PREC	77

static void
bad_length(int tds_type, int len)
{
	ereport(ERROR,
			(errcode(ERRCODE_FDW_INVALID_STRING_FORMAT),
			 errmsg("SQL Server sent a %s value of unexpected length %d",
					tds_type_name(tds_type), len)));
}

static void
expect_length(int tds_type, int len, int expected)
{
	if (len != expected)
		bad_length(tds_type, len);
}

/*
 * Render an unsigned big-endian magnitude of nbytes as decimal digits with
 * scale digits after the point.  Long division by 10^9 on 32-bit limbs:
 * exact for any width FreeTDS can deliver (up to 32 magnitude bytes).
 */
static char *
magnitude_to_text(bool negative, const uint8 *mag, int nbytes, int scale)
{
	uint32		limbs[9];		/* 32 bytes = 8 limbs, +1 spare */
	int			nlimbs = 0;
	uint32		chunks[12];		/* base 10^9 digits, least significant first */
	int			nchunks = 0;
	char		digits[12 * 9 + 1];
	char	   *d;
	int			ndigits;
	StringInfoData out;
	int			i;

	/* big-endian bytes -> big-endian 32-bit limbs */
	{
		int			lead = nbytes % 4;
		int			pos = 0;

		if (lead)
		{
			uint32		v = 0;

			for (i = 0; i < lead; i++)
				v = (v << 8) | mag[pos++];
			limbs[nlimbs++] = v;
		}
		while (pos < nbytes)
		{
			limbs[nlimbs++] = ((uint32) mag[pos] << 24) | ((uint32) mag[pos + 1] << 16) |
				((uint32) mag[pos + 2] << 8) | mag[pos + 3];
			pos += 4;
		}
	}

	/* repeated division by 10^9 */
	for (;;)
	{
		uint64		rem = 0;
		bool		nonzero = false;

		for (i = 0; i < nlimbs; i++)
		{
			uint64		cur = (rem << 32) | limbs[i];

			limbs[i] = (uint32) (cur / 1000000000);
			rem = cur % 1000000000;
			if (limbs[i] != 0)
				nonzero = true;
		}
		chunks[nchunks++] = (uint32) rem;
		if (!nonzero || nchunks == lengthof(chunks))
			break;
	}

	/* chunks -> digit string without leading zeros */
	d = digits;
	d += sprintf(d, "%u", chunks[nchunks - 1]);
	for (i = nchunks - 2; i >= 0; i--)
		d += sprintf(d, "%09u", chunks[i]);
	ndigits = d - digits;

	initStringInfo(&out);
	if (negative)
		appendStringInfoChar(&out, '-');
	if (scale <= 0)
		appendBinaryStringInfo(&out, digits, ndigits);
	else if (ndigits > scale)
	{
		appendBinaryStringInfo(&out, digits, ndigits - scale);
		appendStringInfoChar(&out, '.');
		appendBinaryStringInfo(&out, digits + ndigits - scale, scale);
	}
	else
	{
		appendStringInfoString(&out, "0.");
		for (i = ndigits; i < scale; i++)
			appendStringInfoChar(&out, '0');
		appendBinaryStringInfo(&out, digits, ndigits);
	}
	return out.data;
}

static char *
numeric_to_text(int tds_type, const uint8 *data, int len)
{
	DBNUMERIC	num;
	int			nbytes;

	if (len < 2 || len > (int) sizeof(DBNUMERIC))
		bad_length(tds_type, len);
	memset(&num, 0, sizeof(num));
	memcpy(&num, data, len);
	if (num.precision < 1 || num.precision > NUMERIC_MAX_PREC || num.scale > num.precision)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_STRING_FORMAT),
				 errmsg("SQL Server sent a decimal value with invalid precision %d and scale %d",
						num.precision, num.scale)));
	nbytes = numeric_bytes_per_prec[num.precision] - 1;
	/* FreeTDS stores sign 1 for negative (it converts from the wire's 0) */
	return magnitude_to_text(num.array[0] == 1, num.array + 1, nbytes, num.scale);
}

/* money: an int64 count of 1/10000 units */
static char *
money_to_text(int64 value)
{
	uint64		mag = value < 0 ? (uint64) 0 - (uint64) value : (uint64) value;

	return psprintf("%s" UINT64_FORMAT ".%04u", value < 0 ? "-" : "",
					mag / 10000, (unsigned) (mag % 10000));
}

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

/*
 * Format a date and a microsecond-of-day offset (which may equal or exceed
 * one day after rounding) as "YYYY-MM-DD HH:MM:SS.ffffff", carrying into
 * the date.
 */
static void
append_timestamp(StringInfo out, int year, int month, int day, int64 usec_of_day)
{
	int			jd = date2j(year, month, day);
	int64		secs;

	/* floor division: datetime values before 1900 give negative offsets */
	int64		days = usec_of_day / USECS_PER_DAY_I;

	usec_of_day -= days * USECS_PER_DAY_I;
	if (usec_of_day < 0)
	{
		usec_of_day += USECS_PER_DAY_I;
		days--;
	}
	jd += (int) days;
	j2date(jd, &year, &month, &day);
	secs = usec_of_day / USECS_PER_SEC_I;
	appendStringInfo(out, "%04d-%02d-%02d %02d:%02d:%02d.%06d",
					 year, month, day,
					 (int) (secs / 3600), (int) (secs / 60 % 60), (int) (secs % 60),
					 (int) (usec_of_day % USECS_PER_SEC_I));
}

/* 100 ns digits (as nanoseconds) -> microseconds, rounded half up */
static int64
round_ns_to_us(int nanosecond)
{
	return ((int64) nanosecond + 500) / 1000;
}

static char *
msdate_to_text(void *dbproc, int tds_type, const uint8 *data, int len)
{
	DBDATEREC2	dr;
	DBDATETIMEALL dta;
	StringInfoData out;
	int64		usec;

	/* db-lib hands these types over as a DBDATETIMEALL struct */
	expect_length(tds_type, len, sizeof(DBDATETIMEALL));
	if (dbproc == NULL)			/* a caller that expected no date/time value */
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
				 errmsg("could not decode a SQL Server %s value here", tds_type_name(tds_type))));
	memcpy(&dta, data, sizeof(dta));
	memset(&dr, 0, sizeof(dr));
	if (dbanydatecrack((DBPROCESS *) dbproc, &dr, tds_type, &dta) != SUCCEED)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_STRING_FORMAT),
				 errmsg("could not decode a SQL Server %s value", tds_type_name(tds_type))));
	if (dr.month < 1 || dr.month > 12 || dr.day < 1 || dr.day > 31 ||
		dr.hour < 0 || dr.hour > 23 || dr.minute < 0 || dr.minute > 59 ||
		dr.second < 0 || dr.second > 59 || dr.nanosecond < 0 || dr.nanosecond > 999999999)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_STRING_FORMAT),
				 errmsg("SQL Server sent an out-of-range %s value", tds_type_name(tds_type))));

	usec = ((int64) ((dr.hour * 60 + dr.minute) * 60 + dr.second)) * USECS_PER_SEC_I +
		round_ns_to_us(dr.nanosecond);

	initStringInfo(&out);
	switch (tds_type)
	{
		case SYBMSDATE:
			appendStringInfo(&out, "%04d-%02d-%02d", dr.year, dr.month, dr.day);
			break;
		case SYBMSTIME:
			{
				/* may round up to 24:00:00, which PostgreSQL's time accepts */
				int64		secs = usec / USECS_PER_SEC_I;

				appendStringInfo(&out, "%02d:%02d:%02d.%06d",
								 (int) (secs / 3600), (int) (secs / 60 % 60),
								 (int) (secs % 60), (int) (usec % USECS_PER_SEC_I));
				break;
			}
		case SYBMSDATETIME2:
			append_timestamp(&out, dr.year, dr.month, dr.day, usec);
			break;
		case SYBMSDATETIMEOFFSET:
			{
				/* the cracked fields are local time at the value's offset */
				int			off = dta.offset;
				int			aoff = off < 0 ? -off : off;

				append_timestamp(&out, dr.year, dr.month, dr.day, usec);
				appendStringInfo(&out, "%c%02d:%02d", off < 0 ? '-' : '+',
								 aoff / 60, aoff % 60);
				break;
			}
	}
	return out.data;
}

/*
 * Legacy datetime: days since 1900-01-01 and 1/300 s ticks.  Decoded here
 * rather than with dbanydatecrack, which rounds the ticks to milliseconds.
 */
static char *
datetime_to_text(int tds_type, const uint8 *data, int len)
{
	StringInfoData out;

	initStringInfo(&out);
	if (tds_type == SYBDATETIME4)
	{
		DBDATETIME4 dt4;

		expect_length(tds_type, len, sizeof(dt4));
		memcpy(&dt4, data, sizeof(dt4));
		if (dt4.minutes >= 24 * 60)
			bad_length(tds_type, len);
		append_timestamp(&out, 1900, 1, 1,
						 (int64) dt4.days * USECS_PER_DAY_I +
						 (int64) dt4.minutes * 60 * USECS_PER_SEC_I);
	}
	else
	{
		DBDATETIME	dt;
		int64		ticks;

		expect_length(tds_type, len, sizeof(dt));
		memcpy(&dt, data, sizeof(dt));
		ticks = (uint32) dt.dttime;
		if (ticks >= INT64CONST(300) * 86400 || dt.dtdays < -53690 || dt.dtdays > 2958463)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_STRING_FORMAT),
					 errmsg("SQL Server sent an out-of-range datetime value")));
		/* ticks * 10^6 / 300 us, rounded half up; carry handled by the caller */
		append_timestamp(&out, 1900, 1, 1,
						 (int64) dt.dtdays * USECS_PER_DAY_I +
						 (ticks * 10000 + 1) / 3);
	}
	return out.data;
}

static char *
uuid_to_text(int tds_type, const uint8 *data, int len)
{
	uint32		d1;
	uint16		d2,
				d3;

	/* libtds stores Data1..Data3 in host byte order, Data4 as sent */
	expect_length(tds_type, len, 16);
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
		bad_length(tds_type, len);

	switch (tds_type)
	{
		case SYBBIT:
		case SYBBITN:
			expect_length(tds_type, len, 1);
			return pstrdup(data[0] ? "true" : "false");
		case SYBINT1:
			expect_length(tds_type, len, 1);
			return psprintf("%u", (unsigned) data[0]);	/* tinyint is unsigned */
		case SYBINT2:
			{
				int16		v;

				expect_length(tds_type, len, 2);
				memcpy(&v, data, 2);
				return psprintf("%d", (int) v);
			}
		case SYBINT4:
			{
				int32		v;

				expect_length(tds_type, len, 4);
				memcpy(&v, data, 4);
				return psprintf("%d", v);
			}
		case SYBINT8:
			{
				int64		v;

				expect_length(tds_type, len, 8);
				memcpy(&v, data, 8);
				return psprintf(INT64_FORMAT, v);
			}
		case SYBREAL:
			{
				float		v;
				char		buf[FLOAT_SHORTEST_DECIMAL_LEN];

				expect_length(tds_type, len, 4);
				memcpy(&v, data, 4);
				float_to_shortest_decimal_buf(v, buf);
				return pstrdup(buf);
			}
		case SYBFLT8:
			{
				double		v;
				char		buf[DOUBLE_SHORTEST_DECIMAL_LEN];

				expect_length(tds_type, len, 8);
				memcpy(&v, data, 8);
				double_to_shortest_decimal_buf(v, buf);
				return pstrdup(buf);
			}
		case SYBNUMERIC:
		case SYBDECIMAL:
			return numeric_to_text(tds_type, data, len);
		case SYBMONEY:
			{
				DBMONEY		m;

				expect_length(tds_type, len, sizeof(m));
				memcpy(&m, data, sizeof(m));
				return money_to_text((int64) (((uint64) (uint32) m.mnyhigh << 32) | m.mnylow));
			}
		case SYBMONEY4:
			{
				DBMONEY4	m;

				expect_length(tds_type, len, sizeof(m));
				memcpy(&m, data, sizeof(m));
				return money_to_text((int64) m.mny4);
			}
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
			return datetime_to_text(tds_type, data, len);
		case SYBMSDATE:
		case SYBMSTIME:
		case SYBMSDATETIME2:
		case SYBMSDATETIMEOFFSET:
			return msdate_to_text(dbproc, tds_type, data, len);
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

/*
 * The microseconds since the PostgreSQL epoch of a date and a time of day
 * (which may reach one day after rounding): the value timestamp_in gives
 * for the text append_timestamp writes.
 */
static Timestamp
timestamp_from_fields(int year, int month, int day, int64 usec_of_day)
{
	return (Timestamp) (date2j(year, month, day) - POSTGRES_EPOCH_JDATE) * USECS_PER_DAY_I +
		usec_of_day;
}

static Datum
timestamp_datum(Timestamp ts, const TdsDatumTarget *target)
{
	/* what timestamp_in / timestamptz_in do with the typmod */
	AdjustTimestampForTypmod(&ts, target->typmod);
	return TimestampGetDatum(ts);
}

/* date/time/datetime2/datetimeoffset, from the same cracked fields as the text path */
static bool
msdate_to_datum(void *dbproc, int tds_type, const uint8 *data, int len,
				const TdsDatumTarget *target, Datum *result)
{
	DBDATEREC2	dr;
	DBDATETIMEALL dta;
	int64		usec;

	expect_length(tds_type, len, sizeof(DBDATETIMEALL));
	if (dbproc == NULL)
		return false;			/* the text path raises the error */
	memcpy(&dta, data, sizeof(dta));
	memset(&dr, 0, sizeof(dr));
	if (dbanydatecrack((DBPROCESS *) dbproc, &dr, tds_type, &dta) != SUCCEED)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_STRING_FORMAT),
				 errmsg("could not decode a SQL Server %s value", tds_type_name(tds_type))));
	if (dr.month < 1 || dr.month > 12 || dr.day < 1 || dr.day > 31 ||
		dr.hour < 0 || dr.hour > 23 || dr.minute < 0 || dr.minute > 59 ||
		dr.second < 0 || dr.second > 59 || dr.nanosecond < 0 || dr.nanosecond > 999999999)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_STRING_FORMAT),
				 errmsg("SQL Server sent an out-of-range %s value", tds_type_name(tds_type))));
	usec = ((int64) ((dr.hour * 60 + dr.minute) * 60 + dr.second)) * USECS_PER_SEC_I +
		round_ns_to_us(dr.nanosecond);

	switch (tds_type)
	{
		case SYBMSDATE:
			if (target->typid != DATEOID)
				return false;
			*result = DateADTGetDatum(date2j(dr.year, dr.month, dr.day) - POSTGRES_EPOCH_JDATE);
			return true;
		case SYBMSTIME:
			{
				TimeADT		t = usec;	/* may be 24:00:00, as time_in allows */

				if (target->typid != TIMEOID)
					return false;
				AdjustTimeForTypmod(&t, target->typmod);
				*result = TimeADTGetDatum(t);
				return true;
			}
		case SYBMSDATETIME2:
			if (target->typid != TIMESTAMPOID)
				return false;
			*result = timestamp_datum(timestamp_from_fields(dr.year, dr.month, dr.day, usec),
									  target);
			return true;
		case SYBMSDATETIMEOFFSET:
			/* the cracked fields are local time at the value's offset */
			if (target->typid != TIMESTAMPTZOID)
				return false;
			*result = timestamp_datum(timestamp_from_fields(dr.year, dr.month, dr.day, usec) -
									  (int64) dta.offset * 60 * USECS_PER_SEC_I,
									  target);
			return true;
	}
	return false;
}

/* datetime / smalldatetime, decoded as datetime_to_text does */
static Datum
datetime_to_datum(int tds_type, const uint8 *data, int len, const TdsDatumTarget *target)
{
	if (tds_type == SYBDATETIME4)
	{
		DBDATETIME4 dt4;

		expect_length(tds_type, len, sizeof(dt4));
		memcpy(&dt4, data, sizeof(dt4));
		if (dt4.minutes >= 24 * 60)
			bad_length(tds_type, len);
		return timestamp_datum(timestamp_from_fields(1900, 1, 1,
													 (int64) dt4.days * USECS_PER_DAY_I +
													 (int64) dt4.minutes * 60 * USECS_PER_SEC_I),
							   target);
	}
	else
	{
		DBDATETIME	dt;
		int64		ticks;

		expect_length(tds_type, len, sizeof(dt));
		memcpy(&dt, data, sizeof(dt));
		ticks = (uint32) dt.dttime;
		if (ticks >= INT64CONST(300) * 86400 || dt.dtdays < -53690 || dt.dtdays > 2958463)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_STRING_FORMAT),
					 errmsg("SQL Server sent an out-of-range datetime value")));
		return timestamp_datum(timestamp_from_fields(1900, 1, 1,
													 (int64) dt.dtdays * USECS_PER_DAY_I +
													 (ticks * 10000 + 1) / 3),
							   target);
	}
}

/* A numeric of value/10^scale with display scale `scale`, then the typmod */
static Datum
scaled_int64_to_numeric(int64 value, int scale, const TdsDatumTarget *target)
{
	Datum		d = NumericGetDatum(int64_div_fast_to_numeric(value, scale));

	/* numeric_in applies the typmod the same way (rounding, overflow error) */
	if (target->typmod >= 0)
		d = DirectFunctionCall2(numeric, d, Int32GetDatum(target->typmod));
	return d;
}

/*
 * decimal/numeric whose magnitude fits comfortably in an int64 (up to 15
 * digits: int64_div_fast_to_numeric may scale it by up to 10^3); false
 * for wider ones, which take the text path.
 */
static bool
decimal_to_datum(int tds_type, const uint8 *data, int len, const TdsDatumTarget *target,
				 Datum *result)
{
	DBNUMERIC	num;
	int			nbytes;
	uint64		mag = 0;
	int			i;

	if (len < 2 || len > (int) sizeof(DBNUMERIC))
		bad_length(tds_type, len);
	memset(&num, 0, sizeof(num));
	memcpy(&num, data, len);
	if (num.precision < 1 || num.precision > NUMERIC_MAX_PREC || num.scale > num.precision)
		return false;			/* the text path raises the error */
	nbytes = numeric_bytes_per_prec[num.precision] - 1;
	for (i = 0; i < nbytes; i++)
	{
		if (mag > (UINT64CONST(999999999999999) >> 8))
			return false;
		mag = (mag << 8) | num.array[1 + i];
	}
	if (mag > UINT64CONST(999999999999999))
		return false;
	*result = scaled_int64_to_numeric(num.array[0] == 1 ? -(int64) mag : (int64) mag,
									  num.scale, target);
	return true;
}

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
	expect_length(tds_type, len, 16);
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
			expect_length(tds_type, len, 1);
			return data[0];		/* tinyint is unsigned */
		case SYBINT2:
			{
				int16		v;

				expect_length(tds_type, len, 2);
				memcpy(&v, data, 2);
				return v;
			}
		case SYBINT4:
			{
				int32		v;

				expect_length(tds_type, len, 4);
				memcpy(&v, data, 4);
				return v;
			}
		default:
			{
				int64		v;

				expect_length(tds_type, len, 8);
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
			expect_length(tds_type, len, 1);
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
				expect_length(tds_type, len, 4);
				memcpy(&v, data, 4);
				*result = Float4GetDatum(v);
				return true;
			}
		case SYBFLT8:
			{
				float8		v;

				if (typid != FLOAT8OID)
					return false;
				expect_length(tds_type, len, 8);
				memcpy(&v, data, 8);
				*result = Float8GetDatum(v);
				return true;
			}
		case SYBMONEY:
			{
				DBMONEY		m;

				if (typid != NUMERICOID)
					return false;
				expect_length(tds_type, len, sizeof(m));
				memcpy(&m, data, sizeof(m));
				*result = scaled_int64_to_numeric((int64) (((uint64) (uint32) m.mnyhigh << 32) | m.mnylow),
												  4, target);
				return true;
			}
		case SYBMONEY4:
			{
				DBMONEY4	m;

				if (typid != NUMERICOID)
					return false;
				expect_length(tds_type, len, sizeof(m));
				memcpy(&m, data, sizeof(m));
				*result = scaled_int64_to_numeric((int64) m.mny4, 4, target);
				return true;
			}
		case SYBNUMERIC:
		case SYBDECIMAL:
			return typid == NUMERICOID &&
				decimal_to_datum(tds_type, data, len, target, result);
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
			*result = datetime_to_datum(tds_type, data, len, target);
			return true;
		case SYBMSDATE:
		case SYBMSTIME:
		case SYBMSDATETIME2:
		case SYBMSDATETIMEOFFSET:
			return msdate_to_datum(dbproc, tds_type, data, len, target, result);
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
		bad_length(tds_type, len);
	if (direct_datum(dbproc, tds_type, data, len, target, &result))
		return result;
	text = tds_value_to_text(dbproc, tds_type, data, len);
	return InputFunctionCall((FmgrInfo *) &target->input, text, target->ioparam,
							 target->typmod);
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
