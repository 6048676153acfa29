# Crash safety of mirror tables (doc/mirror.md "The guarantee"): three
# tables with mirrors (one mirror-only, changelog => false) are copied in
# small chunks and then stream, while a seeded random source workload
# (inserts, updates, primary key changes, deletes, multi-table
# transactions) runs and the worker is SIGKILLed (a crash restart of the
# cluster) and the cluster is stopped with -m immediate at random points,
# during the copy and during streaming, some of them inside a chunk (the
# copy's SELECT stalls after a few rows) or a window (a change query
# stalls after another table's rows were applied).  Afterwards every
# mirror equals its source table row for row, the staging tables hold no
# change twice (the mirror-only one none at all), and mssql_cdc.verify()
# finds nothing missing, extra or different.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Launcher qw(kill_worker_and_wait wait_worker_pid);
use StandIn;
use MirrorCheck;
use Test::More;
use Time::HiRes qw(time usleep);

my $seed = $ENV{MSSQL_CDC_CRASH_SEED} // time;
srand($seed);
note "random seed $seed (set MSSQL_CDC_CRASH_SEED to repeat)";

# a SIGKILL costs a crash restart plus the launcher's restart delay (~6 s),
# an immediate stop about one second
my $kills_wanted = $ENV{MSSQL_CDC_CRASH_KILLS} // 6;
my $stops_wanted = $ENV{MSSQL_CDC_CRASH_STOPS} // 4;
my $rows = 1500;
my @tables = qw(m1 m2 m3);

my $si = StandIn->start(capture_interval => 0.1);
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{ALTER DATABASE cdcdb SET ALLOW_SNAPSHOT_ISOLATION ON},
	map { "CREATE TABLE dbo.$_ (id int NOT NULL PRIMARY KEY, v int, note nvarchar(30))" } @tables);
$si->ctl('fill_table', 'database=cdcdb', "table=dbo.$_", "rows=$rows") for @tables;
$si->tsql_ok(
	map { "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" } @tables);
for (1 .. 100)
{
	last if $si->tsql('SELECT sys.fn_cdc_get_max_lsn()') =~ /0x[0-9A-F]{20}/;
	usleep(100_000);
}

my $node = PostgreSQL::Test::Cluster->new('mirrorcrash');
$node->init;
# small chunks and windows: many commits for the crashes to land between and inside
$si->setup_node($node, conf => q{
mssql_cdc.snapshot_chunk_rows = 10
mssql_cdc.batch_max_transactions = 3
restart_after_crash = on
});
$node->start;
$si->create_source($node, 'src');
# a copy long enough for several crashes: the chunks go straight into the
# mirrors and would be done after the first one; a 25 ms round trip (the
# stand-in's network model) per response until every table streams
$si->ctl('rtt', 'ms=25');
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('src', 'dbo.m1', mirror => true)});
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('src', 'dbo.m2', mirror => true)});
$si->add_table_when_started($node,
	q{SELECT mssql_cdc.add_table('src', 'dbo.m3', mirror => true, changelog => false)});

# ---------------------------------------------------------------------------
# The workload: the model only knows which keys exist, so that every
# statement touches a row (the final comparison is with the source itself)
# ---------------------------------------------------------------------------
my %ids = map { my $t = $_; ($t => { map { $_ => 1 } 1 .. $rows }) } @tables;
my $next_id = 100_000;
my $next_val = 1;
my $total_tx = 0;

sub random_statement
{
	my $t = $tables[ int(rand(@tables)) ];
	my @ids = keys %{ $ids{$t} };
	my $r = rand();
	my $val = $next_val++;
	if (!@ids || $r < 0.3)
	{
		my $id = $next_id++;
		$ids{$t}{$id} = 1;
		return "INSERT INTO dbo.$t (id, v, note) VALUES ($id, $val, N'i$val')";
	}
	my $id = $ids[ int(rand(@ids)) ];
	return "UPDATE dbo.$t SET v = $val, note = N'u$val' WHERE id = $id" if $r < 0.6;
	if ($r < 0.8)
	{
		delete $ids{$t}{$id};
		return "DELETE FROM dbo.$t WHERE id = $id";
	}
	# a primary key change: SQL Server CDC records a delete and an insert
	my $new = $next_id++;
	delete $ids{$t}{$id};
	$ids{$t}{$new} = 1;
	return "UPDATE dbo.$t SET id = $new, v = $val WHERE id = $id";
}

# n source transactions of 1..4 statements (often on several tables)
sub start_workload
{
	my ($n) = @_;
	my $script = '';
	for (1 .. $n)
	{
		my @stmts = map { random_statement() } 1 .. 1 + int(rand(4));
		$total_tx++;
		$script .= 'BEGIN TRANSACTION; ' . join('; ', @stmts) . "; COMMIT\ngo\n";
	}
	$script .= "exit\n";
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'tsql', '-H', $si->host, '-p', $si->port, '-U', $si->user, '-P', $si->password, '-D', $si->database ],
		'<', \$script, '>', \$out, '2>', \$err, IPC::Run::timeout(300));
	return { h => $h, out => \$out, err => \$err };
}

sub finish_workload
{
	my ($w) = @_;
	$w->{h}->finish;
	my $all = "${ $w->{out} }\n${ $w->{err} }" =~ s/\r//gr;
	die "workload failed: $all" if $all =~ /^Msg \d+/m;
}

sub phases
{
	my ($ret, $out) = $node->psql('postgres',
		q{SELECT string_agg(phase, ',' ORDER BY source_table) FROM mssql_cdc.table_state JOIN mssql_cdc.tables USING (table_id)});
	return $ret == 0 ? $out : '';
}

# ---------------------------------------------------------------------------
# Crashes during the copy and during streaming
# ---------------------------------------------------------------------------
my ($kills, $stops, $in_copy, $in_stream, $in_unit) = (0, 0, 0, 0, 0);
my $t_start = time;
while ($kills < $kills_wanted || $stops < $stops_wanted || $in_stream < 4)
{
	my $w = start_workload(6 + int(rand(10)));
	my $pid = wait_worker_pid($node, 30);
	if (!defined $pid)
	{
		finish_workload($w);
		fail('the worker came back after the last crash');
		last;
	}
	my $copying = phases() =~ /snapshotting|pending/;
	# enough crashes in the copy: let it finish
	$si->ctl('rtt', 'ms=0') if !$copying || $in_copy >= 3;
	my $stall_set = 0;
	# (until one crash has hit inside a unit, every round tries to)
	if (rand() < 0.35 || $in_unit == 0)
	{
		# inside a chunk (the copy's SELECT stops after a few rows, which
		# are already in the chunk's open transaction) or inside a window
		# (m2's change query gets no answer after m1's rows were applied)
		$si->ctl('stall', 'seconds=3',
			$copying ? ('after_rows=' . (1 + int(rand(8))), 'match=SELECT TOP') : 'match=[dbo_m2_CT] AS c');
		$stall_set = 1;
		usleep(300_000 + int(rand(400_000)));
	}
	else
	{
		usleep(int(rand(500_000)));
	}
	my $ph = phases();
	$copying = $ph =~ /snapshotting|pending/;
	# the fault is gone once the worker ran into it
	my $inside = $stall_set && $si->ctl('faults') !~ /stall/;
	if ($stops >= $stops_wanted || ($kills < $kills_wanted && rand() < 0.5))
	{
		if (!kill_worker_and_wait($node, $pid))
		{
			$si->ctl('clear') if $stall_set;
			finish_workload($w);
			next;
		}
		$kills++;
	}
	else
	{
		$node->stop('immediate');
		$stops++;
		usleep(int(rand(200_000)));
		$node->start;
	}
	$si->ctl('clear') if $stall_set;
	note "crash during: $ph" . ($inside ? ' (inside a chunk or window)' : '');
	$copying ? $in_copy++ : $in_stream++;
	$in_unit++ if $inside;
	finish_workload($w);
	last if time - $t_start > 90;
}
$si->ctl('rtt', 'ms=0');
note sprintf('%d SIGKILLs and %d immediate stops (%d during the copy, %d while every table streamed, %d inside a chunk or window) in %.0f s',
	$kills, $stops, $in_copy, $in_stream, $in_unit, time - $t_start);
cmp_ok($in_copy, '>=', 2, 'several crashes hit the initial copy');
cmp_ok($in_stream, '>=', 4, 'several crashes hit streaming');
cmp_ok($in_unit, '>=', 1, 'a crash hit the middle of a chunk or window');
cmp_ok($kills, '>=', 1, 'the worker was SIGKILLed');
cmp_ok($stops, '>=', 1, 'the cluster was stopped in immediate mode');

# ---------------------------------------------------------------------------
# Caught up: every mirror equals its source
# ---------------------------------------------------------------------------
finish_workload(start_workload(3));
note "$total_tx source transactions in the workload";
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 3 FROM mssql_cdc.table_state WHERE phase = 'streaming'}),
	'all tables stream after the crashes')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors ORDER BY error_id DESC LIMIT 5');
my ($maxl) = $si->tsql(q{SELECT 'L=' + CONVERT(varchar(30), sys.fn_cdc_get_max_lsn(), 1)}) =~ /L=(0x[0-9A-Fa-f]+)/;
ok($node->poll_query_until('postgres',
		qq{SELECT bool_and(checkpoint_lsn OPERATOR(mssql_cdc.>=) '$maxl'::mssql_cdc.lsn) FROM mssql_cdc.table_state}),
	'streaming caught up with the source');

for my $t (@tables)
{
	my $ms = "SELECT 'R=' + CAST(id AS varchar(10)) + '|' + COALESCE(CAST(v AS varchar(10)), 'null') + '|' + COALESCE(note, N'null') FROM dbo.$t ORDER BY id";
	my $pg = "SELECT format('%s|%s|%s', id, coalesce(v::text, 'null'), coalesce(note, 'null')) FROM public.src_dbo_${t}_mirror ORDER BY id";
	my ($eq, $src, $mir) = wait_mirror_equal($node, $si, $ms, $pg, 30);
	my $n = () = $src =~ /\n/g;
	ok($eq && $n > $rows / 2, "$t: the mirror equals the source row for row (" . ($n + 1) . ' rows)')
	  or diag_difference($src, $mir);
}

sub diag_difference
{
	my ($src, $mir) = @_;
	my %want = map { (split /\|/)[0] => $_ } split /\n/, $src;
	my %got = map { (split /\|/)[0] => $_ } split /\n/, $mir;
	my @diff = grep { ($want{$_} // '') ne ($got{$_} // '') } sort { $a <=> $b } keys %{ { %want, %got } };
	diag scalar(@diff) . ' differences, first ones (source / mirror): '
	  . join('; ', map { ($want{$_} // '-') . ' / ' . ($got{$_} // '-') } @diff[0 .. ($#diff < 9 ? $#diff : 9)]);
}

# ---------------------------------------------------------------------------
# The staging tables: no change twice, no snapshot row twice; mirror-only
# commits none
# ---------------------------------------------------------------------------
for my $t (qw(m1 m2))
{
	is($node->safe_psql('postgres', qq{
	SELECT count(*) FROM (SELECT _cdc_lsn, _cdc_seqval, _cdc_op, id FROM public.src_dbo_$t
	                      WHERE _cdc_op <> 'snapshot' GROUP BY 1, 2, 3, 4 HAVING count(*) > 1) d}),
		'0', "$t: no change row twice in the staging table");
	is($node->safe_psql('postgres', qq{
	SELECT count(*) FROM (SELECT _cdc_lsn, id FROM public.src_dbo_$t WHERE _cdc_op = 'snapshot'
	                      GROUP BY 1, 2 HAVING count(*) > 1) d}),
		'0', "$t: no snapshot row twice (no chunk applied twice)");
}
is($node->safe_psql('postgres', q{SELECT count(*) FROM public.src_dbo_m3}),
	'0', 'm3 (mirror only): no staging row committed');
is($node->safe_psql('postgres', q{SELECT count(*) FROM mssql_cdc.errors WHERE sqlstate = '23505'}),
	'0', 'no unique violation was ever hit');

# ---------------------------------------------------------------------------
# verify() agrees
# ---------------------------------------------------------------------------
my @f = split /\|/, $node->safe_psql('postgres',
	q{CALL mssql_cdc.verify('src', chunk_rows => 200, recheck_timeout => '60 s')});
my $src_total = 0;
$src_total += ($si->tsql("SELECT 'N=' + CAST(COUNT(*) AS varchar(10)) FROM dbo.$_") =~ /N=(\d+)/)[0] for @tables;
is(join(',', @f[1 .. 7]), "3,$src_total,$src_total,0,0,0,0",
	"verify(): 3 tables, $src_total rows on each side, nothing missing, extra, different or unconfirmed")
  or diag $node->safe_psql('postgres', "SELECT * FROM mssql_cdc.verify_runs; SELECT * FROM mssql_cdc.verify_mismatches LIMIT 20");
is($node->safe_psql('postgres', "SELECT count(*) FROM mssql_cdc.verify_mismatches WHERE run_id = $f[0]"),
	'0', 'verify_mismatches has no row for the run');

$node->stop;
$si->stop;
done_testing();
