# Crash safety: a randomized source workload (single- and multi-table
# transactions, inserts, updates, deletes, primary key changes) runs while
# the worker is SIGKILLed (a crash-restart of the whole cluster) and the
# cluster is stopped with -m immediate at random points, many times.  The
# test records the exact expected change history itself, from the
# statements it sends; afterwards every staging table must equal it:
# nothing lost, nothing duplicated, commit order kept, and each source
# transaction under one commit LSN.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Launcher qw(kill_worker_and_wait wait_worker_pid);
use StandIn;
use Test::More;
use Time::HiRes qw(time usleep);

my $seed = $ENV{MSSQL_CDC_CRASH_SEED} // time;
srand($seed);
note "random seed $seed (set MSSQL_CDC_CRASH_SEED to repeat)";

# a SIGKILL costs a crash restart plus the launcher's restart delay (~6 s),
# an immediate stop about one second
my $kills_wanted = $ENV{MSSQL_CDC_CRASH_KILLS} // 15;
my $stops_wanted = $ENV{MSSQL_CDC_CRASH_STOPS} // 36;

my $si = StandIn->start(capture_interval => 0.1);
my @tables = qw(c1 c2 c3);
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	(map { "CREATE TABLE dbo.$_ (id int NOT NULL PRIMARY KEY, val int NOT NULL)" } @tables),
	(map { "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" } @tables),
	q{CREATE TABLE dbo.tick (id int NOT NULL PRIMARY KEY)},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'tick', @role_name = NULL},
	q{INSERT INTO dbo.tick VALUES (0)});
# the capture job must have run once so that add_table finds a max LSN
for (1 .. 100)
{
	last if $si->tsql('SELECT sys.fn_cdc_get_max_lsn()') =~ /0x[0-9A-F]{20}/;
	usleep(100_000);
}

my $node = PostgreSQL::Test::Cluster->new('crash');
$node->init;
# small windows: many commits, so kills land between and inside them
$si->setup_node($node, conf => q{
mssql_cdc.batch_max_transactions = 3
restart_after_crash = on
});
$node->start;
$si->create_source($node, 'src');
$si->add_table($node, 'src', "dbo.$_") for @tables;

# ---------------------------------------------------------------------------
# The model: current rows per table and the expected change history
# ---------------------------------------------------------------------------
my %rows = map { $_ => {} } @tables;	# table -> id -> val
my %history = map { $_ => [] } @tables;	# table -> ["op|id|val", ...]
my %tx_count = map { $_ => 0 } @tables; # table -> source transactions touching it
my $next_id = 1;
my $next_val = 1000;
my $total_tx = 0;						# source transactions sent

sub random_statement
{
	my ($tx_tables) = @_;
	my $t = $tables[ int(rand(@tables)) ];
	my @ids = keys %{ $rows{$t} };
	my $r = rand();
	$tx_tables->{$t} = 1;
	if (!@ids || $r < 0.4)
	{
		my ($id, $val) = ($next_id++, $next_val++);
		$rows{$t}{$id} = $val;
		push @{ $history{$t} }, "insert|$id|$val";
		return "INSERT INTO dbo.$t (id, val) VALUES ($id, $val)";
	}
	my $id = $ids[ int(rand(@ids)) ];
	my $old = $rows{$t}{$id};
	if ($r < 0.7)
	{
		my $val = $next_val++;
		$rows{$t}{$id} = $val;
		push @{ $history{$t} }, "update_before|$id|$old", "update_after|$id|$val";
		return "UPDATE dbo.$t SET val = $val WHERE id = $id";
	}
	if ($r < 0.85)
	{
		delete $rows{$t}{$id};
		push @{ $history{$t} }, "delete|$id|$old";
		return "DELETE FROM dbo.$t WHERE id = $id";
	}
	# a primary key change: SQL Server CDC records a delete and an insert
	my $new = $next_id++;
	delete $rows{$t}{$id};
	$rows{$t}{$new} = $old;
	push @{ $history{$t} }, "delete|$id|$old", "insert|$new|$old";
	return "UPDATE dbo.$t SET id = $new WHERE id = $id";
}

# A script of n source transactions (1..4 statements, often multi-table).
sub workload_script
{
	my ($n) = @_;
	my $script = '';
	for (1 .. $n)
	{
		my %tx_tables;
		my @stmts = map { random_statement(\%tx_tables) } 1 .. 1 + int(rand(4));
		$tx_count{$_}++ for keys %tx_tables;
		$total_tx++;
		$script .= 'BEGIN TRANSACTION; ' . join('; ', @stmts) . "; COMMIT\ngo\n";
	}
	return $script . "exit\n";
}

sub start_workload
{
	my ($n) = @_;
	my $script = workload_script($n);
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'tsql', '-H', '127.0.0.1', '-p', $si->port, '-U', 'sa', '-P', 'Passw0rd!', '-D', 'cdcdb' ],
		'<', \$script, '>', \$out, '2>', \$err, IPC::Run::timeout(300));
	return { h => $h, out => \$out, err => \$err };
}

sub finish_workload
{
	my ($w) = @_;
	$w->{h}->finish;
	# tsql writes messages to stderr, each after a carriage return
	my $all = "${ $w->{out} }\n${ $w->{err} }" =~ s/\r//gr;
	die "workload failed: $all" if $all =~ /^Msg \d+/m;
}

sub worker_pid { return wait_worker_pid($node, 30) }

# ---------------------------------------------------------------------------
# Workload with crashes
# ---------------------------------------------------------------------------
my ($kills, $stops, $stalled_crashes) = (0, 0, 0);
my $t_start = time;
while ($kills < $kills_wanted || $stops < $stops_wanted)
{
	my $w = start_workload(4 + int(rand(8)));
	my $pid = worker_pid();
	if (!defined $pid)
	{
		finish_workload($w);
		fail('the worker came back after the last crash');
		diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.worker_state(); SELECT * FROM mssql_cdc.errors');
		last;
	}
	my $stalled = 0;
	my $stall_set = 0;
	# (every round until five crashes hit inside a window, then at random:
	# c2's change query runs only in windows where c2 has rows)
	if (rand() < 0.3 || $stalled_crashes < 5)
	{
		# a point inside a window: the change query of c2 gets no answer,
		# after c1's rows went into the window's open transaction
		$si->ctl('stall', 'seconds=3', 'match=[dbo_c2_CT] AS c');
		$stall_set = 1;
		# the fault is gone once the worker ran into it: the next window
		# with changes (a window without any sends no change query)
		for (1 .. 50)
		{
			last if $si->ctl('faults') !~ /stall/;
			usleep(50_000);
		}
		usleep(int(rand(500_000)));
		$stalled = $si->ctl('faults') !~ /stall/;
	}
	else
	{
		# a random point: before, during or between windows
		usleep(int(rand(400_000)));
	}
	if ($stops >= $stops_wanted || ($kills < $kills_wanted && rand() < 0.5))
	{
		if (kill_worker_and_wait($node, $pid))
		{
			$kills++;
			$stalled_crashes++ if $stalled;
		}
	}
	else
	{
		$node->stop('immediate');
		$stops++;
		$stalled_crashes++ if $stalled;
		usleep(int(rand(200_000)));
		$node->start;
	}
	$si->ctl('clear') if $stall_set;
	finish_workload($w);
}
note "$stalled_crashes crashes while the worker waited inside a window (c2's change query stalled)";
cmp_ok($stalled_crashes, '>=', 5, 'several crashes surely hit the middle of a window');
note sprintf('%d SIGKILLs of the worker and %d immediate stops in %.0f s',
	$kills, $stops, time - $t_start);
cmp_ok($kills + $stops, '>=', 50, 'at least 50 crashes in total');

# a last transaction on every table marks the end of the workload
my $end = start_workload(3);
finish_workload($end);

# ---------------------------------------------------------------------------
# After recovery: staging == expected history
# ---------------------------------------------------------------------------
my $expected_total = 0;
$expected_total += scalar(@{ $history{$_} }) for @tables;
my $count_sql = join(' + ', map { "(SELECT count(*) FROM public.src_dbo_$_)" } @tables);
ok( $node->poll_query_until('postgres', "SELECT $count_sql >= $expected_total"),
	"all $expected_total expected change rows arrived")
  or diag $node->safe_psql('postgres', "SELECT $count_sql; SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors");
# let the worker run a little longer: duplicates would show up now
sleep 1;

for my $t (@tables)
{
	my $got = $node->safe_psql('postgres',
		"SELECT _cdc_op || '|' || id || '|' || val FROM public.src_dbo_$t ORDER BY _cdc_lsn, _cdc_seqval, _cdc_op");
	my @got = split /\n/, $got;
	is(scalar(@got), scalar(@{ $history{$t} }), "$t: row count equals the expected history");
	is_deeply(\@got, $history{$t}, "$t: staging rows equal the expected change history, in commit order")
	  or diag "first difference at " . (first_difference(\@got, $history{$t}));
	is( $node->safe_psql('postgres', "SELECT count(DISTINCT _cdc_lsn) FROM public.src_dbo_$t"),
		$tx_count{$t}, "$t: one commit LSN per source transaction ($tx_count{$t})");
}

# multi-table transactions share their commit LSN across the tables
my $union = $node->safe_psql('postgres',
	'SELECT count(*) FROM ('
	  . join(' UNION ', map { "SELECT _cdc_lsn::text FROM public.src_dbo_$_" } @tables)
	  . ') u');
is($union, $total_tx, "one commit LSN per source transaction over all tables ($total_tx)");

is( $node->safe_psql('postgres', q{SELECT count(*) FROM mssql_cdc.errors WHERE sqlstate = '23505'}),
	'0', 'no unique violation was ever hit (nothing was applied twice)');

sub first_difference
{
	my ($a, $b) = @_;
	for my $i (0 .. ($#$a > $#$b ? $#$a : $#$b))
	{
		return "$i: got " . ($a->[$i] // 'nothing') . ', expected ' . ($b->[$i] // 'nothing')
		  if ($a->[$i] // '') ne ($b->[$i] // '');
	}
	return 'none';
}

$node->stop;
$si->stop;
done_testing();
