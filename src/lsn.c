/*-------------------------------------------------------------------------
 *
 * lsn.c
 *		The mssql_cdc.lsn SQL type: SQL Server's binary(10) log sequence
 *		number with SQL Server's ordering and display.
 *
 * Storing checkpoints as bytea would compare correctly (bytea order is
 * memcmp too) but would display as '\x0000...' and accept any length; a
 * dedicated fixed-length type rejects malformed values at the boundary and
 * prints LSNs the way SQL Server users read them.
 *
 * IDENTIFICATION
 *		src/lsn.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "fmgr.h"
#include "libpq/pqformat.h"
#include "utils/builtins.h"

#include "lsn.h"

/* The SQL type is declared INTERNALLENGTH = 10 and stores the struct as is. */
StaticAssertDecl(sizeof(MssqlLsn) == MSSQL_LSN_BYTES, "MssqlLsn must be exactly 10 bytes");

static int
hex_digit_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Read exactly ndigits hex digits from *str into consecutive bytes of out
 * (ndigits is even).  Advances *str.  Returns false on a non-hex character.
 */
static bool
parse_hex_run(const char **str, int ndigits, uint8 *out)
{
	const char *p = *str;
	int			i;

	for (i = 0; i < ndigits; i += 2)
	{
		int			hi = hex_digit_value(p[i]);
		int			lo;

		if (hi < 0)
			return false;
		lo = hex_digit_value(p[i + 1]);
		if (lo < 0)
			return false;
		out[i / 2] = (uint8) ((hi << 4) | lo);
	}
	*str = p + ndigits;
	return true;
}

bool
mssql_lsn_parse(const char *str, MssqlLsn *result)
{
	const char *p = str;

	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
	{
		p += 2;
		if (strlen(p) != 2 * MSSQL_LSN_BYTES)
			return false;
		return parse_hex_run(&p, 2 * MSSQL_LSN_BYTES, result->bytes);
	}

	/* colon form VVVVVVVV:BBBBBBBB:SSSS, as fn_dblog and Debezium print it */
	if (strlen(p) != 8 + 1 + 8 + 1 + 4 || p[8] != ':' || p[17] != ':')
		return false;
	if (!parse_hex_run(&p, 8, result->bytes))
		return false;
	p++;
	if (!parse_hex_run(&p, 8, result->bytes + 4))
		return false;
	p++;
	return parse_hex_run(&p, 4, result->bytes + 8);
}

void
mssql_lsn_format(const MssqlLsn *lsn, char *buf)
{
	static const char digits[] = "0123456789ABCDEF";
	int			i;

	buf[0] = '0';
	buf[1] = 'x';
	for (i = 0; i < MSSQL_LSN_BYTES; i++)
	{
		buf[2 + 2 * i] = digits[lsn->bytes[i] >> 4];
		buf[3 + 2 * i] = digits[lsn->bytes[i] & 0x0F];
	}
	buf[2 + 2 * MSSQL_LSN_BYTES] = '\0';
}

Datum
mssql_lsn_text_datum(const MssqlLsn *lsn)
{
	char		buf[MSSQL_LSN_TEXT_SIZE];

	mssql_lsn_format(lsn, buf);
	return CStringGetTextDatum(buf);
}

int
mssql_lsn_cmp(const MssqlLsn *a, const MssqlLsn *b)
{
	return memcmp(a->bytes, b->bytes, MSSQL_LSN_BYTES);
}

bool
mssql_lsn_increment(const MssqlLsn *lsn, MssqlLsn *result)
{
	int			i;

	memcpy(result->bytes, lsn->bytes, MSSQL_LSN_BYTES);
	for (i = MSSQL_LSN_BYTES - 1; i >= 0; i--)
	{
		if (result->bytes[i] != 0xFF)
		{
			result->bytes[i]++;
			return true;
		}
		result->bytes[i] = 0;	/* carry into the next more significant byte */
	}
	return false;
}

bool
mssql_lsn_decrement(const MssqlLsn *lsn, MssqlLsn *result)
{
	int			i;

	memcpy(result->bytes, lsn->bytes, MSSQL_LSN_BYTES);
	for (i = MSSQL_LSN_BYTES - 1; i >= 0; i--)
	{
		if (result->bytes[i] != 0)
		{
			result->bytes[i]--;
			return true;
		}
		result->bytes[i] = 0xFF;	/* borrow from the next more significant byte */
	}
	return false;
}

bool
mssql_lsn_is_zero(const MssqlLsn *lsn)
{
	int			i;

	for (i = 0; i < MSSQL_LSN_BYTES; i++)
		if (lsn->bytes[i] != 0)
			return false;
	return true;
}

/* ---- SQL-callable functions ---- */

PG_FUNCTION_INFO_V1(mssql_cdc_lsn_in);
PG_FUNCTION_INFO_V1(mssql_cdc_lsn_out);
PG_FUNCTION_INFO_V1(mssql_cdc_lsn_recv);
PG_FUNCTION_INFO_V1(mssql_cdc_lsn_send);
PG_FUNCTION_INFO_V1(mssql_cdc_lsn_eq);
PG_FUNCTION_INFO_V1(mssql_cdc_lsn_ne);
PG_FUNCTION_INFO_V1(mssql_cdc_lsn_lt);
PG_FUNCTION_INFO_V1(mssql_cdc_lsn_le);
PG_FUNCTION_INFO_V1(mssql_cdc_lsn_gt);
PG_FUNCTION_INFO_V1(mssql_cdc_lsn_ge);
PG_FUNCTION_INFO_V1(mssql_cdc_lsn_btree_cmp);
PG_FUNCTION_INFO_V1(mssql_cdc_lsn_hash);
PG_FUNCTION_INFO_V1(mssql_cdc_lsn_hash_extended);
PG_FUNCTION_INFO_V1(mssql_cdc_lsn_larger);
PG_FUNCTION_INFO_V1(mssql_cdc_lsn_smaller);
PG_FUNCTION_INFO_V1(mssql_cdc_lsn_to_bytea);
PG_FUNCTION_INFO_V1(mssql_cdc_lsn_from_bytea);
PG_FUNCTION_INFO_V1(mssql_cdc_lsn_increment);

Datum
mssql_cdc_lsn_in(PG_FUNCTION_ARGS)
{
	char	   *str = PG_GETARG_CSTRING(0);
	MssqlLsn   *result = palloc(sizeof(MssqlLsn));

	if (!mssql_lsn_parse(str, result))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type %s: \"%s\"",
						"mssql_cdc.lsn", str),
				 errhint("An LSN is written as 0x followed by 20 hex digits, e.g. 0x0000002A000001F00003, or as 0000002A:000001F0:0003.")));
	PG_RETURN_MSSQL_LSN_P(result);
}

Datum
mssql_cdc_lsn_out(PG_FUNCTION_ARGS)
{
	MssqlLsn   *lsn = PG_GETARG_MSSQL_LSN_P(0);
	char	   *buf = palloc(MSSQL_LSN_TEXT_SIZE);

	mssql_lsn_format(lsn, buf);
	PG_RETURN_CSTRING(buf);
}

/* Binary I/O is the 10 raw bytes, exactly as SQL Server sends binary(10). */
Datum
mssql_cdc_lsn_recv(PG_FUNCTION_ARGS)
{
	StringInfo	buf = (StringInfo) PG_GETARG_POINTER(0);
	MssqlLsn   *result = palloc(sizeof(MssqlLsn));

	pq_copymsgbytes(buf, (char *) result->bytes, MSSQL_LSN_BYTES);
	PG_RETURN_MSSQL_LSN_P(result);
}

Datum
mssql_cdc_lsn_send(PG_FUNCTION_ARGS)
{
	MssqlLsn   *lsn = PG_GETARG_MSSQL_LSN_P(0);
	StringInfoData buf;

	pq_begintypsend(&buf);
	pq_sendbytes(&buf, (char *) lsn->bytes, MSSQL_LSN_BYTES);
	PG_RETURN_BYTEA_P(pq_endtypsend(&buf));
}

#define LSN_CMP_ARGS() \
	mssql_lsn_cmp(PG_GETARG_MSSQL_LSN_P(0), PG_GETARG_MSSQL_LSN_P(1))

Datum
mssql_cdc_lsn_eq(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(LSN_CMP_ARGS() == 0);
}

Datum
mssql_cdc_lsn_ne(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(LSN_CMP_ARGS() != 0);
}

Datum
mssql_cdc_lsn_lt(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(LSN_CMP_ARGS() < 0);
}

Datum
mssql_cdc_lsn_le(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(LSN_CMP_ARGS() <= 0);
}

Datum
mssql_cdc_lsn_gt(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(LSN_CMP_ARGS() > 0);
}

Datum
mssql_cdc_lsn_ge(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(LSN_CMP_ARGS() >= 0);
}

Datum
mssql_cdc_lsn_btree_cmp(PG_FUNCTION_ARGS)
{
	int			c = LSN_CMP_ARGS();

	/* btree wants -1/0/1 only by convention, any sign works; normalise anyway */
	PG_RETURN_INT32(c < 0 ? -1 : (c > 0 ? 1 : 0));
}

Datum
mssql_cdc_lsn_hash(PG_FUNCTION_ARGS)
{
	MssqlLsn   *lsn = PG_GETARG_MSSQL_LSN_P(0);

	return hash_any(lsn->bytes, MSSQL_LSN_BYTES);
}

Datum
mssql_cdc_lsn_hash_extended(PG_FUNCTION_ARGS)
{
	MssqlLsn   *lsn = PG_GETARG_MSSQL_LSN_P(0);

	return hash_any_extended(lsn->bytes, MSSQL_LSN_BYTES, PG_GETARG_INT64(1));
}

/* Return one of the inputs: aggregates may keep the pointer as their state. */
Datum
mssql_cdc_lsn_larger(PG_FUNCTION_ARGS)
{
	MssqlLsn   *a = PG_GETARG_MSSQL_LSN_P(0);
	MssqlLsn   *b = PG_GETARG_MSSQL_LSN_P(1);

	PG_RETURN_MSSQL_LSN_P(mssql_lsn_cmp(a, b) >= 0 ? a : b);
}

Datum
mssql_cdc_lsn_smaller(PG_FUNCTION_ARGS)
{
	MssqlLsn   *a = PG_GETARG_MSSQL_LSN_P(0);
	MssqlLsn   *b = PG_GETARG_MSSQL_LSN_P(1);

	PG_RETURN_MSSQL_LSN_P(mssql_lsn_cmp(a, b) <= 0 ? a : b);
}

Datum
mssql_cdc_lsn_to_bytea(PG_FUNCTION_ARGS)
{
	MssqlLsn   *lsn = PG_GETARG_MSSQL_LSN_P(0);
	bytea	   *result = palloc(VARHDRSZ + MSSQL_LSN_BYTES);

	SET_VARSIZE(result, VARHDRSZ + MSSQL_LSN_BYTES);
	memcpy(VARDATA(result), lsn->bytes, MSSQL_LSN_BYTES);
	PG_RETURN_BYTEA_P(result);
}

/* Only exactly 10 bytes make an LSN: padding or truncating would invent one. */
Datum
mssql_cdc_lsn_from_bytea(PG_FUNCTION_ARGS)
{
	bytea	   *value = PG_GETARG_BYTEA_PP(0);
	MssqlLsn   *result;

	if (VARSIZE_ANY_EXHDR(value) != MSSQL_LSN_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("cannot convert bytea of length %d to mssql_cdc.lsn",
						(int) VARSIZE_ANY_EXHDR(value)),
				 errdetail("An LSN is exactly %d bytes long.", MSSQL_LSN_BYTES)));
	result = palloc(sizeof(MssqlLsn));
	memcpy(result->bytes, VARDATA_ANY(value), MSSQL_LSN_BYTES);
	PG_RETURN_MSSQL_LSN_P(result);
}

Datum
mssql_cdc_lsn_increment(PG_FUNCTION_ARGS)
{
	MssqlLsn   *lsn = PG_GETARG_MSSQL_LSN_P(0);
	MssqlLsn   *result = palloc(sizeof(MssqlLsn));

	if (!mssql_lsn_increment(lsn, result))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("mssql_cdc.lsn out of range"),
				 errdetail("0xFFFFFFFFFFFFFFFFFFFF has no successor.")));
	PG_RETURN_MSSQL_LSN_P(result);
}
