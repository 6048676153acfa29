/*-------------------------------------------------------------------------
 *
 * lsn.h
 *		SQL Server log sequence numbers (binary(10)) as seen by Postgres.
 *
 * An LSN is 10 bytes: 4-byte VLF sequence, 4-byte log block, 2-byte slot,
 * each big-endian.  SQL Server orders LSNs as unsigned byte strings, so the
 * whole value is one 80-bit big-endian unsigned number and memcmp() is the
 * correct comparison.  The worker uses these helpers directly; the SQL type
 * mssql_cdc.lsn (src/lsn.c) is a thin wrapper around them.
 *
 * IDENTIFICATION
 *		include/lsn.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_LSN_H
#define MSSQL_CDC_LSN_H

#include "postgres.h"
#include "fmgr.h"

#define MSSQL_LSN_BYTES		10

/* "0x" + 20 hex digits + NUL */
#define MSSQL_LSN_TEXT_SIZE	(2 + 2 * MSSQL_LSN_BYTES + 1)

typedef struct MssqlLsn
{
	uint8		bytes[MSSQL_LSN_BYTES];
} MssqlLsn;

/* fmgr conveniences: the SQL type is fixed-length and pass-by-reference */
#define DatumGetMssqlLsnP(X)	((MssqlLsn *) DatumGetPointer(X))
#define MssqlLsnPGetDatum(X)	PointerGetDatum(X)
#define PG_GETARG_MSSQL_LSN_P(n)	DatumGetMssqlLsnP(PG_GETARG_DATUM(n))
#define PG_RETURN_MSSQL_LSN_P(x)	return MssqlLsnPGetDatum(x)

/*
 * Parse "0x" + 20 hex digits or the colon form "XXXXXXXX:XXXXXXXX:XXXX"
 * (case-insensitive).  Returns false on malformed input without raising.
 */
extern bool mssql_lsn_parse(const char *str, MssqlLsn *result);

/* Format as "0x" + 20 upper-case hex digits into buf[MSSQL_LSN_TEXT_SIZE]. */
extern void mssql_lsn_format(const MssqlLsn *lsn, char *buf);

/* The same text as a text Datum (catalog columns and SPI parameters). */
extern Datum mssql_lsn_text_datum(const MssqlLsn *lsn);

/* <0, 0, >0 like memcmp: unsigned big-endian order, as SQL Server orders */
extern int	mssql_lsn_cmp(const MssqlLsn *a, const MssqlLsn *b);

/*
 * The next LSN (80-bit +1 with carry), the client-side equivalent of
 * sys.fn_cdc_increment_lsn.  Returns false, leaving *result undefined,
 * when lsn is the largest possible value.
 */
extern bool mssql_lsn_increment(const MssqlLsn *lsn, MssqlLsn *result);

/* True for 0x00000000000000000000 (what fn_cdc_get_min_lsn returns for "no access") */
/* lsn - 1 (80-bit, with borrow); false for zero, which has no predecessor */
extern bool mssql_lsn_decrement(const MssqlLsn *lsn, MssqlLsn *result);
extern bool mssql_lsn_is_zero(const MssqlLsn *lsn);

#endif							/* MSSQL_CDC_LSN_H */
