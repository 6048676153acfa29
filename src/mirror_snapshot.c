/*-------------------------------------------------------------------------
 *
 * mirror_snapshot.c
 *		A snapshot chunk's rows written straight into the mirror (or the
 *		shadow of a rebuild) with the bulk writer (mirror.h).
 *
 * The rows are the ones the chunk converts for the staging table, the
 * same Datums: a mirror column has the staging column's name and type
 * (mirror_ddl.c builds both from the same mapping).  Where it does not
 * (a user changed one of them), the chunk takes the staged path instead
 * (mirror_apply_snapshot), which casts as INSERT does.
 *
 * Plain inserts, no upsert: a chunk reads the keys after the last one
 * committed (keyset.c), so its keys are new to a first copy, and a rebuild
 * fills a shadow that starts empty.  A key that is there anyway (two
 * source keys that map to one PostgreSQL value) fails the chunk with the
 * mirror's unique violation rather than keep one of the two rows.
 *
 * The writer's privileges are run_as's, as for the staging table; the
 * chunk's transaction commits the rows with the resume key.
 *
 * IDENTIFICATION
 *		src/mirror_snapshot.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "utils/lsyscache.h"

#include "mirror.h"
#include "mirror_internal.h"
#include "staging_writer.h"

struct MirrorSink
{
	StagingWriter *writer;
	int		   *from;			/* per mirror column: the caller's value index */
	int			ncols;
	Datum	   *values;
	bool	   *nulls;
};

MirrorSink *
mirror_sink_open(const MssqlCdcTable *table, Oid run_as, bool alone, int ncols,
				 char *const *names, const Oid *types, const int32 *typmods)
{
	char	   *shadow;
	Oid			nspid;
	Oid			relid;
	AttrNumber *attnums;
	MirrorSink *sink;
	int			i;

	if (!mirror_enabled(table))
		return NULL;
	shadow = mirror_shadow_if_building(table);
	nspid = get_namespace_oid(table->mirror_schema, true);
	relid = OidIsValid(nspid) ? get_relname_relid(shadow ? shadow : table->mirror_table, nspid)
		: InvalidOid;
	/* a missing mirror: the staged path reports it */
	if (!OidIsValid(relid))
		return NULL;
	/* two SPI writers cannot interleave (staging_writer.h) */
	if (!alone && !staging_writer_is_bulk(relid))
		return NULL;

	sink = palloc0(sizeof(MirrorSink));
	sink->from = palloc(sizeof(int) * Max(ncols, 1));
	attnums = palloc(sizeof(AttrNumber) * Max(ncols, 1));
	for (i = 0; i < ncols; i++)
	{
		AttrNumber	att;
		Oid			typid;
		int32		typmod;
		Oid			collid;

		if (names[i] == NULL)
			continue;			/* not a source column */
		att = get_attnum(relid, names[i]);
		if (att == InvalidAttrNumber || get_attgenerated(relid, att) != '\0')
			return NULL;
		get_atttypetypmodcoll(relid, att, &typid, &typmod, &collid);
		if (typid != types[i] || typmod != typmods[i])
			return NULL;
		attnums[sink->ncols] = att;
		sink->from[sink->ncols++] = i;
	}
	sink->values = palloc(sizeof(Datum) * Max(sink->ncols, 1));
	sink->nulls = palloc(sizeof(bool) * Max(sink->ncols, 1));
	sink->writer = staging_writer_open(relid, run_as, attnums, sink->ncols);
	return sink;
}

MemoryContext
mirror_sink_row_context(MirrorSink *sink)
{
	return staging_writer_row_context(sink->writer);
}

void
mirror_sink_add(MirrorSink *sink, const Datum *values, const bool *nulls, bool copy)
{
	int			i;

	for (i = 0; i < sink->ncols; i++)
	{
		sink->values[i] = values[sink->from[i]];
		sink->nulls[i] = nulls[sink->from[i]];
	}
	if (copy)
		staging_writer_add_copy(sink->writer, sink->values, sink->nulls);
	else
		staging_writer_add(sink->writer, sink->values, sink->nulls);
}

void
mirror_sink_close(MirrorSink *sink)
{
	staging_writer_close(sink->writer);
}
