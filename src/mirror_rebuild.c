/*-------------------------------------------------------------------------
 *
 * mirror_rebuild.c
 *		A resnapshot rebuilds a mirror without a reader ever seeing it empty
 *		or half filled (doc/mirror.md "Resnapshot").
 *
 * When a snapshot starts (pending -> snapshotting) and the mirror already
 * has rows, or a rebuild was asked for (alter_table adding a mirror to a
 * streaming table), the chunks go into a shadow table "<mirror>_rebuild"
 * (LIKE the mirror, same key) instead of the mirror; readers keep the whole
 * old mirror, as of the old checkpoint.  Its existence is the state that
 * survives a crash: a resumed snapshot goes on filling it.  In the
 * transaction of the last chunk (the hand-over to streaming at L0), the
 * mirror is made equal to the shadow in place (rows gone at the source
 * deleted, the others upserted where they differ) and the shadow dropped:
 * readers see the old mirror until that commit and the new one after it.
 * The mirror keeps its OID, grants, publications and indexes; a subscriber
 * receives one transaction with the differences.  The replay from L0 then
 * converges the rows copied after L0, exactly as after an initial copy.
 *
 * IDENTIFICATION
 *		src/mirror_rebuild.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "mirror.h"
#include "mirror_internal.h"
#include "staging.h"

#define SHADOW_SUFFIX	"_rebuild"

static char *
shadow_name_of(const char *mirror_table)
{
	return staging_column_name(psprintf("%s%s", mirror_table, SHADOW_SUFFIX));
}

static char *
shadow_name(const MssqlCdcTable *table)
{
	return shadow_name_of(table->mirror_table);
}

void
mirror_drop_shadow(const char *mirror_schema, const char *mirror_table, Oid run_as)
{
	Oid			nspid = get_namespace_oid(mirror_schema, true);
	char	   *name = shadow_name_of(mirror_table);

	if (OidIsValid(nspid) && OidIsValid(get_relname_relid(name, nspid)))
		mirror_run_sql(psprintf("DROP TABLE %s", quote_qualified_identifier(mirror_schema, name)),
					   run_as);
}

char *
mirror_shadow_if_building(const MssqlCdcTable *table)
{
	Oid			nspid = get_namespace_oid(table->mirror_schema, true);
	char	   *name = shadow_name(table);

	if (OidIsValid(nspid) && OidIsValid(get_relname_relid(name, nspid)))
		return name;
	return NULL;
}

/* whether the mirror has a row (as run_as) */
static bool
mirror_has_rows(const MssqlCdcTable *table, Oid run_as)
{
	Oid			save_userid;
	int			save_sec_context;
	bool		has;

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(run_as, save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute(psprintf("SELECT 1 FROM %s LIMIT 1",
							 quote_qualified_identifier(table->mirror_schema,
														table->mirror_table)),
					true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read mirror table \"%s.%s\"", table->mirror_schema,
			 table->mirror_table);
	has = SPI_processed > 0;
	SPI_finish();
	SetUserIdAndSecContext(save_userid, save_sec_context);
	return has;
}

void
mirror_start_rebuild(const MssqlCdcTable *table, Oid run_as)
{
	const char *mirror = quote_qualified_identifier(table->mirror_schema, table->mirror_table);
	const char *shadow = quote_qualified_identifier(table->mirror_schema, shadow_name(table));

	/* a rebuild interrupted by another resnapshot starts from empty again */
	mirror_run_sql(psprintf("DROP TABLE IF EXISTS %s; CREATE TABLE %s (LIKE %s INCLUDING ALL);"
							" COMMENT ON TABLE %s IS %s",
							shadow, shadow, mirror, shadow,
							quote_literal_cstr(psprintf("mssql_cdc: the resnapshot of %s being built; merged into it and dropped when the copy is done",
														mirror))),
				   run_as);
}

void
mirror_snapshot_begin(const MssqlCdcTable *table, Oid run_as)
{
	if (!mirror_enabled(table))
		return;
	/* an empty mirror (the first copy) fills in place, chunk by chunk */
	if (mirror_shadow_if_building(table) != NULL || mirror_has_rows(table, run_as))
		mirror_start_rebuild(table, run_as);
}

void
mirror_snapshot_done(const MssqlCdcTable *table, const MssqlSourceTable *src, Oid run_as)
{
	char	   *shadow_rel;
	const char *mirror;
	const char *shadow;
	MirrorColumn *cols;
	int			ncols;
	int			nkey;
	StringInfoData sql;

	if (!mirror_enabled(table) || (shadow_rel = mirror_shadow_if_building(table)) == NULL)
		return;
	mirror = quote_qualified_identifier(table->mirror_schema, table->mirror_table);
	shadow = quote_qualified_identifier(table->mirror_schema, shadow_rel);
	cols = mirror_columns(src, &ncols, &nkey);

	initStringInfo(&sql);
	/* rows that are gone at the source */
	appendStringInfo(&sql, "DELETE FROM %s m WHERE NOT EXISTS (SELECT 1 FROM %s s WHERE ",
					 mirror, shadow);
	mirror_append_key_join(&sql, cols, nkey, "s", "m");
	/*
	 * the others, written only where they differ (less for subscribers);
	 * compared as the text of the rows: it needs no equality operator (xml
	 * has none), and a difference that equality would hide (a numeric's
	 * scale, -0) is written
	 */
	appendStringInfo(&sql, "); INSERT INTO %s AS m (", mirror);
	mirror_append_names(&sql, cols, 0, ncols, "");
	appendStringInfoString(&sql, ") SELECT ");
	mirror_append_names(&sql, cols, 0, ncols, "s.");
	appendStringInfo(&sql, " FROM %s s", shadow);
	mirror_append_upsert_tail(&sql, cols, ncols, nkey);
	if (ncols > nkey)
	{
		/* as text: xml has no equality; a row's text is never NULL */
		appendStringInfoString(&sql, " WHERE pg_catalog.textne(ROW(");
		mirror_append_names(&sql, cols, nkey, ncols, "m.");
		appendStringInfoString(&sql, ")::pg_catalog.text, ROW(");
		mirror_append_names(&sql, cols, nkey, ncols, "EXCLUDED.");
		appendStringInfoString(&sql, ")::pg_catalog.text)");
	}
	appendStringInfo(&sql, "; DROP TABLE %s", shadow);
	mirror_run_sql(sql.data, run_as);
}
