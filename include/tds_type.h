/*-------------------------------------------------------------------------
 *
 * tds_type.h
 *		db-lib type codes: the ones sybdb.h does not name, their readable
 *		names and default PostgreSQL types, and the length check every
 *		converter applies to a value before it reads it.
 *
 * IDENTIFICATION
 *		include/tds_type.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_TDS_TYPE_H
#define MSSQL_CDC_TDS_TYPE_H

#include "postgres.h"

/* Type codes libtds reports that sybdb.h does not name */
#ifndef SYBUNIQUE
#define SYBUNIQUE		36
#endif
#define TDS_XSYBVARBINARY	165
#define TDS_XSYBBINARY		173
#define TDS_XSYBVARCHAR		167
#define TDS_XSYBCHAR		175
#define TDS_XSYBNVARCHAR	231
#define TDS_XSYBNCHAR		239

/* The PostgreSQL type a db-lib type maps to by default; InvalidOid if none */
extern Oid	tds_type_pg_type(int tds_type);

/* A readable name of a db-lib type code, for messages ("datetime2") */
extern const char *tds_type_name(int tds_type);

/*
 * A value of tds_type whose length len does not fit the type: an error
 * (ERRCODE_FDW_INVALID_STRING_FORMAT), so that a broken server cannot make
 * a converter read past the value.
 */
extern void tds_value_bad_length(int tds_type, int len);

/* tds_value_bad_length unless len == expected */
extern void tds_value_expect_length(int tds_type, int len, int expected);

#endif							/* MSSQL_CDC_TDS_TYPE_H */
