/*-------------------------------------------------------------------------
 *
 * options.c
 *		Validator of the mssql_cdc foreign-data wrapper and resolution of a
 *		server's connection settings for the worker.
 *
 * The wrapper has no handler: it only stores connection details.  The
 * validator therefore accepts options on SERVER and USER MAPPING objects
 * only, and refuses foreign tables outright, so that nobody builds on an
 * object that can never be queried.
 *
 * IDENTIFICATION
 *		src/options.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include "access/reloptions.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_foreign_data_wrapper.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_foreign_table.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/syscache.h"

#include "mssql_cdc.h"
#include "options.h"

typedef enum OptionKind
{
	OPTION_STRING,				/* any non-empty text */
	OPTION_SECRET,				/* any text; never echoed */
	OPTION_INTEGER,				/* decimal digits within [min, max] */
	OPTION_ENUM,				/* one of values[] */
	OPTION_BOOLEAN,				/* true/false, on/off, yes/no, 1/0 */
	OPTION_FILE					/* an absolute path the server process reads */
} OptionKind;

typedef struct MssqlOption
{
	const char *name;
	Oid			context;		/* catalog the option belongs to */
	OptionKind	kind;
	int			min;			/* OPTION_INTEGER */
	int			max;
	int			max_length;		/* OPTION_STRING; 0 = unlimited */
	const char *const *values;	/* OPTION_ENUM, NULL-terminated; OPTION_FILE:
								 * words allowed instead of a path */
} MssqlOption;

static const char *const tds_version_values[] = {"7.3", "7.4", NULL};
static const char *const encryption_values[] = {"off", "request", "require", NULL};
static const char *const ca_file_words[] = {MSSQL_CDC_CA_FILE_SYSTEM, NULL};
static const char *const no_words[] = {NULL};
static const char *const data_query_mode_values[] = {"direct", "function", NULL};

/*
 * TDS versions FreeTDS knows that are older than 7.3.  They are refused with
 * a specific hint: before 7.3 date, time, datetime2 and datetimeoffset
 * travel as strings, which would break the exact type mapping.
 */
static const char *const old_tds_versions[] = {"4.2", "5.0", "7.0", "7.1", "7.2", NULL};

static const MssqlOption mssql_options[] = {
	/* SERVER: where and how to connect; never who */
	{"host", ForeignServerRelationId, OPTION_STRING, 0, 0, 0, NULL},
	{"port", ForeignServerRelationId, OPTION_INTEGER, 1, 65535, 0, NULL},
	{"database", ForeignServerRelationId, OPTION_STRING, 0, 0, 128, NULL},
	{"tds_version", ForeignServerRelationId, OPTION_ENUM, 0, 0, 0, tds_version_values},
	{"encryption", ForeignServerRelationId, OPTION_ENUM, 0, 0, 0, encryption_values},
	{"login_timeout", ForeignServerRelationId, OPTION_INTEGER, 1, 3600, 0, NULL},
	{"query_timeout", ForeignServerRelationId, OPTION_INTEGER, 1, 86400, 0, NULL},
	{"application_name", ForeignServerRelationId, OPTION_STRING, 0, 0, 128, NULL},
	{"packet_size", ForeignServerRelationId, OPTION_INTEGER, 512, 32767, 0, NULL},
	/* TLS (see validate_tls_options) */
	{"trust_server_certificate", ForeignServerRelationId, OPTION_BOOLEAN, 0, 0, 0, NULL},
	{"ca_file", ForeignServerRelationId, OPTION_FILE, 0, 0, 0, ca_file_words},
	{"crl_file", ForeignServerRelationId, OPTION_FILE, 0, 0, 0, no_words},
	{"check_host_name", ForeignServerRelationId, OPTION_BOOLEAN, 0, 0, 0, NULL},
	/* SERVER: how change rows are read (doc/streaming.md) */
	{"data_query_mode", ForeignServerRelationId, OPTION_ENUM, 0, 0, 0, data_query_mode_values},
	/* SERVER: the Windows time zone of the server, for commit times (doc/streaming.md) */
	{"server_time_zone", ForeignServerRelationId, OPTION_STRING, 0, 0, 128, NULL},
	/* SERVER: tables copied at once, each on a session of its own (doc/snapshot.md) */
	{"snapshot_connections", ForeignServerRelationId, OPTION_INTEGER, 1,
	MSSQL_CDC_MAX_SNAPSHOT_CONNECTIONS, 0, NULL},
	/* USER MAPPING: the SQL Server login */
	{"username", UserMappingRelationId, OPTION_STRING, 0, 0, 128, NULL},
	{"password", UserMappingRelationId, OPTION_SECRET, 0, 0, 0, NULL},
	{NULL, InvalidOid, OPTION_STRING, 0, 0, 0, NULL}
};

static const MssqlOption *
find_option(const char *name)
{
	const MssqlOption *opt;

	for (opt = mssql_options; opt->name; opt++)
		if (strcmp(opt->name, name) == 0)
			return opt;
	return NULL;
}

/* "a, b, c" for the options valid in one catalog */
static char *
valid_option_names(Oid context)
{
	StringInfoData buf;
	const MssqlOption *opt;

	initStringInfo(&buf);
	for (opt = mssql_options; opt->name; opt++)
	{
		if (opt->context != context)
			continue;
		if (buf.len > 0)
			appendStringInfoString(&buf, ", ");
		appendStringInfoString(&buf, opt->name);
	}
	return buf.data;
}

static char *
enum_value_list(const char *const *values)
{
	StringInfoData buf;
	const char *const *v;

	initStringInfo(&buf);
	for (v = values; *v; v++)
	{
		if (buf.len > 0)
			appendStringInfoString(&buf, ", ");
		appendStringInfoString(&buf, *v);
	}
	return buf.data;
}

static bool
string_in_list(const char *value, const char *const *values)
{
	const char *const *v;

	for (v = values; *v; v++)
		if (strcmp(*v, value) == 0)
			return true;
	return false;
}

/*
 * Parse a strictly decimal integer (no sign, no blanks, no units): "1433"
 * yes, " 1433", "+1433", "1433s" no.  Returns false if malformed or if the
 * value does not fit in an int.
 */
static bool
parse_plain_int(const char *value, int *result)
{
	const char *p;
	int64		v = 0;

	if (*value == '\0')
		return false;
	for (p = value; *p; p++)
	{
		if (*p < '0' || *p > '9')
			return false;
		v = v * 10 + (*p - '0');
		if (v > PG_INT32_MAX)
			return false;
	}
	*result = (int) v;
	return true;
}

/*
 * A file the database server reads when it connects (a CA bundle, a CRL).
 * It must be an absolute path, since the server's working directory is
 * the data directory, and one FreeTDS's freetds.conf can carry: no
 * whitespace (FreeTDS collapses and trims it), none of "#;[]" (comments,
 * sections), at most 200 bytes (FreeTDS reads lines of 256).  Whether it
 * exists and who may replace it is checked at each login (tds_tls.c),
 * because files change after CREATE SERVER.
 */
static void
validate_file_option(const MssqlOption *opt, const char *value)
{
	const char *p;

	if (string_in_list(value, opt->values))
		return;
	if (value[0] != '/')
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("option \"%s\" must be an absolute path", opt->name),
				 opt->values[0] != NULL ?
				 errhint("Give the path of a PEM file, or '%s' for the operating system's trust store.",
						 opt->values[0]) :
				 errhint("Give the path of a PEM file on the database server.")));
	for (p = value; *p; p++)
		if (isspace((unsigned char) *p) || strchr("#;[]", *p) != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("option \"%s\" contains a character FreeTDS cannot read in a file name", opt->name),
					 errdetail("Whitespace and the characters # ; [ ] are not allowed."),
					 errhint("Use a path without them, for example a symbolic link.")));
	if (strlen(value) > 200)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("value of option \"%s\" is too long", opt->name),
				 errdetail("FreeTDS reads file names of at most 200 bytes.")));
}

static void
validate_option_value(const MssqlOption *opt, const char *value)
{
	int			intval;
	bool		boolval;

	switch (opt->kind)
	{
		case OPTION_SECRET:
			/* an empty password is a legal SQL Server password; nothing to say */
			break;

		case OPTION_STRING:
			if (value[0] == '\0')
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("option \"%s\" must not be empty", opt->name)));
			if (opt->max_length > 0 && pg_mbstrlen(value) > opt->max_length)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("value of option \"%s\" is too long", opt->name),
						 errdetail("SQL Server allows at most %d characters.",
								   opt->max_length)));
			break;

		case OPTION_INTEGER:
			if (!parse_plain_int(value, &intval) ||
				intval < opt->min || intval > opt->max)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("invalid value for option \"%s\": \"%s\"",
								opt->name, value),
						 errhint("Valid values are whole numbers from %d to %d.",
								 opt->min, opt->max)));
			break;

		case OPTION_BOOLEAN:
			if (!parse_bool(value, &boolval))
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("invalid value for option \"%s\": \"%s\"", opt->name, value),
						 errhint("Valid values are true and false.")));
			break;

		case OPTION_FILE:
			validate_file_option(opt, value);
			break;

		case OPTION_ENUM:
			if (string_in_list(value, opt->values))
				break;
			if (strcmp(opt->name, "tds_version") == 0 &&
				string_in_list(value, old_tds_versions))
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("TDS version \"%s\" is too old for mssql_cdc", value),
						 errdetail("Before TDS 7.3, date, time, datetime2 and datetimeoffset values are sent as text."),
						 errhint("Valid values are: %s.", enum_value_list(opt->values))));
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
					 errmsg("invalid value for option \"%s\": \"%s\"",
							opt->name, value),
					 errhint("Valid values are: %s.", enum_value_list(opt->values))));
			break;
	}
}

PG_FUNCTION_INFO_V1(mssql_cdc_validator);

/*
 * mssql_cdc.validator(options text[], catalog oid)
 *
 * Called by CREATE/ALTER FOREIGN DATA WRAPPER, SERVER, USER MAPPING and
 * FOREIGN TABLE with the complete resulting option list (also when empty).
 */
Datum
mssql_cdc_validator(PG_FUNCTION_ARGS)
{
	List	   *options = untransformRelOptions(PG_GETARG_DATUM(0));
	Oid			catalog = PG_GETARG_OID(1);
	List	   *seen = NIL;
	bool		have_database = false;
	bool		trust = false;
	const char *tls_validation_option = NULL;
	const char *file_option = NULL;
	ListCell   *lc;

	if (catalog == ForeignTableRelationId || catalog == AttributeRelationId)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("foreign tables are not supported by the mssql_cdc foreign-data wrapper"),
				 errhint("Capture a SQL Server table with mssql_cdc.add_table(); use tds_fdw to query SQL Server directly.")));

	foreach(lc, options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);
		/* untransformRelOptions gives DefElems with the value as a String */
		char	   *name = def->defname;
		char	   *value = defGetString(def);
		const MssqlOption *opt;
		ListCell   *lc2;

		if (catalog == ForeignDataWrapperRelationId)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("the mssql_cdc foreign-data wrapper takes no options"),
					 errhint("Set connection options on a server (CREATE SERVER … OPTIONS) and credentials on a user mapping.")));

		foreach(lc2, seen)
		{
			if (strcmp((char *) lfirst(lc2), name) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_OBJECT),
						 errmsg("option \"%s\" provided more than once", name)));
		}
		seen = lappend(seen, name);

		opt = find_option(name);
		if (opt == NULL || opt->context != catalog)
		{
			if (opt != NULL && catalog == ForeignServerRelationId &&
				opt->context == UserMappingRelationId)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
						 errmsg("option \"%s\" is not allowed on a server", name),
						 errhint("Credentials belong in a user mapping: CREATE USER MAPPING FOR <role> SERVER <server> OPTIONS (username '…', password '…').")));
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("invalid option \"%s\"", name),
					 errhint("Valid options in this context are: %s.",
							 valid_option_names(catalog))));
		}

		validate_option_value(opt, value);
		if (strcmp(name, "database") == 0)
			have_database = true;
		else if (strcmp(name, "trust_server_certificate") == 0)
			(void) parse_bool(value, &trust);
		if (strcmp(name, "ca_file") == 0 || strcmp(name, "crl_file") == 0 ||
			strcmp(name, "check_host_name") == 0)
			tls_validation_option = opt->name;
		if (opt->kind == OPTION_FILE && !string_in_list(value, opt->values))
			file_option = opt->name;
	}

	if (trust && tls_validation_option != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("option \"%s\" cannot be combined with trust_server_certificate 'true'",
						tls_validation_option),
				 errdetail("With trust_server_certificate 'true' the server's certificate is not validated at all."),
				 errhint("Drop one of them: validating against a CA is the safe choice.")));

	/*
	 * The files are read by the database server's operating-system user, so
	 * naming one is reading a server file: the same right COPY FROM a file
	 * needs.  Without it a server owner could probe which files exist.
	 */
	if (file_option != NULL &&
		!has_privs_of_role(GetUserId(), ROLE_PG_READ_SERVER_FILES))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to set option \"%s\"", file_option),
				 errdetail("The file is read by the database server's operating-system user."),
				 errhint("Only superusers and members of pg_read_server_files may name files on the database server.")));

	if (catalog == ForeignServerRelationId && !have_database)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_DYNAMIC_PARAMETER_VALUE_NEEDED),
				 errmsg("option \"database\" is required for a mssql_cdc server"),
				 errhint("Name the SQL Server database whose CDC tables are read, e.g. OPTIONS (host '…', database 'erp').")));

	PG_RETURN_VOID();
}

ForeignServer *
mssql_cdc_get_server_by_name(const char *server_name)
{
	ForeignServer *server = GetForeignServerByName(server_name, true);
	ForeignDataWrapper *fdw;

	if (server == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("server \"%s\" does not exist", server_name)));

	fdw = GetForeignDataWrapper(server->fdwid);
	if (strcmp(fdw->fdwname, MSSQL_CDC_FDW_NAME) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("server \"%s\" does not use the mssql_cdc foreign-data wrapper",
						server_name),
				 errdetail("It uses the foreign-data wrapper \"%s\".", fdw->fdwname),
				 errhint("Create a server with CREATE SERVER … FOREIGN DATA WRAPPER mssql_cdc.")));
	return server;
}

bool
mssql_cdc_user_mapping_exists(Oid roleid, Oid serverid)
{
	return SearchSysCacheExists2(USERMAPPINGUSERSERVER,
								 ObjectIdGetDatum(roleid),
								 ObjectIdGetDatum(serverid)) ||
		SearchSysCacheExists2(USERMAPPINGUSERSERVER,
							  ObjectIdGetDatum(InvalidOid),
							  ObjectIdGetDatum(serverid));
}

void
mssql_cdc_check_server_access(Oid caller, ForeignServer *server)
{
	char	   *role = GetUserNameFromId(caller, false);

	if (!superuser_arg(caller) &&
		pg_foreign_server_aclcheck(server->serverid, caller, ACL_USAGE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for foreign server %s", server->servername),
				 errhint("GRANT USAGE ON FOREIGN SERVER %s TO %s;",
						 quote_identifier(server->servername), quote_identifier(role))));
	if (!mssql_cdc_user_mapping_exists(caller, server->serverid))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" has no user mapping for server \"%s\"",
						role, server->servername),
				 errhint("CREATE USER MAPPING FOR %s SERVER %s OPTIONS (username '…', password '…');",
						 quote_identifier(role), quote_identifier(server->servername))));
}

static MssqlEncryption
encryption_from_string(const char *value)
{
	if (strcmp(value, "off") == 0)
		return MSSQL_ENCRYPTION_OFF;
	if (strcmp(value, "require") == 0)
		return MSSQL_ENCRYPTION_REQUIRE;
	return MSSQL_ENCRYPTION_REQUEST;
}

MssqlServerOptions *
mssql_cdc_get_server_options(Oid serverid, Oid roleid)
{
	ForeignServer *server = GetForeignServer(serverid);
	MssqlServerOptions *result = palloc0(sizeof(MssqlServerOptions));
	UserMapping *mapping;
	ListCell   *lc;

	result->serverid = serverid;
	result->server_name = pstrdup(server->servername);
	result->port = MSSQL_CDC_DEFAULT_PORT;
	result->tds_version = pstrdup(MSSQL_CDC_DEFAULT_TDS_VERSION);
	result->login_timeout = MSSQL_CDC_DEFAULT_LOGIN_TIMEOUT;
	result->query_timeout = MSSQL_CDC_DEFAULT_QUERY_TIMEOUT;
	result->application_name = pstrdup(MSSQL_CDC_DEFAULT_APPLICATION_NAME);
	result->packet_size = MSSQL_CDC_DEFAULT_PACKET_SIZE;
	result->encryption = MSSQL_ENCRYPTION_REQUIRE;
	result->ca_file = pstrdup(MSSQL_CDC_DEFAULT_CA_FILE);
	result->check_host_name = true;
	result->data_query_mode = MSSQL_QUERY_DIRECT;
	result->snapshot_connections = MSSQL_CDC_DEFAULT_SNAPSHOT_CONNECTIONS;

	/* Values were checked by the validator when they were stored. */
	foreach(lc, server->options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);
		const char *value = defGetString(def);

		if (strcmp(def->defname, "host") == 0)
			result->host = pstrdup(value);
		else if (strcmp(def->defname, "port") == 0)
			result->port = pg_strtoint32(value);
		else if (strcmp(def->defname, "database") == 0)
			result->database = pstrdup(value);
		else if (strcmp(def->defname, "tds_version") == 0)
			result->tds_version = pstrdup(value);
		else if (strcmp(def->defname, "encryption") == 0)
			result->encryption = encryption_from_string(value);
		else if (strcmp(def->defname, "login_timeout") == 0)
			result->login_timeout = pg_strtoint32(value);
		else if (strcmp(def->defname, "query_timeout") == 0)
			result->query_timeout = pg_strtoint32(value);
		else if (strcmp(def->defname, "application_name") == 0)
			result->application_name = pstrdup(value);
		else if (strcmp(def->defname, "packet_size") == 0)
			result->packet_size = pg_strtoint32(value);
		else if (strcmp(def->defname, "trust_server_certificate") == 0)
			(void) parse_bool(value, &result->trust_server_certificate);
		else if (strcmp(def->defname, "ca_file") == 0)
			result->ca_file = pstrdup(value);
		else if (strcmp(def->defname, "crl_file") == 0)
			result->crl_file = pstrdup(value);
		else if (strcmp(def->defname, "check_host_name") == 0)
			(void) parse_bool(value, &result->check_host_name);
		else if (strcmp(def->defname, "data_query_mode") == 0)
			result->data_query_mode = strcmp(value, "function") == 0 ?
				MSSQL_QUERY_FUNCTION : MSSQL_QUERY_DIRECT;
		else if (strcmp(def->defname, "server_time_zone") == 0)
			result->server_time_zone = pstrdup(value);
		else if (strcmp(def->defname, "snapshot_connections") == 0)
			result->snapshot_connections = pg_strtoint32(value);
	}

	if (result->host == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_DYNAMIC_PARAMETER_VALUE_NEEDED),
				 errmsg("server \"%s\" has no \"host\" option", server->servername),
				 errhint("ALTER SERVER %s OPTIONS (ADD host '…');",
						 quote_identifier(server->servername))));
	if (result->database == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_DYNAMIC_PARAMETER_VALUE_NEEDED),
				 errmsg("server \"%s\" has no \"database\" option", server->servername)));

	if (!mssql_cdc_user_mapping_exists(roleid, serverid))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_DYNAMIC_PARAMETER_VALUE_NEEDED),
				 errmsg("no user mapping for role \"%s\" on server \"%s\"",
						GetUserNameFromId(roleid, false), server->servername),
				 errhint("CREATE USER MAPPING FOR %s SERVER %s OPTIONS (username '…', password '…');",
						 quote_identifier(GetUserNameFromId(roleid, false)),
						 quote_identifier(server->servername))));

	mapping = GetUserMapping(roleid, serverid);
	foreach(lc, mapping->options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (strcmp(def->defname, "username") == 0)
			result->username = pstrdup(defGetString(def));
		else if (strcmp(def->defname, "password") == 0)
			result->password = pstrdup(defGetString(def));
	}

	if (result->username == NULL || result->password == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_DYNAMIC_PARAMETER_VALUE_NEEDED),
				 errmsg("the user mapping for role \"%s\" on server \"%s\" lacks option \"%s\"",
						GetUserNameFromId(roleid, false), server->servername,
						result->username == NULL ? "username" : "password"),
				 errhint("SQL Server authentication needs both username and password.")));
	return result;
}
