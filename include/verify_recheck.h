/*-------------------------------------------------------------------------
 *
 * verify_recheck.h
 *		verify(): settle the candidate keys a table's scan found (see
 *		verify_recheck.c).
 *
 * IDENTIFICATION
 *		include/verify_recheck.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_VERIFY_RECHECK_H
#define MSSQL_CDC_VERIFY_RECHECK_H

#include "postgres.h"

#include "datatype/timestamp.h"

#include "tds_session.h"
#include "verify.h"

/*
 * Settle every candidate of the table (see verify_recheck.c), up to
 * deadline; commit between batches when nonatomic.
 */
extern void verify_recheck(TdsSession *session, VerifyTable *vt, TimestampTz deadline,
						   bool nonatomic);

#endif							/* MSSQL_CDC_VERIFY_RECHECK_H */
