/*-------------------------------------------------------------------------
 *
 * verify_mirror.c
 *		verify(): reading a table's mirror rows by key, and comparing
 *		values (see verify_mirror.h).
 *
 * The keys of a batch go to PostgreSQL as one array per key column,
 * unnested WITH ORDINALITY, so that one query finds the mirror rows of
 * every key and says which key each row belongs to.  Values are compared
 * as binary images: no text rendering can hide a difference, and a NULL
 * never equals an empty string.
 *
 * IDENTIFICATION
 *		src/verify_mirror.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"

#include "verify_mirror.h"

bool
verify_values_equal(const VerifyColumn *col, Datum a, bool anull, Datum b, bool bnull)
{
	if (anull || bnull)
		return anull && bnull;
	return datum_image_eq(a, b, col->typbyval, col->typlen);
}

char *
verify_mirror_columns(VerifyTable *vt)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	for (i = 0; i < vt->ncols; i++)
		appendStringInfo(&buf, "%sm.%s", i ? ", " : "", quote_identifier(vt->cols[i].pg_name));
	return buf.data;
}

char *
verify_key_join(VerifyTable *vt)
{
	StringInfoData buf;
	int			k;

	initStringInfo(&buf);
	for (k = 0; k < vt->nkey; k++)
		appendStringInfo(&buf, "%sm.%s OPERATOR(pg_catalog.=) s._k%d", k ? " AND " : "",
						 quote_identifier(vt->cols[vt->key_col[k]].pg_name), k + 1);
	return buf.data;
}

char *
verify_key_unnest(VerifyTable *vt, int first_param)
{
	StringInfoData buf;
	int			k;

	initStringInfo(&buf);
	/*
	 * ROWS FROM, not unnest($1, $2): the multi-argument unnest is a syntax
	 * of FROM that exists only unqualified, and pg_catalog.unnest has one
	 * argument
	 */
	appendStringInfoString(&buf, "ROWS FROM (");
	for (k = 0; k < vt->nkey; k++)
		appendStringInfo(&buf, "%spg_catalog.unnest($%d)", k ? ", " : "", first_param + k);
	appendStringInfoString(&buf, ") WITH ORDINALITY AS s(");
	for (k = 0; k < vt->nkey; k++)
		appendStringInfo(&buf, "_k%d, ", k + 1);
	appendStringInfoString(&buf, "_ord)");
	return buf.data;
}

void
verify_key_arrays(VerifyTable *vt, Datum **keys, int nrows, Datum *arrays, Oid *array_types)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(nrows, 1));
	int			k;
	int			r;

	for (k = 0; k < vt->nkey; k++)
	{
		const VerifyColumn *col = &vt->cols[vt->key_col[k]];

		for (r = 0; r < nrows; r++)
			elems[r] = keys[r][k];
		arrays[k] = PointerGetDatum(construct_array(elems, nrows, col->typid, col->typlen,
													col->typbyval, col->typalign));
		array_types[k] = get_array_type(col->typid);
	}
}
