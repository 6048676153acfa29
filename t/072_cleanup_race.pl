# CDC cleanup while the worker reads a window (issue 12, point 2).  SQL
# Server's change function reads its change table WITH (NOLOCK), and its
# cleanup raises the low watermark first and then deletes in batches while
# readers run: rows can vanish from the middle of a change query without
# error 313.  Here the change query is held after 10 rows, cleanup runs into
# the window, and the query is released.  The window must never commit with
# rows missing: the worker sees the moved low watermark after reading and
# handles it as a retention overrun, under both policies ('error' parks the
# table, 'resnapshot' copies it again).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;
use Time::HiRes qw(time usleep);

my $si = StandIn->start(capture_interval => 0.1);
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.digits (n int NOT NULL PRIMARY KEY)},
	q{INSERT INTO dbo.digits VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)},
	q{CREATE TABLE dbo.race (id int NOT NULL PRIMARY KEY, v int NOT NULL)},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'race', @role_name = NULL},
	q{CREATE TABLE dbo.race2 (id int NOT NULL PRIMARY KEY, v int NOT NULL)},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'race2', @role_name = NULL});

my $node = PostgreSQL::Test::Cluster->new('cleanup_race');
$node->init;
$si->setup_node($node);
$node->start;
$si->create_source($node, 'src');
$si->add_table_when_started($node,
	q{SELECT mssql_cdc.add_table('src', 'dbo.race', snapshot_mode => 'never')});
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('src', 'dbo.race2')});
$node->safe_psql('postgres',
	q{SELECT mssql_cdc.set_table_option('src', 'dbo.race2', 'on_retention_overrun', 'resnapshot')});
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 2 FROM mssql_cdc.status WHERE state = 'streaming'}),
	'both tables stream');

sub status_of
{
	my ($table) = @_;
	return $node->safe_psql('postgres',
		"SELECT state || '|' || coalesce(condition, '') FROM mssql_cdc.status WHERE source_table = 'dbo.$table'");
}

sub staging_ops
{
	my ($table) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(_cdc_op || ':' || n, ',' ORDER BY _cdc_op::text), '')"
		  . " FROM (SELECT _cdc_op, count(*) AS n FROM public.src_dbo_$table GROUP BY _cdc_op) s");
}

# one row of a few before the race, so the staging table has a history
sub baseline
{
	my ($table) = @_;
	$si->tsql_ok("INSERT INTO dbo.$table (id, v) VALUES (100000, 1)");
	ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM public.src_dbo_$table"),
		"$table: the baseline row arrived");
}

# Three source transactions in one window (2500, 10 and 5 rows); the change
# query is held after 10 rows while cleanup moves the low watermark to the
# third transaction's commit LSN (deleting in batches of 1000), then released.
sub race
{
	my ($table) = @_;
	$si->ctl('capture_freeze');
	$si->tsql_ok(
		"INSERT INTO dbo.$table (id, v) SELECT a.n * 1000 + b.n * 100 + c.n * 10 + d.n + 1, 1"
		  . ' FROM dbo.digits a CROSS JOIN dbo.digits b CROSS JOIN dbo.digits c CROSS JOIN dbo.digits d'
		  . ' WHERE a.n * 1000 + b.n * 100 + c.n * 10 + d.n < 2500',
		"INSERT INTO dbo.$table (id, v) SELECT 3000 + n, 2 FROM dbo.digits",
		"INSERT INTO dbo.$table (id, v) SELECT 4000 + n, 3 FROM dbo.digits WHERE n < 5");
	# both ways of reading the change table select __$operation
	$si->ctl('stall', 'after_rows=10', 'hold=true', 'match=__$operation');
	$si->ctl('capture_now');
	# tsql prints binary(10) as 20 hex digits
	my ($third) = $si->tsql_ok(
		'SELECT MAX(start_lsn) FROM cdc.lsn_time_mapping WHERE tran_id <> 0x00') =~ /^\s*([0-9a-fA-F]{20})\s*$/m;
	$third = "0x$third";
	my $deadline = time + 60;
	usleep(20_000) until $si->ctl('faults') =~ /"held": \[\{/ || time > $deadline;
	like($si->ctl('faults'), qr/"rows_sent": 10/, "$table: the change query is held after 10 rows");
	$si->ctl('cleanup', "capture_instance=dbo_$table", "low_water_mark=$third", 'threshold=1000');
	like($si->ctl('release'), qr/"released": 1/, "$table: released after the cleanup");
	$si->ctl('capture_resume');
	return $third;
}

# ---------------------------------------------------------------------------
# policy 'error': the table stops, nothing of the window is kept
# ---------------------------------------------------------------------------
baseline('race');
race('race');
ok( $node->poll_query_until('postgres',
		q{SELECT state = 'error' FROM mssql_cdc.status WHERE source_table = 'dbo.race'}),
	'race: the table stops')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status');
is(status_of('race'), 'error|retention_overrun', 'race: condition retention_overrun');
is(staging_ops('race'), 'insert:1', 'race: the window was not committed (no rows of it, none missing)');
like(
	$node->safe_psql('postgres',
		q{SELECT last_error FROM mssql_cdc.status WHERE source_table = 'dbo.race'}),
	qr/were removed by CDC cleanup while the worker read them/,
	'race: the error says cleanup ran during the read');

# ---------------------------------------------------------------------------
# policy 'resnapshot': the table is copied again, the window is not kept
# ---------------------------------------------------------------------------
baseline('race2');
race('race2');
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 2516 FROM public.src_dbo_race2 WHERE _cdc_op = 'snapshot'}),
	'race2: copied again by a new snapshot')
  or diag $node->safe_psql('postgres',
	'SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors ORDER BY error_id DESC LIMIT 3');
ok( $node->poll_query_until('postgres',
		q{SELECT state = 'streaming' FROM mssql_cdc.status WHERE source_table = 'dbo.race2'}),
	'race2: streams again');
is(staging_ops('race2'), 'insert:1,snapshot:2516',
	'race2: the baseline row, then the new snapshot; no row of the raced window');
is( $node->safe_psql('postgres',
		q{SELECT condition FROM mssql_cdc.errors e JOIN mssql_cdc.tables t USING (table_id)
		   WHERE t.source_table = 'race2' ORDER BY error_id DESC LIMIT 1}),
	'retention_overrun', 'race2: the overrun is in the error log');
# the snapshot equals the source
is( $node->safe_psql('postgres',
		q{SELECT count(*) || '|' || sum(id) || '|' || sum(v) FROM public.src_dbo_race2 WHERE _cdc_op = 'snapshot'}),
	$si->tsql_ok(q{SELECT CONCAT(COUNT(*), '|', SUM(CAST(id AS bigint)), '|', SUM(v)) FROM dbo.race2})
	  =~ /(\d+\|\d+\|\d+)/ ? $1 : 'no answer',
	'race2: the snapshot rows are exactly the source table');

$node->stop;
$si->stop;
done_testing();
