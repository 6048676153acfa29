/*-------------------------------------------------------------------------
 *
 * tds_convert_numeric.h
 *		SQL Server decimal/numeric and money/smallmoney values ->
 *		PostgreSQL numeric text and Datums, for tds_convert.c: rendered
 *		from their integer representation, never through a double
 *		(tds_convert.h).
 *
 * IDENTIFICATION
 *		include/tds_convert_numeric.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_TDS_CONVERT_NUMERIC_H
#define MSSQL_CDC_TDS_CONVERT_NUMERIC_H

#include "postgres.h"

/* decimal/numeric (a DBNUMERIC) as numeric input text, every digit kept */
extern char *tds_decimal_to_text(int tds_type, const uint8 *data, int len);

/*
 * The same value as a numeric Datum with typmod applied, when its
 * magnitude has at most 15 digits; false for a wider one (and for an
 * invalid precision), which the text path handles.
 */
extern bool tds_decimal_to_datum(int tds_type, const uint8 *data, int len, int32 typmod,
								 Datum *result);

/* money/smallmoney as numeric input text with 4 decimals */
extern char *tds_money_to_text(int tds_type, const uint8 *data, int len);

/* money/smallmoney as a numeric Datum with typmod applied */
extern Datum tds_money_to_datum(int tds_type, const uint8 *data, int len, int32 typmod);

#endif							/* MSSQL_CDC_TDS_CONVERT_NUMERIC_H */
