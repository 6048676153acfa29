/*-------------------------------------------------------------------------
 *
 * source_identity.h
 *		Which history a source database has: its identity
 *		(sys.database_recovery_status: database_guid, recovery_fork_guid)
 *		and a fingerprint of a real transaction of cdc.lsn_time_mapping at
 *		or below the lead checkpoint, remembered per server in
 *		mssql_cdc.servers and compared again on every new connection.
 *
 * A restore from backup, a failover that lost the end of the log, or a
 * server object repointed at another copy gives the worker a source whose
 * history differs at or below the checkpoint: its LSNs are reused by other
 * transactions, so streaming on would skip some and mix in others.  A new
 * recovery fork or database_guid says so directly; the fingerprint ("the
 * last real transaction at or below E was (start_lsn, tran_id,
 * tran_end_time)") also catches what keeps the identity (an asynchronous
 * failover, an attached copy of the files) and works for logins that may
 * not read sys.database_recovery_status.  The worker side (parking,
 * accepting a new timeline) is src/worker_timeline.c.
 *
 * IDENTIFICATION
 *		include/source_identity.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_SOURCE_IDENTITY_H
#define MSSQL_CDC_SOURCE_IDENTITY_H

#include "postgres.h"

#include "datatype/timestamp.h"

#include "lsn.h"
#include "tds_session.h"

/* cdc.lsn_time_mapping.tran_id is varbinary(10) */
#define SOURCE_TRAN_ID_MAX	10

/* sys.database_recovery_status of the source database */
typedef struct SourceIdentity
{
	bool		known;			/* false: not stored / not visible to the login */
	char	   *database_guid;	/* canonical lower-case text, NULL if NULL */
	char	   *recovery_fork_guid;
} SourceIdentity;

/* "The last real transaction at or below window_end was ..." */
typedef struct SourceFingerprint
{
	bool		known;			/* false: none taken yet */
	MssqlLsn	window_end;
	bool		has_tran;		/* false: no real transaction at or below window_end */
	MssqlLsn	lsn;
	uint8		tran_id[SOURCE_TRAN_ID_MAX];
	int			tran_id_len;
	Timestamp	end_time;		/* naive local tran_end_time; 0 if NULL */
} SourceFingerprint;

/* What one probe of a new connection found on SQL Server */
typedef struct SourceProbe
{
	SourceIdentity identity;	/* known = the login sees the row */
	SourceFingerprint again;	/* the stored fingerprint's question asked again */
	bool		has_mapping_min;	/* MIN(start_lsn) of cdc.lsn_time_mapping */
	MssqlLsn	mapping_min;
} SourceProbe;

/* ---- SQL Server side ---------------------------------------------------- */

/*
 * One batch: the identity and, when a fingerprint is stored, its question
 * asked again plus the mapping's lowest LSN (cleanup may have removed the
 * fingerprint's transaction legitimately).
 */
extern void source_identity_probe(TdsSession *session, const SourceFingerprint *stored,
								  SourceProbe *probe);

/*
 * The statement that takes a fingerprint at window_end, for a batch of the
 * caller; source_fingerprint_read reads its result set (the current one).
 */
extern char *source_fingerprint_sql(const MssqlLsn *window_end);
extern void source_fingerprint_read(TdsSession *session, const MssqlLsn *window_end,
									SourceFingerprint *fp);

/*
 * Why the source now has another history than the stored identity and
 * fingerprint say, or NULL when nothing shows that.  server_name for the
 * message.
 */
extern char *source_identity_explain(const SourceIdentity *stored_id,
									 const SourceFingerprint *stored_fp,
									 const SourceProbe *probe, const char *server_name);

/* ---- catalog side (in a transaction) ------------------------------------ */

extern void source_identity_load(const char *server_name, SourceIdentity *id,
								 SourceFingerprint *fp);

/* Remember id (first contact, or a new timeline accepted); optionally forget the fingerprint */
extern void source_identity_store(const char *server_name, const SourceIdentity *id,
								  bool clear_fingerprint);

/*
 * In a window's transaction: remember fp unless the stored one was taken
 * at a later window end (a group behind the lead commits after it).
 */
extern void source_fingerprint_store(const char *server_name, const SourceFingerprint *fp);

/*
 * First statement of a window's transaction: lock the server's row before
 * any table_state row, in the order the SQL API locks them
 * (servers FOR UPDATE, then the table), so that the fingerprint's UPDATE at
 * the window's end cannot deadlock with remove_table() or resnapshot().
 */
extern void source_fingerprint_lock(const char *server_name);

#endif							/* MSSQL_CDC_SOURCE_IDENTITY_H */
