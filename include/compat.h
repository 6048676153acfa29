/*-------------------------------------------------------------------------
 *
 * compat.h
 *		Every difference between PostgreSQL major versions, in one place.
 *
 * Function bodies never test PG_VERSION_NUM; they call the wrappers below
 * instead, so supporting another major version means editing this file
 * only.  The project is built and tested against PostgreSQL 15; the older
 * branches here follow the documented API of 13 and 14.
 *
 * IDENTIFICATION
 *		include/compat.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_COMPAT_H
#define MSSQL_CDC_COMPAT_H

#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "utils/tuplestore.h"
#include "pgstat.h"
#include "utils/guc.h"

#if PG_VERSION_NUM < 130000
#error "mssql_cdc requires PostgreSQL 13 or later"
#endif

/*
 * Shared memory requests.  From PG 15 RequestAddinShmemSpace() and
 * RequestNamedLWLockTranche() may only be called from shmem_request_hook;
 * before 15 they are called directly from _PG_init.  The caller passes its
 * request function and keeps the returned previous hook, which it must call
 * first (NULL before PG 15, when there is no hook chain).
 */
typedef void (*compat_shmem_request_fn) (void);

#if PG_VERSION_NUM >= 150000
static inline compat_shmem_request_fn
compat_install_shmem_request(compat_shmem_request_fn request_fn)
{
	compat_shmem_request_fn prev = shmem_request_hook;

	shmem_request_hook = request_fn;
	return prev;
}
#else
static inline compat_shmem_request_fn
compat_install_shmem_request(compat_shmem_request_fn request_fn)
{
	request_fn();
	return NULL;
}
#endif

/* Reserve our GUC prefix so typos like mssql_cdc.pol_interval are refused. */
#if PG_VERSION_NUM >= 150000
#define compat_mark_guc_prefix_reserved(prefix) MarkGUCPrefixReserved(prefix)
#else
#define compat_mark_guc_prefix_reserved(prefix) EmitWarningsOnPlaceholders(prefix)
#endif

/*
 * Wait event shown in pg_stat_activity while our processes sleep.  PG 17
 * added named custom wait events; until they are adopted every version uses
 * the generic "Extension" event.
 */
#define MSSQL_CDC_WAIT_EVENT_MAIN	PG_WAIT_EXTENSION

/*
 * Materialize-mode set-returning functions: set up rsinfo->setResult and
 * rsinfo->setDesc from the function's declared OUT parameters.
 */
#if PG_VERSION_NUM >= 150000
#define compat_init_materialized_srf(fcinfo) InitMaterializedSRF((fcinfo), 0)
#else
static inline void
compat_init_materialized_srf(FunctionCallInfo fcinfo)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TupleDesc	tupdesc;
	MemoryContext oldcxt;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		!(rsinfo->allowedModes & SFRM_Materialize))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	oldcxt = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = tuplestore_begin_heap(true, false, work_mem);
	rsinfo->setDesc = CreateTupleDescCopy(tupdesc);
	MemoryContextSwitchTo(oldcxt);
}
#endif

/* A uniformly distributed random number in [0, 1), for retry jitter. */
#if PG_VERSION_NUM >= 150000
#include "common/pg_prng.h"
static inline double
compat_random_fraction(void)
{
	return pg_prng_double(&pg_global_prng_state);
}
#else
static inline double
compat_random_fraction(void)
{
	return (double) random() / ((double) MAX_RANDOM_VALUE + 1);
}
#endif

#endif							/* MSSQL_CDC_COMPAT_H */
