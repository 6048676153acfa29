# Huge windows and huge transactions (issue 14, point 1; doc/streaming.md
# "Large transactions"), scaled down: the stand-in's blocking Sort takes
# 100 µs per row before its first row (ENGINE.md "Sorts take time"), so a
# sorted change query over more than 20,000 rows exceeds query_timeout = 2 s.
#
#  1. function mode, a backlog of 48 transactions of 1,000 rows: the window
#     that timed out is retried smaller, everything is applied exactly once,
#     each source transaction in one Postgres transaction (one xmin);
#  2. the learned size survives a SIGKILL of the worker: a second backlog
#     after the crash restart is applied without another timeout;
#  3. function mode, one transaction of 50,000 rows (5 s to sort): applied
#     whole in one Postgres transaction, the worker's memory flat;
#  4. direct mode, a 50,000-row transaction and 20 of 1,000 rows: windows
#     are bounded by batch_max_rows (a Postgres transaction that holds
#     several source transactions holds at most batch_max_rows plus the
#     last one's rows), the big one whole.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use Launcher qw(kill_worker_and_wait wait_worker_pid);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;
use Time::HiRes qw(time usleep);

my $max_rows = 5000;

my $si = StandIn->start(capture_interval => 0.2);
$si->ctl('sort_cost', 'us_per_row=100');
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.digits (d int NOT NULL PRIMARY KEY)},
	q{INSERT dbo.digits (d) VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)},
	q{CREATE TABLE dbo.big (id int NOT NULL PRIMARY KEY, v int, note nvarchar(20))},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'big', @role_name = NULL});

my $node = PostgreSQL::Test::Cluster->new('huge');
$node->init;
$si->setup_node($node, conf => qq{
mssql_cdc.batch_max_transactions = 64
mssql_cdc.batch_max_rows = $max_rows
mssql_cdc.retry_max_backoff = 1
restart_after_crash = on
shared_buffers = 32MB
});
$node->start;
$si->create_source($node, 'src', query_timeout => 2, data_query_mode => 'function');
$si->add_table_when_started($node,
	q{SELECT mssql_cdc.add_table('src', 'dbo.big', snapshot_mode => 'never')});
ok($node->poll_query_until('postgres', q{SELECT state = 'streaming' FROM mssql_cdc.status}),
	'the table streams');

# one autocommit INSERT of 1,000 rows (ids base+1 .. base+1000) per batch
sub backlog
{
	my ($first, $count) = @_;
	$si->tsql_ok(map {
		my $base = $first + $_ * 1000;
		"INSERT dbo.big (id, v, note) SELECT $base + a.d * 100 + b.d * 10 + c.d + 1, $_, N'backlog'"
		  . ' FROM dbo.digits a, dbo.digits b, dbo.digits c'
	} 0 .. $count - 1);
	return;
}

# one transaction of $n * 10,000 rows
sub huge
{
	my ($first, $n) = @_;
	$si->tsql_ok("INSERT dbo.big (id, v, note) SELECT $first + a.d * 10000 + b.d * 1000"
		  . " + c.d * 100 + e.d * 10 + f.d + 1, -1, N'huge'"
		  . ' FROM dbo.digits a, dbo.digits b, dbo.digits c, dbo.digits e, dbo.digits f'
		  . " WHERE a.d < $n");
	return;
}

my $pid = wait_worker_pid($node, 30);
my ($peak_anon, $base_anon) = (0, undef);

# the worker's private memory; it exits after each failure (a timeout) and
# the launcher starts it again, so a vanished pid is looked up once more
sub anon_kb
{
	my $fh;
	unless (open($fh, '<', "/proc/$pid/status"))
	{
		$pid = wait_worker_pid($node, 10) // 0;
		open($fh, '<', "/proc/$pid/status") or return 0;
	}
	while (<$fh>) { return $1 if /^RssAnon:\s+(\d+) kB/ }
	return 0;
}

# wait (at most $seconds) until the ids in [lo, hi] are all staged, sampling
# the worker's memory
sub wait_rows
{
	my ($lo, $hi, $seconds) = @_;
	my $deadline = time + $seconds;
	while (time < $deadline)
	{
		my $kb = anon_kb();
		$peak_anon = $kb if $kb > $peak_anon;
		return 1
		  if $node->safe_psql('postgres',
			"SELECT count(*) FROM public.src_dbo_big WHERE id BETWEEN $lo AND $hi") == $hi - $lo + 1;
		usleep(200_000);
	}
	diag $node->safe_psql('postgres',
		"SELECT count(*) FROM public.src_dbo_big WHERE id BETWEEN $lo AND $hi; SELECT * FROM mssql_cdc.status");
	return 0;
}

# every row once, every source transaction in one Postgres transaction
sub check_whole
{
	my ($lo, $hi, $what) = @_;
	is( $node->safe_psql('postgres',
			"SELECT count(*) = count(DISTINCT id) FROM public.src_dbo_big WHERE id BETWEEN $lo AND $hi"),
		't', "$what: every row staged once");
	is( $node->safe_psql('postgres',
			"SELECT count(*) FROM (SELECT _cdc_lsn FROM public.src_dbo_big WHERE id BETWEEN $lo AND $hi"
			  . ' GROUP BY _cdc_lsn HAVING count(DISTINCT xmin::text) > 1) split'),
		'0', "$what: each source transaction committed in one Postgres transaction (one xmin)");
	return;
}

sub timeouts_since
{
	my ($offset) = @_;
	my $log = slurp_file($node->logfile, $offset);
	my @n = $log =~ /timed out waiting for SQL Server \(server "src"\)/g;
	return scalar @n;
}

# ---------------------------------------------------------------------------
# 1. function mode: a backlog whose sorted read exceeds query_timeout
# ---------------------------------------------------------------------------
my $log0 = -s $node->logfile;
$si->ctl('capture_freeze');
backlog(0, 48);
$si->ctl('capture_resume');
unless (ok(wait_rows(1, 48_000, 90), 'function mode: the backlog of 48 x 1,000 rows was applied'))
{
	diag 'timeouts so far: ' . timeouts_since($log0);
	done_testing();
	exit 0;
}
check_whole(1, 48_000, 'backlog');
cmp_ok(timeouts_since($log0), '>', 0, 'the first windows timed out (the sort of 48,000 rows takes 4.8 s)');
my $limit = $node->safe_psql('postgres', q{SELECT window_transactions FROM mssql_cdc.servers});
like($limit, qr/^\d+$/, "the window size that works is kept: $limit transactions");
cmp_ok($limit, '<', 48, 'below the size that timed out');

# ---------------------------------------------------------------------------
# 2. the size survives a crash of the worker
# ---------------------------------------------------------------------------
$pid = wait_worker_pid($node, 30);
ok(kill_worker_and_wait($node, $pid), 'killed the worker (SIGKILL, crash restart)');
$pid = wait_worker_pid($node, 60);
like($pid, qr/^\d+$/, 'the worker is back');
my $log1 = -s $node->logfile;
$si->ctl('capture_freeze');
backlog(100_000, 48);
$si->ctl('capture_resume');
ok(wait_rows(100_001, 148_000, 120), 'the second backlog was applied');
check_whole(100_001, 148_000, 'second backlog');
is(timeouts_since($log1), 0, 'the restarted worker read it without a timeout');

# ---------------------------------------------------------------------------
# 3. function mode: one transaction of 50,000 rows (a 5 s sort)
# ---------------------------------------------------------------------------
$base_anon = anon_kb();
$peak_anon = $base_anon;
huge(200_000, 5);
ok(wait_rows(200_001, 250_000, 150), 'function mode: the 50,000-row transaction was applied');
check_whole(200_001, 250_000, 'huge transaction');
note "worker RssAnon: $base_anon kB before, peak $peak_anon kB";
cmp_ok($peak_anon - $base_anon, '<', 50_000, 'the worker\'s memory stayed flat (< 50 MB more)');

# ---------------------------------------------------------------------------
# 4. direct mode: windows bounded by rows
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', q{ALTER SERVER src OPTIONS (SET data_query_mode 'direct')});
$si->ctl('capture_freeze');
huge(300_000, 5);
backlog(400_000, 20);
$si->ctl('capture_resume');
ok(wait_rows(300_001, 350_000, 150) && wait_rows(400_001, 420_000, 60),
	'direct mode: the 50,000-row transaction and 20 x 1,000 rows were applied');
check_whole(300_001, 420_000, 'direct mode');
is( $node->safe_psql('postgres',
		'SELECT count(*) FROM (SELECT xmin::text FROM public.src_dbo_big WHERE id > 300000'
		  . ' GROUP BY 1 HAVING count(DISTINCT _cdc_lsn) > 1 AND count(*) > '
		  . ($max_rows + 1000) . ') big'),
	'0', 'no window of several transactions holds more than batch_max_rows plus one transaction');

done_testing();
