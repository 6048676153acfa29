/*-------------------------------------------------------------------------
 *
 * snapshot.c
 *		Keyset-paged initial snapshot of one table (see snapshot.h and
 *		doc/snapshot.md).
 *
 * Correctness comes from L0 and replay, not from the isolation level: L0
 * is read before the first chunk, so every change the chunks do not see
 * has an LSN above L0 and is streamed afterwards.  SNAPSHOT isolation only
 * makes each chunk a consistent, non-blocking read; where the database
 * does not allow it, chunks run under READ COMMITTED (logged once per
 * connection) with the same guarantees.
 *
 * Paging: each chunk is SELECT TOP (n) ... WHERE key > last ORDER BY key,
 * with the key compared by SQL Server itself and the last key kept as
 * exact T-SQL literals (keyset.c).
 *
 * IDENTIFICATION
 *		src/snapshot.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "apply.h"
#include "keyset.h"
#include "mirror.h"
#include "mssql_cdc.h"
#include "snapshot.h"
#include "tds_convert.h"
#include "tds_row_buffer.h"

const char *
snapshot_refusal(const MssqlSourceTable *src)
{
	const char *refusal;

	if (src->nkey == 0)
		return psprintf("Table %s has no primary key, so snapshot_mode 'initial' cannot copy it without risking duplicates.",
						source_label(src));
	(void) keyset_columns(src, &refusal);
	return refusal;
}

static int64
parse_int64_or(const char *text, int64 fallback)
{
	char	   *end;
	long long	v;

	if (text == NULL)
		return fallback;
	errno = 0;
	v = strtoll(text, &end, 10);
	if (errno != 0 || *end != '\0' || v < 0)
		return fallback;
	return (int64) v;
}

/*
 * L0 (sys.fn_cdc_get_max_lsn()) and the partition row count, cheap and
 * approximate like SQL Server's own, in one request.  The count goes
 * second: progress is a nicety, and a login that may not read
 * sys.partitions still snapshots (its error ends the batch after L0 was
 * read; estimate -1).  False when SQL Server has no max LSN yet.
 */
static bool
read_max_lsn_and_estimate(TdsSession *session, const MssqlSourceTable *src, MssqlLsn *l0,
						  int64 *estimate)
{
	char	   *name = psprintf("%s.%s", tds_quote_ident(src->schema), tds_quote_ident(src->table));
	char	   *sql = psprintf("SELECT sys.fn_cdc_get_max_lsn(); "
							   "SELECT SUM(rows) FROM sys.partitions"
							   " WHERE object_id = OBJECT_ID(%s) AND index_id IN (0, 1)",
							   tds_quote_nstring(name));
	int			result = 0;
	bool		found = false;
	TdsStep		step = TDS_STEP_DONE;

	*estimate = -1;
	if (tds_exec_try(session, sql))
	{
		while ((step = tds_next_result_try(session)) == TDS_STEP_MORE)
		{
			bool		first_row = true;

			if (tds_num_cols(session) == 0)
				continue;
			while ((step = tds_next_row_try(session)) == TDS_STEP_MORE)
			{
				if (!first_row)
					continue;	/* drain the rest */
				first_row = false;
				if (result == 0)
					found = tds_col_lsn(session, 1, l0);
				else if (result == 1)
					*estimate = parse_int64_or(tds_col_text(session, 1), -1);
			}
			if (step == TDS_STEP_REMOTE_ERROR)
				break;
			result++;
		}
	}
	else
		step = TDS_STEP_REMOTE_ERROR;
	/* only the count may fail */
	if (step == TDS_STEP_REMOTE_ERROR && result == 0)
		tds_report_error(tds_session_server_name(session), tds_session_last_error(session),
						 "reading the snapshot's start LSN");
	return found;
}

/* The LSN just before lsn (80-bit -1 with borrow); lsn must not be zero. */
static void
lsn_decrement(MssqlLsn *lsn)
{
	int			i;

	for (i = MSSQL_LSN_BYTES - 1; i >= 0; i--)
		if (lsn->bytes[i]-- != 0)
			break;
}

bool
snapshot_read_start(TdsSession *session, const MssqlSourceTable *src, MssqlLsn *l0,
					int64 *total_estimate)
{
	const MssqlCaptureInstance *ci = src->capture_instance;

	if (!ci->has_start_lsn)
		return false;
	if (!read_max_lsn_and_estimate(session, src, l0, total_estimate))
		return false;

	/*
	 * A capture instance that starts after L0 has no changes at or before
	 * its start: stream from just before it (its min LSN), or the retention
	 * check would see a gap where there never were changes.  Everything
	 * committed before its start is in the snapshot, read later.
	 */
	if (!mssql_lsn_is_zero(&ci->start_lsn) && mssql_lsn_cmp(&ci->start_lsn, l0) > 0)
	{
		*l0 = ci->start_lsn;
		lsn_decrement(l0);
	}
	return true;
}

SnapshotIsolation
snapshot_isolation_check(TdsSession *session)
{
	bool		allowed = false;

	/* a login that cannot read the setting gets the fallback, not a failure */
	if (tds_exec_try(session, "SELECT snapshot_isolation_state FROM sys.databases WHERE name = DB_NAME()"))
	{
		while (tds_next_result_try(session) == TDS_STEP_MORE)
			while (tds_next_row_try(session) == TDS_STEP_MORE)
			{
				char	   *text = tds_num_cols(session) >= 1 ? tds_col_text(session, 1) : NULL;

				/* 1 = ON; 2/3 (in transition) still refuse snapshot transactions */
				if (text != NULL && strcmp(text, "1") == 0)
					allowed = true;
			}
	}
	if (!allowed)
		ereport(LOG,
				(errmsg("mssql_cdc source \"%s\": the database does not allow snapshot isolation, snapshot chunks read under READ COMMITTED",
						tds_session_server_name(session)),
				 errdetail("The copy stays complete: changes after the recorded start LSN are replayed after the snapshot."),
				 errhint("ALTER DATABASE ... SET ALLOW_SNAPSHOT_ISOLATION ON makes each chunk a consistent read that does not block writers.")));
	return allowed ? SNAPSHOT_ISOLATION_ALLOWED : SNAPSHOT_ISOLATION_NOT_ALLOWED;
}

/*
 * The batch of one chunk: the SELECT TOP (n) after last_key in a snapshot
 * transaction of its own.  Its text is all that decides what it reads, so
 * that a batch sent ahead can be compared with the one due now.
 */
static char *
chunk_batch(MssqlCdcTable *table, const MssqlSourceTable *src, List *select_exprs,
			const KeyColumn *keys, int chunk_rows, SnapshotIsolation isolation,
			List *last_key)
{
	StringInfoData sql;

	initStringInfo(&sql);
	if (isolation == SNAPSHOT_ISOLATION_ALLOWED)
		appendStringInfoString(&sql, "SET TRANSACTION ISOLATION LEVEL SNAPSHOT; ");
	appendStringInfoString(&sql, "BEGIN TRANSACTION; ");
	/* the row filter was checked as one condition when it was set (snapshot_filter.h) */
	keyset_append_chunk_select(&sql, src, select_exprs, keys, src->nkey, chunk_rows,
							   table->snapshot_filter, last_key);
	appendStringInfoString(&sql, "; COMMIT TRANSACTION;");
	if (isolation == SNAPSHOT_ISOLATION_ALLOWED)
		appendStringInfoString(&sql, " SET TRANSACTION ISOLATION LEVEL READ COMMITTED;");
	return sql.data;
}

void
snapshot_reader_discard(SnapshotReader *reader)
{
	if (reader->sent_sql == NULL)
		return;
	/* db-lib discards the reply with an attention (dbcancel) */
	tds_cancel(reader->session);
	pfree(reader->sent_sql);
	reader->sent_sql = NULL;
	reader->table_id = 0;
}

/* Send a chunk's batch ahead on the reader's session, remembering it */
static void
reader_send_ahead(SnapshotReader *reader, const MssqlCdcTable *table, const char *sql)
{
	tds_send(reader->session, sql);
	reader->sent_sql = MemoryContextStrdup(reader->cxt, sql);
	reader->table_id = table->table_id;
	reader->l0 = table->snapshot_lsn;
}

/*
 * The reply to sql: the batch read ahead if it is exactly this one (same
 * table, same L0, same text: the same key, columns, filter and isolation),
 * else sql sent now.  A batch sent after this L0 was recorded reads what a
 * batch sent now would need to read: every change it does not see has an
 * LSN above L0 and is replayed after the snapshot (snapshot.h).  A batch
 * of an earlier L0 (a resnapshot in between) may be older than the new L0
 * and is never used.
 */
static void
reader_receive(SnapshotReader *reader, const MssqlCdcTable *table, const char *sql)
{
	bool		ahead = reader->sent_sql != NULL &&
		reader->table_id == table->table_id &&
		mssql_lsn_cmp(&reader->l0, &table->snapshot_lsn) == 0 &&
		strcmp(reader->sent_sql, sql) == 0;

	if (!ahead)
	{
		snapshot_reader_discard(reader);
		tds_send(reader->session, sql);
	}
	else
	{
		pfree(reader->sent_sql);
		reader->sent_sql = NULL;
		reader->table_id = 0;
	}
	tds_await(reader->session);
}

/*
 * A chunk's rows are read into memory first, up to this many bytes (a
 * chunk of the bench's narrow rows is ~0.6 MB), so that the next chunk's
 * batch goes out before they are converted and inserted: SQL Server reads
 * the next chunk while this one is written.  A chunk of bigger rows keeps
 * this much and reads the rest as it inserts, so memory stays bounded.
 */
#define SNAPSHOT_KEEP_BYTES		(8 * 1024 * 1024)

static void
apply_kept_rows(SnapshotInsert *ins, TdsSession *session, const TdsRowBuffer *kept)
{
	int			n = tds_row_buffer_rows(kept);
	int			row;

	for (row = 0; row < n; row++)
	{
		CHECK_FOR_INTERRUPTS();
		apply_snapshot_row(ins, session, kept, row);
	}
}

bool
snapshot_copy_chunk(SnapshotReader *reader, MssqlCdcTable *table,
					const MssqlSourceTable *src, Oid run_as,
					SnapshotIsolation *isolation, int64 *rows)
{
	TdsSession *session = reader->session;
	MemoryContext callercxt = CurrentMemoryContext;
	const char *refusal;
	KeyColumn  *keys = keyset_columns(src, &refusal);
	int			nkey = src->nkey;
	int			chunk_rows = mssql_cdc_snapshot_chunk_rows;
	List	   *select_exprs;
	SnapshotInsert *ins;
	char	   *sql;
	int			first_key_col;
	int64		copied = 0;
	List	   *last_key = NIL;
	MemoryContext keycxt;
	MemoryContext oldcxt;
	RawKeyValue *raw_keys;
	TdsRowBuffer *kept;
	bool		keeping = true;
	bool		done;
	int			i;

	if (refusal != NULL || nkey == 0)
		elog(ERROR, "snapshot of a table that cannot be paged");	/* worker checked */
	if (!table->has_snapshot_lsn)
		elog(ERROR, "table %d is snapshotting without a snapshot LSN", table->table_id);
	if (table->snapshot_last_key != NIL && list_length(table->snapshot_last_key) != nkey)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the primary key of %s changed during its snapshot", source_label(src)),
				 errhint("Call mssql_cdc.resnapshot() for this table.")));

	if (*isolation == SNAPSHOT_ISOLATION_UNKNOWN)
	{
		/* the session must be idle for the check: a batch sent ahead goes */
		snapshot_reader_discard(reader);
		*isolation = snapshot_isolation_check(session);
	}

	ins = apply_snapshot_prepare(table, src, run_as, &table->snapshot_lsn, &select_exprs);
	first_key_col = list_length(select_exprs) + 1;
	sql = chunk_batch(table, src, select_exprs, keys, chunk_rows, *isolation,
					  table->snapshot_last_key);

	keycxt = AllocSetContextCreate(CurrentMemoryContext, "mssql_cdc snapshot key",
								   ALLOCSET_SMALL_SIZES);
	raw_keys = MemoryContextAllocZero(keycxt, sizeof(RawKeyValue) * nkey);
	kept = tds_row_buffer_create(keycxt, SNAPSHOT_KEEP_BYTES);
	reader_receive(reader, table, sql);
	while (tds_next_result(session))
	{
		int			ncols = tds_num_cols(session);

		if (ncols == 0)
			continue;			/* SET / BEGIN / COMMIT: no result set */

		/*
		 * The batch has exactly one result of this shape; skipping another
		 * shape would end the snapshot with rows missing.
		 */
		tds_expect_num_cols(session, first_key_col - 1 + nkey, "reading a snapshot chunk");
		while (tds_next_row(session))
		{
			CHECK_FOR_INTERRUPTS();
			if (copied >= chunk_rows)
			{
				tds_mark_malformed(session);
				ereport(ERROR,
						(errcode(ERRCODE_FDW_ERROR),
						 errmsg("SQL Server (server \"%s\") sent more rows than the snapshot query's TOP (%d)",
								tds_session_server_name(session), chunk_rows)));
			}
			apply_snapshot_check_types(ins, session);
			if (keeping && !tds_row_buffer_add(kept, session))
			{
				/* a chunk of big rows: what is kept goes in now, the rest as read */
				keeping = false;
				apply_kept_rows(ins, session, kept);
			}
			else if (!keeping)
				apply_snapshot_row(ins, session, NULL, 0);

			/* only the last row's key is kept: one row's worth of memory */
			for (i = 0; i < nkey; i++)
				keyset_save_value(session, &keys[i], first_key_col + i, &raw_keys[i], keycxt);
			copied++;
		}
	}
	if (copied > 0)
	{
		/* in the caller's context: it becomes the table's resume point */
		oldcxt = MemoryContextSwitchTo(callercxt);
		for (i = 0; i < nkey; i++)
			last_key = lappend(last_key, keyset_literal(&keys[i], &raw_keys[i]));
		MemoryContextSwitchTo(oldcxt);
	}

	/* a short chunk means the keyset is exhausted: hand over to streaming */
	done = copied < chunk_rows;

	/*
	 * Read ahead: the next chunk's batch goes out now, so that SQL Server
	 * reads it while this chunk's rows (all of them when they were kept,
	 * else the last batch of them) are inserted and committed.  It commits
	 * nothing: the next chunk uses it only if it starts from
	 * the key this chunk commits (reader_receive compares the text); after
	 * an error the worker restarts with new sessions from the committed
	 * resume key.
	 */
	if (!done)
		reader_send_ahead(reader, table,
						  chunk_batch(table, src, select_exprs, keys, chunk_rows, *isolation,
									  last_key));
	if (keeping)
		apply_kept_rows(ins, session, kept);

	apply_snapshot_finish(ins);
	if (!apply_snapshot_wrote_mirror(ins))
		mirror_apply_snapshot(table, src, run_as, &table->snapshot_lsn,
							  apply_snapshot_first_seqval(ins));
	apply_snapshot_progress(table->table_id, last_key, copied, done, &table->snapshot_lsn);
	if (done)
		mirror_snapshot_done(table, src, run_as);
	MemoryContextDelete(keycxt);

	/*
	 * The caller's copy of the state row now says what the catalog will say
	 * once the chunk's transaction commits, so it may copy the next chunk
	 * without reading the catalog again (if the commit fails, the worker's
	 * error path discards this copy with the iteration).
	 */
	if (copied > 0)
		table->snapshot_last_key = last_key;
	table->snapshot_rows += copied;
	*rows = copied;
	return done;
}
