/*-------------------------------------------------------------------------
 *
 * verify_scan.h
 *		verify(): the scan of one table, chunk by chunk, that finds the
 *		candidate keys (vt->candidates) for verify_recheck.c.
 *
 * IDENTIFICATION
 *		include/verify_scan.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_VERIFY_SCAN_H
#define MSSQL_CDC_VERIFY_SCAN_H

#include "postgres.h"

#include "tds_session.h"
#include "verify.h"

/*
 * Read the source in chunks of chunk_rows rows (in vt->isolation) and
 * compare each with the mirror rows of its keys, then find the mirror rows
 * no chunk had; the progress row is written after every chunk, and
 * committed when nonatomic.
 */
extern void verify_scan(TdsSession *session, VerifyTable *vt, int chunk_rows, bool nonatomic);

#endif							/* MSSQL_CDC_VERIFY_SCAN_H */
