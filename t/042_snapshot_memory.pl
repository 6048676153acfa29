# A 1M-row initial snapshot: the worker's memory stays bounded (peak
# private RSS sampled while it runs, target under 100 MB), progress is
# visible in mssql_cdc.status while it runs (rows, estimate, percent,
# rate), and a table that already streams keeps a small lag while the big
# table is added and copied (its windows run between the chunks).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;
use Time::HiRes qw(time usleep);

my $rows = $ENV{MSSQL_CDC_SNAPSHOT_ROWS} // 1_000_000;
my $poll_ms = 200;

my $si = StandIn->start(capture_interval => 0.1);
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{ALTER DATABASE cdcdb SET ALLOW_SNAPSHOT_ISOLATION ON},
	q{CREATE TABLE dbo.big (id int NOT NULL PRIMARY KEY, v int, note nvarchar(40), amount decimal(12,2))},
	q{CREATE TABLE dbo.live (id int NOT NULL PRIMARY KEY, v int)},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'live', @role_name = NULL});
my $t0 = time;
$si->ctl('fill_table', 'database=cdcdb', 'table=dbo.big', "rows=$rows");
$si->tsql_ok(q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'big', @role_name = NULL});
note sprintf('filled %d source rows in %.1f s', $rows, time - $t0);
for (1 .. 100)
{
	last if $si->tsql('SELECT sys.fn_cdc_get_max_lsn()') =~ /0x[0-9A-F]{20}/;
	usleep(100_000);
}

my $node = PostgreSQL::Test::Cluster->new('snapmem');
$node->init;
$si->setup_node($node, conf => qq{
mssql_cdc.poll_interval = $poll_ms
shared_buffers = 32MB
});
$node->start;
$si->create_source($node, 'src');
$si->add_table($node, 'src', 'dbo.live', snapshot_mode => 'never');
ok( $node->poll_query_until('postgres', q{SELECT state = 'streaming' FROM mssql_cdc.status}),
	'the live table streams');

# ---------------------------------------------------------------------------
# Add the big table; sample memory, progress and the live table's lag
# ---------------------------------------------------------------------------
my $t_start = time;
$si->add_table($node, 'src', 'dbo.big', snapshot_mode => 'initial');

my $pid;
for (1 .. 100)
{
	$pid = $node->safe_psql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mssql_cdc worker'});
	last if $pid =~ /^\d+$/;
	usleep(100_000);
}
like($pid, qr/^\d+$/, 'found the worker');

sub status_kb
{
	my ($field) = @_;
	open(my $fh, '<', "/proc/$pid/status") or return undef;
	while (<$fh>) { return $1 if /^$field:\s+(\d+) kB/ }
	return undef;
}

my ($peak_anon, $peak_hwm) = (0, 0);
my @progress;					# snapshot_rows seen while snapshotting
my ($seen_percent, $seen_rate, $seen_estimate) = (0, 0, 0);
my @lags;						# seconds from a live insert to its staging row
my $live_id = 0;
my $done = 0;
my $deadline = time + 1800;
while (!$done && time < $deadline)
{
	# a change on the live table, and how long it takes to arrive
	$live_id++;
	$si->tsql_ok("INSERT INTO dbo.live VALUES ($live_id, $live_id)");
	my $t_ins = time;
	while (time < $t_ins + 60)
	{
		my $anon = status_kb('RssAnon') // 0;
		$peak_anon = $anon if $anon > $peak_anon;
		last if $node->safe_psql('postgres', "SELECT count(*) FROM src_dbo_live WHERE id = $live_id") eq '1';
		usleep(50_000);
	}
	push @lags, time - $t_ins;

	my $st = $node->safe_psql('postgres',
		q{SELECT state, snapshot_rows, coalesce(snapshot_total_estimate, -1), coalesce(snapshot_percent, -1),
		         coalesce(snapshot_rows_per_second, -1)
		  FROM mssql_cdc.status WHERE source_table = 'dbo.big'});
	my ($state, $srows, $est, $pct, $rate) = split /\|/, $st;
	if ($state eq 'snapshotting')
	{
		push @progress, $srows;
		$seen_estimate = $est if $est > 0;
		$seen_percent++ if $pct > 0 && $pct < 100;
		$seen_rate++ if $rate > 0;
	}
	$done = $state eq 'streaming';
	my $anon = status_kb('RssAnon') // 0;
	$peak_anon = $anon if $anon > $peak_anon;
	my $hwm = status_kb('VmHWM') // 0;
	$peak_hwm = $hwm if $hwm > $peak_hwm;
	usleep(300_000);
}
my $elapsed = time - $t_start;
ok($done, 'the snapshot finished');
note sprintf('%d rows snapshotted in %.1f s (%.0f rows/s)', $rows, $elapsed, $rows / $elapsed);

is( $node->safe_psql('postgres',
		q{SELECT count(*) || '/' || count(DISTINCT id) FROM src_dbo_big WHERE _cdc_op = 'snapshot'}),
	"$rows/$rows", 'every source row copied exactly once');
is($node->safe_psql('postgres', q{SELECT snapshot_rows FROM mssql_cdc.status WHERE source_table = 'dbo.big'}),
	$rows, 'snapshot_rows is exact');

# memory: private (anonymous) RSS is what the worker itself allocates;
# VmHWM also counts the shared buffers it touched
note sprintf('worker peak RssAnon %.1f MB (sampled), VmHWM %.1f MB (includes touched shared memory)',
	$peak_anon / 1024, $peak_hwm / 1024);
cmp_ok($peak_anon, '>', 0, 'sampled the worker memory');
cmp_ok($peak_anon / 1024, '<', 100, 'worker private memory stayed under 100 MB');

# progress was visible while it ran
my $distinct = scalar(keys %{ { map { $_ => 1 } @progress } });
note sprintf('%d status samples while snapshotting, %d distinct snapshot_rows values, estimate %d',
	scalar(@progress), $distinct, $seen_estimate);
cmp_ok($distinct, '>=', 3, 'snapshot_rows grew while the snapshot ran');
is($seen_estimate, $rows, 'the row estimate came from sys.partitions');
cmp_ok($seen_percent, '>=', 1, 'snapshot_percent was between 0 and 100 while it ran');
cmp_ok($seen_rate, '>=', 1, 'snapshot_rows_per_second was shown while it ran');

# the live table kept streaming between the chunks
my @sorted = sort { $a <=> $b } @lags;
my $max_lag = $sorted[-1];
my $p50 = $sorted[int($#sorted / 2)];
note sprintf('live table: %d changes during the snapshot, lag median %.2f s, max %.2f s (poll interval %d ms)',
	scalar(@lags), $p50, $max_lag, $poll_ms);
cmp_ok(scalar(@lags), '>=', 3, 'changes were made on the live table during the snapshot');
cmp_ok($max_lag, '<', 10 * $poll_ms / 1000 + 3, 'the live table lag stayed within a few poll intervals plus one chunk');

# after the snapshot the big table streams from L0
$si->tsql_ok(q{UPDATE dbo.big SET v = -1 WHERE id = 7});
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM src_dbo_big WHERE _cdc_op = 'update_after' AND id = 7 AND v = -1}),
	'the big table streams after its snapshot');
# caught up: it shares the live table's checkpoint, so they share windows again
$si->tsql_ok(q{INSERT INTO dbo.live VALUES (-1, -1)});
ok( $node->poll_query_until('postgres',
		q{SELECT count(DISTINCT checkpoint_lsn) = 1 AND bool_and(state = 'streaming')
		  FROM mssql_cdc.status}),
	'the new table caught up and joined the shared window (same checkpoint as the live table)')
  or diag $node->safe_psql('postgres', 'SELECT source_table, state, checkpoint_lsn FROM mssql_cdc.status');

$node->stop;
$si->stop;
done_testing();
