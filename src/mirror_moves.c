/*-------------------------------------------------------------------------
 *
 * mirror_moves.c
 *		The window statement for a window in which an update pair 3/4 may
 *		have moved a row to another primary key (mirror_internal.h).
 *
 * SQL Server can record a primary-key change as an in-place update pair:
 * the 3 with the old key, the 4 with the new one, both with the same
 * update mask.  A LOB column the update did not assign is NULL with mask
 * bit 0 in the 4 (text, ntext, image: bit 0, value in the 4), and its
 * value is the one the row had at the OLD key.  The general statement
 * (mirror_apply.c) looks only at the new key, so such a window is applied
 * by this one instead; the reader tells which windows (ApplyResult
 * .key_moves), so the usual window pays nothing for it.
 *
 * A statement that shifts keys in place (UPDATE t SET id = id + 1) records
 * its pairs in execution order, each 3 with the row as it was before the
 * statement: the pair 1 -> 2 comes before 2 -> 3, whose 3 is the row that
 * was at 2, not the one just moved there.  So a key holds a queue of rows
 * ("occupants"), at most two and only inside such a statement: the one it
 * had at the window's start (if any, number 0), then one per insert or
 * move to it (numbered 1, 2, ... in execution order).  A delete or a move
 * away takes the oldest (the j-th takes number j - 1 when the key had a
 * row at the start, else j); an update that keeps the key changes the
 * only one.  After the window the key holds a row when it had one at the
 * start plus the arrivals minus the departures is 1, and that row is its
 * last arrival (or the first row): its columns are the key's last change
 * that is not a departure.  Whether the key had a row at the start is its
 * first change in the window: a departure or an update says yes, an insert
 * no; a move to it (the shift) asks the mirror.
 *
 * A LOB column's value for each occupant is its latest change in the
 * window that set the column; a move with bit 0 "sets" it to the value of
 * the occupant its 3 took away (the row just before it in execution
 * order), a chain followed by a recursive CTE; an occupant with no such
 * change is the key's row at the start, whose value is the mirror's.
 * Everything is read in one statement, so the mirror's rows are read as
 * they were before the statement deletes and upserts.
 *
 * IDENTIFICATION
 *		src/mirror_moves.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "mirror_internal.h"

/* "a.k1 = b._cdc_k1 AND ...": a's key against the key columns b moved from */
static void
append_key_to_origin(StringInfo sql, const MirrorColumn *cols, int nkey, const char *a,
					 const char *b)
{
	int			i;

	for (i = 0; i < nkey; i++)
		appendStringInfo(sql, "%s%s.%s = %s._cdc_k%d", i > 0 ? " AND " : "", a, cols[i].name,
						 b, i + 1);
}

/* whether the row next to s (lead or lag) in execution order has another key */
static void
append_other_key(StringInfo sql, const MirrorColumn *cols, int nkey, const char *fn)
{
	int			i;

	appendStringInfoChar(sql, '(');
	for (i = 0; i < nkey; i++)
		appendStringInfo(sql, "%spg_catalog.%s(s.%s) OVER o IS DISTINCT FROM s.%s",
						 i > 0 ? " OR " : "", fn, cols[i].name, cols[i].name);
	appendStringInfoChar(sql, ')');
}

/*
 * e: the window's changes in execution order (_cdc_n), each an arrival
 * ('add': insert, or the 4 of a move), a departure ('rem': delete, or the
 * 3 of a move) or an update keeping the key ('upd'); the 3 of such an
 * update is of no use (NULL).  A 3 is followed by its 4 in that order.
 * f: per key, the arrivals and departures so far, its first change and the
 * last change that is not a departure.  g: per key, those at its last
 * change, and whether it had a row at the window's start.
 */
static void
append_changes(StringInfo sql, const char *staged, const char *mirror,
			   const MirrorColumn *cols, int ncols, int nkey)
{
	appendStringInfoString(sql, "WITH RECURSIVE e AS MATERIALIZED (SELECT ");
	mirror_append_names(sql, cols, 0, ncols, "s.");
	appendStringInfoString(sql, ", s._cdc_op, s._cdc_update_mask,"
						   " pg_catalog.row_number() OVER o AS _cdc_n,"
						   " CASE s._cdc_op WHEN 'delete' THEN 'rem'"
						   " WHEN 'update_before' THEN CASE WHEN pg_catalog.lead(s._cdc_op) OVER o"
						   " = 'update_after' AND ");
	append_other_key(sql, cols, nkey, "lead");
	appendStringInfoString(sql, " THEN 'rem' END WHEN 'update_after' THEN CASE WHEN"
						   " pg_catalog.lag(s._cdc_op) OVER o = 'update_before' AND ");
	append_other_key(sql, cols, nkey, "lag");
	appendStringInfo(sql, " THEN 'add' ELSE 'upd' END ELSE 'add' END AS _cdc_kind"
					 " FROM %s s WHERE" MIRROR_LSN_RANGE_OF("s")
					 " WINDOW o AS (ORDER BY s._cdc_lsn, s._cdc_command_id, s._cdc_seqval,"
					 " s._cdc_op))", staged);
	appendStringInfoString(sql, ", f AS MATERIALIZED (SELECT e.*,"
						   " pg_catalog.count(*) FILTER (WHERE e._cdc_kind = 'add') OVER k AS _cdc_adds,"
						   " pg_catalog.count(*) FILTER (WHERE e._cdc_kind = 'rem') OVER k AS _cdc_rems,"
						   " pg_catalog.first_value(e._cdc_kind) OVER k AS _cdc_fk,"
						   " pg_catalog.first_value(e._cdc_op) OVER k AS _cdc_fop,"
						   " pg_catalog.max(e._cdc_n) FILTER (WHERE e._cdc_kind <> 'rem') OVER k"
						   " AS _cdc_last FROM e WHERE e._cdc_kind IS NOT NULL"
						   " WINDOW k AS (PARTITION BY ");
	mirror_append_names(sql, cols, 0, nkey, "e.");
	appendStringInfoString(sql, " ORDER BY e._cdc_n))");
	appendStringInfoString(sql, ", g AS MATERIALIZED (SELECT ");
	mirror_append_names(sql, cols, 0, nkey, "x.");
	appendStringInfo(sql, ", x._cdc_adds, x._cdc_rems, x._cdc_last, CASE WHEN x._cdc_fk <> 'add'"
					 " THEN 1 WHEN x._cdc_fop <> 'update_after' THEN 0 WHEN m.%s IS NULL THEN 0"
					 " ELSE 1 END AS _cdc_init FROM (SELECT DISTINCT ON (", cols[0].name);
	mirror_append_names(sql, cols, 0, nkey, "f.");
	appendStringInfoString(sql, ") f.* FROM f ORDER BY ");
	mirror_append_names(sql, cols, 0, nkey, "f.");
	appendStringInfo(sql, ", f._cdc_n DESC) x LEFT JOIN %s m ON x._cdc_fk = 'add'"
					 " AND x._cdc_fop = 'update_after' AND ", mirror);
	mirror_append_key_join(sql, cols, nkey, "m", "x");
	appendStringInfoChar(sql, ')');
}

/*
 * o: the changes with the occupant they concern (_cdc_o).  Per LOB column
 * n: c<n>, each occupant's latest change that set it (_cdc_link: a move
 * with bit 0, whose value is the one of the occupant its 3 took away);
 * ln<n>, those links with that occupant (_cdc_k*, _cdc_to); r<n>, the
 * value each link resolves to, from the end of its chain.
 */
static void
append_lob_values(StringInfo sql, const char *mirror, const MirrorColumn *cols, int ncols,
				  int nkey)
{
	int			i;
	int			k;

	appendStringInfoString(sql, ", o AS MATERIALIZED (SELECT f.*, CASE f._cdc_kind"
						   " WHEN 'add' THEN f._cdc_adds WHEN 'rem' THEN f._cdc_rems - g._cdc_init"
						   " ELSE f._cdc_rems + 1 - g._cdc_init END AS _cdc_o FROM f JOIN g ON ");
	mirror_append_key_join(sql, cols, nkey, "f", "g");
	appendStringInfoChar(sql, ')');
	for (i = nkey; i < ncols; i++)
	{
		char	   *unchanged;
		char	   *c = psprintf("c%d", i);

		if (cols[i].mask_ordinal == 0)
			continue;
		unchanged = mirror_lob_unchanged("o", cols[i].mask_ordinal);
		appendStringInfo(sql, ", c%d AS MATERIALIZED (SELECT DISTINCT ON (", i);
		mirror_append_names(sql, cols, 0, nkey, "o.");
		appendStringInfoString(sql, ", o._cdc_o) ");
		mirror_append_names(sql, cols, 0, nkey, "o.");
		appendStringInfo(sql, ", o._cdc_o, o._cdc_n, o.%s AS _cdc_v, %s AS _cdc_link FROM o"
						 " WHERE o._cdc_kind <> 'rem' AND (o._cdc_kind = 'add' OR NOT %s)"
						 " ORDER BY ", cols[i].name, unchanged, unchanged);
		mirror_append_names(sql, cols, 0, nkey, "o.");
		appendStringInfoString(sql, ", o._cdc_o, o._cdc_n DESC)");

		appendStringInfo(sql, ", ln%d AS MATERIALIZED (SELECT ", i);
		mirror_append_names(sql, cols, 0, nkey, "c.");
		appendStringInfoString(sql, ", c._cdc_o");
		for (k = 0; k < nkey; k++)
			appendStringInfo(sql, ", b.%s AS _cdc_k%d", cols[k].name, k + 1);
		appendStringInfo(sql, ", b._cdc_o AS _cdc_to FROM c%d c JOIN o b"
						 " ON b._cdc_n = c._cdc_n - 1 WHERE c._cdc_link)", i);

		/* the chains' ends: a value set in the window, or the mirror's */
		appendStringInfo(sql, ", r%d AS (SELECT ", i);
		mirror_append_names(sql, cols, 0, nkey, "l.");
		appendStringInfo(sql, ", l._cdc_o, CASE WHEN c._cdc_o IS NULL THEN m.%s ELSE c._cdc_v END"
						 " AS _cdc_v FROM ln%d l LEFT JOIN %s c ON c._cdc_o = l._cdc_to AND ",
						 cols[i].name, i, c);
		append_key_to_origin(sql, cols, nkey, "c", "l");
		appendStringInfo(sql, " LEFT JOIN %s m ON c._cdc_o IS NULL AND ", mirror);
		append_key_to_origin(sql, cols, nkey, "m", "l");
		appendStringInfoString(sql, " WHERE c._cdc_o IS NULL OR NOT c._cdc_link UNION ALL SELECT ");
		mirror_append_names(sql, cols, 0, nkey, "l.");
		appendStringInfo(sql, ", l._cdc_o, r._cdc_v FROM r%d r JOIN ln%d l ON r._cdc_o = l._cdc_to AND ",
						 i, i);
		append_key_to_origin(sql, cols, nkey, "r", "l");
		appendStringInfoChar(sql, ')');
		pfree(c);
	}
}

/* a LOB column's value: its occupant's, from a chain of moves, or the mirror's */
static char *
lob_value(const MirrorColumn *cols, int i)
{
	return psprintf("CASE WHEN c%d._cdc_o IS NULL THEN m.%s WHEN c%d._cdc_link THEN r%d._cdc_v"
					" ELSE c%d._cdc_v END", i, cols[i].name, i, i, i);
}

char *
mirror_moves_window_sql(const char *staged, const char *mirror, const MirrorColumn *cols,
						int ncols, int nkey)
{
	StringInfoData sql;
	int			i;
	bool		any_lob = false;

	for (i = nkey; i < ncols; i++)
		any_lob |= cols[i].mask_ordinal != 0;
	initStringInfo(&sql);
	append_changes(&sql, staged, mirror, cols, ncols, nkey);
	if (any_lob)
		append_lob_values(&sql, mirror, cols, ncols, nkey);
	/* keys without a row after the window */
	appendStringInfo(&sql, ", d AS (DELETE FROM %s m USING g WHERE"
					 " g._cdc_init + g._cdc_adds - g._cdc_rems <= 0 AND ", mirror);
	mirror_append_key_join(&sql, cols, nkey, "m", "g");
	/* the others: their last row, a LOB column from its occupant */
	appendStringInfoString(&sql, ") ");
	mirror_append_insert_select(&sql, mirror, cols, ncols, lob_value);
	appendStringInfoString(&sql, " FROM g JOIN f w ON w._cdc_n = g._cdc_last");
	if (any_lob)
	{
		appendStringInfo(&sql, " LEFT JOIN %s m ON ", mirror);
		mirror_append_key_join(&sql, cols, nkey, "m", "g");
		for (i = nkey; i < ncols; i++)
		{
			char	   *alias;

			if (cols[i].mask_ordinal == 0)
				continue;
			/* the row after the window is the key's last arrival (0: its first row) */
			alias = psprintf("c%d", i);
			appendStringInfo(&sql, " LEFT JOIN %s ON %s._cdc_o = g._cdc_adds AND ", alias, alias);
			mirror_append_key_join(&sql, cols, nkey, alias, "g");
			alias = psprintf("r%d", i);
			appendStringInfo(&sql, " LEFT JOIN %s ON %s._cdc_o = g._cdc_adds AND ", alias, alias);
			mirror_append_key_join(&sql, cols, nkey, alias, "g");
		}
	}
	appendStringInfoString(&sql, " WHERE g._cdc_init + g._cdc_adds - g._cdc_rems > 0");
	mirror_append_upsert_tail(&sql, cols, ncols, nkey);
	return sql.data;
}
