/*-------------------------------------------------------------------------
 *
 * worker_timeline.c
 *		A source that went back in time: the worker's checks and what it
 *		does about them (source_identity.h has the why).
 *
 * At every poll: a max LSN below the lead position (the highest checkpoint
 * or snapshot L0 of the source's tables) means the source went back.  On
 * every new connection (a restore, a failover and a repointed server all
 * break the connection) one batch reads the identity
 * (sys.database_recovery_status) and asks the stored fingerprint's question
 * again.  Any evidence parks every table that holds a position on the old
 * history (phase 'error', condition source_went_back) and nothing of the
 * new history is copied; only mssql_cdc.resnapshot() brings a table back.
 * Once no table holds a position any more, the worker accepts the source
 * as it is now (identity stored, fingerprint forgotten), so tables added or
 * re-snapshotted afterwards start on the new timeline.  The identity is
 * remembered at first contact; a login that may not see it (no VIEW ANY
 * DATABASE) is told so in the log once per connection, and the other two
 * checks go on.
 *
 * IDENTIFICATION
 *		src/worker_timeline.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "error_condition.h"
#include "source_identity.h"

#include "worker_internal.h"

/* probed on the current connection (and again after parking) */
static bool probed = false;

#define WENT_BACK_HINT \
	"Nothing of the new history was copied. If the server points to the wrong database, fix its options (ALTER SERVER ... OPTIONS (SET host/port/database ...)) and call mssql_cdc.resnapshot(). " \
	"To accept the source as it is now: remove the staging rows of the lost history (TRUNCATE the staging table, or DELETE its rows above the restore point; new changes reuse those LSNs), then call mssql_cdc.resnapshot() for each table of the source. See doc/troubleshooting.md."

void
worker_timeline_forget(void)
{
	probed = false;
	/* what the worker knew of quiet tables may be of an earlier history */
	window_quiet_forget();
}

/* The LSN of the history the table's rows come from: checkpoint or L0 */
static bool
table_position(const MssqlCdcTable *table, MssqlLsn *pos)
{
	if (table->phase == MSSQL_PHASE_STREAMING && table->has_checkpoint_lsn)
	{
		*pos = table->checkpoint_lsn;
		return true;
	}
	if (table->phase == MSSQL_PHASE_SNAPSHOTTING && table->has_snapshot_lsn)
	{
		*pos = table->snapshot_lsn;
		return true;
	}
	return false;
}

static void
park_positioned(List *tables, const char *message)
{
	ListCell   *lc;
	MssqlLsn	pos;

	foreach(lc, tables)
	{
		MssqlCdcTable *table = lfirst(lc);

		if (!table_position(table, &pos))
			continue;
		worker_ctx_table_id = table->table_id;
		worker_park_table(table, COND_SOURCE_WENT_BACK, message, WENT_BACK_HINT);
		table->phase = MSSQL_PHASE_ERROR;
	}
	worker_ctx_table_id = 0;
	/* the next iteration accepts the source as it is (nothing holds a position) */
	probed = false;
	window_quiet_forget();
}

/*
 * Before the windows of a poll.  Returns false when the iteration must not
 * go on (tables were parked; pending tables wait for the next one, which
 * accepts the new timeline first).
 */
bool
worker_check_timeline(List *tables, const MssqlLsn *max_lsn)
{
	ListCell   *lc;
	bool		positioned = false;
	MssqlLsn	lead;
	SourceIdentity stored_id;
	SourceFingerprint stored_fp;
	SourceProbe probe;
	char	   *evidence;

	foreach(lc, tables)
	{
		MssqlLsn	pos;

		if (!table_position(lfirst(lc), &pos))
			continue;
		if (!positioned || mssql_lsn_cmp(&pos, &lead) > 0)
			lead = pos;
		positioned = true;
	}
	if (positioned && mssql_lsn_cmp(max_lsn, &lead) < 0)
	{
		char		max_text[MSSQL_LSN_TEXT_SIZE];
		char		lead_text[MSSQL_LSN_TEXT_SIZE];

		mssql_lsn_format(max_lsn, max_text);
		mssql_lsn_format(&lead, lead_text);
		park_positioned(tables,
						psprintf("The max LSN of server \"%s\" is %s, below the position %s its tables were copied to: the source database went back in time (restored, failed over with the end of its log lost, or the server now points to another copy).",
								 worker_server_name, max_text, lead_text));
		return false;
	}
	if (probed)
		return true;

	worker_begin_xact();
	source_identity_load(worker_server_name, &stored_id, &stored_fp);
	worker_commit_xact();
	source_identity_probe(worker_session, &stored_fp, &probe);
	probed = true;
	if (!probe.identity.known)
		ereport(LOG,
				(errmsg("mssql_cdc source \"%s\": sys.database_recovery_status is not visible to the login, so a restore is noticed only through LSNs and transaction fingerprints",
						worker_server_name),
				 errhint("GRANT VIEW ANY DATABASE TO the login (or make it the database owner) so that a new recovery fork or another database is recognised at once.")));

	evidence = source_identity_explain(&stored_id, &stored_fp, &probe, worker_server_name);
	if (evidence != NULL && positioned)
	{
		park_positioned(tables, evidence);
		return false;
	}
	worker_begin_xact();
	if (evidence != NULL)
	{
		/* nothing holds a position on the old history: take the source as it is */
		ereport(LOG,
				(errmsg("mssql_cdc source \"%s\": accepting the source's new history (no table holds a position on the old one)",
						worker_server_name),
				 errdetail("%s", evidence)));
		source_identity_store(worker_server_name, &probe.identity, true);
	}
	else if (probe.identity.known && !stored_id.known)
		source_identity_store(worker_server_name, &probe.identity, false);	/* first contact */
	worker_commit_xact();
	return true;
}

/*
 * In the transaction that gives a table a position at lsn (a snapshot's L0,
 * a 'never' table's start): fingerprint the history up to it, so that a
 * table that has not committed a window yet is covered too (a later probe
 * must not take its fingerprint from whatever source it meets then).  Its
 * first statement: the servers row is locked before the table's row, as
 * in a window.
 */
void
worker_timeline_fingerprint_at(const MssqlLsn *lsn)
{
	SourceFingerprint fp;

	memset(&fp, 0, sizeof(fp));
	source_fingerprint_lock(worker_server_name);
	tds_exec(worker_session, source_fingerprint_sql(lsn));
	while (tds_next_result(worker_session))
	{
		if (fp.known)
		{
			while (tds_next_row(worker_session))
				;				/* drain */
			continue;
		}
		source_fingerprint_read(worker_session, lsn, &fp);
	}
	if (fp.known)
		source_fingerprint_store(worker_server_name, &fp);
}
