/*-------------------------------------------------------------------------
 *
 * tds_convert_numeric.c
 *		SQL Server decimal/numeric and money values -> PostgreSQL numeric
 *		text and Datums (see tds_convert_numeric.h).
 *
 * decimal is rendered from its magnitude bytes by long division, money
 * from its int64 count of 1/10000 units; the direct Datums are built from
 * the same integers, with the typmod applied as numeric_in applies it.
 *
 * IDENTIFICATION
 *		src/tds_convert_numeric.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#define MSDBLIB 1				/* Microsoft field names, months 1-12 */
#include <sybfront.h>
#include <sybdb.h>

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/fmgrprotos.h"
#include "utils/numeric.h"

#include "tds_convert_numeric.h"
#include "tds_type.h"

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

/* The DBNUMERIC of a decimal/numeric value, its length checked */
static void
decimal_copy(int tds_type, const uint8 *data, int len, DBNUMERIC *num)
{
	if (len < 2 || len > (int) sizeof(DBNUMERIC))
		tds_value_bad_length(tds_type, len);
	memset(num, 0, sizeof(*num));
	memcpy(num, data, len);
}

char *
tds_decimal_to_text(int tds_type, const uint8 *data, int len)
{
	DBNUMERIC	num;
	int			nbytes;

	decimal_copy(tds_type, data, len, &num);
	if (num.precision < 1 || num.precision > NUMERIC_MAX_PREC || num.scale > num.precision)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_STRING_FORMAT),
				 errmsg("SQL Server sent a decimal value with invalid precision %d and scale %d",
						num.precision, num.scale)));
	nbytes = numeric_bytes_per_prec[num.precision] - 1;
	/* FreeTDS stores sign 1 for negative (it converts from the wire's 0) */
	return magnitude_to_text(num.array[0] == 1, num.array + 1, nbytes, num.scale);
}

/* A numeric of value/10^scale with display scale `scale`, then the typmod */
static Datum
scaled_int64_to_numeric(int64 value, int scale, int32 typmod)
{
	Datum		d = NumericGetDatum(int64_div_fast_to_numeric(value, scale));

	/* numeric_in applies the typmod the same way (rounding, overflow error) */
	if (typmod >= 0)
		d = DirectFunctionCall2(numeric, d, Int32GetDatum(typmod));
	return d;
}

/*
 * decimal/numeric whose magnitude fits comfortably in an int64 (up to 15
 * digits: int64_div_fast_to_numeric may scale it by up to 10^3); false
 * for wider ones, which take the text path.
 */
bool
tds_decimal_to_datum(int tds_type, const uint8 *data, int len, int32 typmod, Datum *result)
{
	DBNUMERIC	num;
	int			nbytes;
	uint64		mag = 0;
	int			i;

	decimal_copy(tds_type, data, len, &num);
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
									  num.scale, typmod);
	return true;
}

/* money/smallmoney: an int64 count of 1/10000 units */
static int64
money_value(int tds_type, const uint8 *data, int len)
{
	if (tds_type == SYBMONEY4)
	{
		DBMONEY4	m;

		tds_value_expect_length(tds_type, len, sizeof(m));
		memcpy(&m, data, sizeof(m));
		return (int64) m.mny4;
	}
	else
	{
		DBMONEY		m;

		tds_value_expect_length(tds_type, len, sizeof(m));
		memcpy(&m, data, sizeof(m));
		return (int64) (((uint64) (uint32) m.mnyhigh << 32) | m.mnylow);
	}
}

char *
tds_money_to_text(int tds_type, const uint8 *data, int len)
{
	int64		value = money_value(tds_type, data, len);
	uint64		mag = value < 0 ? (uint64) 0 - (uint64) value : (uint64) value;

	return psprintf("%s" UINT64_FORMAT ".%04u", value < 0 ? "-" : "",
					mag / 10000, (unsigned) (mag % 10000));
}

Datum
tds_money_to_datum(int tds_type, const uint8 *data, int len, int32 typmod)
{
	return scaled_int64_to_numeric(money_value(tds_type, data, len), 4, typmod);
}
