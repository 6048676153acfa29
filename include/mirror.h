/*-------------------------------------------------------------------------
 *
 * mirror.h
 *		Mirror tables (doc/mirror.md): a PostgreSQL table that holds the
 *		current rows of a captured SQL Server table, with the staged source
 *		columns, the mapped types of type_map.h and the source's primary key
 *		(also its replica identity, so it can be published).
 *
 * A mirror changes in the same transaction as the window's (or snapshot
 * chunk's) staging rows and checkpoint, so at every commit of a streaming
 * table it equals the source as of checkpoint_lsn.  A snapshot chunk's
 * rows go straight into the mirror (mirror_snapshot.c); a mirror-only
 * table (tables.changelog false) writes nothing to its staging table: its
 * window is staged in a temporary table (mirror_window_stage.c).
 *
 * IDENTIFICATION
 *		include/mirror.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_MIRROR_H
#define MSSQL_CDC_MIRROR_H

#include "postgres.h"

#include "fmgr.h"
#include "nodes/pg_list.h"
#include "utils/relcache.h"

#include "catalog.h"
#include "lsn.h"
#include "source_schema.h"

/* suffix of the default mirror name: "<staging table>_mirror" */
#define MIRROR_DEFAULT_SUFFIX	"_mirror"

/* ---- mirror_ddl.c ------------------------------------------------------- */

/* What add_table (or alter_table) was asked for */
typedef struct MirrorChoice
{
	bool		mirror;			/* keep a mirror table */
	List	   *names;			/* its name as given (qualified name list), or NIL */
	bool		changelog;		/* keep the changelog (staging rows) */
} MirrorChoice;

/*
 * Read the arguments mirror boolean, mirror_table text, changelog boolean
 * (argument numbers), with their checks: mirror_table implies a mirror,
 * changelog => false needs one.
 */
extern void mirror_choice_from_args(FunctionCallInfo fcinfo, int mirror_arg, int name_arg,
									int changelog_arg, MirrorChoice *choice);

/*
 * The default mirror name for a staging table: its name + "_mirror", in
 * the staging table's schema; a name too long for NAMEDATALEN is cut and
 * ends in "_" and 8 hex digits of a hash, as staging_default_name does.
 */
extern char *mirror_default_name(const char *staging_table);

/*
 * Refuse a mirror for a source without a primary key (issue 15 point 7):
 * a mirror row is found by its key, and no key means no way to apply an
 * update or delete to exactly one row.
 */
extern void mirror_require_primary_key(const MssqlSourceTable *src);

/* CREATE TABLE of the mirror (staged columns, mapped types, primary key) */
extern char *mirror_build_ddl(const char *schema, const char *table, const char *source_label,
							  const MssqlColumn *cols, int ncols);

/*
 * Create the mirror in the current transaction as the current user;
 * ERRCODE_DUPLICATE_TABLE when the name is taken.
 */
extern void mirror_create_table(const char *schema, const char *table, const char *source_label,
								const MssqlColumn *cols, int ncols);

/* Store the table's mirror name and changelog flag (catalog owner). */
extern void mirror_set_catalog(int32 table_id, const char *schema, const char *table,
							   bool changelog);

/* ---- mirror_apply.c ----------------------------------------------------- */

static inline bool
mirror_enabled(const MssqlCdcTable *table)
{
	return table->mirror_table != NULL;
}

/*
 * After a window's rows of [from, to] went into the staging table, in the
 * same transaction: change the mirror to the last change of every key in
 * execution order (set-based; see mirror_apply.c), as run_as.  In
 * mirror-only mode the staging rows of the window are deleted again.
 * key_moves: an update pair of the window may have moved a row to another
 * key (ApplyResult.key_moves).
 */
extern void mirror_apply_window(const MssqlCdcTable *table, const MssqlSourceTable *src,
								Oid run_as, const MssqlLsn *from, const MssqlLsn *to,
								bool key_moves);

/*
 * After a snapshot chunk's rows (at L0, _cdc_seqval from first_seqval on)
 * went into the staging table: upsert them into the mirror.
 */
extern void mirror_apply_snapshot(const MssqlCdcTable *table, const MssqlSourceTable *src,
								  Oid run_as, const MssqlLsn *l0, const MssqlLsn *first_seqval);

/* ---- mirror_snapshot.c -------------------------------------------------- */

typedef struct MirrorSink MirrorSink;

/*
 * Write a snapshot chunk's rows straight into the mirror (the shadow
 * during a rebuild) with the bulk writer, as run_as, from the values the
 * chunk converts for the staging table: value i is column names[i] (NULL:
 * not a source column) of type types[i]/typmods[i].  NULL when the mirror
 * has no such column of that type (the chunk is then staged and copied,
 * mirror_apply_snapshot) or, unless alone (no staging writer is open), when
 * it would take the SPI path.  Close it after a staging writer opened
 * later (each restores the user it found).
 */
extern MirrorSink *mirror_sink_open(const MssqlCdcTable *table, Oid run_as, bool alone,
									int ncols, char *const *names, const Oid *types,
									const int32 *typmods);

/* Where to build the next row's values when no staging writer is open */
extern MemoryContext mirror_sink_row_context(MirrorSink *sink);

/* One row; copy: the values live in another writer's row context */
extern void mirror_sink_add(MirrorSink *sink, const Datum *values, const bool *nulls,
							bool copy);

extern void mirror_sink_close(MirrorSink *sink);

/* ---- mirror_window_stage.c ---------------------------------------------- */

/*
 * A mirror-only table's window is staged in a temporary table of the
 * worker with the staging table's columns and key, ON COMMIT DELETE ROWS,
 * not in the user's staging table: opened (made when needed) in the
 * window's transaction, locked RowExclusive, for run_as to write.
 */
extern Relation mirror_window_stage_open(const MssqlCdcTable *table, Relation staging,
										 Oid run_as);

/* Its name (in pg_temp) */
extern char *mirror_window_stage_name(int32 table_id);

/* ---- mirror_alter.c ----------------------------------------------------- */

/* alter_table's mirror arguments and what they lead to */
typedef struct MirrorAlter
{
	bool		mirror_given;	/* mirror or mirror_table passed */
	bool		mirror;
	List	   *names;			/* mirror_table, or NIL */
	bool		changelog_given;
	bool		changelog;
	/* filled by mirror_alter_prepare */
	char	   *cur_schema;		/* the mirror now, or NULL */
	char	   *cur_table;
	bool		cur_changelog;
	bool		spatial_postgis;
	char	   *schema;			/* the mirror afterwards, or NULL */
	char	   *relname;
	bool		new_changelog;
	bool		create;			/* a new mirror: create, rebuild, resnapshot */
	MssqlSourceTable *src;		/* described, when create */
} MirrorAlter;

/* What alter_table knows of the table */
typedef struct MirrorAlterTarget
{
	const char *display;		/* dbo.orders of server "erp" */
	const char *source_schema;
	const char *source_table;
	const char *capture_instance;
	const char *staging_schema;
	const char *staging_table;
	MssqlSnapshotMode mode;
} MirrorAlterTarget;

extern void mirror_alter_from_args(FunctionCallInfo fcinfo, int mirror_arg, int name_arg,
								   int changelog_arg, MirrorAlter *ma);

/*
 * Outside the catalog write scope (it may ask SQL Server): check the
 * change against the table's current mirror settings and, for a new
 * mirror, describe the source and refuse it without a primary key.
 */
extern void mirror_alter_prepare(MirrorAlter *ma, int32 table_id, const char *server_name,
								 Oid run_as_oid, const MirrorAlterTarget *t);

/* In the write scope, after the table's progress row is locked. */
extern void mirror_alter_commit(MirrorAlter *ma, int32 table_id, Oid run_as_oid);

/* After the write scope: a new mirror asks for a resnapshot. */
extern void mirror_alter_finish(MirrorAlter *ma, FunctionCallInfo fcinfo);

/*
 * In the transaction of a new column selection, after the staging table
 * got its new columns: the mirror gets them too (NULL in its rows until
 * they change or a resnapshot copies them).
 */
extern void mirror_extend_columns(int32 table_id, const MssqlSourceTable *src, Oid run_as_oid);

/* ---- mirror_rebuild.c --------------------------------------------------- */

/*
 * In the transaction that starts a snapshot (pending -> snapshotting):
 * when the mirror has rows or a rebuild is under way, the chunks go into a
 * fresh shadow table, and the mirror stays whole until the copy is done.
 */
extern void mirror_snapshot_begin(const MssqlCdcTable *table, Oid run_as);

/* Start a rebuild now (an empty shadow), e.g. for a mirror just added. */
extern void mirror_start_rebuild(const MssqlCdcTable *table, Oid run_as);

/*
 * Drop the shadow of a rebuild of mirror_schema.mirror_table if there is
 * one, as run_as (its owner): remove_table of a table being rebuilt, or
 * alter_table(mirror => false).
 */
extern void mirror_drop_shadow(const char *mirror_schema, const char *mirror_table,
							   Oid run_as);

/*
 * In the transaction of the snapshot's last chunk: make the mirror equal
 * to the shadow in place and drop the shadow (no-op without a rebuild).
 */
extern void mirror_snapshot_done(const MssqlCdcTable *table, const MssqlSourceTable *src,
								 Oid run_as);

#endif							/* MSSQL_CDC_MIRROR_H */
