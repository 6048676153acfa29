/*-------------------------------------------------------------------------
 *
 * mirror_internal.h
 *		What the mirror's files share: its columns and pieces of the SQL
 *		built over them, and running SQL as run_as (mirror_sql.c, so that
 *		mirror_apply.c and mirror_rebuild.c need not include each other),
 *		and whether a rebuild's shadow is being filled (mirror_rebuild.c).
 *
 * IDENTIFICATION
 *		include/mirror_internal.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_MIRROR_INTERNAL_H
#define MSSQL_CDC_MIRROR_INTERNAL_H

#include "postgres.h"

#include "lib/stringinfo.h"

#include "catalog.h"
#include "source_schema.h"

/* One staged column of the mirror */
typedef struct MirrorColumn
{
	const char *name;			/* quoted */
	bool		is_key;
	int			mask_ordinal;	/* LOB: its bit in __$update_mask; else 0 */
} MirrorColumn;

/* The staged columns, key columns in key order first (*nkey of them) */
extern MirrorColumn *mirror_columns(const MssqlSourceTable *src, int *ncols, int *nkey);

/* the staging rows of alias in the window [$1, $2] */
#define MIRROR_LSN_RANGE_OF(alias) \
	" " alias "._cdc_lsn OPERATOR(mssql_cdc.>=) $1::mssql_cdc.lsn" \
	" AND " alias "._cdc_lsn OPERATOR(mssql_cdc.<=) $2::mssql_cdc.lsn"

/*
 * SQL that is true when row alias's update_after did not set the LOB
 * column with mask ordinal n (bit 0: its value, possibly NULL, is not one)
 */
extern char *mirror_lob_unchanged(const char *alias, int n);

/* "a.k1 = b.k1 AND a.k2 = b.k2" */
extern void mirror_append_key_join(StringInfo sql, const MirrorColumn *cols, int nkey,
								   const char *a, const char *b);

/* "prefix c[from], ..., prefix c[to - 1]" */
extern void mirror_append_names(StringInfo sql, const MirrorColumn *cols, int from, int to,
								const char *prefix);

/* the SQL of the value of LOB column i (a SELECT list entry) */
typedef char *(*MirrorLobValue) (const MirrorColumn *cols, int i);

/*
 * "INSERT INTO mirror (columns) SELECT w.c1, ...": the columns of row w,
 * a LOB column's as lob_value says
 */
extern void mirror_append_insert_select(StringInfo sql, const char *mirror,
										const MirrorColumn *cols, int ncols,
										MirrorLobValue lob_value);

/* ON CONFLICT (keys) DO UPDATE SET c = EXCLUDED.c ... (DO NOTHING: key only) */
extern void mirror_append_upsert_tail(StringInfo sql, const MirrorColumn *cols, int ncols,
									  int nkey);

/*
 * The window statement when an update pair may have moved a row to another
 * key (mirror_moves.c); parameters $1 and $2 are the window's LSN range
 */
extern char *mirror_moves_window_sql(const char *staged, const char *mirror,
									 const MirrorColumn *cols, int ncols, int nkey);

/* Run SQL (no parameters) as run_as; returns SPI's result code */
extern int	mirror_run_sql(const char *sql, Oid run_as);

/* The shadow a resnapshot builds (mirror_rebuild.c), or NULL when none is being built */
extern char *mirror_shadow_if_building(const MssqlCdcTable *table);

#endif							/* MSSQL_CDC_MIRROR_INTERNAL_H */
