/*-------------------------------------------------------------------------
 *
 * tds_convert.h
 *		db-lib column values -> PostgreSQL values, exactly.
 *
 * Policy (DESIGN.md "Type mapping"): never through floating point or
 * locale-dependent text.  decimal/numeric/money are rendered from their
 * integer representation; date/time values from their cracked fields;
 * floats with the shortest text that reads back to the same binary value.
 * The text produced is what the PostgreSQL input function of the mapped
 * type accepts, independent of DateStyle, lc_numeric and
 * extra_float_digits.
 *
 * Sub-microsecond rule: SQL Server's time/datetime2/datetimeoffset carry up
 * to 100 ns, PostgreSQL keeps microseconds.  The 100 ns digit is rounded
 * half up (values are non-negative offsets from midnight, so this is also
 * "half away from zero"), carrying into seconds, days, months and years
 * (23:59:59.9999995 on 2024-12-31 becomes 2025-01-01 00:00:00).  This is
 * the same result PostgreSQL's own input gives for the 7-digit literal.  A
 * time(7) of 23:59:59.9999995 becomes 24:00:00, which PostgreSQL's time
 * accepts.  datetime (1/300 s ticks) becomes ticks * 10000 / 3 us rounded
 * half up, which is what SQL Server's CAST(datetime AS datetime2(6)) gives
 * (.003 -> .003333).
 *
 * IDENTIFICATION
 *		include/tds_convert.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_TDS_CONVERT_H
#define MSSQL_CDC_TDS_CONVERT_H

#include "postgres.h"

#include "fmgr.h"

/*
 * Text form of one value, palloc'd in the current memory context, in the
 * server encoding.  data == NULL (a SQL NULL) returns NULL.  dbproc is the
 * DBPROCESS the value came from (needed by dbanydatecrack for date, time,
 * datetime2 and datetimeoffset; NULL makes those an error); tds_type is
 * dbcoltype()'s code.  Raises ERRCODE_FDW_INVALID_DATA_TYPE for an
 * unsupported type and ERRCODE_FDW_INVALID_STRING_FORMAT for a value whose
 * length does not fit its type (a broken server must not crash us).
 */
extern char *tds_value_to_text(void *dbproc, int tds_type,
							   const uint8 *data, int len);

/*
 * The type a value is converted to, prepared once per column: the direct
 * conversions look at typid/typmod, the text path uses the input function.
 */
typedef struct TdsDatumTarget
{
	Oid			typid;
	int32		typmod;
	FmgrInfo	input;
	Oid			ioparam;
} TdsDatumTarget;

extern void tds_datum_target_init(TdsDatumTarget *target, Oid typid, int32 typmod);

/*
 * The value as a Datum of the target type, palloc'd in the current memory
 * context; *isnull is set for a SQL NULL.  Where the pair (db-lib type,
 * target type) has a direct conversion (integers, bit, real/float, money,
 * decimal up to 15 digits, the date/time types, uniqueidentifier, binary
 * types -> bytea, character types -> text/varchar/char) the Datum is built
 * from the binary value; every other pair goes through the exact text
 * above and the type's input function.  Both give the same value, typmod
 * rounding and errors included (t/050 checks every type).
 */
extern Datum tds_value_to_datum(void *dbproc, int tds_type,
								const uint8 *data, int len,
								const TdsDatumTarget *target, bool *isnull);

#endif							/* MSSQL_CDC_TDS_CONVERT_H */
