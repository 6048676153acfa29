/*-------------------------------------------------------------------------
 *
 * staging_unit.h
 *		The staging side of one unit of rows (a window or a snapshot chunk):
 *		which staging column gets which value, the writer, and the row being
 *		built; shared by apply.c (change rows) and apply_snapshot.c
 *		(snapshot rows).
 *
 * Staging layout (staging.h): the staged source columns (named by
 * staging_column_name), then _cdc_lsn, _cdc_seqval, _cdc_op,
 * _cdc_commit_time, _cdc_update_mask, _cdc_command_id.  Columns are matched
 * by name, and each source column is read with the type policy's select
 * expression (type_map.h), the same way the snapshot reads it.
 *
 * IDENTIFICATION
 *		include/staging_unit.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_STAGING_UNIT_H
#define MSSQL_CDC_STAGING_UNIT_H

#include "postgres.h"

#include "nodes/pg_list.h"
#include "utils/relcache.h"

#include "catalog.h"
#include "lsn.h"
#include "source_schema.h"
#include "staging_writer.h"
#include "tds_convert.h"
#include "tds_session.h"

/* Where the value of one staging column comes from */
typedef enum StagingSource
{
	FROM_DATA,					/* a captured source column */
	FROM_LSN,
	FROM_COMMAND_ID,
	FROM_SEQVAL,
	FROM_OPERATION,
	FROM_COMMIT_TIME,
	FROM_UPDATE_MASK
} StagingSource;

typedef struct StagingColumn
{
	char	   *name;
	AttrNumber	attnum;
	StagingSource source;
	int			tds_col;		/* result column, for FROM_DATA */
	/* FROM_DATA read as is: its SQL Server type; NULL when read converted */
	const char *plain_source_type;
	TdsDatumTarget target;		/* the staging column's type */
} StagingColumn;

/* __$operation 1..4 index op_datums; 0: a snapshot row */
#define OPERATION_SNAPSHOT	0
#define STAGING_OPERATIONS	5

typedef struct StagingUnit
{
	StagingColumn *cols;
	int			ncols;
	AttrNumber *attnums;
	StagingWriter *writer;		/* NULL: the rows are not staged */
	Datum	   *values;
	bool	   *nulls;
	Datum		op_datums[STAGING_OPERATIONS];	/* the _cdc_op labels */
	bool		lsn_binary;		/* _cdc_lsn/_cdc_seqval are mssql_cdc.lsn */
} StagingUnit;

/* The table's staging relation, locked RowExclusive until commit */
extern Relation staging_unit_relation(const MssqlCdcTable *table);

/*
 * The staged source columns (const MssqlColumn *) the staging table rel
 * has, in the order of their result columns: what its query must read.
 */
extern List *staging_unit_source_columns(Relation rel, const MssqlSourceTable *src);

/*
 * Describe rel's columns, the source's data columns arriving from result
 * column first_data_col on (*source_cols as above); no writer yet.
 */
extern StagingUnit *staging_unit_describe(Relation rel, const MssqlSourceTable *src,
										  int first_data_col, List **source_cols);

/* Open the unit's writer into rel, as run_as */
extern void staging_unit_open_writer(StagingUnit *unit, Relation rel, Oid run_as);

/* staging_unit_describe, then staging_unit_open_writer */
extern StagingUnit *staging_unit_open(Relation rel, const MssqlSourceTable *src,
									  int first_data_col, Oid run_as, List **source_cols);

/* Flush and close the writer, if any */
extern void staging_unit_close(StagingUnit *unit);

/*
 * Each data column of the current result is of a type its source column
 * can arrive as; what names the read in the error.
 */
extern void staging_unit_check_types(TdsSession *session, StagingUnit *unit, const char *what);

/* An LSN as a value of the staging column col (in the current context) */
extern Datum staging_unit_lsn_datum(StagingUnit *unit, StagingColumn *col, const MssqlLsn *lsn);

#endif							/* MSSQL_CDC_STAGING_UNIT_H */
