/*-------------------------------------------------------------------------
 *
 * options.h
 *		Connection options of the mssql_cdc foreign-data wrapper: the
 *		validator's rules and the resolved settings a worker connects with.
 *
 * Connection details live in the standard FDW catalogs so that credentials
 * follow PostgreSQL's own rules: server-level settings on CREATE SERVER,
 * username and password only on CREATE USER MAPPING (pg_user_mapping hides
 * them from other roles).
 *
 * IDENTIFICATION
 *		include/options.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_OPTIONS_H
#define MSSQL_CDC_OPTIONS_H

#include "postgres.h"
#include "foreign/foreign.h"

/* Defaults applied when an option is absent (documented in doc/sql-api.md) */
#define MSSQL_CDC_DEFAULT_PORT				1433
#define MSSQL_CDC_DEFAULT_TDS_VERSION		"7.4"
#define MSSQL_CDC_DEFAULT_APPLICATION_NAME	"mssql_cdc"
#define MSSQL_CDC_DEFAULT_LOGIN_TIMEOUT		15	/* seconds */
#define MSSQL_CDC_DEFAULT_QUERY_TIMEOUT		300 /* seconds */
#define MSSQL_CDC_DEFAULT_PACKET_SIZE		4096

/*
 * Tables of one source copied at once, each on a session of its own
 * (server option snapshot_connections, doc/snapshot.md "Parallel copy").
 * 4 by default: enough to overlap the round trips of a SQL Server a few
 * milliseconds away (one worker process then writes all the time) while
 * adding only three sessions and three concurrent scans to the source.
 */
#define MSSQL_CDC_DEFAULT_SNAPSHOT_CONNECTIONS	4
#define MSSQL_CDC_MAX_SNAPSHOT_CONNECTIONS		16

/*
 * The "encryption" option (doc/connecting.md, Encryption).  mssql_cdc's own
 * meaning, not FreeTDS's: 'request' never falls back to plain text without
 * a WARNING (tds_tls.c).
 */
typedef enum MssqlEncryption
{
	MSSQL_ENCRYPTION_OFF,		/* no TLS, asked for explicitly */
	MSSQL_ENCRYPTION_REQUEST,	/* TLS; plain text (with a WARNING) only when
								 * SQL Server offers no TLS at all */
	MSSQL_ENCRYPTION_REQUIRE	/* TLS or fail (the default) */
} MssqlEncryption;

/* ca_file value meaning the operating system's trust store (FreeTDS's word) */
#define MSSQL_CDC_CA_FILE_SYSTEM			"system"
#define MSSQL_CDC_DEFAULT_CA_FILE			MSSQL_CDC_CA_FILE_SYSTEM

/*
 * How the worker reads change rows (server option data_query_mode, named
 * after Debezium's data.query.mode; doc/streaming.md):
 */
typedef enum MssqlDataQueryMode
{
	MSSQL_QUERY_DIRECT,			/* cdc.[<ci>_CT] in its clustered order:
								 * execution order (the default) */
	MSSQL_QUERY_FUNCTION		/* cdc.fn_cdc_get_all_changes_<ci>, for logins
								 * that may not read the change table:
								 * __$seqval order, no command id */
} MssqlDataQueryMode;

/*
 * Everything a worker needs to open a TDS session for one server and role.
 * Strings are palloc'd in the caller's memory context.  The password is
 * never to be logged or put into any message.
 */
typedef struct MssqlServerOptions
{
	Oid			serverid;
	char	   *server_name;	/* the Postgres foreign server's name */
	char	   *host;
	int			port;
	char	   *database;
	char	   *tds_version;	/* "7.3" or "7.4", as freetds.conf spells it */
	MssqlEncryption encryption;
	int			login_timeout;	/* seconds */
	int			query_timeout;	/* seconds */
	char	   *application_name;
	int			packet_size;	/* bytes */
	char	   *username;
	char	   *password;
	/* TLS: how the server's certificate is validated (doc/connecting.md) */
	bool		trust_server_certificate;	/* no validation at all */
	char	   *ca_file;		/* PEM bundle, or "system" */
	char	   *crl_file;		/* PEM revocation list, or NULL */
	bool		check_host_name;	/* the certificate must name host */
	/* not connection settings: how the worker queries (doc/streaming.md) */
	MssqlDataQueryMode data_query_mode;
	char	   *server_time_zone;	/* Windows zone name; NULL: ask the server */
	int			snapshot_connections;	/* tables copied at once */
} MssqlServerOptions;

/*
 * Look up a foreign server by name and make sure it belongs to the
 * mssql_cdc wrapper.  Raises ERRCODE_UNDEFINED_OBJECT for an unknown name and
 * ERRCODE_WRONG_OBJECT_TYPE for a server of another wrapper.
 */
extern ForeignServer *mssql_cdc_get_server_by_name(const char *server_name);

/* True if roleid, or PUBLIC, has a user mapping for the server. */
extern bool mssql_cdc_user_mapping_exists(Oid roleid, Oid serverid);

/*
 * The rule for every function that talks to SQL Server on the caller's
 * behalf: USAGE on the foreign server (superusers have it) and a user
 * mapping (own or PUBLIC) holding the credentials.  Without it a role could
 * reach SQL Server with someone else's access.  ERRCODE_INSUFFICIENT_
 * PRIVILEGE with a hint that says what to grant or create.
 */
extern void mssql_cdc_check_server_access(Oid caller, ForeignServer *server);

/*
 * Resolve the connection settings of a server for a role (its own user
 * mapping, else the PUBLIC one), with defaults applied.  Options that are
 * only required at use (host, username, password) are checked here, with
 * errors naming the server.  Must be called inside a transaction.
 */
extern MssqlServerOptions *mssql_cdc_get_server_options(Oid serverid, Oid roleid);

#endif							/* MSSQL_CDC_OPTIONS_H */
