/*-------------------------------------------------------------------------
 *
 * type_map.c
 *		The SQL Server -> PostgreSQL type-mapping policy, as one table, and
 *		the SQL functions that expose it: mssql_cdc.map_type() and
 *		mssql_cdc.type_mappings().
 *
 * The policy is exact: every target type holds every value of its source
 * type without rounding (the only documented loss is the 100 ns digit of
 * time/datetime2/datetimeoffset(7), see tds_convert.h, and the offset of
 * datetimeoffset, whose instant is kept).  Types that FreeTDS cannot read
 * natively (CLR types, sql_variant) carry a T-SQL expression that converts
 * them on the SQL Server side.
 *
 * doc/type-mapping.md shows mssql_cdc.type_mappings(); scripts/check-type-doc
 * fails when the two differ, so a change here must come with the doc.
 *
 * IDENTIFICATION
 *		src/type_map.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/builtins.h"
#include "utils/formatting.h"
#include "utils/tuplestore.h"

#include "compat.h"
#include "source_name.h"
#include "type_map.h"

PG_FUNCTION_INFO_V1(mssql_cdc_map_type);
PG_FUNCTION_INFO_V1(mssql_cdc_type_mappings);

/* PostgreSQL keeps microseconds: fractional-second digits beyond 6 are cut */
#define PG_MAX_FRACTION_DIGITS	6

/* Which CHARACTER_MAXIMUM_LENGTH values a rule applies to */
typedef enum LengthMatch
{
	LENGTH_ANY,					/* length is not part of the type */
	LENGTH_BOUNDED,				/* (n), n >= 1 */
	LENGTH_MAX					/* (max) */
} LengthMatch;

/* How the PostgreSQL type text is built from the column's facets */
typedef enum PgShape
{
	SHAPE_FIXED,				/* pg_type as is */
	SHAPE_PRECISION_SCALE,		/* pg_type(p,s) */
	SHAPE_LENGTH,				/* pg_type(n) */
	SHAPE_FRACTION				/* pg_type(min(n,6)) || pg_suffix */
} PgShape;

/* Which spatial mapping a rule is (geometry/geography have two) */
typedef enum SpatialMapping
{
	SPATIAL_NONE,				/* not a spatial rule */
	SPATIAL_TEXT,				/* WKT text: PostGIS was not installed */
	SPATIAL_POSTGIS				/* PostGIS geometry/geography */
} SpatialMapping;

typedef struct TypeRule
{
	const char *sqlserver_type; /* DATA_TYPE as INFORMATION_SCHEMA reports it */
	const char *sqlserver_form; /* documented spelling, e.g. "float(25..53)" */
	LengthMatch length_match;
	int			min_precision;	/* NUMERIC_PRECISION range this rule covers; */
	int			max_precision;	/* 0, 0 = any (only float needs it) */
	PgShape		shape;
	const char *pg_type;		/* the type, or its base for the parameterised shapes */
	const char *pg_suffix;		/* after the (n) of SHAPE_FRACTION */
	const char *pg_form;		/* documented spelling, e.g. "numeric(p,s)" */
	const char *select_template;	/* T-SQL with %s (or %1$s, repeated) for the
								 * quoted column; NULL = as is */
	const char *note;
	SpatialMapping spatial;
} TypeRule;

/*
 * sql_variant as exact text.  A plain CAST(v AS nvarchar) uses style 0,
 * which drops digits: float/real to 6 significant digits, money to 2
 * decimals, datetime/smalldatetime to minutes ("Jan  2 2024  3:04AM"), and
 * it reinterprets binary bytes as UTF-16.  So each such base type is
 * converted with a lossless style: floats with style 3 (every digit), money
 * with style 2 (4 decimals), date/time types with ISO 8601 style 121 (120
 * for smalldatetime, which has no fraction), binary with style 1 (0x hex).
 * A variant holds up to 8000 bytes: binary as hex and char/varchar can be
 * longer than nvarchar(4000), so they go to nvarchar(max) (nchar/nvarchar
 * hold at most 4000 UTF-16 units and fit).  Every other base type
 * (integers, decimal, nchar/nvarchar, uniqueidentifier, bit) is exact under
 * CAST.  %1$s is the quoted column, used several times.
 */
#define SQL_VARIANT_AS_TEXT \
	"CASE CAST(SQL_VARIANT_PROPERTY(%1$s, 'BaseType') AS sysname)" \
	" WHEN N'float' THEN CONVERT(nvarchar(4000), CAST(%1$s AS float), 3)" \
	" WHEN N'real' THEN CONVERT(nvarchar(4000), CAST(%1$s AS real), 3)" \
	" WHEN N'money' THEN CONVERT(nvarchar(4000), CAST(%1$s AS money), 2)" \
	" WHEN N'smallmoney' THEN CONVERT(nvarchar(4000), CAST(%1$s AS smallmoney), 2)" \
	" WHEN N'datetime' THEN CONVERT(nvarchar(4000), CAST(%1$s AS datetime), 121)" \
	" WHEN N'smalldatetime' THEN CONVERT(nvarchar(4000), CAST(%1$s AS smalldatetime), 120)" \
	" WHEN N'datetime2' THEN CONVERT(nvarchar(4000), CAST(%1$s AS datetime2(7)), 121)" \
	" WHEN N'datetimeoffset' THEN CONVERT(nvarchar(4000), CAST(%1$s AS datetimeoffset(7)), 121)" \
	" WHEN N'time' THEN CONVERT(nvarchar(4000), CAST(%1$s AS time(7)), 121)" \
	" WHEN N'date' THEN CONVERT(nvarchar(4000), CAST(%1$s AS date), 121)" \
	" WHEN N'binary' THEN CONVERT(nvarchar(max), CAST(%1$s AS varbinary(8000)), 1)" \
	" WHEN N'varbinary' THEN CONVERT(nvarchar(max), CAST(%1$s AS varbinary(8000)), 1)" \
	" WHEN N'char' THEN CAST(CAST(%1$s AS varchar(8000)) AS nvarchar(max))" \
	" WHEN N'varchar' THEN CAST(CAST(%1$s AS varchar(8000)) AS nvarchar(max))" \
	" ELSE CAST(%1$s AS nvarchar(4000)) END"

/*
 * geometry/geography for PostGIS: hex EWKB, which PostGIS's input functions
 * read: the WKB of STAsBinary() (the coordinates are the source's doubles,
 * never printed as decimal text, which STAsText rounds) with the SRID put
 * in as EWKB does it: the type's 0x20000000 flag and the 4-byte SRID after
 * the type, in the byte order the WKB itself declares (its first byte; the
 * pages do not say which SQL Server writes).  STSrid is a property; an int
 * cast to binary(n) keeps its low bytes.  NULL stays NULL.
 */
#define POSTGIS_WKB_HEX "CONVERT(varchar(max), %1$s.STAsBinary(), 2)"
#define POSTGIS_FROM_WKB \
	"CASE LEFT(" POSTGIS_WKB_HEX ", 2) WHEN '01' THEN LEFT(" POSTGIS_WKB_HEX ", 8) + '20'" \
	" + CONVERT(varchar(8), CAST(%1$s.STSrid AS binary(1)) + CAST(%1$s.STSrid / 256 AS binary(1))" \
	" + CAST(%1$s.STSrid / 65536 AS binary(1)) + CAST(%1$s.STSrid / 16777216 AS binary(1)), 2)" \
	" + SUBSTRING(" POSTGIS_WKB_HEX ", 11, 2147483647)" \
	" ELSE LEFT(" POSTGIS_WKB_HEX ", 2) + '20' + SUBSTRING(" POSTGIS_WKB_HEX ", 5, 6)" \
	" + CONVERT(varchar(8), CAST(%1$s.STSrid AS binary(4)), 2)" \
	" + SUBSTRING(" POSTGIS_WKB_HEX ", 11, 2147483647) END"

/*
 * THE policy.  Order = order of mssql_cdc.type_mappings() and of the table
 * in doc/type-mapping.md.  Facet defaults (when a caller of map_type leaves
 * them out) are SQL Server's own DDL defaults, see apply_defaults().
 */
static const TypeRule type_rules[] = {
	{"bit", "bit", LENGTH_ANY, 0, 0, SHAPE_FIXED, "boolean", NULL, "boolean", NULL,
	NULL},
	{"tinyint", "tinyint", LENGTH_ANY, 0, 0, SHAPE_FIXED, "smallint", NULL, "smallint", NULL,
	"unsigned 0..255 on SQL Server"},
	{"smallint", "smallint", LENGTH_ANY, 0, 0, SHAPE_FIXED, "smallint", NULL, "smallint", NULL,
	NULL},
	{"int", "int", LENGTH_ANY, 0, 0, SHAPE_FIXED, "integer", NULL, "integer", NULL,
	NULL},
	{"bigint", "bigint", LENGTH_ANY, 0, 0, SHAPE_FIXED, "bigint", NULL, "bigint", NULL,
	NULL},
	{"decimal", "decimal(p,s)", LENGTH_ANY, 0, 0, SHAPE_PRECISION_SCALE, "numeric", NULL, "numeric(p,s)", NULL,
	"exact; p 1..38"},
	{"numeric", "numeric(p,s)", LENGTH_ANY, 0, 0, SHAPE_PRECISION_SCALE, "numeric", NULL, "numeric(p,s)", NULL,
	"exact; p 1..38"},
	{"money", "money", LENGTH_ANY, 0, 0, SHAPE_FIXED, "numeric(19,4)", NULL, "numeric(19,4)", NULL,
	"not PostgreSQL money, whose text form depends on lc_monetary"},
	{"smallmoney", "smallmoney", LENGTH_ANY, 0, 0, SHAPE_FIXED, "numeric(10,4)", NULL, "numeric(10,4)", NULL,
	NULL},
	{"real", "real", LENGTH_ANY, 0, 0, SHAPE_FIXED, "real", NULL, "real", NULL,
	"SQL Server reports float(1..24) columns as real"},
	{"float", "float(1..24)", LENGTH_ANY, 1, 24, SHAPE_FIXED, "real", NULL, "real", NULL,
	"4-byte float"},
	{"float", "float(25..53), float", LENGTH_ANY, 25, 53, SHAPE_FIXED, "double precision", NULL, "double precision", NULL,
	"8-byte float; float without n is float(53)"},
	{"date", "date", LENGTH_ANY, 0, 0, SHAPE_FIXED, "date", NULL, "date", NULL,
	NULL},
	{"time", "time(n)", LENGTH_ANY, 0, 0, SHAPE_FRACTION, "time", " without time zone", "time(min(n,6)) without time zone", NULL,
	"n = 7 loses the 100 ns digit, rounded half up"},
	{"datetime", "datetime", LENGTH_ANY, 0, 0, SHAPE_FIXED, "timestamp(3) without time zone", NULL, "timestamp(3) without time zone", NULL,
	"1/300 s ticks, converted exactly; no time zone shift"},
	{"smalldatetime", "smalldatetime", LENGTH_ANY, 0, 0, SHAPE_FIXED, "timestamp(0) without time zone", NULL, "timestamp(0) without time zone", NULL,
	"no time zone shift"},
	{"datetime2", "datetime2(n)", LENGTH_ANY, 0, 0, SHAPE_FRACTION, "timestamp", " without time zone", "timestamp(min(n,6)) without time zone", NULL,
	"no time zone shift; n = 7 loses the 100 ns digit, rounded half up"},
	{"datetimeoffset", "datetimeoffset(n)", LENGTH_ANY, 0, 0, SHAPE_FRACTION, "timestamp", " with time zone", "timestamp(min(n,6)) with time zone", NULL,
	"the instant is kept, the offset is not; n = 7 loses the 100 ns digit"},
	{"char", "char(n)", LENGTH_BOUNDED, 0, 0, SHAPE_LENGTH, "character", NULL, "character(n)", NULL,
	"space-padded, as on SQL Server"},
	{"nchar", "nchar(n)", LENGTH_BOUNDED, 0, 0, SHAPE_LENGTH, "character", NULL, "character(n)", NULL,
	"n counts UTF-16 code units, so every value fits n characters"},
	{"varchar", "varchar(n)", LENGTH_BOUNDED, 0, 0, SHAPE_LENGTH, "character varying", NULL, "character varying(n)", NULL,
	NULL},
	{"nvarchar", "nvarchar(n)", LENGTH_BOUNDED, 0, 0, SHAPE_LENGTH, "character varying", NULL, "character varying(n)", NULL,
	"n counts UTF-16 code units, so every value fits n characters"},
	{"varchar", "varchar(max)", LENGTH_MAX, 0, 0, SHAPE_FIXED, "text", NULL, "text", NULL,
	"LOB: an unchanged value arrives as NULL in updates (see _cdc_update_mask)"},
	{"nvarchar", "nvarchar(max)", LENGTH_MAX, 0, 0, SHAPE_FIXED, "text", NULL, "text", NULL,
	"LOB: an unchanged value arrives as NULL in updates (see _cdc_update_mask)"},
	{"text", "text", LENGTH_ANY, 0, 0, SHAPE_FIXED, "text", NULL, "text", NULL,
	"LOB: NULL in CDC deletes and update_before rows"},
	{"ntext", "ntext", LENGTH_ANY, 0, 0, SHAPE_FIXED, "text", NULL, "text", NULL,
	"LOB: NULL in CDC deletes and update_before rows"},
	{"binary", "binary(n)", LENGTH_BOUNDED, 0, 0, SHAPE_FIXED, "bytea", NULL, "bytea", NULL,
	NULL},
	{"varbinary", "varbinary(n)", LENGTH_BOUNDED, 0, 0, SHAPE_FIXED, "bytea", NULL, "bytea", NULL,
	NULL},
	{"varbinary", "varbinary(max)", LENGTH_MAX, 0, 0, SHAPE_FIXED, "bytea", NULL, "bytea", NULL,
	"LOB: an unchanged value arrives as NULL in updates (see _cdc_update_mask)"},
	{"image", "image", LENGTH_ANY, 0, 0, SHAPE_FIXED, "bytea", NULL, "bytea", NULL,
	"LOB: NULL in CDC deletes and update_before rows"},
	{"timestamp", "timestamp", LENGTH_ANY, 0, 0, SHAPE_FIXED, "bytea", NULL, "bytea", NULL,
	"rowversion: 8 bytes, not a time"},
	{"rowversion", "rowversion", LENGTH_ANY, 0, 0, SHAPE_FIXED, "bytea", NULL, "bytea", NULL,
	"8 bytes, not a time"},
	{"uniqueidentifier", "uniqueidentifier", LENGTH_ANY, 0, 0, SHAPE_FIXED, "uuid", NULL, "uuid", NULL,
	"GUID byte order converted"},
	{"xml", "xml", LENGTH_ANY, 0, 0, SHAPE_FIXED, "xml", NULL, "xml", NULL,
	"LOB: an unchanged value arrives as NULL in updates (see _cdc_update_mask)"},
	{"sql_variant", "sql_variant", LENGTH_ANY, 0, 0, SHAPE_FIXED, "text", NULL, "text", SQL_VARIANT_AS_TEXT,
	"exact text of the value in its base type; the base type is not kept"},
	{"hierarchyid", "hierarchyid", LENGTH_ANY, 0, 0, SHAPE_FIXED, "text", NULL, "text", "%s.ToString()",
	"path text such as /1/3/"},
	{"geometry", "geometry", LENGTH_ANY, 0, 0, SHAPE_FIXED, "text", NULL, "text", "%s.STAsText()",
	"WKT, without the SRID (PostGIS not installed)", SPATIAL_TEXT},
	{"geography", "geography", LENGTH_ANY, 0, 0, SHAPE_FIXED, "text", NULL, "text", "%s.STAsText()",
	"WKT, without the SRID (PostGIS not installed)", SPATIAL_TEXT},
	{"geometry", "geometry", LENGTH_ANY, 0, 0, SHAPE_FIXED, "geometry", NULL, "geometry (PostGIS)",
		POSTGIS_FROM_WKB,
	"PostGIS installed: exact coordinates (WKB) with the SRID; 2D", SPATIAL_POSTGIS},
	{"geography", "geography", LENGTH_ANY, 0, 0, SHAPE_FIXED, "geography", NULL, "geography (PostGIS)",
		POSTGIS_FROM_WKB,
	"PostGIS installed: exact coordinates (WKB) with the SRID; 2D", SPATIAL_POSTGIS},
};

#define NUM_TYPE_RULES lengthof(type_rules)

/* PostGIS's extension OID, or InvalidOid */
static Oid
postgis_extension(void)
{
	return get_extension_oid("postgis", true);
}

bool
mssql_postgis_installed(void)
{
	return OidIsValid(postgis_extension());
}

void
mssql_columns_set_postgis(MssqlColumn *cols, int ncols, bool postgis)
{
	int			i;

	for (i = 0; i < ncols; i++)
		cols[i].spatial_postgis = postgis;
}

/* pg_extension.extnamespace (PostgreSQL 15 exports no lookup for it) */
static Oid
extension_namespace(Oid extoid)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	Oid			nsp = InvalidOid;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(extoid));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
		nsp = ((Form_pg_extension) GETSTRUCT(tuple))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return nsp;
}

/* "schema.geometry": PostGIS's type, qualified (staging DDL resolves in pg_catalog only) */
static char *
postgis_type_sql(const char *type_name)
{
	Oid			ext = postgis_extension();

	if (!OidIsValid(ext))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("type %s needs the PostGIS extension", type_name),
				 errdetail("The table was added while PostGIS was installed; its staging table has PostGIS columns."),
				 errhint("CREATE EXTENSION postgis in this database.")));
	return psprintf("%s.%s", quote_identifier(get_namespace_name(extension_namespace(ext))),
					type_name);
}

bool
source_column_is_staged(const MssqlColumn *col)
{
	return col->captured && !col->is_computed && !col->excluded;
}

void
mssql_column_init(MssqlColumn *col)
{
	memset(col, 0, sizeof(*col));
	col->max_length = MSSQL_FACET_UNKNOWN;
	col->precision = MSSQL_FACET_UNKNOWN;
	col->scale = MSSQL_FACET_UNKNOWN;
	col->datetime_precision = MSSQL_FACET_UNKNOWN;
	col->nullable = true;
}

/*
 * What a message is about: 'column [x] of SQL Server type T', or for a bare
 * type (map_type) 'SQL Server type T'.
 */
static char *
subject(const MssqlColumn *col, const char *type_text)
{
	if (col->name == NULL)
		return psprintf("SQL Server type %s", type_text);
	return psprintf("column %s of SQL Server type %s", mssql_quote_identifier(col->name), type_text);
}

static bool
type_is(const char *type_name, const char *name)
{
	return strcmp(type_name, name) == 0;
}

/*
 * Facets a caller left out get SQL Server's DDL defaults: decimal(18,0),
 * float(53), time/datetime2/datetimeoffset(7).  A length is never guessed
 * (SQL Server's default n = 1 would silently make a varchar(1) column).
 */
static void
apply_defaults(const char *type_name, MssqlColumn *c)
{
	if (type_is(type_name, "decimal") || type_is(type_name, "numeric"))
	{
		if (c->precision == MSSQL_FACET_UNKNOWN)
			c->precision = 18;
		if (c->scale == MSSQL_FACET_UNKNOWN)
			c->scale = 0;
	}
	else if (type_is(type_name, "float"))
	{
		if (c->precision == MSSQL_FACET_UNKNOWN)
			c->precision = 53;
	}
	else if (type_is(type_name, "time") || type_is(type_name, "datetime2") ||
			 type_is(type_name, "datetimeoffset"))
	{
		if (c->datetime_precision == MSSQL_FACET_UNKNOWN)
			c->datetime_precision = 7;
	}
}

static bool
type_is_known(const char *type_name)
{
	int			i;

	for (i = 0; i < NUM_TYPE_RULES; i++)
		if (type_is(type_rules[i].sqlserver_type, type_name))
			return true;
	return false;
}

static bool
rule_matches(const TypeRule *rule, const MssqlColumn *c)
{
	if (!type_is(rule->sqlserver_type, c->type_name))
		return false;
	if (rule->spatial != SPATIAL_NONE &&
		(rule->spatial == SPATIAL_POSTGIS) != c->spatial_postgis)
		return false;
	if (rule->length_match == LENGTH_MAX && c->max_length != MSSQL_LENGTH_MAX)
		return false;
	if (rule->length_match == LENGTH_BOUNDED && c->max_length == MSSQL_LENGTH_MAX)
		return false;
	if (rule->max_precision != 0 &&
		(c->precision < rule->min_precision || c->precision > rule->max_precision))
		return false;
	return true;
}

/* Facet range checks, so that an impossible type never reaches the DDL. */
static void
check_facets(const TypeRule *rule, const MssqlColumn *c)
{
	const char *type_name = c->type_name;

	if (rule->shape == SHAPE_PRECISION_SCALE &&
		(c->precision < 1 || c->precision > 38 || c->scale < 0 || c->scale > c->precision))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s has an invalid precision or scale",
						subject(c, psprintf("%s(%d,%d)", type_name, c->precision, c->scale))),
				 errdetail("SQL Server allows precision 1 to 38 and scale 0 to the precision.")));
	if (rule->shape == SHAPE_FRACTION &&
		(c->datetime_precision < 0 || c->datetime_precision > 7))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s has an invalid fractional-seconds precision",
						subject(c, psprintf("%s(%d)", type_name, c->datetime_precision))),
				 errdetail("SQL Server allows 0 to 7 digits.")));
	if (rule->length_match == LENGTH_BOUNDED && c->max_length == MSSQL_FACET_UNKNOWN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s needs its length", subject(c, type_name)),
				 errhint("Pass max_length: the n of %s(n), or -1 for %s(max).",
						 type_name, type_name)));
	if (rule->length_match == LENGTH_BOUNDED && c->max_length < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s has an invalid length",
						subject(c, psprintf("%s(%d)", type_name, c->max_length))),
				 errdetail("The length is at least 1, or -1 for (max).")));
}

static const TypeRule *
find_rule(const MssqlColumn *c)
{
	int			i;

	for (i = 0; i < NUM_TYPE_RULES; i++)
		if (rule_matches(&type_rules[i], c))
			return &type_rules[i];

	if (type_is_known(c->type_name))
	{
		/* a known type with facets no rule covers: float(60), char(max) */
		if (type_is(c->type_name, "float"))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s has an invalid precision",
							subject(c, psprintf("float(%d)", c->precision))),
					 errdetail("SQL Server allows float(1) to float(53).")));
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s does not exist",
						subject(c, c->max_length == MSSQL_LENGTH_MAX ? psprintf("%s(max)", c->type_name)
								: psprintf("%s(%d)", c->type_name, c->max_length)))));
	}

	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("%s is not supported by mssql_cdc",
					subject(c, psprintf("\"%s\"", c->type_name))),
			 errhint("Leave the column out of the capture instance (@captured_column_list of sys.sp_cdc_enable_table); "
					 "mssql_cdc.type_mappings() lists the supported types.")));
	return NULL;				/* keep the compiler quiet */
}

/*
 * mssql_type_to_pg with the column written as column_ref in the select
 * expression (NULL: the bare quoted name, or [c] for a nameless column).
 */
static void
type_to_pg(const MssqlColumn *col, const char *column_ref, char **pg_type_sql,
		   char **select_expr)
{
	MssqlColumn c = *col;
	const TypeRule *rule;
	char	   *lowered;

	if (c.type_name == NULL || c.type_name[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 c.name ? errmsg("column %s has no SQL Server type", mssql_quote_identifier(c.name))
				 : errmsg("the SQL Server type name is empty")));

	/* SQL Server type names are case-insensitive; ours are lower case */
	lowered = asc_tolower(c.type_name, strlen(c.type_name));
	c.type_name = lowered;
	apply_defaults(lowered, &c);

	rule = find_rule(&c);
	check_facets(rule, &c);

	switch (rule->shape)
	{
		case SHAPE_FIXED:
			*pg_type_sql = rule->spatial == SPATIAL_POSTGIS ? postgis_type_sql(rule->pg_type)
				: pstrdup(rule->pg_type);
			break;
		case SHAPE_PRECISION_SCALE:
			*pg_type_sql = psprintf("%s(%d,%d)", rule->pg_type, c.precision, c.scale);
			break;
		case SHAPE_LENGTH:
			*pg_type_sql = psprintf("%s(%d)", rule->pg_type, c.max_length);
			break;
		case SHAPE_FRACTION:
			*pg_type_sql = psprintf("%s(%d)%s", rule->pg_type,
									Min(c.datetime_precision, PG_MAX_FRACTION_DIGITS),
									rule->pg_suffix ? rule->pg_suffix : "");
			break;
	}

	if (rule->select_template != NULL && column_ref != NULL)
		*select_expr = psprintf(rule->select_template, column_ref);
	else if (rule->select_template != NULL && col->name != NULL)
		*select_expr = psprintf(rule->select_template, mssql_quote_identifier(col->name));
	else if (rule->select_template != NULL)
		*select_expr = psprintf(rule->select_template, "[c]");
	else
		*select_expr = NULL;
}

void
mssql_type_to_pg(const MssqlColumn *col, char **pg_type_sql, char **select_expr)
{
	type_to_pg(col, NULL, pg_type_sql, select_expr);
}

char *
mssql_type_display(const MssqlColumn *col)
{
	const char *type_name = col->type_name ? col->type_name : "?";
	int			i;

	for (i = 0; i < NUM_TYPE_RULES; i++)
	{
		const TypeRule *rule = &type_rules[i];

		if (!type_is(rule->sqlserver_type, type_name))
			continue;
		if (rule->length_match != LENGTH_ANY)
			return col->max_length == MSSQL_LENGTH_MAX ? psprintf("%s(max)", type_name)
				: psprintf("%s(%d)", type_name, col->max_length);
		if (rule->shape == SHAPE_PRECISION_SCALE)
			return psprintf("%s(%d,%d)", type_name, col->precision, col->scale);
		if (rule->shape == SHAPE_FRACTION)
			return psprintf("%s(%d)", type_name, col->datetime_precision);
		if (type_is(type_name, "float"))
			return psprintf("float(%d)", col->precision);
		break;
	}
	return pstrdup(type_name);
}

char *
mssql_column_select_expr(const MssqlColumn *col)
{
	return mssql_column_select_expr_qualified(col, NULL);
}

char *
mssql_column_select_expr_qualified(const MssqlColumn *col, const char *qualifier)
{
	char	   *pg_type;
	char	   *expr;
	char	   *ref = mssql_quote_identifier(col->name);

	if (qualifier != NULL)
		ref = psprintf("%s.%s", qualifier, ref);
	type_to_pg(col, ref, &pg_type, &expr);
	return expr ? expr : ref;
}

/* ---- SQL interface ------------------------------------------------------ */

static int
facet_arg(FunctionCallInfo fcinfo, int argno)
{
	return PG_ARGISNULL(argno) ? MSSQL_FACET_UNKNOWN : PG_GETARG_INT32(argno);
}

/*
 * mssql_cdc.map_type(sqlserver_type text, max_length int, numeric_precision
 * int, numeric_scale int, datetime_precision int) -> text
 *
 * Facets as INFORMATION_SCHEMA.COLUMNS reports them (max_length -1 = max).
 */
Datum
mssql_cdc_map_type(PG_FUNCTION_ARGS)
{
	MssqlColumn col;
	char	   *pg_type;
	char	   *select_expr;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();

	mssql_column_init(&col);
	col.type_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	col.max_length = facet_arg(fcinfo, 1);
	col.precision = facet_arg(fcinfo, 2);
	col.scale = facet_arg(fcinfo, 3);
	col.datetime_precision = facet_arg(fcinfo, 4);
	col.spatial_postgis = mssql_postgis_installed();

	mssql_type_to_pg(&col, &pg_type, &select_expr);
	PG_RETURN_TEXT_P(cstring_to_text(pg_type));
}

/*
 * mssql_cdc.type_mappings() -> (sqlserver_type, postgres_type,
 * select_expression, notes): the policy table, in order.
 */
Datum
mssql_cdc_type_mappings(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			i;

	compat_init_materialized_srf(fcinfo);

	for (i = 0; i < NUM_TYPE_RULES; i++)
	{
		const TypeRule *rule = &type_rules[i];
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};

		values[0] = CStringGetTextDatum(rule->sqlserver_form);
		values[1] = CStringGetTextDatum(rule->pg_form);
		if (rule->select_template)
			values[2] = CStringGetTextDatum(psprintf(rule->select_template, "[c]"));
		else
			nulls[2] = true;
		if (rule->note)
			values[3] = CStringGetTextDatum(rule->note);
		else
			nulls[3] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
