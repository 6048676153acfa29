# Discovery of a SQL Server source table and its staging DDL, against the
# SQL Server stand-in, through mssql_cdc.describe_source() and
# mssql_cdc.staging_ddl(): many types, a composite primary key, a computed
# column, odd identifiers (space, ], ', non-ASCII, 128 characters), two
# capture instances, the DDL run for real, and the errors users see (missing
# table, database without CDC, table without CDC, unknown capture instance,
# a column that collides with the metadata columns, missing privileges).
# Also checks doc/type-mapping.md against mssql_cdc.type_mappings().
use strict;
use warnings;

use Cwd qw(abs_path);
use File::Basename qw(dirname);
use FindBin;
use lib "$FindBin::RealBin/lib";
use IPC::Run;
use StandIn;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $root = abs_path(dirname(__FILE__) . '/..');
# ---------------------------------------------------------------------------
# The stand-in, on free loopback ports (t/lib/StandIn.pm stops it at exit)
# ---------------------------------------------------------------------------
my $si = StandIn->start;
my ($tds_port, $control_port) = ($si->port, $si->control_port);

sub standin_ctl { return $si->ctl(@_); }

# Run T-SQL batches with FreeTDS's tsql; dies if SQL Server reports an error.
sub tsql { return $si->tsql_ok(@_); }

# ---------------------------------------------------------------------------
# The Postgres node (UTF-8, so that non-ASCII names are characters)
# ---------------------------------------------------------------------------
my $node = PostgreSQL::Test::Cluster->new('source_schema');
$node->init(extra => [ '--encoding=UTF8', '--locale=C' ]);
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'mssql_cdc'
mssql_cdc.database = 'postgres'
log_statement = none
});
$node->start;
$node->safe_psql(
	'postgres', qq{
CREATE EXTENSION mssql_cdc;
CREATE SERVER src FOREIGN DATA WRAPPER mssql_cdc
  OPTIONS (host '127.0.0.1', port '$tds_port', database 'cdcdb', query_timeout '30', encryption 'off');
CREATE USER MAPPING FOR CURRENT_USER SERVER src
  OPTIONS (username 'sa', password 'Passw0rd!');
});

# psql that returns (stdout, stderr); stdout rows as a|b|c
sub query
{
	my ($sql) = @_;
	my ($stdout, $stderr) = ('', '');
	$node->psql('postgres', $sql, stdout => \$stdout, stderr => \$stderr);
	return ($stdout, $stderr);
}

my $describe = q{SELECT column_name, staging_column, sqlserver_type, postgres_type, nullable,
  key_ordinal, captured, select_expression FROM mssql_cdc.describe_source('src', %s)};

# ---------------------------------------------------------------------------
# Before CDC: missing table, database without CDC
# ---------------------------------------------------------------------------
tsql(
	q{CREATE TABLE dbo.everything (
	  id int NOT NULL, region nchar(3) NOT NULL,
	  flag bit, tiny tinyint, small smallint, big bigint,
	  amount decimal(12,2), ratio numeric(38,38), price money, fee smallmoney,
	  r real, f24 float(24), f53 float, d date, t0 time(0), t7 time(7),
	  dt datetime, sdt smalldatetime, dt2 datetime2(3), dt27 datetime2, dto datetimeoffset(7),
	  code char(5), ncode nchar(2), name varchar(40), nname nvarchar(100),
	  body varchar(max), nbody nvarchar(max), legacy text, nlegacy ntext,
	  bin binary(4), vbin varbinary(16), blob varbinary(max), img image,
	  guid uniqueidentifier, doc xml, variant sql_variant, version rowversion,
	  doubled AS (id * 2),
	  CONSTRAINT pk_everything PRIMARY KEY (region, id))},
	q{CREATE TABLE dbo.plain (id int NOT NULL PRIMARY KEY, v nvarchar(10))});

my ($out, $err) = query(sprintf($describe, q{'dbo.nosuch'}));
like($err, qr/ERROR:\s+table dbo\.nosuch does not exist on server "src"/,
	'missing table: clear error naming table and server');

($out, $err) = query(sprintf($describe, q{'dbo.everything'}));
like($err,
	qr/ERROR:\s+change data capture is not enabled for database "cdcdb" of server "src".*HINT:\s+A sysadmin runs EXEC sys\.sp_cdc_enable_db/s,
	'database without CDC: error with the fix in the hint');

# ---------------------------------------------------------------------------
# CDC on: the types, the composite key, the computed column
# ---------------------------------------------------------------------------
tsql(
	q{EXEC sys.sp_cdc_enable_db},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'everything', @role_name = NULL});

($out, $err) = query(sprintf($describe, q{'dbo.everything'}));
is($err, '', 'describe_source of dbo.everything succeeds');
is( $out, join("\n",
		'id|id|int|integer|f|2|t|[id]',
		'region|region|nchar(3)|character(3)|f|1|t|[region]',
		'flag|flag|bit|boolean|t||t|[flag]',
		'tiny|tiny|tinyint|smallint|t||t|[tiny]',
		'small|small|smallint|smallint|t||t|[small]',
		'big|big|bigint|bigint|t||t|[big]',
		'amount|amount|decimal(12,2)|numeric(12,2)|t||t|[amount]',
		'ratio|ratio|numeric(38,38)|numeric(38,38)|t||t|[ratio]',
		'price|price|money|numeric(19,4)|t||t|[price]',
		'fee|fee|smallmoney|numeric(10,4)|t||t|[fee]',
		'r|r|real|real|t||t|[r]',
		'f24|f24|real|real|t||t|[f24]',
		'f53|f53|float(53)|double precision|t||t|[f53]',
		'd|d|date|date|t||t|[d]',
		't0|t0|time(0)|time(0) without time zone|t||t|[t0]',
		't7|t7|time(7)|time(6) without time zone|t||t|[t7]',
		'dt|dt|datetime|timestamp(3) without time zone|t||t|[dt]',
		'sdt|sdt|smalldatetime|timestamp(0) without time zone|t||t|[sdt]',
		'dt2|dt2|datetime2(3)|timestamp(3) without time zone|t||t|[dt2]',
		'dt27|dt27|datetime2(7)|timestamp(6) without time zone|t||t|[dt27]',
		'dto|dto|datetimeoffset(7)|timestamp(6) with time zone|t||t|[dto]',
		'code|code|char(5)|character(5)|t||t|[code]',
		'ncode|ncode|nchar(2)|character(2)|t||t|[ncode]',
		'name|name|varchar(40)|character varying(40)|t||t|[name]',
		'nname|nname|nvarchar(100)|character varying(100)|t||t|[nname]',
		'body|body|varchar(max)|text|t||t|[body]',
		'nbody|nbody|nvarchar(max)|text|t||t|[nbody]',
		'legacy|legacy|text|text|t||t|[legacy]',
		'nlegacy|nlegacy|ntext|text|t||t|[nlegacy]',
		'bin|bin|binary(4)|bytea|t||t|[bin]',
		'vbin|vbin|varbinary(16)|bytea|t||t|[vbin]',
		'blob|blob|varbinary(max)|bytea|t||t|[blob]',
		'img|img|image|bytea|t||t|[img]',
		'guid|guid|uniqueidentifier|uuid|t||t|[guid]',
		'doc|doc|xml|xml|t||t|[doc]',
		q{variant|variant|sql_variant|text|t||t|CASE CAST(SQL_VARIANT_PROPERTY([variant], 'BaseType') AS sysname) WHEN N'float' THEN CONVERT(nvarchar(4000), CAST([variant] AS float), 3) WHEN N'real' THEN CONVERT(nvarchar(4000), CAST([variant] AS real), 3) WHEN N'money' THEN CONVERT(nvarchar(4000), CAST([variant] AS money), 2) WHEN N'smallmoney' THEN CONVERT(nvarchar(4000), CAST([variant] AS smallmoney), 2) WHEN N'datetime' THEN CONVERT(nvarchar(4000), CAST([variant] AS datetime), 121) WHEN N'smalldatetime' THEN CONVERT(nvarchar(4000), CAST([variant] AS smalldatetime), 120) WHEN N'datetime2' THEN CONVERT(nvarchar(4000), CAST([variant] AS datetime2(7)), 121) WHEN N'datetimeoffset' THEN CONVERT(nvarchar(4000), CAST([variant] AS datetimeoffset(7)), 121) WHEN N'time' THEN CONVERT(nvarchar(4000), CAST([variant] AS time(7)), 121) WHEN N'date' THEN CONVERT(nvarchar(4000), CAST([variant] AS date), 121) WHEN N'binary' THEN CONVERT(nvarchar(max), CAST([variant] AS varbinary(8000)), 1) WHEN N'varbinary' THEN CONVERT(nvarchar(max), CAST([variant] AS varbinary(8000)), 1) WHEN N'char' THEN CAST(CAST([variant] AS varchar(8000)) AS nvarchar(max)) WHEN N'varchar' THEN CAST(CAST([variant] AS varchar(8000)) AS nvarchar(max)) ELSE CAST([variant] AS nvarchar(4000)) END},
		'version|version|timestamp|bytea|f||t|[version]',
		'doubled||int||t||t|'),
	'describe_source: every type mapped, key ordinals, computed column not staged');

my $ddl = $node->safe_psql('postgres',
	q{SELECT mssql_cdc.staging_ddl('src', 'dbo.everything')});
like($ddl, qr/^CREATE TABLE public\.src_dbo_everything \(\n    id integer NOT NULL,\n    region character\(3\) NOT NULL,\n    flag boolean,\n/,
	'staging_ddl: default name in the creation schema, key columns NOT NULL first');
like($ddl, qr/\n    version bytea,\n    _cdc_lsn mssql_cdc\.lsn NOT NULL,\n    _cdc_seqval mssql_cdc\.lsn NOT NULL,\n    _cdc_op mssql_cdc\.operation NOT NULL,\n    _cdc_commit_time timestamp with time zone,\n    _cdc_update_mask bytea,\n    _cdc_command_id integer NOT NULL,\n    PRIMARY KEY \(_cdc_lsn, _cdc_command_id, _cdc_seqval, _cdc_op\)\n\);\n/,
	'staging_ddl: metadata columns and the primary key after the source columns');
unlike($ddl, qr/doubled/, 'staging_ddl: the computed column is left out');
like($ddl, qr/COMMENT ON TABLE public\.src_dbo_everything IS 'mssql_cdc changelog of SQL Server table dbo\.everything of server "src"';/,
	'staging_ddl: the comment names the source');

# The DDL runs, and the table has exactly the types describe_source showed
$node->safe_psql('postgres', $ddl);
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM mssql_cdc.describe_source('src', 'dbo.everything') d
  JOIN pg_attribute a ON a.attrelid = 'public.src_dbo_everything'::regclass
   AND a.attname = d.staging_column
 WHERE format_type(a.atttypid, a.atttypmod) = d.postgres_type}),
	'37', 'the created staging table has every staged column with its mapped type');
is( $node->safe_psql(
		'postgres', q{
SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute
 WHERE attrelid = 'public.src_dbo_everything'::regclass AND attnum > 0 AND attname LIKE '\_cdc\_%'}),
	'_cdc_lsn,_cdc_seqval,_cdc_op,_cdc_commit_time,_cdc_update_mask,_cdc_command_id',
	'metadata columns in order');
is( $node->safe_psql(
		'postgres', q{
SELECT pg_get_constraintdef(oid) FROM pg_constraint
 WHERE conrelid = 'public.src_dbo_everything'::regclass AND contype = 'p'}),
	'PRIMARY KEY (_cdc_lsn, _cdc_command_id, _cdc_seqval, _cdc_op)',
	'primary key in commit order and, inside a transaction, execution order');

# A named staging table, schema-qualified
$node->safe_psql('postgres', 'CREATE SCHEMA "Staging Area"');
$ddl = $node->safe_psql('postgres',
	q{SELECT mssql_cdc.staging_ddl('src', 'dbo.everything', '"Staging Area".orders')});
like($ddl, qr/^CREATE TABLE "Staging Area"\.orders \(/, 'staging_ddl: explicit schema.table, quoted');

# ---------------------------------------------------------------------------
# Odd identifiers: space, ], ', non-ASCII, 128 characters
# ---------------------------------------------------------------------------
my $long_col = 'c' . ('0123456789' x 12) . 'abcdefg';    # 128 characters
my $long_col2 = 'c' . ('0123456789' x 12) . 'abcdefh';   # same 127-character prefix
my $long_table = 't' x 128;
tsql(
	q{CREATE SCHEMA [odd ]]schema]},
	qq{CREATE TABLE [odd ]]schema].[it's Ünïcødé tâble] ([col ]] x] int NOT NULL PRIMARY KEY,
	  [Größe 'q"] nvarchar(20), [$long_col] int, [$long_col2] int)},
	qq{CREATE TABLE dbo.[$long_table] (id int NOT NULL PRIMARY KEY)},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'odd ]schema', @source_name = N'it''s Ünïcødé tâble', @role_name = NULL},
	qq{EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$long_table', \@role_name = NULL,
	  \@capture_instance = N'long_table'});

($out, $err) = query(sprintf($describe, q{'[odd ]]schema].[it''s Ünïcødé tâble]'}));
is($err, '', 'describe_source with odd identifiers succeeds');
my @rows = split /\n/, $out;
is($rows[0], 'col ] x|col ] x|int|integer|f|1|t|[col ]] x]', 'column with ] and a space');
is($rows[1], q{Größe 'q"|Größe 'q"|nvarchar(20)|character varying(20)|t||t|[Größe 'q"]},
	'non-ASCII column name with quotes');
my ($name3, $staging3) = split /\|/, $rows[2];
my ($name4, $staging4) = split /\|/, $rows[3];
is($name3, $long_col, '128-character source column name kept');
is(length($staging3), 63, 'its staging column is cut to 63 bytes');
like($staging3, qr/^\Q@{[substr($long_col, 0, 54)]}\E_[0-9a-f]{8}$/, 'with a hash suffix');
isnt($staging3, $staging4, 'long names that share a prefix stay distinct');

$ddl = $node->safe_psql('postgres',
	q{SELECT mssql_cdc.staging_ddl('src', '[odd ]]schema].[it''s Ünïcødé tâble]')});
like($ddl, qr/^CREATE TABLE public\.src_odd__schema_it_s__n_c_d__t_ble \(\n    "col \] x" integer NOT NULL,\n    "Größe 'q""" character varying\(20\),\n/,
	'staging_ddl: odd names quoted for PostgreSQL, default table name sanitized');
like($ddl, qr/IS 'mssql_cdc changelog of SQL Server table \[odd \]\]schema\]\.\[it''s Ünïcødé tâble\] of server "src"'/,
	'staging_ddl: comment names the source exactly');
$node->safe_psql('postgres', $ddl);
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM pg_attribute
 WHERE attrelid = 'public.src_odd__schema_it_s__n_c_d__t_ble'::regclass AND attnum > 0}),
	'10', 'odd-identifier staging table created with 4 + 6 columns');

$ddl = $node->safe_psql('postgres', qq{SELECT mssql_cdc.staging_ddl('src', 'dbo.$long_table')});
my ($long_staging) = $ddl =~ /^CREATE TABLE public\.(\S+) \(/;
is(length($long_staging), 63, 'long default staging name cut to 63 bytes');
like($long_staging, qr/^src_dbo_t+_[0-9a-f]{8}$/, 'with a hash suffix');
is( $node->safe_psql('postgres', qq{SELECT mssql_cdc.staging_ddl('src', 'dbo.$long_table')}),
	$ddl, 'the default name is deterministic');

# ---------------------------------------------------------------------------
# Errors: table without CDC, unknown capture instance, metadata collision
# ---------------------------------------------------------------------------
($out, $err) = query(sprintf($describe, q{'dbo.plain'}));
like($err,
	qr/ERROR:\s+table dbo\.plain of server "src" is not enabled for change data capture.*HINT:\s+A db_owner runs EXEC sys\.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'plain'/s,
	'table without CDC: error with the fix in the hint');

($out, $err) = query(q{SELECT * FROM mssql_cdc.describe_source('src', 'dbo.everything', 'nope')});
like($err,
	qr/ERROR:\s+capture instance "nope" of table dbo\.everything does not exist on server "src".*HINT:\s+Capture instances of this table the login may read: dbo_everything\./s,
	'unknown capture instance: the hint lists the existing ones');

is( $node->safe_psql(
		'postgres', q{SELECT count(*) FROM mssql_cdc.describe_source('src', 'dbo.everything', 'DBO_Everything')}),
	'38', 'a requested capture instance is found in another case, as SQL Server would');

tsql(
	q{CREATE TABLE dbo.collide (id int NOT NULL PRIMARY KEY, _cdc_op int)},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'collide', @role_name = NULL});
($out, $err) = query(q{SELECT mssql_cdc.staging_ddl('src', 'dbo.collide')});
like($err,
	qr/ERROR:\s+source column "_cdc_op" collides with the staging table's metadata columns.*HINT:\s+Rename the column/s,
	'a source column named like a metadata column is refused');

# A login that may read the table but is not in the capture instance's
# gating role sees no capture instance: say so, rather than "not enabled".
tsql(
	q{CREATE LOGIN reader WITH PASSWORD = 'R3ader!pass'},
	q{CREATE USER reader FOR LOGIN reader},
	q{CREATE TABLE dbo.gated (id int NOT NULL PRIMARY KEY, v int)},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'gated', @role_name = N'cdc_gate'},
	q{GRANT SELECT ON dbo.gated TO reader});
$node->safe_psql(
	'postgres', qq{
CREATE SERVER src_reader FOREIGN DATA WRAPPER mssql_cdc
  OPTIONS (host '127.0.0.1', port '$tds_port', database 'cdcdb', query_timeout '30', encryption 'off');
CREATE USER MAPPING FOR CURRENT_USER SERVER src_reader
  OPTIONS (username 'reader', password 'R3ader!pass');
});
($out, $err) = query(q{SELECT * FROM mssql_cdc.describe_source('src_reader', 'dbo.gated')});
like($err,
	qr/ERROR:\s+table dbo\.gated of server "src_reader" is enabled for change data capture, but the login sees no capture instance of it.*HINT:\s+Grant the login SELECT on the table and membership in the capture instance's gating role/s,
	'capture instance hidden from the login: a permission error, not "not enabled"');
is( $node->safe_psql('postgres', q{SELECT count(*) FROM mssql_cdc.describe_source('src', 'dbo.gated')}),
	'2', 'the same table as sa: described');

# ---------------------------------------------------------------------------
# Two capture instances: explicit choice, and the default (newest started)
# ---------------------------------------------------------------------------
# The first instance gets its start_lsn; then, with the capture job frozen,
# a second one is added that has none yet.
standin_ctl('capture_now');
standin_ctl('capture_freeze');
tsql(
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'everything', @role_name = NULL,
	  @capture_instance = N'everything_v2', @captured_column_list = N'id, region, name'});

is( $node->safe_psql(
		'postgres', q{
SELECT string_agg(column_name, ',') FROM mssql_cdc.describe_source('src', 'dbo.everything', 'everything_v2')
 WHERE captured}),
	'id,region,name', 'requested capture instance: only its columns are captured');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM mssql_cdc.describe_source('src', 'dbo.everything', 'everything_v2')
 WHERE NOT captured AND postgres_type IS NULL}),
	'35', 'columns outside the capture instance are not staged');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM mssql_cdc.describe_source('src', 'dbo.everything') WHERE captured}),
	'38', 'without a request, an instance without start_lsn is not chosen over one with it');

standin_ctl('capture_resume');
standin_ctl('capture_now');
# Once the capture job has given the new instance its start_lsn, it is the default.
my $picked;
foreach my $try (1 .. 60)
{
	$picked = $node->safe_psql('postgres',
		q{SELECT count(*) FROM mssql_cdc.describe_source('src', 'dbo.everything') WHERE captured});
	last if $picked eq '3';
	sleep 1;
}
is($picked, '3', 'without a request, the newest capture instance with a start_lsn is used');

# ---------------------------------------------------------------------------
# Privileges: EXECUTE, USAGE on the server, a user mapping
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE ROLE alice LOGIN');
($out, $err) = query(q{SET ROLE alice; SELECT * FROM mssql_cdc.describe_source('src', 'dbo.everything')});
like($err, qr/permission denied for function describe_source/, 'no EXECUTE: refused');
$node->safe_psql('postgres',
	q{GRANT EXECUTE ON FUNCTION mssql_cdc.describe_source(name, text, text) TO alice});
($out, $err) = query(q{SET ROLE alice; SELECT * FROM mssql_cdc.describe_source('src', 'dbo.everything')});
like($err, qr/permission denied for foreign server src/, 'no USAGE on the server: refused');
$node->safe_psql('postgres', q{GRANT USAGE ON FOREIGN SERVER src TO alice});
($out, $err) = query(q{SET ROLE alice; SELECT * FROM mssql_cdc.describe_source('src', 'dbo.everything')});
like($err, qr/role "alice" has no user mapping for server "src"/, 'no user mapping: refused');
$node->safe_psql('postgres',
	q{CREATE USER MAPPING FOR alice SERVER src OPTIONS (username 'sa', password 'Passw0rd!')});
($out, $err) = query(q{SET ROLE alice; SELECT count(*) FROM mssql_cdc.describe_source('src', 'dbo.everything')});
is($out, '38', 'with EXECUTE, USAGE and a user mapping: allowed');

# ---------------------------------------------------------------------------
# doc/type-mapping.md shows exactly mssql_cdc.type_mappings()
# ---------------------------------------------------------------------------
my ($doc_out, $doc_err) = ('', '');
my $doc_ok = IPC::Run::run(
	[ "$root/scripts/check-type-doc", "$root/doc/type-mapping.md" ],
	'>', \$doc_out, '2>', \$doc_err,
	init => sub {
		$ENV{PGHOST} = $node->host;
		$ENV{PGPORT} = $node->port;
		$ENV{PGDATABASE} = 'postgres';
	});
ok($doc_ok, 'doc/type-mapping.md matches mssql_cdc.type_mappings()') or diag "$doc_out$doc_err";

$node->stop;
done_testing();
