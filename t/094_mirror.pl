# Mirror tables (issue 15, doc/mirror.md), against the SQL Server stand-in:
# the initial copy and then streaming keep the mirror equal to the source
# row for row; a key-shifting UPDATE (recorded as deletes + inserts), a
# unique-value swap and a primary-key swap apply without a transient key
# violation; a window of inserts only, also of a key the mirror has,
# converges; an unchanged LOB column that arrives as NULL in an update
# (stand-in option lob_op4_unchanged_null) keeps its value, also when the
# same window set it before; a mirror-only table never writes a staging
# row (pg_stat_user_tables: no tuple inserted or deleted); a table without a primary key
# cannot get a mirror, nor one streamed without a copy (snapshot_mode 'never', start_at);
# a capture-instance switch adds the new column to the mirror and keeps
# the one no longer captured.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use MirrorCheck;
use Test::More;
use Time::HiRes qw(usleep);

my $si = StandIn->start(capture_interval => 0.1);
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{ALTER DATABASE cdcdb SET ALLOW_SNAPSHOT_ISOLATION ON},
	q{CREATE TABLE dbo.m1 (id int NOT NULL PRIMARY KEY, name nvarchar(50), u int NULL UNIQUE, doc nvarchar(max))},
	q{CREATE TABLE dbo.m2 (id int NOT NULL PRIMARY KEY, v int)},
	q{CREATE TABLE dbo.nopk (id int NOT NULL, v int)},
	join(' ', map { "INSERT INTO dbo.m1 VALUES ($_, N'n$_', $_, N'doc-$_');" } 1 .. 25),
	q{INSERT INTO dbo.m2 VALUES (1, 10), (2, 20), (3, 30)},
	map({ "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
		qw(m1 m2 nopk)));
for (1 .. 100)
{
	last if $si->tsql('SELECT sys.fn_cdc_get_max_lsn()') =~ /0x[0-9A-F]{20}/;
	usleep(100_000);
}

my $node = PostgreSQL::Test::Cluster->new('mirror');
$node->init;
$si->setup_node($node, conf => 'mssql_cdc.snapshot_chunk_rows = 7');
$node->start;
$si->create_source($node, 'src');

my $m1_ms = q{SELECT 'R=' + CAST(id AS varchar(10)) + '|' + COALESCE(name, N'null') + '|' + COALESCE(CAST(u AS varchar(10)), 'null') + '|' + COALESCE(doc, N'null') FROM dbo.m1 ORDER BY id};
my $m1_pg = q{SELECT format('%s|%s|%s|%s', id, coalesce(name, 'null'), coalesce(u::text, 'null'), coalesce(doc, 'null')) FROM public.src_dbo_m1_mirror ORDER BY id};
my $m2_ms = q{SELECT 'R=' + CAST(id AS varchar(10)) + '|' + COALESCE(CAST(v AS varchar(10)), 'null') FROM dbo.m2 ORDER BY id};
my $m2_pg = q{SELECT format('%s|%s', id, coalesce(v::text, 'null')) FROM public.src_dbo_m2_mirror ORDER BY id};

# ---------------------------------------------------------------------------
# No primary key: refused, with why and what to do; nothing is created
# ---------------------------------------------------------------------------
# (the mirror is the reason, not the copy, whose hint, snapshot_mode
# 'never', would not help: a mirror needs the copy)
my ($ret, $out, $err) = $node->psql('postgres', q{\set VERBOSITY verbose
SELECT mssql_cdc.add_table('src', 'dbo.nopk', mirror => true)});
isnt($ret, 0, 'a mirror of a table without a primary key is refused');
like($err, qr/55000: table dbo\.nopk of server "src" has no primary key, so it cannot have a mirror table/,
	'the error says why (SQLSTATE 55000)');
like($err, qr/HINT:  Add a primary key to the source table.*mirror => false/s, 'and what to do');
is($node->safe_psql('postgres',
		q{SELECT (SELECT count(*) FROM mssql_cdc.tables WHERE source_table = 'nopk')}
		  . q{ + (SELECT count(*) FROM pg_class WHERE relname LIKE 'src_dbo_nopk%')}),
	'0', 'nothing was created for it');
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT mssql_cdc.add_table('src', 'dbo.m2', changelog => false)});
like($err, qr/changelog => false needs a mirror table/, 'changelog => false alone is refused');

# A mirror starts from a copy: a table streamed without one (snapshot_mode
# 'never', or start_at) would have a mirror missing every row not changed
# since, so it is refused before SQL Server is asked, as alter_table
# refuses it (doc/sql-api.md).
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT mssql_cdc.add_table('src', 'dbo.m2', snapshot_mode => 'never', mirror => true)});
like($err, qr/ERROR:  a mirror table needs snapshot_mode 'initial'/,
	"a mirror of a table that is never copied is refused");
my ($max_lsn) = $si->tsql(q{SELECT 'lsn=' + CONVERT(varchar(30), sys.fn_cdc_get_max_lsn(), 1)})
  =~ /lsn=0x([0-9A-F]{20})/i;
$max_lsn = '0x' . uc($max_lsn);
($ret, $out, $err) = $node->psql('postgres',
	"SELECT mssql_cdc.add_table('src', 'dbo.m2', start_at => '$max_lsn', mirror => true)");
like($err, qr/ERROR:  a mirror table cannot be combined with start_at/,
	'a mirror of a table streamed from start_at without a copy is refused');
is($node->safe_psql('postgres',
		q{SELECT (SELECT count(*) FROM mssql_cdc.tables WHERE source_table = 'm2')}
		  . q{ + (SELECT count(*) FROM pg_class WHERE relname LIKE 'src_dbo_m2%')}),
	'0', 'nothing was created for them');

# ---------------------------------------------------------------------------
# Initial copy in chunks, then streaming
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', q{SELECT mssql_cdc.add_table('src', 'dbo.m1', mirror => true)});
$node->safe_psql('postgres',
	q{SELECT mssql_cdc.add_table('src', 'dbo.m2', mirror => true, changelog => false)});
is($node->safe_psql('postgres',
		q{SELECT string_agg(format('%s %s.%s %s', source_table, mirror_schema, mirror_table, changelog), ',' ORDER BY source_table) FROM mssql_cdc.tables}),
	'm1 public.src_dbo_m1_mirror t,m2 public.src_dbo_m2_mirror f',
	'the catalog names the mirrors (default: the staging name + _mirror)');
is($node->safe_psql('postgres', q{
SELECT string_agg(a.attname, ',' ORDER BY k.i)
  FROM pg_index x, unnest(x.indkey) WITH ORDINALITY k(attnum, i), pg_attribute a
 WHERE x.indrelid = 'public.src_dbo_m1_mirror'::regclass AND x.indisprimary
   AND a.attrelid = x.indrelid AND a.attnum = k.attnum}),
	'id', 'the mirror has the source primary key');
is($node->safe_psql('postgres',
		q{SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum) FROM pg_attribute WHERE attrelid = 'public.src_dbo_m1_mirror'::regclass AND attnum > 0}),
	'id integer, name character varying(50), u integer, doc text',
	'the mirror has the source columns with the mapped types');
is($node->safe_psql('postgres',
		q{SELECT relreplident FROM pg_class WHERE oid = 'public.src_dbo_m1_mirror'::regclass}),
	'd', 'replica identity: the primary key');

ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 2 FROM mssql_cdc.table_state WHERE phase = 'streaming'}),
	'both tables copied and streaming')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors');
cmp_ok($node->safe_psql('postgres', q{SELECT snapshot_rows FROM mssql_cdc.table_state ts JOIN mssql_cdc.tables t USING (table_id) WHERE source_table = 'm1'}),
	'==', 25, 'the copy took all rows');
my ($eq, $src, $mir) = wait_mirror_equal($node, $si, $m1_ms, $m1_pg, 60);
ok($eq, 'after the initial copy the mirror equals the source') or diag "source:\n$src\nmirror:\n$mir";

# ordinary changes, one transaction over both tables
$si->tsql_ok(
	q{INSERT INTO dbo.m1 VALUES (30, N'thirty', 30, N'doc-30')},
	q{UPDATE dbo.m1 SET name = N'renamed' WHERE id = 2},
	q{DELETE FROM dbo.m1 WHERE id = 3},
	q{BEGIN TRANSACTION; INSERT INTO dbo.m2 VALUES (4, 40); UPDATE dbo.m2 SET v = 21 WHERE id = 2; DELETE FROM dbo.m2 WHERE id = 1; UPDATE dbo.m1 SET doc = N'new doc' WHERE id = 4; COMMIT});
($eq, $src, $mir) = wait_mirror_equal($node, $si, $m1_ms, $m1_pg, 60);
ok($eq, 'inserts, updates and deletes reach the mirror') or diag "source:\n$src\nmirror:\n$mir";

# a window of inserts only whose keys are new is applied with a plain
# INSERT; one with a key the mirror has already (as the snapshot/stream
# overlap leaves it, made here by hand) fails that INSERT and is applied
# by the general statement: the insert overwrites the row, no window fails
$node->safe_psql('postgres',
	q{INSERT INTO public.src_dbo_m1_mirror VALUES (41, 'stale', NULL, 'stale doc');
	  INSERT INTO public.src_dbo_m2_mirror VALUES (6, 0)});
$si->tsql_ok(
	q{BEGIN TRANSACTION; INSERT INTO dbo.m1 VALUES (40, N'forty', 40, N'doc-40'), (41, N'forty-one', 41, N'doc-41'); INSERT INTO dbo.m2 VALUES (5, 50), (6, 60); COMMIT},
	q{INSERT INTO dbo.m1 VALUES (42, N'forty-two', 42, N'doc-42')});
($eq, $src, $mir) = wait_mirror_equal($node, $si, $m1_ms, $m1_pg, 60);
ok($eq, 'windows of inserts only, of new keys and of a key the mirror has: the mirror equals the source')
  or diag "source:\n$src\nmirror:\n$mir";
($eq, $src, $mir) = wait_mirror_equal($node, $si, $m2_ms, $m2_pg, 60);
ok($eq, 'and so does the mirror-only one') or diag "source:\n$src\nmirror:\n$mir";

# ---------------------------------------------------------------------------
# Key shifts and swaps: recorded as deletes + inserts, applied without a
# transient duplicate key
# ---------------------------------------------------------------------------
$si->tsql_ok(q{UPDATE dbo.m1 SET id = id + 1 WHERE id < 30});
$si->tsql_ok(q{UPDATE dbo.m1 SET u = 9 - u WHERE id IN (5, 6)});
$si->tsql_ok(q{UPDATE dbo.m1 SET id = CASE id WHEN 7 THEN 8 WHEN 8 THEN 7 END WHERE id IN (7, 8)});
($eq, $src, $mir) = wait_mirror_equal($node, $si, $m1_ms, $m1_pg, 60);
ok($eq, 'a key-shifting update, a unique-value swap and a key swap: the mirror equals the source')
  or diag "source:\n$src\nmirror:\n$mir\n" . $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.errors');
is($node->safe_psql('postgres', q{SELECT count(*) FROM mssql_cdc.errors}), '0',
	'no window failed on the way');

# ---------------------------------------------------------------------------
# LOB unchanged in an update: NULL with mask bit 0 in update_after
# ---------------------------------------------------------------------------
$si->ctl('set_option', 'name=lob_op4_unchanged_null', 'value=true');
$si->tsql_ok(q{UPDATE dbo.m1 SET name = N'lob kept' WHERE id = 10});
# in one transaction: set the LOB, then an update that leaves it alone
$si->tsql_ok(q{BEGIN TRANSACTION; UPDATE dbo.m1 SET doc = N'set in tx' WHERE id = 11; UPDATE dbo.m1 SET name = N'later' WHERE id = 11; COMMIT});
# a real NULL assigned is a NULL
$si->tsql_ok(q{UPDATE dbo.m1 SET doc = NULL WHERE id = 12});
($eq, $src, $mir) = wait_mirror_equal($node, $si, $m1_ms, $m1_pg, 60);
ok($eq, 'an unchanged LOB never overwrites the stored value') or diag "source:\n$src\nmirror:\n$mir";
is($node->safe_psql('postgres',
		q{SELECT count(*) FROM public.src_dbo_m1 WHERE _cdc_op = 'update_after' AND doc IS NULL AND id IN (10, 11)}),
	'2', 'the changelog did get those LOB values as NULL');
$si->ctl('set_option', 'name=lob_op4_unchanged_null', 'value=false');

# ---------------------------------------------------------------------------
# Mirror only: no changelog row is ever committed
# ---------------------------------------------------------------------------
($eq, $src, $mir) = wait_mirror_equal($node, $si, $m2_ms, $m2_pg, 60);
ok($eq, 'the mirror-only table equals the source') or diag "source:\n$src\nmirror:\n$mir";
is($node->safe_psql('postgres', q{SELECT count(*) FROM public.src_dbo_m2}), '0',
	'its staging table holds no rows');

# and never held one: not even rows inserted and deleted in the same
# transaction (dead tuples, WAL, and the insert + delete for a subscriber
# of a publication of the staging table).  The worker's table statistics
# reach pg_stat_user_tables when it exits: restart the cluster.
$node->restart;
is($node->safe_psql('postgres',
		q{SELECT n_tup_ins || ' ' || n_tup_del || ' ' || n_tup_upd FROM pg_stat_user_tables WHERE relid = 'public.src_dbo_m2'::regclass}),
	'0 0 0', 'the mirror-only table wrote nothing to its staging table, in the copy or while streaming');

# ---------------------------------------------------------------------------
# A capture-instance switch of the mirror-only table: the new instance's
# column is added to the mirror in the switching window (NULL in the rows
# it has), a column the new instance no longer captures stays and keeps
# its last value, and the window's temporary table is made again with the
# staging table's new columns
# ---------------------------------------------------------------------------
$si->tsql_ok(q{ALTER TABLE dbo.m2 ADD w int NULL},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'm2', @role_name = NULL, @capture_instance = N'dbo_m2_v2', @captured_column_list = N'id, w'},
	q{UPDATE dbo.m2 SET w = 7, v = 99 WHERE id = 2},
	q{INSERT INTO dbo.m2 (id, v, w) VALUES (7, 70, 77)});
ok($node->poll_query_until('postgres',
		q{SELECT capture_instance = 'dbo_m2_v2' FROM mssql_cdc.tables WHERE source_table = 'm2'}),
	'the mirror-only table switched to its second capture instance')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors');
is($node->safe_psql('postgres', q{
SELECT array_to_string(columns_added, ',') || ' ' || array_to_string(columns_not_captured, ',')
  FROM mssql_cdc.capture_instance_switches JOIN mssql_cdc.tables USING (table_id) WHERE source_table = 'm2'}),
	'w v', 'the switch added w and no longer captures v');
is($node->safe_psql('postgres',
		q{SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum) FROM pg_attribute WHERE attrelid = 'public.src_dbo_m2_mirror'::regclass AND attnum > 0}),
	'id integer, v integer, w integer', 'the mirror got the new column, and kept the one no longer captured');
ok($node->poll_query_until('postgres',
		q{SELECT string_agg(format('%s|%s|%s', id, coalesce(v::text, 'null'), coalesce(w::text, 'null')), ',' ORDER BY id) FROM public.src_dbo_m2_mirror},
		'2|21|7,3|30|null,4|40|null,5|50|null,6|60|null,7|null|77'),
	'after the switch: w from the new instance (NULL in rows not changed since), v keeps its last value')
  or diag $node->safe_psql('postgres', 'SELECT * FROM public.src_dbo_m2_mirror ORDER BY id; SELECT * FROM mssql_cdc.errors');
is($node->safe_psql('postgres', q{SELECT count(*) FROM public.src_dbo_m2}), '0',
	'the mirror-only table still stages nothing');
cmp_ok($node->safe_psql('postgres',
		q{SELECT n_tup_ins FROM pg_stat_user_tables WHERE relid = 'public.src_dbo_m2_mirror'::regclass}),
	'>=', 4, 'while its mirror got the rows (the statistics do count the worker)');
cmp_ok($node->safe_psql('postgres',
		q{SELECT n_tup_ins FROM pg_stat_user_tables WHERE relid = 'public.src_dbo_m1'::regclass}),
	'>=', 25, 'and the table with a changelog wrote its staging table');

$node->stop;
done_testing();
