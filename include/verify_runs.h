/*-------------------------------------------------------------------------
 *
 * verify_runs.h
 *		verify(): the rows of a run in mssql_cdc.verify_runs (one per table,
 *		its progress committed chunk by chunk) and mssql_cdc.
 *		verify_mismatches (one per settled key), written as the catalog
 *		owner.
 *
 * IDENTIFICATION
 *		include/verify_runs.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_VERIFY_RUNS_H
#define MSSQL_CDC_VERIFY_RUNS_H

#include "postgres.h"

#include "nodes/pg_list.h"

#include "catalog.h"
#include "lsn.h"
#include "verify.h"

/* A new run id (mssql_cdc.verify_run_id_seq) */
extern int64 verify_run_next_id(void);

/* The table's row of the run, before its scan starts */
extern void verify_run_insert(int64 run_id, const MssqlCdcTable *t);

/* The progress row of the table: state, counters, and message unless NULL */
extern void verify_report_progress(VerifyTable *vt, const char *state, const char *message);

/* A settled key of the run, of kind; columns (char *) name what differed */
extern void verify_record(VerifyTable *vt, VerifyKind kind, const Datum *key,
						  List *columns, const MssqlLsn *mirror_lsn);

/*
 * In a PG_CATCH of a nonatomic run: roll back, mark the run's unfinished
 * rows 'failed' with the error, commit, and rethrow the error.
 */
extern void verify_run_record_failure(int64 run_id, MemoryContext run_cxt);

#endif							/* MSSQL_CDC_VERIFY_RUNS_H */
