/*-------------------------------------------------------------------------
 *
 * mirror_sql.c
 *		The mirror's columns and the pieces of SQL over them that the window
 *		apply (mirror_apply.c) and the rebuild (mirror_rebuild.c) both build
 *		with, and running such SQL as run_as (mirror_internal.h).
 *
 * IDENTIFICATION
 *		src/mirror_sql.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "mirror_internal.h"
#include "staging.h"

/* LOBs whose unchanged value CDC may record as NULL (doc/type-mapping.md) */
static bool
is_lob(const MssqlColumn *col)
{
	const char *t = col->type_name;

	if (strcmp(t, "xml") == 0 || strcmp(t, "text") == 0 || strcmp(t, "ntext") == 0 ||
		strcmp(t, "image") == 0)
		return true;
	return col->max_length == MSSQL_LENGTH_MAX &&
		(strcmp(t, "varchar") == 0 || strcmp(t, "nvarchar") == 0 ||
		 strcmp(t, "varbinary") == 0);
}

/* The staged columns, key columns in key order first */
MirrorColumn *
mirror_columns(const MssqlSourceTable *src, int *ncols, int *nkey)
{
	MirrorColumn *cols = palloc0(sizeof(MirrorColumn) * Max(src->ncolumns, 1));
	int			n = 0;
	int			captured = 0;
	int			k;
	int			i;

	for (k = 1; k <= src->nkey; k++)
		for (i = 0; i < src->ncolumns; i++)
			if (src->columns[i].is_key && src->columns[i].key_ordinal == k &&
				source_column_is_staged(&src->columns[i]))
			{
				cols[n].name = quote_identifier(staging_column_of(&src->columns[i]));
				cols[n++].is_key = true;
			}
	*nkey = n;
	for (i = 0; i < src->ncolumns; i++)
	{
		const MssqlColumn *col = &src->columns[i];

		/* the mask counts every captured column, staged or not */
		if (col->captured)
			captured++;
		if (col->is_key || !source_column_is_staged(col))
			continue;
		cols[n].name = quote_identifier(staging_column_of(col));
		cols[n++].mask_ordinal = is_lob(col) && col->captured ? captured : 0;
	}
	*ncols = n;
	return cols;
}

char *
mirror_lob_unchanged(const char *alias, int n)
{
	return psprintf("(%s._cdc_op = 'update_after' AND %s._cdc_update_mask IS NOT NULL"
					" AND pg_catalog.length(%s._cdc_update_mask) > %d"
					" AND pg_catalog.get_bit(%s._cdc_update_mask,"
					" (pg_catalog.length(%s._cdc_update_mask) - 1 - %d) * 8 + %d) = 0)",
					alias, alias, alias, (n - 1) / 8, alias, alias, (n - 1) / 8, (n - 1) % 8);
}

/* "a.k1 = b.k1 AND a.k2 = b.k2" */
void
mirror_append_key_join(StringInfo sql, const MirrorColumn *cols, int nkey, const char *a, const char *b)
{
	int			i;

	for (i = 0; i < nkey; i++)
		appendStringInfo(sql, "%s%s.%s = %s.%s", i > 0 ? " AND " : "", a, cols[i].name,
						 b, cols[i].name);
}

void
mirror_append_names(StringInfo sql, const MirrorColumn *cols, int from, int to, const char *prefix)
{
	int			i;

	for (i = from; i < to; i++)
		appendStringInfo(sql, "%s%s%s", i > from ? ", " : "", prefix, cols[i].name);
}

void
mirror_append_insert_select(StringInfo sql, const char *mirror, const MirrorColumn *cols,
							int ncols, MirrorLobValue lob_value)
{
	int			i;

	appendStringInfo(sql, "INSERT INTO %s (", mirror);
	mirror_append_names(sql, cols, 0, ncols, "");
	appendStringInfoString(sql, ") SELECT ");
	for (i = 0; i < ncols; i++)
	{
		if (i > 0)
			appendStringInfoString(sql, ", ");
		if (cols[i].mask_ordinal == 0)
			appendStringInfo(sql, "w.%s", cols[i].name);
		else
			appendStringInfoString(sql, lob_value(cols, i));
	}
}

/* ON CONFLICT (keys) DO UPDATE SET ... (DO NOTHING for a key-only table) */
void
mirror_append_upsert_tail(StringInfo sql, const MirrorColumn *cols, int ncols, int nkey)
{
	int			i;

	appendStringInfoString(sql, " ON CONFLICT (");
	mirror_append_names(sql, cols, 0, nkey, "");
	if (ncols == nkey)
	{
		appendStringInfoString(sql, ") DO NOTHING");
		return;
	}
	appendStringInfoString(sql, ") DO UPDATE SET ");
	for (i = nkey; i < ncols; i++)
		appendStringInfo(sql, "%s%s = EXCLUDED.%s", i > nkey ? ", " : "", cols[i].name,
						 cols[i].name);
}

int
mirror_run_sql(const char *sql, Oid run_as)
{
	Oid			save_userid;
	int			save_sec_context;
	int			rc;

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(run_as, save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	rc = SPI_execute(sql, false, 0);
	if (rc < 0)
		elog(ERROR, "mirror statement failed (%s): %s", SPI_result_code_string(rc), sql);
	SPI_finish();
	SetUserIdAndSecContext(save_userid, save_sec_context);
	return rc;
}
