/*-------------------------------------------------------------------------
 *
 * mirror_apply.c
 *		Change a mirror table from the staging rows just written, in the
 *		same transaction (mirror.h).
 *
 * A window is applied in one statement, set-based: the window's rows are
 * collapsed to the LAST change of every primary key in execution order
 * (_cdc_lsn, _cdc_command_id, _cdc_seqval, _cdc_op: doc/streaming.md),
 * then the keys whose last change is a delete (or the update_before of an
 * update that moved the row to another key) are deleted and the others
 * upserted (INSERT ... ON CONFLICT DO UPDATE).  Every key occurs once, so
 *
 *	- a statement that shifts keys (UPDATE t SET id = id + 1, recorded as
 *	  deletes and inserts) or swaps values never meets a transient
 *	  duplicate: there is no intermediate state;
 *	- the snapshot/stream overlap converges: a delete of a row that is not
 *	  there deletes nothing, an insert of a row that is there overwrites it;
 *	- a LOB column ((max), xml, text, ntext, image) of an update_after
 *	  whose update-mask bit is 0 was not changed by the update, and its
 *	  value (possibly NULL) is not a value: the column takes the value of
 *	  the key's latest change in the window that did set it, else keeps
 *	  the mirror's stored value.  A window in which an update pair may
 *	  have moved a row to another key is applied by the statement of
 *	  mirror_moves.c instead, which follows the value from the old key.
 *
 * A mirror-only table's window is read from its temporary table
 * (mirror_window_stage.c), which empties at commit.  A snapshot chunk's
 * rows go straight into the mirror (mirror_snapshot.c); where they cannot,
 * they are staged and upserted from the staging table here, and in
 * mirror-only mode deleted from it again in the chunk's transaction.
 *
 * IDENTIFICATION
 *		src/mirror_apply.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/resowner.h"

#include "mirror.h"
#include "mirror_internal.h"

#define LSN_RANGE MIRROR_LSN_RANGE_OF("s")
#define CHUNK_RANGE \
	" s._cdc_lsn OPERATOR(mssql_cdc.=) $1::mssql_cdc.lsn" \
	" AND s._cdc_command_id OPERATOR(pg_catalog.=) 0" \
	" AND s._cdc_seqval OPERATOR(mssql_cdc.>=) $2::mssql_cdc.lsn" \
	" AND s._cdc_op OPERATOR(pg_catalog.=) 'snapshot'"
#define EXEC_ORDER_DESC \
	"s._cdc_lsn DESC, s._cdc_command_id DESC, s._cdc_seqval DESC, s._cdc_op DESC"

/* a LOB column's value: w's when set, else its latest in the window, else kept */
static char *
lob_value(const MirrorColumn *cols, int i)
{
	return psprintf("CASE WHEN NOT %s THEN w.%s WHEN l%d.%s IS NOT NULL THEN l%d.v ELSE m.%s END",
					mirror_lob_unchanged("w", cols[i].mask_ordinal), cols[i].name,
					i, cols[0].name, i, cols[i].name);
}

static char *
build_window_sql(const char *staging, const char *mirror, const MirrorColumn *cols,
				 int ncols, int nkey)
{
	StringInfoData sql;
	int			i;
	bool		any_lob = false;

	initStringInfo(&sql);
	/* the last change of every key */
	appendStringInfoString(&sql, "WITH w AS MATERIALIZED (SELECT DISTINCT ON (");
	mirror_append_names(&sql, cols, 0, nkey, "s.");
	appendStringInfoString(&sql, ") ");
	mirror_append_names(&sql, cols, 0, ncols, "s.");
	appendStringInfo(&sql, ", s._cdc_op, s._cdc_update_mask FROM %s s WHERE" LSN_RANGE
					 " ORDER BY ", staging);
	mirror_append_names(&sql, cols, 0, nkey, "s.");
	appendStringInfoString(&sql, ", " EXEC_ORDER_DESC ")");
	/* per LOB column: its latest change in the window that set it */
	for (i = nkey; i < ncols; i++)
	{
		if (cols[i].mask_ordinal == 0)
			continue;
		any_lob = true;
		appendStringInfo(&sql, ", l%d AS (SELECT DISTINCT ON (", i);
		mirror_append_names(&sql, cols, 0, nkey, "s.");
		appendStringInfoString(&sql, ") ");
		mirror_append_names(&sql, cols, 0, nkey, "s.");
		appendStringInfo(&sql, ", s.%s AS v FROM %s s WHERE" LSN_RANGE
						 " AND s._cdc_op IN ('insert', 'update_after') AND NOT %s ORDER BY ",
						 cols[i].name, staging, mirror_lob_unchanged("s", cols[i].mask_ordinal));
		mirror_append_names(&sql, cols, 0, nkey, "s.");
		appendStringInfoString(&sql, ", " EXEC_ORDER_DESC ")");
	}
	/* keys whose last change removes them */
	appendStringInfo(&sql, ", d AS (DELETE FROM %s m USING w WHERE w._cdc_op IN"
					 " ('delete', 'update_before') AND ", mirror);
	mirror_append_key_join(&sql, cols, nkey, "m", "w");
	appendStringInfoString(&sql, ") ");
	/* the others: upsert */
	mirror_append_insert_select(&sql, mirror, cols, ncols, lob_value);
	appendStringInfoString(&sql, " FROM w");
	if (any_lob)
	{
		appendStringInfo(&sql, " LEFT JOIN %s m ON ", mirror);
		mirror_append_key_join(&sql, cols, nkey, "m", "w");
		for (i = nkey; i < ncols; i++)
		{
			char	   *alias;

			if (cols[i].mask_ordinal == 0)
				continue;
			alias = psprintf("l%d", i);
			appendStringInfo(&sql, " LEFT JOIN %s ON ", alias);
			mirror_append_key_join(&sql, cols, nkey, alias, "w");
		}
	}
	appendStringInfoString(&sql, " WHERE w._cdc_op NOT IN ('delete', 'update_before')");
	mirror_append_upsert_tail(&sql, cols, ncols, nkey);
	return sql.data;
}

/*
 * A window of inserts only, the usual backlog: each key occurs once (the
 * source's key refuses a second insert of a key without a delete between)
 * and, unless the snapshot overlap or a key collision of the type mapping
 * says otherwise, is new to the mirror.  Then the collapse and the upsert
 * change nothing, and a plain INSERT is what the window statement would
 * do, at less than half its cost (no sort, no speculative insertion).  It
 * inserts nothing when the window has any other change; a key the mirror
 * has already fails it with a unique violation, and run_as_role() applies
 * the window with the general statement instead.
 */
static char *
build_inserts_sql(const char *staging, const char *mirror, const MirrorColumn *cols,
				  int ncols)
{
	StringInfoData sql;

	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s (", mirror);
	mirror_append_names(&sql, cols, 0, ncols, "");
	appendStringInfoString(&sql, ") SELECT ");
	mirror_append_names(&sql, cols, 0, ncols, "s.");
	appendStringInfo(&sql, " FROM %s s WHERE" LSN_RANGE " AND NOT EXISTS (SELECT FROM %s o WHERE"
					 MIRROR_LSN_RANGE_OF("o") " AND o._cdc_op OPERATOR(pg_catalog.<>) 'insert')",
					 staging, staging);
	return sql.data;
}

/*
 * Subtransactions of inserts-only windows in one transaction at most: a
 * transaction with more subtransaction XIDs than its PGPROC caches makes
 * every other backend's snapshots look them up in pg_subtrans.  A window
 * with more tables applies the rest with the general statement.
 */
#define INSERTS_ONLY_PER_XACT	(PGPROC_MAX_CACHED_SUBXIDS / 2)

/*
 * Run the inserts-only statement in a subtransaction; false (and nothing
 * done) when the window needs the general statement.
 */
static bool
try_inserts_only(const char *sql, Oid *types, Datum *values)
{
	static LocalTransactionId xact = InvalidLocalTransactionId;
	static int	tried = 0;
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	volatile bool done = false;

	if (xact != MyProc->lxid)
	{
		xact = MyProc->lxid;
		tried = 0;
	}
	if (tried++ >= INSERTS_ONLY_PER_XACT)
		return false;
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		if (SPI_execute_with_args(sql, 2, types, values, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not insert into the mirror table");
		/* nothing inserted: the window has other changes (or no rows) */
		done = SPI_processed > 0;
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
		/* a key the mirror has (the overlap): the general statement applies it */
		if (edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION)
			ReThrowError(edata);
		FreeErrorData(edata);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);
	CurrentResourceOwner = oldowner;
	return done;
}

static char *
build_snapshot_sql(const char *staging, const char *mirror, const MirrorColumn *cols,
				   int ncols, int nkey)
{
	StringInfoData sql;

	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s (", mirror);
	mirror_append_names(&sql, cols, 0, ncols, "");
	appendStringInfoString(&sql, ") SELECT ");
	mirror_append_names(&sql, cols, 0, ncols, "s.");
	appendStringInfo(&sql, " FROM %s s WHERE" CHUNK_RANGE, staging);
	mirror_append_upsert_tail(&sql, cols, ncols, nkey);
	return sql.data;
}

/*
 * Remove staged rows of range (and extra) again in the window's
 * transaction: all of a mirror-only table's, or the before-images read
 * only for the mirror.
 */
static void
delete_staged(const MssqlCdcTable *table, const char *range, const char *extra,
			  Oid *types, Datum *values)
{
	char	   *del = psprintf("DELETE FROM %s s WHERE%s%s",
							   quote_qualified_identifier(table->staging_schema, table->staging_table),
							   range, extra);

	if (SPI_execute_with_args(del, 2, types, values, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not remove applied rows of table \"%s.%s\" from its changelog",
			 table->staging_schema, table->staging_table);
}

static void
run_as_role(const MssqlCdcTable *table, Oid run_as, const char *inserts_sql,
			const char *apply_sql, bool window, const char *range,
			const MssqlLsn *a, const MssqlLsn *b)
{
	Oid			types[2] = {TEXTOID, TEXTOID};
	Datum		values[2];
	char		a_text[MSSQL_LSN_TEXT_SIZE];
	char		b_text[MSSQL_LSN_TEXT_SIZE];
	Oid			save_userid;
	int			save_sec_context;

	mssql_lsn_format(a, a_text);
	mssql_lsn_format(b, b_text);
	values[0] = CStringGetTextDatum(a_text);
	values[1] = CStringGetTextDatum(b_text);

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(run_as, save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if ((inserts_sql == NULL || !try_inserts_only(inserts_sql, types, values)) &&
		SPI_execute_with_args(apply_sql, 2, types, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not apply changes to mirror table \"%s.%s\"",
			 table->mirror_schema, table->mirror_table);
	if (!table->changelog)
	{
		/* a window came from its temporary table, which empties at commit */
		if (!window)
			delete_staged(table, range, "", types, values);
	}
	else if (!table->update_before)
		/* read for the mirror only (apply.c): the changelog keeps no before-images */
		delete_staged(table, range, " AND s._cdc_op OPERATOR(pg_catalog.=) 'update_before'",
					  types, values);
	SPI_finish();
	SetUserIdAndSecContext(save_userid, save_sec_context);
}

/*
 * Apply into target (the mirror or its shadow, a relation name) and, in
 * mirror-only mode, delete the staging rows it read (same range), as
 * run_as.  A window reads a mirror-only table's rows from its temporary
 * table (mirror_window_stage.c).
 */
static void
apply_range(const MssqlCdcTable *table, const MssqlSourceTable *src, Oid run_as,
			const char *target, bool window, bool key_moves, const char *range,
			const MssqlLsn *a, const MssqlLsn *b)
{
	MirrorColumn *cols;
	int			ncols;
	int			nkey;
	const char *staged;
	const char *mirror = quote_qualified_identifier(table->mirror_schema, target);
	const char *inserts_sql = NULL;
	const char *apply_sql;

	cols = mirror_columns(src, &ncols, &nkey);
	if (window && !table->changelog)
		staged = psprintf("pg_temp.%s",
						  quote_identifier(mirror_window_stage_name(table->table_id)));
	else
		staged = quote_qualified_identifier(table->staging_schema, table->staging_table);
	if (!window)
		apply_sql = build_snapshot_sql(staged, mirror, cols, ncols, nkey);
	else if (key_moves)
		/* a window with updates, so no inserts-only one */
		apply_sql = mirror_moves_window_sql(staged, mirror, cols, ncols, nkey);
	else
	{
		inserts_sql = build_inserts_sql(staged, mirror, cols, ncols);
		apply_sql = build_window_sql(staged, mirror, cols, ncols, nkey);
	}
	run_as_role(table, run_as, inserts_sql, apply_sql, window, range, a, b);
}

void
mirror_apply_window(const MssqlCdcTable *table, const MssqlSourceTable *src, Oid run_as,
					const MssqlLsn *from, const MssqlLsn *to, bool key_moves)
{
	if (mirror_enabled(table))
		apply_range(table, src, run_as, table->mirror_table, true, key_moves, LSN_RANGE,
					from, to);
}

void
mirror_apply_snapshot(const MssqlCdcTable *table, const MssqlSourceTable *src, Oid run_as,
					  const MssqlLsn *l0, const MssqlLsn *first_seqval)
{
	char	   *shadow;

	if (!mirror_enabled(table))
		return;
	/* a resnapshot fills the shadow; readers keep the whole old mirror */
	shadow = mirror_shadow_if_building(table);
	apply_range(table, src, run_as, shadow ? shadow : table->mirror_table, false, false,
				CHUNK_RANGE, l0, first_seqval);
}
