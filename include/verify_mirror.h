/*-------------------------------------------------------------------------
 *
 * verify_mirror.h
 *		verify(): the pieces of the queries that read a table's mirror rows
 *		by key (the chunk comparison and the re-check build theirs from
 *		them), and the equality of two values of a compared column.
 *
 * IDENTIFICATION
 *		include/verify_mirror.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_VERIFY_MIRROR_H
#define MSSQL_CDC_VERIFY_MIRROR_H

#include "postgres.h"

#include "verify.h"

/* SELECT-list of the mirror columns ("m.a, m.b") */
extern char *verify_mirror_columns(VerifyTable *vt);

/* the ON clause joining m with unnest's s(_k1, ...) */
extern char *verify_key_join(VerifyTable *vt);

/* "unnest($first, ...) WITH ORDINALITY AS s(_k1, ..., _ord)" */
extern char *verify_key_unnest(VerifyTable *vt, int first_param);

/* key values of nrows rows as arrays, parameters of unnest */
extern void verify_key_arrays(VerifyTable *vt, Datum **keys, int nrows, Datum *arrays,
							  Oid *array_types);

/* are two values of column col the same (NULLs included)? */
extern bool verify_values_equal(const VerifyColumn *col, Datum a, bool anull, Datum b, bool bnull);

#endif							/* MSSQL_CDC_VERIFY_MIRROR_H */
