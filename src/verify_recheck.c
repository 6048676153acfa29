/*-------------------------------------------------------------------------
 *
 * verify_recheck.c
 *		Settle the keys that differed at first sight (see verify.h): a key
 *		is reported only when the source and the mirror differ at a point
 *		where no concurrent change can explain it (doc/mirror.md, "No false
 *		mismatches").
 *
 * For a batch of candidate keys:
 *	1. One batch on SQL Server reads M = sys.fn_cdc_get_max_lsn() and then
 *	   the keys' rows in one SNAPSHOT transaction, and after its COMMIT the
 *	   server's local time T and UTC offset.  Every row was read at an
 *	   instant t with M <= t <= T: every transaction with commit LSN <= M
 *	   had committed before t (the capture job publishes only committed
 *	   transactions), none that committed after T is in the rows.  M is
 *	   only a lower bound of what the rows reflect: the capture job lags
 *	   the source, so transactions committed before t may still be
 *	   uncaptured, with LSNs above M.
 *	2. U = sys.fn_cdc_map_time_to_lsn('smallest greater than', T + 1 s)
 *	   is the commit LSN of a captured transaction that committed after t
 *	   (tran_end_time is its commit time; the second covers datetime's
 *	   1/300 s rounding and the clock's resolution).  Commit LSNs follow
 *	   commit order, so every transaction the rows reflect has a commit LSN
 *	   below U, and the capture job publishes in commit order, so all of
 *	   them are captured.  U must be above M and the UTC offset unchanged
 *	   since T (a daylight-saving change moves local times back); else the
 *	   batch waits (or, for an offset change, reads again).  On an idle
 *	   source no such transaction comes: then U is the max LSN read after
 *	   an empty log scan session that began after T + 1 s
 *	   (sys.dm_cdc_log_scan_sessions, idle_bound below), when the login
 *	   may read that view.
 *	3. Wait until the mirror's checkpoint_lsn C >= U, then read the
 *	   mirror rows of the keys with C in one statement (the worker commits
 *	   mirror rows and checkpoint together).  The mirror now reflects
 *	   everything the source rows reflect, plus transactions in (t, C].
 *	4. Equal: settled, no mismatch.  Different: the change function
 *	   cdc.fn_cdc_get_all_changes_<ci> over (M, C] is asked for changes of
 *	   those keys; (M, C] contains every commit after t up to C.  A key
 *	   without a change there had the same row at the source at C as at t,
 *	   so the mirror at C really differs from the source at C: reported.
 *	   A key with a change is read again in the next round (the change may
 *	   be one the rows already reflect: a retry, never a false report).
 * Keys still open at recheck_timeout are reported as 'unconfirmed'.
 *
 * IDENTIFICATION
 *		src/verify_recheck.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "type_map.h"
#include "verify_mirror.h"
#include "verify_recheck.h"
#include "verify_runs.h"

/* keys per re-check batch: one SQL Server batch and one mirror query each */
#define RECHECK_BATCH	200
/* how long a poll for the bound or the mirror's progress waits between reads */
#define RECHECK_POLL_US	100000L

/* A source row re-read in step 1 */
typedef struct SourceRow
{
	Datum	   *values;
	bool	   *nulls;
} SourceRow;

/* A candidate's key as a T-SQL literal per key column */
static char **
key_literals(VerifyTable *vt, const VerifyCandidate *c)
{
	char	  **lits = palloc(sizeof(char *) * vt->nkey);
	int			k;

	for (k = 0; k < vt->nkey; k++)
	{
		const KeyColumn *key = &vt->keys[k];
		const VerifyColumn *col = &vt->cols[vt->key_col[k]];
		Datum		d = c->key[k];

		if (key->kind == KEY_BINARY)
		{
			bytea	   *b = DatumGetByteaPP(d);

			lits[k] = keyset_binary_literal((uint8 *) VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b));
		}
		else if (key->kind == KEY_BIT)
			lits[k] = pstrdup(DatumGetBool(d) ? "1" : "0");
		else
		{
			Oid			out;
			bool		varlena;
			int			save_style = DateStyle;

			/* ISO date/time text, which style 121 reads back */
			getTypeOutputInfo(col->typid, &out, &varlena);
			DateStyle = USE_ISO_DATES;
			PG_TRY();
			{
				lits[k] = keyset_literal_from_text(key, OidOutputFunctionCall(out, d));
			}
			PG_FINALLY();
			{
				DateStyle = save_style;
			}
			PG_END_TRY();
		}
	}
	return lits;
}

/* "(k1 = v1 AND k2 = v2) OR (...)" for the candidates */
static void
append_key_filter(StringInfo sql, VerifyTable *vt, List *batch)
{
	ListCell   *lc;
	bool		first = true;

	foreach(lc, batch)
	{
		appendStringInfoString(sql, first ? "(" : " OR (");
		keyset_append_equal(sql, vt->keys, vt->nkey, key_literals(vt, lfirst(lc)));
		appendStringInfoChar(sql, ')');
		first = false;
	}
}

static bool
keys_equal(VerifyTable *vt, const Datum *key, const Datum *values)
{
	int			k;

	for (k = 0; k < vt->nkey; k++)
		if (!verify_values_equal(&vt->cols[vt->key_col[k]], key[k], false,
								 values[vt->key_col[k]], false))
			return false;
	return true;
}

/*
 * Step 1: the rows of the batch's keys; *m_lsn, *local_time (style-121
 * text) and *offset as described above.
 */
static List *
read_source(TdsSession *session, VerifyTable *vt, List *batch, MssqlLsn *m_lsn,
			char **local_time, int *offset)
{
	StringInfoData sql;
	List	   *rows = NIL;
	int			result = 0;

	initStringInfo(&sql);
	if (vt->isolation == SNAPSHOT_ISOLATION_ALLOWED)
		appendStringInfoString(&sql, "SET TRANSACTION ISOLATION LEVEL SNAPSHOT; ");
	appendStringInfoString(&sql, "BEGIN TRANSACTION; SELECT sys.fn_cdc_get_max_lsn(); SELECT ");
	{
		ListCell   *lc;
		bool		first = true;

		foreach(lc, vt->select_exprs)
		{
			appendStringInfo(&sql, "%s%s", first ? "" : ", ", (char *) lfirst(lc));
			first = false;
		}
	}
	appendStringInfo(&sql, " FROM %s.%s WHERE ", tds_quote_ident(vt->src->schema),
					 tds_quote_ident(vt->src->table));
	append_key_filter(&sql, vt, batch);
	appendStringInfoString(&sql, "; COMMIT TRANSACTION;");
	if (vt->isolation == SNAPSHOT_ISOLATION_ALLOWED)
		appendStringInfoString(&sql, " SET TRANSACTION ISOLATION LEVEL READ COMMITTED;");
	appendStringInfoString(&sql, " SELECT CONVERT(nvarchar(30), SYSDATETIME(), 121),"
						   " DATEPART(TZOFFSET, SYSDATETIMEOFFSET());");

	memset(m_lsn, 0, sizeof(MssqlLsn));
	*local_time = NULL;
	*offset = 0;
	tds_exec(session, sql.data);
	while (tds_next_result(session))
	{
		if (tds_num_cols(session) == 0)
			continue;
		switch (result++)
		{
			case 0:
				while (tds_next_row(session))
					(void) tds_col_lsn(session, 1, m_lsn);
				break;
			case 1:
				tds_expect_num_cols(session, vt->ncols, "re-reading rows to verify");
				while (tds_next_row(session))
				{
					SourceRow  *row = palloc(sizeof(SourceRow));
					int			c;

					row->values = palloc(sizeof(Datum) * vt->ncols);
					row->nulls = palloc(sizeof(bool) * vt->ncols);
					for (c = 0; c < vt->ncols; c++)
						row->values[c] = tds_col_datum(session, c + 1, &vt->cols[c].target,
													   &row->nulls[c]);
					rows = lappend(rows, row);
				}
				break;
			default:
				while (tds_next_row(session))
				{
					char	   *off = tds_col_text(session, 2);

					*local_time = tds_col_text(session, 1);
					*offset = off ? atoi(off) : 0;
				}
				break;
		}
	}
	if (*local_time == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("SQL Server (server \"%s\") did not report its time while verifying",
						tds_session_server_name(session))));
	return rows;
}

/* "yyyy-mm-dd hh:mi:ss.mmm" one second after the style-121 text */
static char *
one_second_later(const char *local_time)
{
	char		buf[24];
	Timestamp	ts;
	struct pg_tm tm;
	fsec_t		fsec;

	strlcpy(buf, local_time, sizeof(buf));
	ts = DatumGetTimestamp(DirectFunctionCall3(timestamp_in, CStringGetDatum(buf),
											   ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1)));
	ts += USECS_PER_SEC;
	if (timestamp2tm(ts, NULL, &tm, &fsec, NULL, NULL) != 0)
		elog(ERROR, "timestamp out of range");
	return psprintf("%04d-%02d-%02d %02d:%02d:%02d.%03d", tm.tm_year, tm.tm_mon, tm.tm_mday,
					tm.tm_hour, tm.tm_min, tm.tm_sec, (int) (fsec / 1000));
}

static bool
past(TimestampTz deadline)
{
	return GetCurrentTimestamp() >= deadline;
}

static void
nap(void)
{
	CHECK_FOR_INTERRUPTS();
	pg_usleep(RECHECK_POLL_US);
	CHECK_FOR_INTERRUPTS();
}

/* What the polls of one batch saw of the latest empty log scan session */
typedef struct IdleWatch
{
	bool		denied;			/* the login may not read the view: no idle bound */
	bool		seen;
	int64		session_id;		/* the latest empty session at the first poll */
	int64		empty_count;	/* and its empty_scan_count */
} IdleWatch;

static int64
col_int64_or(TdsSession *session, int col, int64 fallback)
{
	char	   *text = tds_col_text(session, col);

	return text ? strtoll(text, NULL, 10) : fallback;
}

/*
 * Step 2 on an idle source: an empty log scan session of the capture job
 * (tran_count 0: it found no change data capture transaction left to
 * process up to the end of the log) that began after the rows were read.
 * Everything the rows reflect committed before that session began, so it
 * had been captured by then, and the max LSN read after it is a bound U.
 * The session shows as its own row with start_time after T + 1 s, or, if
 * consecutive empty sessions are folded into one row (UNCONFIRMED, see
 * ENGINE.md), as that row's empty_scan_count rising by two after a poll
 * made after T: the second of those sessions began after the first ended.
 * Returns 1 with *u set, 0 without evidence, -1 when the UTC offset
 * changed.
 */
static int
idle_bound(TdsSession *session, IdleWatch *w, const char *later, int offset, MssqlLsn *u)
{
	char	   *sql = psprintf("SELECT TOP (1) session_id, empty_scan_count,"
							   " CASE WHEN start_time > CONVERT(datetime, N'%s', 121) THEN 1 ELSE 0 END,"
							   " DATEPART(TZOFFSET, SYSDATETIMEOFFSET())"
							   " FROM sys.dm_cdc_log_scan_sessions WHERE session_id > 0 AND tran_count = 0"
							   " AND end_time IS NOT NULL ORDER BY session_id DESC;"
							   " SELECT sys.fn_cdc_get_max_lsn();", later);
	TdsStep		step;
	int			result = 0;
	bool		evidence = false;
	bool		have_max = false;
	int			now_offset = offset;

	if (w->denied)
		return 0;
	if (!tds_exec_try(session, sql))
		goto remote_error;
	while ((step = tds_next_result_try(session)) == TDS_STEP_MORE)
	{
		if (tds_num_cols(session) == 0)
			continue;
		while ((step = tds_next_row_try(session)) == TDS_STEP_MORE)
		{
			if (result == 0 && tds_num_cols(session) >= 4)
			{
				int64		id = col_int64_or(session, 1, -1);
				int64		count = col_int64_or(session, 2, 0);

				now_offset = (int) col_int64_or(session, 4, offset);
				if (col_int64_or(session, 3, 0) == 1)
					evidence = true;
				else if (w->seen && id == w->session_id && count >= w->empty_count + 2)
					evidence = true;
				else if (!w->seen || id != w->session_id)
				{
					w->seen = true;
					w->session_id = id;
					w->empty_count = count;
				}
			}
			else if (result == 1)
				have_max = tds_col_lsn(session, 1, u);
		}
		if (step == TDS_STEP_REMOTE_ERROR)
			goto remote_error;
		result++;
	}
	if (step == TDS_STEP_REMOTE_ERROR)
		goto remote_error;
	if (now_offset != offset)
		return -1;
	return evidence && have_max ? 1 : 0;

remote_error:
	/* e.g. 297: no VIEW DATABASE STATE; the bound of a later transaction remains */
	w->denied = true;
	return 0;
}

/*
 * Step 2: U.  Returns 1 with *u set, 0 when the deadline passed, -1 when
 * the UTC offset changed (read the batch again).
 */
static int
wait_bound(TdsSession *session, const MssqlLsn *m_lsn, const char *local_time, int offset,
		   TimestampTz deadline, MssqlLsn *u)
{
	char	   *later = one_second_later(local_time);
	char	   *sql = psprintf("SELECT sys.fn_cdc_map_time_to_lsn(N'smallest greater than',"
							   " CONVERT(datetime, N'%s', 121)), DATEPART(TZOFFSET, SYSDATETIMEOFFSET())",
							   later);
	IdleWatch	idle;

	memset(&idle, 0, sizeof(idle));
	for (;;)
	{
		bool		found = false;
		int			now_offset = offset;
		int			idle_found;

		tds_exec(session, sql);
		while (tds_next_result(session))
			while (tds_next_row(session))
			{
				char	   *off = tds_col_text(session, 2);

				found = tds_col_lsn(session, 1, u);
				now_offset = off ? atoi(off) : offset;
			}
		if (now_offset != offset)
			return -1;
		if (found && mssql_lsn_cmp(u, m_lsn) > 0)
			return 1;
		/* no transaction after the read (yet): an idle source's bound */
		idle_found = idle_bound(session, &idle, later, offset, u);
		if (idle_found < 0)
			return -1;
		if (idle_found > 0 && mssql_lsn_cmp(u, m_lsn) >= 0)
			return 1;
		if (past(deadline))
			return 0;
		nap();
	}
}

/* The table's checkpoint_lsn (false while it has none) */
static bool
read_checkpoint(VerifyTable *vt, MssqlLsn *c)
{
	CatalogOwnerScope scope;
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {Int32GetDatum(vt->table->table_id)};
	bool		ok = false;

	catalog_become_owner(&scope);
	if (SPI_execute_with_args("SELECT checkpoint_lsn::text FROM mssql_cdc.table_state WHERE table_id = $1",
							  1, types, values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read mssql_cdc.table_state");
	if (SPI_processed == 1)
	{
		char	   *text = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

		ok = text != NULL && mssql_lsn_parse(text, c);
	}
	catalog_restore_user(&scope);
	return ok;
}

/* What step 3 found for one candidate */
typedef struct Outcome
{
	VerifyCandidate *cand;
	VerifyKind	kind;
	List	   *columns;		/* differing columns (kind different) */
} Outcome;

/*
 * Step 3: compare the mirror at C (>= U) with the source rows; the
 * candidates that still differ are returned, *c gets C.
 */
static List *
compare_with_mirror(VerifyTable *vt, List *batch, List *source_rows, MssqlLsn *c)
{
	int			n = list_length(batch);
	int			nkey = vt->nkey;
	Datum	  **keys = palloc(sizeof(Datum *) * n);
	SourceRow **match = palloc0(sizeof(SourceRow *) * n);
	Datum	   *args = palloc(sizeof(Datum) * (nkey + 1));
	Oid		   *types = palloc(sizeof(Oid) * (nkey + 1));
	List	   *differing = NIL;
	CatalogOwnerScope scope;
	char	   *sql;
	ListCell   *lc;
	int			i = 0;
	uint64		r;

	foreach(lc, batch)
	{
		VerifyCandidate *cand = lfirst(lc);
		ListCell   *lr;

		keys[i] = cand->key;
		foreach(lr, source_rows)
		{
			SourceRow  *row = lfirst(lr);

			if (keys_equal(vt, cand->key, row->values))
				match[i] = row;
		}
		i++;
	}
	verify_key_arrays(vt, keys, n, args, types);
	args[nkey] = Int32GetDatum(vt->table->table_id);
	types[nkey] = INT4OID;
	/* one statement: the mirror rows and the checkpoint they are at */
	sql = psprintf("SELECT (SELECT checkpoint_lsn::text FROM mssql_cdc.table_state WHERE table_id = $%d),"
				   " s._ord, m.%s IS NOT NULL, %s FROM %s LEFT JOIN %s m ON %s",
				   nkey + 1, quote_identifier(vt->cols[vt->key_col[0]].pg_name),
				   verify_mirror_columns(vt), verify_key_unnest(vt, 1), vt->mirror_name,
				   verify_key_join(vt));
	/* the caller's SELECT privilege on the mirror was checked at the start */
	catalog_become_owner(&scope);
	if (SPI_execute_with_args(sql, nkey + 1, types, args, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read mirror table %s", vt->mirror_name);
	catalog_restore_user(&scope);
	for (r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		char	   *lsn_text = SPI_getvalue(tup, desc, 1);
		bool		isnull;
		int			idx = (int) DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull)) - 1;
		bool		in_mirror = DatumGetBool(SPI_getbinval(tup, desc, 3, &isnull));
		SourceRow  *src = (idx >= 0 && idx < n) ? match[idx] : NULL;
		Outcome    *o;
		int			col;

		if (lsn_text == NULL || !mssql_lsn_parse(lsn_text, c))
			elog(ERROR, "table %d lost its checkpoint while being verified", vt->table->table_id);
		if (idx < 0 || idx >= n)
			continue;
		o = palloc0(sizeof(Outcome));
		o->cand = list_nth(batch, idx);
		if (src == NULL && !in_mirror)
			continue;			/* gone on both sides */
		if (src == NULL)
			o->kind = VERIFY_EXTRA;
		else if (!in_mirror)
			o->kind = VERIFY_MISSING;
		else
		{
			o->kind = VERIFY_DIFFERENT;
			for (col = 0; col < vt->ncols; col++)
			{
				Datum		m = SPI_getbinval(tup, desc, col + 4, &isnull);

				if (!verify_values_equal(&vt->cols[col], src->values[col], src->nulls[col], m, isnull))
					o->columns = lappend(o->columns, vt->cols[col].pg_name);
			}
			if (o->columns == NIL)
				continue;		/* equal now */
		}
		differing = lappend(differing, o);
	}
	return differing;
}

/*
 * Step 4: *changed gets the candidates of outcomes with a change in (M, C]
 * at the source (NIL: none changed); false when SQL Server could not say
 * (then all are read again).
 */
static bool
changed_keys(TdsSession *session, VerifyTable *vt, List *outcomes, const MssqlLsn *m_lsn,
			 const MssqlLsn *c, List **changed_out)
{
	StringInfoData sql;
	List	   *cands = NIL;
	List	   *changed = NIL;
	ListCell   *lc;
	TdsStep		step;
	int			k;

	*changed_out = NIL;

	/*
	 * (M, C] empty (an idle source: C = U = M): no commit came after the
	 * read, so nothing changed; the change function would refuse the range
	 */
	if (mssql_lsn_cmp(c, m_lsn) <= 0)
		return true;
	foreach(lc, outcomes)
		cands = lappend(cands, ((Outcome *) lfirst(lc))->cand);
	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	for (k = 0; k < vt->nkey; k++)
		appendStringInfo(&sql, "%s%s", k ? ", " : "", mssql_column_select_expr(vt->keys[k].col));
	appendStringInfo(&sql, " FROM cdc.%s(sys.fn_cdc_increment_lsn(%s), %s, N'all') WHERE ",
					 tds_quote_ident(psprintf("fn_cdc_get_all_changes_%s",
											  vt->src->capture_instance->name)),
					 tds_format_lsn_literal(m_lsn->bytes), tds_format_lsn_literal(c->bytes));
	append_key_filter(&sql, vt, cands);

	/* e.g. Msg 313 once cleanup passed M: read the keys again */
	if (!tds_exec_try(session, sql.data))
		return false;
	while ((step = tds_next_result_try(session)) == TDS_STEP_MORE)
	{
		if (tds_num_cols(session) == 0)
			continue;
		while ((step = tds_next_row_try(session)) == TDS_STEP_MORE)
		{
			Datum	   *values = palloc0(sizeof(Datum) * vt->ncols);
			bool		isnull;

			for (k = 0; k < vt->nkey; k++)
				values[vt->key_col[k]] = tds_col_datum(session, k + 1,
													   &vt->cols[vt->key_col[k]].target, &isnull);
			foreach(lc, cands)
			{
				VerifyCandidate *cand = lfirst(lc);

				if (keys_equal(vt, cand->key, values) && !list_member_ptr(changed, cand))
					changed = lappend(changed, cand);
			}
		}
		if (step == TDS_STEP_REMOTE_ERROR)
			break;
	}
	if (step == TDS_STEP_REMOTE_ERROR)
		return false;
	*changed_out = changed;
	return true;
}

/* One batch: settles what it can, returns the candidates to read again */
static List *
recheck_batch(TdsSession *session, VerifyTable *vt, List *batch, TimestampTz deadline,
			  bool *timed_out)
{
	MssqlLsn	m_lsn;
	MssqlLsn	u;
	MssqlLsn	c;
	char	   *local_time;
	int			offset;
	List	   *rows;
	List	   *differing;
	List	   *changed;
	ListCell   *lc;
	int			bound;

	rows = read_source(session, vt, batch, &m_lsn, &local_time, &offset);
	bound = wait_bound(session, &m_lsn, local_time, offset, deadline, &u);
	if (bound < 0)
		return batch;
	if (bound == 0)
	{
		*timed_out = true;
		return batch;
	}
	for (;;)
	{
		if (read_checkpoint(vt, &c) && mssql_lsn_cmp(&c, &u) >= 0)
			break;
		if (past(deadline))
		{
			*timed_out = true;
			return batch;
		}
		nap();
	}
	differing = compare_with_mirror(vt, batch, rows, &c);
	vt->rechecked += list_length(batch) - list_length(differing);
	if (differing == NIL)
		return NIL;
	/* (a NIL list is NULL: "could not say" needs its own answer) */
	if (!changed_keys(session, vt, differing, &m_lsn, &c, &changed))
	{
		List	   *again = NIL;

		foreach(lc, differing)
			again = lappend(again, ((Outcome *) lfirst(lc))->cand);
		return again;
	}
	foreach(lc, differing)
	{
		Outcome    *o = lfirst(lc);

		if (!list_member_ptr(changed, o->cand))
			verify_record(vt, o->kind, o->cand->key, o->columns, &c);
	}
	return changed;
}

void
verify_recheck(TdsSession *session, VerifyTable *vt, TimestampTz deadline, bool nonatomic)
{
	MemoryContext batch_cxt = AllocSetContextCreate(vt->run_cxt, "mssql_cdc verify recheck",
													ALLOCSET_DEFAULT_SIZES);
	List	   *open = vt->candidates;
	bool		timed_out = false;
	ListCell   *lc;

	while (open != NIL && !timed_out)
	{
		List	   *batch = NIL;
		List	   *again;
		MemoryContext old;
		int			i = 0;

		old = MemoryContextSwitchTo(vt->run_cxt);
		foreach(lc, open)
		{
			if (i++ < RECHECK_BATCH)
				batch = lappend(batch, lfirst(lc));
		}
		open = list_copy_tail(open, list_length(batch));
		MemoryContextSwitchTo(batch_cxt);
		again = recheck_batch(session, vt, batch, deadline, &timed_out);
		MemoryContextSwitchTo(vt->run_cxt);
		open = list_concat(open, list_copy(again));
		MemoryContextSwitchTo(old);
		MemoryContextReset(batch_cxt);
		verify_report_progress(vt, "rechecking", NULL);
		if (nonatomic)
			SPI_commit();
	}
	foreach(lc, open)
		verify_record(vt, VERIFY_UNCONFIRMED, ((VerifyCandidate *) lfirst(lc))->key, NIL, NULL);
	vt->candidates = NIL;
	MemoryContextDelete(batch_cxt);
}
