/*-------------------------------------------------------------------------
 *
 * verify.h
 *		mssql_cdc.verify(): compare a captured SQL Server table with its
 *		mirror table (doc/mirror.md "verify()").  The types of a run's
 *		table, shared by its files: verify.c (the procedure, a table's
 *		setting up), verify_scan.c (the source chunk by chunk by primary
 *		key, each chunk compared with the mirror rows of its keys),
 *		verify_mirror.c (those mirror queries, value equality),
 *		verify_runs.c (the rows of mssql_cdc.verify_runs and
 *		verify_mismatches).  Every key that differs is only a candidate
 *		until verify_recheck.c has re-read it on both sides at a point where
 *		no concurrent change can explain the difference.
 *
 * IDENTIFICATION
 *		include/verify.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_VERIFY_H
#define MSSQL_CDC_VERIFY_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"

#include "catalog.h"
#include "keyset.h"
#include "snapshot.h"
#include "source_schema.h"
#include "tds_convert.h"

/* A column compared: a staged source column and its mirror column */
typedef struct VerifyColumn
{
	const MssqlColumn *src;
	char	   *pg_name;
	Oid			typid;
	int32		typmod;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	TdsDatumTarget target;		/* the worker's conversion into the mirror type */
} VerifyColumn;

/* What differed at first sight; the re-check decides */
typedef enum VerifyKind
{
	VERIFY_MISSING,				/* at the source, not in the mirror */
	VERIFY_EXTRA,				/* in the mirror, not at the source */
	VERIFY_DIFFERENT,			/* other values */
	VERIFY_UNCONFIRMED			/* not settled before the timeout */
} VerifyKind;

/* A key to re-check: its values as the mirror's key types */
typedef struct VerifyCandidate
{
	Datum	   *key;			/* nkey values, never NULL */
} VerifyCandidate;

/* One table of a run; lives in run_cxt, across the chunks' commits */
typedef struct VerifyTable
{
	int64		run_id;
	MssqlCdcTable *table;
	MssqlSourceTable *src;
	KeyColumn  *keys;
	int			nkey;
	VerifyColumn *cols;
	int			ncols;
	int		   *key_col;		/* cols index of key k */
	char	   *mirror_name;	/* quoted schema.table */
	List	   *select_exprs;	/* T-SQL that reads cols, in order */
	MemoryContext run_cxt;
	SnapshotIsolation isolation;	/* of the source database */
	List	   *candidates;		/* VerifyCandidate * */
	bool		candidates_full;	/* stopped collecting at the cap */
	TimestampTz started;
	/* counters, as in mssql_cdc.verify_runs */
	int64		chunks;
	int64		source_rows;
	int64		mirror_rows;
	int64		ncandidates;
	int64		rechecked;
	int64		counts[4];		/* by VerifyKind */
} VerifyTable;

/* How many candidate keys a run keeps per table before it stops collecting */
#define VERIFY_MAX_CANDIDATES	100000

#endif							/* MSSQL_CDC_VERIFY_H */
