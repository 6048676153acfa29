/*-------------------------------------------------------------------------
 *
 * verify.h
 *		mssql_cdc.verify(): compare a captured SQL Server table with its
 *		mirror table (doc/mirror.md "verify()").  verify.c scans the source
 *		chunk by chunk by primary key and compares each chunk with the
 *		mirror rows of its keys; every key that differs is only a candidate
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
#include "tds_session.h"

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

/* verify.c: as the catalog owner, record a settled key of the run */
extern void verify_record(VerifyTable *vt, VerifyKind kind, const Datum *key,
						  List *columns, const MssqlLsn *mirror_lsn);

/* verify.c: the progress row of the table, written as the catalog owner */
extern void verify_report_progress(VerifyTable *vt, const char *state, const char *message);

/* verify.c: SELECT-list of the mirror columns ("m.a, m.b") */
extern char *verify_mirror_columns(VerifyTable *vt);

/* verify.c: the ON clause joining m with unnest's s(_k1, ...) */
extern char *verify_key_join(VerifyTable *vt);

/* verify.c: "unnest($first, ...) WITH ORDINALITY AS s(_k1, ..., _ord)" */
extern char *verify_key_unnest(VerifyTable *vt, int first_param);

/* verify.c: key values of nrows rows as arrays, parameters of unnest */
extern void verify_key_arrays(VerifyTable *vt, Datum **keys, int nrows, Datum *arrays,
							  Oid *array_types);

/* verify.c: are two values of column col the same (NULLs included)? */
extern bool verify_values_equal(const VerifyColumn *col, Datum a, bool anull, Datum b, bool bnull);

/*
 * verify_recheck.c: settle every candidate of the table (see there), up to
 * deadline; commit between batches when nonatomic.
 */
extern void verify_recheck(TdsSession *session, VerifyTable *vt, TimestampTz deadline,
						   bool nonatomic);

#endif							/* MSSQL_CDC_VERIFY_H */
