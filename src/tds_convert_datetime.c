/*-------------------------------------------------------------------------
 *
 * tds_convert_datetime.c
 *		SQL Server date/time values -> PostgreSQL text and Datums (see
 *		tds_convert_datetime.h; the rules are in tds_convert.h).
 *
 * The text and the Datum of a value come from the same decoded fields
 * (msdate_crack, legacy_datetime_usec), so the two paths cannot disagree
 * on a value or on which values are errors.
 *
 * IDENTIFICATION
 *		src/tds_convert_datetime.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#define MSDBLIB 1				/* Microsoft field names, months 1-12 */
#include <sybfront.h>
#include <sybdb.h>

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/timestamp.h"

#include "tds_convert_datetime.h"
#include "tds_type.h"

#define USECS_PER_SEC_I		INT64CONST(1000000)
#define USECS_PER_DAY_I		(INT64CONST(86400) * USECS_PER_SEC_I)

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
timestamp_datum(Timestamp ts, int32 typmod)
{
	/* what timestamp_in / timestamptz_in do with the typmod */
	AdjustTimestampForTypmod(&ts, typmod);
	return TimestampGetDatum(ts);
}

/* 100 ns digits (as nanoseconds) -> microseconds, rounded half up */
static int64
round_ns_to_us(int nanosecond)
{
	return ((int64) nanosecond + 500) / 1000;
}

/*
 * Crack a date/time/datetime2/datetimeoffset value of the right length
 * into its fields (*dr, local time at the value's offset for a
 * datetimeoffset, whose *dta holds the offset) and its microsecond of the
 * day, rounded (*usec).
 */
static void
msdate_crack(void *dbproc, int tds_type, const uint8 *data, DBDATEREC2 *dr,
			 DBDATETIMEALL *dta, int64 *usec)
{
	memcpy(dta, data, sizeof(*dta));
	memset(dr, 0, sizeof(*dr));
	if (dbanydatecrack((DBPROCESS *) dbproc, dr, tds_type, dta) != SUCCEED)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_STRING_FORMAT),
				 errmsg("could not decode a SQL Server %s value", tds_type_name(tds_type))));
	if (dr->month < 1 || dr->month > 12 || dr->day < 1 || dr->day > 31 ||
		dr->hour < 0 || dr->hour > 23 || dr->minute < 0 || dr->minute > 59 ||
		dr->second < 0 || dr->second > 59 || dr->nanosecond < 0 || dr->nanosecond > 999999999)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_STRING_FORMAT),
				 errmsg("SQL Server sent an out-of-range %s value", tds_type_name(tds_type))));
	*usec = ((int64) ((dr->hour * 60 + dr->minute) * 60 + dr->second)) * USECS_PER_SEC_I +
		round_ns_to_us(dr->nanosecond);
}

char *
tds_msdate_to_text(void *dbproc, int tds_type, const uint8 *data, int len)
{
	DBDATEREC2	dr;
	DBDATETIMEALL dta;
	StringInfoData out;
	int64		usec;

	/* db-lib hands these types over as a DBDATETIMEALL struct */
	tds_value_expect_length(tds_type, len, sizeof(DBDATETIMEALL));
	if (dbproc == NULL)			/* a caller that expected no date/time value */
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
				 errmsg("could not decode a SQL Server %s value here", tds_type_name(tds_type))));
	msdate_crack(dbproc, tds_type, data, &dr, &dta, &usec);

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

bool
tds_msdate_to_datum(void *dbproc, int tds_type, const uint8 *data, int len,
					Oid typid, int32 typmod, Datum *result)
{
	DBDATEREC2	dr;
	DBDATETIMEALL dta;
	int64		usec;

	tds_value_expect_length(tds_type, len, sizeof(DBDATETIMEALL));
	if (dbproc == NULL)
		return false;			/* the text path raises the error */
	msdate_crack(dbproc, tds_type, data, &dr, &dta, &usec);

	switch (tds_type)
	{
		case SYBMSDATE:
			if (typid != DATEOID)
				return false;
			*result = DateADTGetDatum(date2j(dr.year, dr.month, dr.day) - POSTGRES_EPOCH_JDATE);
			return true;
		case SYBMSTIME:
			{
				TimeADT		t = usec;	/* may be 24:00:00, as time_in allows */

				if (typid != TIMEOID)
					return false;
				AdjustTimeForTypmod(&t, typmod);
				*result = TimeADTGetDatum(t);
				return true;
			}
		case SYBMSDATETIME2:
			if (typid != TIMESTAMPOID)
				return false;
			*result = timestamp_datum(timestamp_from_fields(dr.year, dr.month, dr.day, usec),
									  typmod);
			return true;
		case SYBMSDATETIMEOFFSET:
			/* the cracked fields are local time at the value's offset */
			if (typid != TIMESTAMPTZOID)
				return false;
			*result = timestamp_datum(timestamp_from_fields(dr.year, dr.month, dr.day, usec) -
									  (int64) dta.offset * 60 * USECS_PER_SEC_I,
									  typmod);
			return true;
	}
	return false;
}

/*
 * Legacy datetime: days since 1900-01-01 and 1/300 s ticks; smalldatetime:
 * days and minutes.  The microseconds since 1900-01-01 00:00, which may be
 * negative (before 1900).  Decoded here rather than with dbanydatecrack,
 * which rounds the ticks to milliseconds.
 */
static int64
legacy_datetime_usec(int tds_type, const uint8 *data, int len)
{
	if (tds_type == SYBDATETIME4)
	{
		DBDATETIME4 dt4;

		tds_value_expect_length(tds_type, len, sizeof(dt4));
		memcpy(&dt4, data, sizeof(dt4));
		if (dt4.minutes >= 24 * 60)
			tds_value_bad_length(tds_type, len);
		return (int64) dt4.days * USECS_PER_DAY_I +
			(int64) dt4.minutes * 60 * USECS_PER_SEC_I;
	}
	else
	{
		DBDATETIME	dt;
		int64		ticks;

		tds_value_expect_length(tds_type, len, sizeof(dt));
		memcpy(&dt, data, sizeof(dt));
		ticks = (uint32) dt.dttime;
		if (ticks >= INT64CONST(300) * 86400 || dt.dtdays < -53690 || dt.dtdays > 2958463)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_STRING_FORMAT),
					 errmsg("SQL Server sent an out-of-range datetime value")));
		/* ticks * 10^6 / 300 us, rounded half up; the callers carry into the date */
		return (int64) dt.dtdays * USECS_PER_DAY_I + (ticks * 10000 + 1) / 3;
	}
}

char *
tds_datetime_to_text(int tds_type, const uint8 *data, int len)
{
	int64		usec = legacy_datetime_usec(tds_type, data, len);
	StringInfoData out;

	initStringInfo(&out);
	append_timestamp(&out, 1900, 1, 1, usec);
	return out.data;
}

Datum
tds_datetime_to_datum(int tds_type, const uint8 *data, int len, int32 typmod)
{
	return timestamp_datum(timestamp_from_fields(1900, 1, 1,
												 legacy_datetime_usec(tds_type, data, len)),
						   typmod);
}
