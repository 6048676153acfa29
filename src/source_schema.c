/*-------------------------------------------------------------------------
 *
 * source_schema.c
 *		Discover a SQL Server source table: columns (INFORMATION_SCHEMA),
 *		computed columns (sys.columns), primary key (sp_pkeys), CDC state
 *		(sys.databases, sys.tables) and the capture instance with its
 *		captured columns (sp_cdc_help_change_data_capture,
 *		cdc.captured_columns).  The SQL functions built on it live in
 *		describe_source.c.
 *
 * Only the statement shapes of reference/sqlserver-cdc.md §1.5 and §4 are
 * sent, names always as N'...' literals (tds_quote_nstring) or [quoted]
 * identifiers, so any name a user can create on SQL Server works.  Result
 * columns are picked by name, not position, so extra columns of a newer
 * SQL Server do not break us.
 *
 * IDENTIFICATION
 *		src/source_schema.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "fmgr.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/pg_list.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/formatting.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"
#include "utils/varlena.h"

#include "compat.h"
#include "options.h"
#include "source_name.h"
#include "source_schema.h"
#include "staging.h"

/* The columns of the current result named names[], in map[] (false: not all there) */
static bool
map_columns(TdsSession *session, const char *const *names, int ncols, int *map)
{
	int			i;

	if (tds_num_cols(session) == 0)
		return false;
	for (i = 0; i < ncols; i++)
	{
		int			c;

		map[i] = 0;
		for (c = 1; c <= tds_num_cols(session); c++)
			if (pg_strcasecmp(tds_col_name(session, c), names[i]) == 0)
			{
				map[i] = c;
				break;
			}
		if (map[i] == 0)
			return false;
	}
	return true;
}

static char **
row_values(TdsSession *session, const int *map, int ncols)
{
	char	  **values = palloc(sizeof(char *) * ncols);
	int			i;

	for (i = 0; i < ncols; i++)
		values[i] = tds_col_text(session, map[i]);
	return values;
}

/*
 * Run a batch and collect, as text, the named columns of every row of every
 * result set that has them all (stored procedures also send results that do
 * not, which are skipped).  Returns a List of char *[ncols].
 */
List *
source_schema_result_rows(TdsSession *session, const char *const *names, int ncols,
						  int max_rows, bool *usable)
{
	List	   *rows = NIL;
	int		   *map = palloc(sizeof(int) * ncols);

	*usable = map_columns(session, names, ncols, map);
	/* another shape: its rows are left for the caller */
	while (*usable && tds_next_row(session))
		if (max_rows <= 0 || list_length(rows) < max_rows)
			rows = lappend(rows, row_values(session, map, ncols));
	pfree(map);
	return rows;
}

List *
source_schema_fetch_rows(TdsSession *session, const char *sql, const char *const *names,
						 int ncols)
{
	List	   *rows = NIL;
	bool		usable;

	tds_exec(session, sql);
	while (tds_next_result(session))
	{
		rows = list_concat(rows, source_schema_result_rows(session, names, ncols, 0, &usable));
		while (!usable && tds_next_row(session))
			;					/* skipped */
	}
	return rows;
}

/* An integer column; NULL gives if_null.  SQL Server sent it, so it parses. */
static int
int_value(const char *text, int if_null)
{
	return text ? pg_strtoint32(text) : if_null;
}

/* bit columns arrive as "true"/"false" (tds_convert), counts as "1"/"0" */
static bool
bool_value(const char *text)
{
	return text != NULL && (strcmp(text, "true") == 0 || strcmp(text, "1") == 0);
}

static char *
display(const MssqlSourceTable *src)
{
	return mssql_display_name(src->schema, src->table);
}

static MssqlColumn *
find_column(MssqlSourceTable *src, const char *name)
{
	int			i;

	for (i = 0; i < src->ncolumns; i++)
		if (strcmp(src->columns[i].name, name) == 0)
			return &src->columns[i];
	return NULL;
}

/*
 * The table is not there for this login.  SQL Server's metadata visibility
 * hides tables the login has no permission on from the catalog views (and
 * sys.sp_cdc_help_change_data_capture says 22981 "Object does not exist or
 * access is denied"), so "not found" can mean "not allowed".
 */
static void
report_table_not_found(const MssqlSourceTable *src, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_TABLE),
			 errmsg("table %s does not exist on server \"%s\" (dropped, or not visible to this login)",
					display(src), src->server_name),
			 errdetail("%s", detail),
			 errhint("Names are matched exactly as SQL Server stores them.  SQL Server hides a table from a login "
					 "without permission on it: GRANT SELECT ON %s.%s TO the login.",
					 mssql_quote_identifier(src->schema), mssql_quote_identifier(src->table))));
}

static void
fill_columns(MssqlSourceTable *src, List *rows)
{
	ListCell   *lc;
	int			n = 0;

	if (rows == NIL)
		report_table_not_found(src, "INFORMATION_SCHEMA.COLUMNS of the server's database lists no columns for it.");

	src->ncolumns = list_length(rows);
	src->columns = palloc(sizeof(MssqlColumn) * src->ncolumns);
	foreach(lc, rows)
	{
		char	  **v = lfirst(lc);
		MssqlColumn *col = &src->columns[n];

		mssql_column_init(col);
		col->name = v[0];
		col->pg_name = staging_column_name(v[0]);
		col->ordinal = ++n;
		col->type_name = v[1] ? asc_tolower(v[1], strlen(v[1])) : "";
		col->max_length = int_value(v[2], MSSQL_FACET_UNKNOWN);
		col->precision = int_value(v[3], MSSQL_FACET_UNKNOWN);
		col->scale = int_value(v[4], MSSQL_FACET_UNKNOWN);
		col->datetime_precision = int_value(v[5], MSSQL_FACET_UNKNOWN);
		col->nullable = v[6] != NULL && pg_strcasecmp(v[6], "YES") == 0;
		col->collation = v[7];
	}
}

static void
mark_computed(MssqlSourceTable *src, List *rows)
{
	ListCell   *lc;

	foreach(lc, rows)
	{
		char	  **v = lfirst(lc);
		MssqlColumn *col = v[0] ? find_column(src, v[0]) : NULL;

		if (col)
			col->is_computed = true;
	}
}

static void
mark_primary_key(MssqlSourceTable *src, List *rows)
{
	ListCell   *lc;

	foreach(lc, rows)
	{
		char	  **v = lfirst(lc);
		MssqlColumn *col = v[0] ? find_column(src, v[0]) : NULL;

		if (col == NULL)
			continue;
		col->is_key = true;
		col->key_ordinal = int_value(v[1], 0);
		src->nkey++;
	}
}

static void
require_cdc_database(MssqlSourceTable *src, List *rows)
{
	char	  **v;

	if (rows == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the current database of server \"%s\" is not visible in sys.databases",
						src->server_name)));
	v = linitial(rows);
	if (!bool_value(v[0]))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("change data capture is not enabled for database \"%s\" of server \"%s\"",
						v[1] ? v[1] : "?", src->server_name),
				 errdetail("Table %s cannot be captured without it.", display(src)),
				 errhint("A sysadmin runs EXEC sys.sp_cdc_enable_db in that database.")));
}

/* "\x0000002A000001F00003" (tds_convert's binary text) -> MssqlLsn */
bool
source_schema_parse_binary_lsn(const char *text, MssqlLsn *lsn)
{
	char	   *copy;

	if (text == NULL || strlen(text) < 2)
		return false;
	copy = pstrdup(text);
	copy[0] = '0';
	copy[1] = 'x';
	return mssql_lsn_parse(copy, lsn);
}

static void report_no_capture_instance(TdsSession *session, MssqlSourceTable *src)
			pg_attribute_noreturn();
static void report_not_enabled(const MssqlSourceTable *src) pg_attribute_noreturn();
static void report_table_not_found(const MssqlSourceTable *src, const char *detail)
			pg_attribute_noreturn();

SourceCdcTracking
source_schema_cdc_tracking(TdsSession *session, const char *schema, const char *table)
{
	static const char *const names[] = {"is_tracked_by_cdc"};
	char	   *object = psprintf("%s.%s", mssql_quote_identifier(schema),
								  mssql_quote_identifier(table));
	List	   *rows;

	rows = source_schema_fetch_rows(session,
					  psprintf("SELECT is_tracked_by_cdc FROM sys.tables WHERE object_id = OBJECT_ID(%s)",
							   tds_quote_nstring(object)),
					  names, 1);
	if (rows == NIL)
		return SOURCE_TABLE_NOT_FOUND;
	return bool_value(((char **) linitial(rows))[0]) ? SOURCE_TABLE_TRACKED : SOURCE_TABLE_NOT_TRACKED;
}

/* No capture instance is visible: not enabled, or not readable by the login? */
static void
report_no_capture_instance(TdsSession *session, MssqlSourceTable *src)
{
	if (source_schema_cdc_tracking(session, src->schema, src->table) == SOURCE_TABLE_TRACKED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("table %s of server \"%s\" is enabled for change data capture, but the login sees no capture instance of it",
						display(src), src->server_name),
				 errdetail("sys.sp_cdc_help_change_data_capture lists only capture instances whose captured columns the login may SELECT."),
				 errhint("Grant the login SELECT on the table and membership in the capture instance's gating role.")));
	report_not_enabled(src);
}

/*
 * The table exists but has no capture instance (22985 from the named
 * sys.sp_cdc_help_change_data_capture): ERRCODE_UNDEFINED_OBJECT, the
 * capture instance is what is missing, so the worker parks a captured
 * table with condition capture_instance_missing instead of retrying.
 */
static void
report_not_enabled(const MssqlSourceTable *src)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("table %s of server \"%s\" is not enabled for change data capture",
					display(src), src->server_name),
			 errdetail("It has no capture instance (its capture instances were dropped, or it was never enabled)."),
			 errhint("A db_owner runs EXEC sys.sp_cdc_enable_table @source_schema = %s, @source_name = %s, @role_name = NULL; then call mssql_cdc.resnapshot() for a table already captured, or add it again.",
					 tds_quote_nstring(src->schema), tds_quote_nstring(src->table))));
}

/*
 * For a named table SQL Server raises 22985 when it is not enabled and
 * 22981 when the login cannot see it (it does not return an empty result);
 * an enabled table lists the capture instances the login may read,
 * possibly none.  err: the error the statement ended with, or NULL.
 */
static void
fill_capture_instances(TdsSession *session, MssqlSourceTable *src, List *rows,
					   const TdsRemoteError *err)
{
	ListCell   *lc;
	int			n = 0;

	if (err != NULL)
	{
		if (err->msgno == 22985)
			report_not_enabled(src);
		if (err->msgno == 22981)
			report_table_not_found(src, "sys.sp_cdc_help_change_data_capture: Object does not exist or access is denied (Msg 22981).");
		tds_report_error(src->server_name, err, "reading the table's capture instances");
	}
	if (rows == NIL)
		report_no_capture_instance(session, src);

	src->ninstances = list_length(rows);
	src->instances = palloc0(sizeof(MssqlCaptureInstance) * src->ninstances);
	foreach(lc, rows)
	{
		char	  **v = lfirst(lc);
		MssqlCaptureInstance *ci = &src->instances[n++];

		ci->name = v[0];
		ci->change_table_id = int_value(v[1], 0);
		ci->has_start_lsn = source_schema_parse_binary_lsn(v[2], &ci->start_lsn);
		ci->create_date = v[3] ? v[3] : "";
	}
}

/* a newer than b: later start_lsn; instances still without one by create_date */
static bool
instance_is_newer(const MssqlCaptureInstance *a, const MssqlCaptureInstance *b)
{
	int			cmp;

	if (a->has_start_lsn != b->has_start_lsn)
		return a->has_start_lsn;
	if (a->has_start_lsn && (cmp = mssql_lsn_cmp(&a->start_lsn, &b->start_lsn)) != 0)
		return cmp > 0;
	if ((cmp = strcmp(a->create_date, b->create_date)) != 0)
		return cmp > 0;
	return a->change_table_id > b->change_table_id;
}

/*
 * Without a request, the newest instance with a start_lsn: during a schema
 * change the DBA adds a second instance with the new columns, and the old
 * one is dropped soon after; an instance whose start_lsn is still NULL has
 * no change rows yet.  (The worker switches instances itself later.)
 */
static void
choose_capture_instance(MssqlSourceTable *src, const char *requested)
{
	int			i;

	if (requested == NULL)
	{
		const MssqlCaptureInstance *best = &src->instances[0];

		for (i = 1; i < src->ninstances; i++)
			if (instance_is_newer(&src->instances[i], best))
				best = &src->instances[i];
		src->capture_instance = best;
		return;
	}

	for (i = 0; i < src->ninstances; i++)
		if (strcmp(src->instances[i].name, requested) == 0)
		{
			src->capture_instance = &src->instances[i];
			return;
		}

	/*
	 * SQL Server compares names under the database collation, usually
	 * case-insensitive; accept a different case when it is unambiguous.
	 */
	for (i = 0; i < src->ninstances; i++)
		if (pg_strcasecmp(src->instances[i].name, requested) == 0)
		{
			if (src->capture_instance != NULL)
			{
				src->capture_instance = NULL;
				break;
			}
			src->capture_instance = &src->instances[i];
		}
	if (src->capture_instance != NULL)
		return;

	{
		StringInfoData list;

		initStringInfo(&list);
		for (i = 0; i < src->ninstances; i++)
			appendStringInfo(&list, "%s%s", i > 0 ? ", " : "", src->instances[i].name);
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("capture instance \"%s\" of table %s does not exist on server \"%s\" (dropped, or not visible to this login)",
						requested, display(src), src->server_name),
				 errhint("Capture instances of this table the login may read: %s.", list.data)));
	}
}

/*
 * Captured columns of the chosen instance.  A captured column that no
 * longer exists in the source (dropped after the instance was created)
 * always arrives as NULL and is not staged.
 */
static void
read_captured_columns(TdsSession *session, MssqlSourceTable *src)
{
	static const char *const names[] = {"column_name", "is_computed"};
	List	   *rows;
	ListCell   *lc;

	rows = source_schema_fetch_rows(session,
					  psprintf("SELECT column_name, column_ordinal, column_type, is_computed "
							   "FROM cdc.captured_columns WHERE object_id = %d ORDER BY column_ordinal",
							   src->capture_instance->change_table_id),
					  names, 2);
	foreach(lc, rows)
	{
		char	  **v = lfirst(lc);
		MssqlColumn *col = v[0] ? find_column(src, v[0]) : NULL;

		if (col == NULL)
			continue;
		col->captured = true;
		if (bool_value(v[1]))
			col->is_computed = true;
	}
}

/*
 * The statements of a table's first describe request, in the order they
 * run, each told by the columns of its result: the aliases make every shape
 * unique, and the other results a procedure may send have none of them.
 */
typedef enum DescribePart
{
	PART_COLUMNS,
	PART_COMPUTED,
	PART_KEY,
	PART_DATABASE,
	PART_INSTANCES,
	NUM_DESCRIBE_PARTS
} DescribePart;

static const char *const columns_names[] = {
	"COLUMN_NAME", "DATA_TYPE", "CHARACTER_MAXIMUM_LENGTH", "NUMERIC_PRECISION",
	"NUMERIC_SCALE", "DATETIME_PRECISION", "IS_NULLABLE", "COLLATION_NAME"
};
static const char *const computed_names[] = {"computed_column"};
static const char *const key_names[] = {"COLUMN_NAME", "KEY_SEQ"};
static const char *const database_names[] = {"is_cdc_enabled", "database_name"};
static const char *const instances_names[] = {"capture_instance", "object_id", "start_lsn", "create_date"};

/* map_columns() room for the widest part */
#define DESCRIBE_MAX_COLS lengthof(columns_names)
StaticAssertDecl(lengthof(computed_names) <= DESCRIBE_MAX_COLS &&
				 lengthof(key_names) <= DESCRIBE_MAX_COLS &&
				 lengthof(database_names) <= DESCRIBE_MAX_COLS &&
				 lengthof(instances_names) <= DESCRIBE_MAX_COLS,
				 "a describe part has more columns than DESCRIBE_MAX_COLS");

static const struct
{
	const char *const *names;
	int			ncols;
}			describe_parts[NUM_DESCRIBE_PARTS] =
{
	{columns_names, lengthof(columns_names)},
	{computed_names, lengthof(computed_names)},
	{key_names, lengthof(key_names)},
	{database_names, lengthof(database_names)},
	{instances_names, lengthof(instances_names)}
};

static char *
describe_batch(const MssqlSourceTable *src)
{
	char	   *schema = tds_quote_nstring(src->schema);
	char	   *table = tds_quote_nstring(src->table);
	char	   *object = tds_quote_nstring(psprintf("%s.%s", mssql_quote_identifier(src->schema),
													mssql_quote_identifier(src->table)));

	return psprintf("SELECT COLUMN_NAME, DATA_TYPE, CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, "
					"NUMERIC_SCALE, DATETIME_PRECISION, IS_NULLABLE, COLLATION_NAME FROM INFORMATION_SCHEMA.COLUMNS "
					"WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION; "
					"SELECT name AS computed_column FROM sys.columns WHERE object_id = OBJECT_ID(%s) "
					"AND is_computed = 1; "
					"EXEC sp_pkeys @table_name = %s, @table_owner = %s; "
					"SELECT is_cdc_enabled, name AS database_name FROM sys.databases WHERE database_id = DB_ID(); "
					"EXEC sys.sp_cdc_help_change_data_capture @source_schema = %s, @source_name = %s",
					schema, table, object, table, schema, schema, table);
}

/*
 * Run the describe batch and collect each part's rows (as text, the part's
 * columns by name).  One request instead of five: a worker describes every
 * table again after each reconnect, and against a server 10 ms away five
 * round trips per table are 50 ms, 10 s for 200 tables.
 *
 * SQL Server runs the statements in order, and an error ends what the
 * session reads of the batch (tds_after_call cancels the rest).  So the
 * part that failed is the one being read when the error came, or the one
 * after the last part seen; *failed says which (NUM_DESCRIBE_PARTS: none)
 * and the error is returned, so that source_schema_describe judges every
 * part before it in the order it always did.  The procedure that may raise
 * an error of its own (22981, 22985) goes last.
 */
static const TdsRemoteError *
fetch_describe_parts(TdsSession *session, const MssqlSourceTable *src,
					 List *rows[NUM_DESCRIBE_PARTS], DescribePart *failed)
{
	int			map[DESCRIBE_MAX_COLS];
	int			last_seen = -1;
	int			part = NUM_DESCRIBE_PARTS;	/* the result being read: none */
	TdsStep		step = TDS_STEP_DONE;
	int			p;

	for (p = 0; p < NUM_DESCRIBE_PARTS; p++)
		rows[p] = NIL;
	*failed = NUM_DESCRIBE_PARTS;
	if (!tds_exec_try(session, describe_batch(src)))
	{
		*failed = PART_COLUMNS;
		return tds_session_last_error(session);
	}
	while ((step = tds_next_result_try(session)) == TDS_STEP_MORE)
	{
		for (part = 0; part < NUM_DESCRIBE_PARTS; part++)
			if (map_columns(session, describe_parts[part].names, describe_parts[part].ncols, map))
				break;
		if (part < NUM_DESCRIBE_PARTS)
			last_seen = Max(last_seen, part);
		while ((step = tds_next_row_try(session)) == TDS_STEP_MORE)
			if (part < NUM_DESCRIBE_PARTS)
				rows[part] = lappend(rows[part], row_values(session, map, describe_parts[part].ncols));
		if (step == TDS_STEP_REMOTE_ERROR)
			break;
		part = NUM_DESCRIBE_PARTS;
	}
	if (step != TDS_STEP_REMOTE_ERROR)
		return NULL;
	/* in the middle of a result: its statement's; between results (or unknown): the next one's */
	*failed = part < NUM_DESCRIBE_PARTS ? part : Min(last_seen + 1, PART_INSTANCES);
	return tds_session_last_error(session);
}

MssqlSourceTable *
source_schema_describe(TdsSession *session, const char *schema, const char *table,
					   const char *capture_instance)
{
	MssqlSourceTable *src = palloc0(sizeof(MssqlSourceTable));
	List	   *rows[NUM_DESCRIBE_PARTS];
	const TdsRemoteError *err;
	DescribePart failed;

	src->server_name = pstrdup(tds_session_server_name(session));
	src->schema = pstrdup(schema);
	src->table = pstrdup(table);

	err = fetch_describe_parts(session, src, rows, &failed);
	/* an error of a statement before the capture instances' is reported as it comes */
	if (err != NULL && failed < PART_INSTANCES)
	{
		if (failed > PART_COLUMNS)
			fill_columns(src, rows[PART_COLUMNS]);
		tds_report_error(src->server_name, err, "describing the table");
	}
	fill_columns(src, rows[PART_COLUMNS]);
	mark_computed(src, rows[PART_COMPUTED]);
	mark_primary_key(src, rows[PART_KEY]);
	require_cdc_database(src, rows[PART_DATABASE]);
	fill_capture_instances(session, src, rows[PART_INSTANCES], err);
	choose_capture_instance(src, capture_instance);
	read_captured_columns(session, src);
	return src;
}

char *
source_label(const MssqlSourceTable *src)
{
	return psprintf("%s of server \"%s\"", display(src), src->server_name);
}
