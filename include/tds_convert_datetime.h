/*-------------------------------------------------------------------------
 *
 * tds_convert_datetime.h
 *		SQL Server date/time values -> PostgreSQL text and Datums, for
 *		tds_convert.c (the rules, sub-microsecond rounding included, are
 *		in tds_convert.h).
 *
 * date, time, datetime2 and datetimeoffset ("msdate" types) are cracked
 * by db-lib and need the DBPROCESS they came from; datetime and
 * smalldatetime are decoded from their days and ticks.
 *
 * IDENTIFICATION
 *		include/tds_convert_datetime.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_TDS_CONVERT_DATETIME_H
#define MSSQL_CDC_TDS_CONVERT_DATETIME_H

#include "postgres.h"

/* date/time/datetime2/datetimeoffset as the input text of date ... timestamptz */
extern char *tds_msdate_to_text(void *dbproc, int tds_type, const uint8 *data, int len);

/*
 * The same value as a Datum of typid (date, time, timestamp or timestamptz
 * matching tds_type) with typmod applied; false when typid is another type
 * or there is no dbproc, which the text path handles.
 */
extern bool tds_msdate_to_datum(void *dbproc, int tds_type, const uint8 *data, int len,
								Oid typid, int32 typmod, Datum *result);

/* datetime/smalldatetime as the input text of timestamp */
extern char *tds_datetime_to_text(int tds_type, const uint8 *data, int len);

/* datetime/smalldatetime as a timestamp Datum with typmod applied */
extern Datum tds_datetime_to_datum(int tds_type, const uint8 *data, int len, int32 typmod);

#endif							/* MSSQL_CDC_TDS_CONVERT_DATETIME_H */
