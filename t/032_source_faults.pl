# Source faults that are not about status conditions: SIGTERM while SQL
# Server hangs (the worker must be gone within 2 s, and nothing is lost),
# and lag_transactions while the change query hangs.  The faults that must
# be explained in mssql_cdc.status (connection dropped mid-result, stall
# past query_timeout, SQL Server restart, retention overrun, …) are in
# t/070_fault_matrix.pl.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Launcher qw(wait_worker_pid);
use StandIn;
use Test::More;
use Time::HiRes qw(time usleep);

my $si = StandIn->start(capture_interval => 0.1);
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.f1 (id int NOT NULL PRIMARY KEY, val int NOT NULL)},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'f1', @role_name = NULL},
	q{CREATE TABLE dbo.digits (n int NOT NULL PRIMARY KEY)},
	q{INSERT INTO dbo.digits VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)});
for (1 .. 100)
{
	last if $si->tsql('SELECT sys.fn_cdc_get_max_lsn()') =~ /0x[0-9A-F]{20}/;
	usleep(100_000);
}

my $node = PostgreSQL::Test::Cluster->new('faults');
$node->init;
$si->setup_node($node);
$node->start;
$si->create_source($node, 'src', query_timeout => 3);
$si->add_table($node, 'src', 'dbo.f1');

my @expected;	# "op|id|val" in commit order
my $next_id = 1;

# one source transaction of n inserts
sub insert_tx
{
	my ($n) = @_;
	my @stmts;
	for (1 .. $n)
	{
		my $id = $next_id++;
		push @stmts, "INSERT INTO dbo.f1 VALUES ($id, " . ($id * 10) . ')';
		push @expected, "insert|$id|" . ($id * 10);
	}
	$si->tsql_ok('BEGIN TRANSACTION; ' . join('; ', @stmts) . '; COMMIT');
}

sub staging_matches
{
	my ($what) = @_;
	my $n = scalar @expected;
	ok($node->poll_query_until('postgres', "SELECT count(*) >= $n FROM public.src_dbo_f1"),
		"$what: all $n rows arrived")
	  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors');
	my @got = split /\n/, $node->safe_psql('postgres',
		"SELECT _cdc_op || '|' || id || '|' || val FROM public.src_dbo_f1 ORDER BY _cdc_lsn, _cdc_seqval, _cdc_op");
	is_deeply(\@got, \@expected, "$what: staging equals the source history exactly (no loss, no duplicate)");
}

sub worker_pid { return wait_worker_pid($node, 60) }

# wait until a fault has been taken (it disappears once used)
sub wait_fault_taken
{
	my $deadline = time + 30;
	while (time < $deadline)
	{
		return 1 if $si->ctl('faults') !~ /"kind"|stall|drop/;
		usleep(20_000);
	}
	return 0;
}

ok( $node->poll_query_until('postgres',
		q{SELECT state = 'streaming' FROM mssql_cdc.status}),
	'streaming');
insert_tx(3);
staging_matches('baseline');

# ---------------------------------------------------------------------------
# SIGTERM while SQL Server hangs: gone within 2 seconds
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', q{ALTER SERVER src OPTIONS (SET query_timeout '60')});
# the worker reconnects with the new option by itself (t/034); a new worker
# process gives the SIGTERM below a known pid that uses it from the start
my $pid = worker_pid();
kill 'TERM', $pid;
$node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid");
$pid = worker_pid();
ok(defined $pid, 'the worker is back');
$si->ctl('capture_freeze');
insert_tx(5);
$si->ctl('stall', 'seconds=60', 'match=__$update_mask');
$si->ctl('capture_resume');
ok(wait_fault_taken(), 'the worker is waiting on the stalled server');
usleep(500_000);
my $t0 = time;
kill 'TERM', $pid;
my $gone = 0;
while (time - $t0 < 10)
{
	if (!kill(0, $pid))
	{
		$gone = 1;
		last;
	}
	usleep(20_000);
}
my $elapsed = time - $t0;
note sprintf('worker exited %.2f s after SIGTERM', $elapsed);
ok($gone && $elapsed < 2, 'SIGTERM stops the worker within 2 s although SQL Server hangs');
$si->ctl('clear');
staging_matches('after SIGTERM during a stall');

# ---------------------------------------------------------------------------
# lag_transactions: 0 when caught up; while the change query hangs, the
# worker has still counted the source transactions it has not applied
# ---------------------------------------------------------------------------
ok( $node->poll_query_until('postgres', q{SELECT lag_transactions = 0 FROM mssql_cdc.status}),
	'caught up: lag_transactions is 0');
# the capture job publishes the three transactions in one scan, and the
# worker's next change query hangs (below query_timeout) after it counted.
# Freeze first and let the worker reach the frozen max LSN: an idle window
# (the capture job's dummy rows move the max LSN) must not take the stall.
$si->ctl('capture_freeze');
ok( $node->poll_query_until('postgres',
		q{SELECT checkpoint_lsn OPERATOR(mssql_cdc.=) source_max_lsn FROM mssql_cdc.status}),
	'with the capture job frozen the worker reaches its max LSN');
my $caught_up_at = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
ok( $node->poll_query_until('postgres',
		qq{SELECT last_poll_at > '$caught_up_at' FROM mssql_cdc.worker_state()}),
	'and polls again, with nothing to read');
insert_tx(1) for 1 .. 3;
$si->ctl('stall', 'seconds=2', 'match=[dbo_f1_CT] AS c');
$si->ctl('capture_resume');
ok( $node->poll_query_until('postgres', q{SELECT lag_transactions = 3 FROM mssql_cdc.status}),
	'three source transactions behind: lag_transactions is 3')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status');
ok( $node->poll_query_until('postgres', q{SELECT lag_transactions = 0 FROM mssql_cdc.status}),
	'after the stall the worker catches up: lag_transactions is 0 again');
$si->ctl('clear');
staging_matches('after the lag check');

$node->stop;
$si->stop;
done_testing();
