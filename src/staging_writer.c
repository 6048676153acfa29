/*-------------------------------------------------------------------------
 *
 * staging_writer.c
 *		Bulk inserts into a staging table, the way COPY FROM does them, with
 *		the SPI INSERT path as the fallback (see staging_writer.h).
 *
 * Why this is the same as the INSERT it replaces: the executor's own
 * pieces do the work INSERT's would — ExecCheckRTPerms for the INSERT
 * privilege on the supplied columns, the defaults of the other columns
 * from build_column_default, ExecComputeStoredGenerated, ExecConstraints,
 * ExecInsertIndexTuples (unique checks against the heap, so a duplicate in
 * the same batch is found too).  Everything that would make a bulk insert
 * differ from INSERT sends the table to the SPI path instead: any trigger
 * (statement and row triggers, foreign keys, deferrable constraints are
 * all triggers), rules, row-level security, partitions and partitioned
 * tables, foreign and non-heap tables.
 *
 * The rows of a unit share the caller's transaction and command id; the
 * caller commits or aborts the whole unit.  After the last flush the
 * command counter is advanced so the caller's later statements see the
 * rows, as they would after an SPI INSERT.
 *
 * IDENTIFICATION
 *		src/staging_writer.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "executor/executor.h"
#include "executor/nodeModifyTable.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "rewrite/rewriteHandler.h"
#include "utils/acl.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "staging_spi_writer.h"
#include "staging_writer.h"

int			mssql_cdc_insert_batch_rows = 1000;

/* A column the caller does not supply but whose default must be computed */
typedef struct DefaultColumn
{
	AttrNumber	attnum;
	ExprState  *expr;
} DefaultColumn;

struct StagingWriter
{
	Oid			save_userid;
	int			save_sec_context;
	Relation	rel;
	AttrNumber *attnums;		/* the caller's columns */
	int			ncols;

	/* SPI path */
	StagingSpiWriter *spi;

	/* bulk path */
	EState	   *estate;
	ResultRelInfo *rri;
	BulkInsertState bistate;
	CommandId	cid;
	DefaultColumn *defaults;
	int			ndefaults;
	bool		has_generated;
	bool		has_constraints;
	TupleDesc	slot_desc;		/* the slots' descriptor: not reference-counted */
	TupleTableSlot **slots;		/* batch_rows slots, created as needed */
	int			nslots;
	int			nused;
	int			batch_rows;
	MemoryContext batchcxt;		/* the values of the buffered rows */
	Size		copied_bytes;	/* rows copied into their slots (add_copy) */
	bool		pushed_snapshot;
};

void
staging_writer_define_gucs(void)
{
	DefineCustomIntVariable("mssql_cdc.insert_batch_rows",
							"Rows buffered per bulk insert into a staging table.",
							"Rows are written to the staging table in batches of at most "
							"this many rows (and about 1 MB); a batch is not a transaction: "
							"a window or snapshot chunk still commits as a whole.",
							&mssql_cdc_insert_batch_rows,
							1000, 1, 100000,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);
}

/*
 * Why a bulk insert would not behave like INSERT on this table; NULL when
 * it would.
 */
static const char *
bulk_refusal(Relation rel)
{
	if (rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
		return "it is partitioned";
	if (rel->rd_rel->relkind != RELKIND_RELATION)
		return "it is not a plain table";
	if (rel->rd_rel->relispartition)
		return "it is a partition";
	if (rel->rd_rel->relam != HEAP_TABLE_AM_OID)
		return "it does not use the heap access method";
	if (rel->trigdesc != NULL)
		return "it has triggers (including foreign keys or deferrable constraints)";
	if (rel->rd_rules != NULL)
		return "it has rules";
	if (rel->rd_rel->relrowsecurity)
		return "row-level security is enabled on it";
	return NULL;
}

/*
 * Say which path a table's rows take: once per table and process, and
 * again whenever the path changes (a trigger added or dropped).
 */
static void
log_path(Relation rel, const char *refusal)
{
	static List *logged_bulk = NIL;
	static List *logged_spi = NIL;
	Oid			relid = RelationGetRelid(rel);
	MemoryContext oldcxt;

	if (list_member_oid(refusal ? logged_spi : logged_bulk, relid))
		return;
	oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	if (refusal)
	{
		logged_bulk = list_delete_oid(logged_bulk, relid);
		logged_spi = lappend_oid(logged_spi, relid);
	}
	else
	{
		logged_spi = list_delete_oid(logged_spi, relid);
		logged_bulk = lappend_oid(logged_bulk, relid);
	}
	MemoryContextSwitchTo(oldcxt);
	if (refusal)
		ereport(LOG,
				(errmsg("mssql_cdc: staging table \"%s\" is written row by row because %s",
						RelationGetRelationName(rel), refusal)));
	else
		ereport(DEBUG1,
				(errmsg_internal("mssql_cdc: staging table \"%s\" is written in bulk",
								 RelationGetRelationName(rel))));
}

/*
 * The privilege checks INSERT INTO schema.table (columns) makes: USAGE on
 * the schema (INSERT names it), INSERT on the table or on every supplied
 * column.  The current user is run_as.
 */
static void
check_insert_privileges(Relation rel, RangeTblEntry *rte)
{
	Oid			nspid = RelationGetNamespace(rel);
	AclResult	aclresult;

	aclresult = pg_namespace_aclcheck(nspid, GetUserId(), ACL_USAGE);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_SCHEMA, get_namespace_name(nspid));
	ExecCheckRTPerms(list_make1(rte), true);
}

/* Columns the caller leaves out that have a default, as INSERT fills them */
static void
prepare_defaults(StagingWriter *w)
{
	TupleDesc	desc = RelationGetDescr(w->rel);
	bool	   *supplied = palloc0(sizeof(bool) * (desc->natts + 1));
	int			i;

	for (i = 0; i < w->ncols; i++)
		supplied[w->attnums[i]] = true;
	w->defaults = palloc(sizeof(DefaultColumn) * Max(desc->natts, 1));
	w->ndefaults = 0;
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		Node	   *def;

		if (att->attisdropped || att->attgenerated || supplied[att->attnum])
			continue;
		def = build_column_default(w->rel, att->attnum);
		if (def == NULL)
			continue;			/* NULL, checked by ExecConstraints */
		w->defaults[w->ndefaults].attnum = att->attnum;
		w->defaults[w->ndefaults].expr =
			ExecInitExpr(expression_planner((Expr *) def), NULL);
		w->ndefaults++;
	}
	pfree(supplied);
}

static void
open_bulk(StagingWriter *w)
{
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	TupleConstr *constr = RelationGetDescr(w->rel)->constr;
	int			i;

	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(w->rel);
	rte->relkind = w->rel->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
	rte->requiredPerms = ACL_INSERT;
	for (i = 0; i < w->ncols; i++)
		rte->insertedCols = bms_add_member(rte->insertedCols,
										   w->attnums[i] - FirstLowInvalidHeapAttributeNumber);
	check_insert_privileges(w->rel, rte);

	/* defaults and CHECK expressions may run functions that need one */
	if (!ActiveSnapshotSet())
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		w->pushed_snapshot = true;
	}

	w->estate = CreateExecutorState();
	ExecInitRangeTable(w->estate, list_make1(rte));
	w->rri = makeNode(ResultRelInfo);
	ExecInitResultRelation(w->estate, w->rri, 1);
	CheckValidResultRel(w->rri, CMD_INSERT);
	ExecOpenIndices(w->rri, false);

	w->has_generated = constr != NULL && constr->has_generated_stored;
	w->has_constraints = constr != NULL;
	prepare_defaults(w);

	w->bistate = GetBulkInsertState();
	w->cid = GetCurrentCommandId(true);
	w->batch_rows = mssql_cdc_insert_batch_rows;

	/*
	 * The slots share one copy of the row type that no resource owner
	 * tracks: a slot over the relcache's descriptor pins it, and the
	 * resource owner keeps a thousand pins of one pointer in one hash
	 * chain, so creating and dropping a chunk's slots cost quadratic time
	 * (~9 % of a narrow snapshot, perf).  The copy lives as long as the
	 * writer, which holds the table's lock, so the row type cannot change
	 * under it; heap_multi_insert and the index inserts read only the
	 * attributes, and defaults, generated columns and constraints come from
	 * the relation.
	 */
	w->slot_desc = CreateTupleDescCopy(RelationGetDescr(w->rel));
	w->slots = palloc0(sizeof(TupleTableSlot *) * w->batch_rows);
	w->batchcxt = AllocSetContextCreate(CurrentMemoryContext, "mssql_cdc staging batch",
										ALLOCSET_DEFAULT_SIZES);
}

StagingWriter *
staging_writer_open(Oid relid, Oid run_as, const AttrNumber *attnums, int ncols)
{
	StagingWriter *w = palloc0(sizeof(StagingWriter));
	const char *refusal;

	w->ncols = ncols;
	w->attnums = palloc(sizeof(AttrNumber) * Max(ncols, 1));
	memcpy(w->attnums, attnums, sizeof(AttrNumber) * ncols);

	/* every staging access with the run_as role's privileges */
	GetUserIdAndSecContext(&w->save_userid, &w->save_sec_context);
	SetUserIdAndSecContext(run_as, w->save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);

	/* the lock INSERT takes anyway; held to commit */
	w->rel = table_open(relid, RowExclusiveLock);
	refusal = bulk_refusal(w->rel);
	log_path(w->rel, refusal);
	if (refusal)
		w->spi = staging_spi_writer_open(w->rel, attnums, ncols);
	else
		open_bulk(w);
	return w;
}

MemoryContext
staging_writer_row_context(StagingWriter *w)
{
	return w->spi ? staging_spi_writer_row_context(w->spi) : w->batchcxt;
}

/* Write the buffered rows: heap, then their index entries */
static void
flush_batch(StagingWriter *w)
{
	MemoryContext oldcxt;
	int			i;

	if (w->nused == 0)
		return;
	oldcxt = MemoryContextSwitchTo(w->batchcxt);
	table_multi_insert(w->rel, w->slots, w->nused, w->cid, 0, w->bistate);
	for (i = 0; i < w->nused; i++)
	{
		if (w->rri->ri_NumIndices > 0)
		{
			List	   *recheck;

			/*
			 * No deferrable constraints here (they are triggers, which send
			 * the table to the SPI path), so nothing is left to recheck.
			 */
			recheck = ExecInsertIndexTuples(w->rri, w->slots[i], w->estate,
											false, false, NULL, NIL);
			Assert(recheck == NIL);
			list_free(recheck);
			ResetPerTupleExprContext(w->estate);
		}
		ExecClearTuple(w->slots[i]);
	}
	MemoryContextSwitchTo(oldcxt);
	w->nused = 0;
	w->copied_bytes = 0;
	MemoryContextReset(w->batchcxt);
}

bool
staging_writer_is_bulk(Oid relid)
{
	Relation	rel = table_open(relid, RowExclusiveLock);
	bool		bulk = bulk_refusal(rel) == NULL;

	table_close(rel, NoLock);
	return bulk;
}

static void
add_row(StagingWriter *w, const Datum *values, const bool *nulls, bool copy)
{
	TupleTableSlot *slot;
	TupleDesc	desc;
	MemoryContext oldcxt;
	int			i;

	if (w->spi)
	{
		staging_spi_writer_add(w->spi, values, nulls);
		return;
	}

	if (w->nused == w->nslots)
		w->slots[w->nslots++] = MakeSingleTupleTableSlot(w->slot_desc,
														 table_slot_callbacks(w->rel));
	slot = w->slots[w->nused];
	desc = slot->tts_tupleDescriptor;
	ExecClearTuple(slot);
	for (i = 0; i < desc->natts; i++)
	{
		slot->tts_values[i] = (Datum) 0;
		slot->tts_isnull[i] = true;
	}
	for (i = 0; i < w->ncols; i++)
	{
		slot->tts_values[w->attnums[i] - 1] = values[i];
		slot->tts_isnull[w->attnums[i] - 1] = nulls[i];
	}

	/* defaults are evaluated into the batch's memory: they live to the flush */
	oldcxt = MemoryContextSwitchTo(w->batchcxt);
	if (w->ndefaults > 0)
	{
		ExprContext *econtext = GetPerTupleExprContext(w->estate);

		for (i = 0; i < w->ndefaults; i++)
		{
			AttrNumber	a = w->defaults[i].attnum - 1;

			slot->tts_values[a] = ExecEvalExpr(w->defaults[i].expr, econtext,
											   &slot->tts_isnull[a]);
		}
	}
	ExecStoreVirtualTuple(slot);
	MemoryContextSwitchTo(oldcxt);

	/* computed and materialized in the slot's own memory */
	if (w->has_generated)
		ExecComputeStoredGenerated(w->rri, w->estate, slot, CMD_INSERT);
	if (w->has_constraints)
		ExecConstraints(w->rri, slot, w->estate);
	/*
	 * the slot's own copy, outside the batch's memory: the caller may free
	 * the values before the flush; counted towards the batch's size
	 */
	if (copy)
		w->copied_bytes += ExecFetchSlotHeapTuple(slot, true, NULL)->t_len;
	ResetPerTupleExprContext(w->estate);

	w->nused++;
	if (w->nused >= w->batch_rows ||
		MemoryContextMemAllocated(w->batchcxt, true) + w->copied_bytes >= STAGING_BATCH_MAX_BYTES)
		flush_batch(w);
}

void
staging_writer_add(StagingWriter *w, const Datum *values, const bool *nulls)
{
	add_row(w, values, nulls, false);
}

void
staging_writer_add_copy(StagingWriter *w, const Datum *values, const bool *nulls)
{
	add_row(w, values, nulls, true);
}

void
staging_writer_close(StagingWriter *w)
{
	if (w->spi)
		staging_spi_writer_close(w->spi);
	else
	{
		int			i;

		flush_batch(w);
		for (i = 0; i < w->nslots; i++)
			ExecDropSingleTupleTableSlot(w->slots[i]);
		FreeTupleDesc(w->slot_desc);
		FreeBulkInsertState(w->bistate);
		table_finish_bulk_insert(w->rel, 0);
		ExecCloseResultRelations(w->estate);
		ExecCloseRangeTableRelations(w->estate);
		FreeExecutorState(w->estate);
		MemoryContextDelete(w->batchcxt);
		if (w->pushed_snapshot)
			PopActiveSnapshot();
		/* later statements of the caller see the rows, as after INSERT */
		CommandCounterIncrement();
	}
	table_close(w->rel, NoLock);
	SetUserIdAndSecContext(w->save_userid, w->save_sec_context);
	pfree(w->attnums);
	pfree(w);
}
