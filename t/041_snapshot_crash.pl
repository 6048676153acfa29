# Crash safety of the initial snapshot: while a table snapshots (in small
# chunks) under a concurrent source workload, the worker is SIGKILLed (a
# crash restart of the cluster) and the cluster is stopped with -m
# immediate at random points, some of them in the middle of a chunk (the
# snapshot SELECT stalls after a few rows, with rows already inserted in
# the chunk's open transaction).  When a snapshot completes, the table is
# re-snapshotted so that every crash lands in a snapshot.  Afterwards:
#  - no snapshot (at any L0) holds a key twice: no chunk was applied twice;
#  - the last snapshot plus every later change, replayed in LSN order,
#    equals the source table: no row missing;
#  - every change after the last L0 is in the staging table exactly once
#    (compared with the change table): duplicates only inside the
#    documented overlap (a snapshot row newer than L0 and its change).
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
my $kills_wanted = $ENV{MSSQL_CDC_CRASH_KILLS} // 8;
my $stops_wanted = $ENV{MSSQL_CDC_CRASH_STOPS} // 22;
my $rows = 6000;

my $si = StandIn->start(capture_interval => 0.1);
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{ALTER DATABASE cdcdb SET ALLOW_SNAPSHOT_ISOLATION ON},
	q{CREATE TABLE dbo.c1 (id int NOT NULL PRIMARY KEY, v int, note nvarchar(30))});
$si->ctl('fill_table', 'database=cdcdb', 'table=dbo.c1', "rows=$rows");
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'c1', @role_name = NULL});
for (1 .. 100)
{
	last if $si->tsql('SELECT sys.fn_cdc_get_max_lsn()') =~ /0x[0-9A-F]{20}/;
	usleep(100_000);
}

my $node = PostgreSQL::Test::Cluster->new('snapcrash');
$node->init;
$si->setup_node($node, conf => q{
mssql_cdc.snapshot_chunk_rows = 10
restart_after_crash = on
});
$node->start;
$si->create_source($node, 'src');
$si->add_table($node, 'src', 'dbo.c1', snapshot_mode => 'initial');

sub state_of
{
	my ($ret, $out) = $node->psql('postgres',
		q{SELECT phase || ':' || snapshot_rows FROM mssql_cdc.table_state});
	return $ret == 0 ? $out : '';
}

sub worker_pid { return wait_worker_pid($node, 30) }

# a burst of random single-statement transactions on the source, in the background
my $next_id = 100_000;
sub start_workload
{
	my ($n) = @_;
	my @sql;
	for (1 .. $n)
	{
		my $r = rand();
		my $id = 1 + int(rand($rows));
		if ($r < 0.5) { push @sql, "UPDATE dbo.c1 SET v = v + 1, note = N'w$_' WHERE id = $id" }
		elsif ($r < 0.7) { push @sql, "DELETE FROM dbo.c1 WHERE id = $id" }
		else { $next_id++; push @sql, "INSERT INTO dbo.c1 VALUES ($next_id, $_, N'ins')" }
	}
	my $script = join('', map { "$_\ngo\n" } @sql) . "exit\n";
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'tsql', '-H', '127.0.0.1', '-p', $si->port, '-U', 'sa', '-P', 'Passw0rd!', '-D', 'cdcdb' ],
		'<', \$script, '>', \$out, '2>', \$err);
	return { h => $h, out => \$out };
}
sub finish_workload
{
	my ($w) = @_;
	$w->{h}->finish;
	die "workload failed: ${ $w->{out} }" if ${ $w->{out} } =~ /^Msg \d+/m;
}

# ---------------------------------------------------------------------------
# Crashes during snapshots
# ---------------------------------------------------------------------------
my ($kills, $stops, $mid_chunk, $snapshots_done) = (0, 0, 0, 0);
my $crashes_in_last = 0;		# crashes that hit the snapshot verified below
my $t_start = time;
while ($kills < $kills_wanted || $stops < $stops_wanted || $crashes_in_last < 3)
{
	my $st = state_of();
	if ($st =~ /^streaming/)
	{
		# this snapshot made it through: start another one to crash into
		$snapshots_done++;
		$crashes_in_last = 0;
		$node->safe_psql('postgres', q{SELECT mssql_cdc.resnapshot('src', 'dbo.c1')});
	}
	my $w = start_workload(3 + int(rand(6)));
	my $pid = worker_pid();
	if (!defined $pid)
	{
		finish_workload($w);
		fail('the worker came back after the last crash');
		last;
	}
	my $stall_set = 0;
	if (rand() < 0.35)
	{
		# inside a chunk: the snapshot SELECT stops after a few rows
		$si->ctl('stall', 'seconds=3', 'after_rows=' . (1 + int(rand(8))), 'match=SELECT TOP');
		$stall_set = 1;
		usleep(300_000 + int(rand(400_000)));
	}
	else
	{
		usleep(int(rand(300_000)));
	}
	# only crashes that hit a running snapshot count
	my $during = state_of() =~ /^(snapshotting|pending)/;
	$mid_chunk++ if $during && $stall_set && $si->ctl('faults') !~ /stall/;
	$crashes_in_last++ if $during;
	if ($stops >= $stops_wanted || ($kills < $kills_wanted && rand() < 0.3))
	{
		$kills++ if kill_worker_and_wait($node, $pid) && $during;
	}
	else
	{
		$node->stop('immediate');
		$stops++ if $during;
		usleep(int(rand(200_000)));
		$node->start;
	}
	$si->ctl('clear') if $stall_set;
	finish_workload($w);
	last if time - $t_start > 150;
}
note sprintf('%d SIGKILLs and %d immediate stops during snapshots (%d inside a chunk), %d snapshots completed in between, %.0f s',
	$kills, $stops, $mid_chunk, $snapshots_done, time - $t_start);
cmp_ok($kills + $stops, '>=', 20, 'at least 20 crashes hit a running snapshot');
cmp_ok($mid_chunk, '>=', 2, 'some crashes hit the middle of a chunk');
note "$crashes_in_last crashes hit the last snapshot, whose result is verified below";
cmp_ok($crashes_in_last, '>=', 3, 'the verified snapshot itself survived several crashes');

# a last write, then wait for the snapshot to finish and streaming to catch up
finish_workload(start_workload(3));
ok( $node->poll_query_until('postgres',
		q{SELECT phase = 'streaming' FROM mssql_cdc.table_state}),
	'the snapshot finished after the crashes')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors ORDER BY error_id DESC LIMIT 5');
my ($maxl) = $si->tsql(q{SELECT 'L=' + CONVERT(varchar(30), sys.fn_cdc_get_max_lsn(), 1)}) =~ /L=(0x[0-9A-Fa-f]+)/;
ok( $node->poll_query_until('postgres',
		qq{SELECT checkpoint_lsn OPERATOR(mssql_cdc.>=) '$maxl'::mssql_cdc.lsn FROM mssql_cdc.table_state}),
	'streaming caught up with the source');

# ---------------------------------------------------------------------------
# Verification
# ---------------------------------------------------------------------------
is( $node->safe_psql('postgres', q{
	SELECT count(*) FROM (SELECT _cdc_lsn, id FROM src_dbo_c1 WHERE _cdc_op = 'snapshot'
	                      GROUP BY 1, 2 HAVING count(*) > 1) d}),
	'0', 'no snapshot holds a key twice (no chunk applied twice)');
note 'snapshots in the staging table: '
  . $node->safe_psql('postgres', q{SELECT count(DISTINCT _cdc_lsn) FROM src_dbo_c1 WHERE _cdc_op = 'snapshot'});

my $l0 = $node->safe_psql('postgres', q{SELECT snapshot_lsn FROM mssql_cdc.table_state});
is( $node->safe_psql('postgres', qq{
	SELECT count(*) FROM src_dbo_c1 WHERE _cdc_op = 'snapshot' AND _cdc_lsn OPERATOR(mssql_cdc.=) '$l0'::mssql_cdc.lsn}),
	$node->safe_psql('postgres', q{SELECT snapshot_rows FROM mssql_cdc.table_state}),
	'snapshot_rows counts exactly the rows of the last snapshot');

my $replayed = $node->safe_psql('postgres', qq{
WITH ev AS (SELECT * FROM src_dbo_c1
            WHERE (_cdc_op = 'snapshot' AND _cdc_lsn OPERATOR(mssql_cdc.=) '$l0'::mssql_cdc.lsn)
               OR (_cdc_op IN ('insert', 'update_after', 'delete') AND _cdc_lsn OPERATOR(mssql_cdc.>) '$l0'::mssql_cdc.lsn)),
last AS (SELECT DISTINCT ON (id) * FROM ev ORDER BY id, _cdc_lsn DESC, _cdc_seqval DESC)
SELECT string_agg(id || ':' || coalesce(v::text, 'null') || ':' || coalesce(note, 'null'), ',' ORDER BY id)
FROM last WHERE _cdc_op <> 'delete'});
my $src = $si->tsql(q{SELECT 'R=' + CAST(id AS varchar(10)) + ':' + COALESCE(CAST(v AS varchar(10)), 'null') + ':' + COALESCE(note, N'null') FROM dbo.c1 ORDER BY id});
my @src_rows = $src =~ /^R=(\S+)\s*$/mg;
cmp_ok(scalar(@src_rows), '>', $rows / 2, 'read the source rows');
my $same = $replayed eq join(',', @src_rows);
ok($same, 'the last snapshot plus every later change equals the source: no row missing');
if (!$same)
{
	my %want = map { (split /:/)[0] => $_ } @src_rows;
	my %got = map { (split /:/)[0] => $_ } split /,/, $replayed;
	my @diff = grep { ($want{$_} // '') ne ($got{$_} // '') } sort { $a <=> $b } keys %{ { %want, %got } };
	diag 'first differences (id want/got): '
	  . join(' ', map { "$_ " . ($want{$_} // '-') . '/' . ($got{$_} // '-') } @diff[0 .. ($#diff < 9 ? $#diff : 9)]);
}

my ($ct_n) = $si->tsql("SELECT 'N=' + CAST(COUNT(*) AS varchar(10)) FROM cdc.dbo_c1_CT WHERE __\$start_lsn > $l0") =~ /N=(\d+)/;
is( $node->safe_psql('postgres', qq{
	SELECT count(*) FROM src_dbo_c1 WHERE _cdc_op <> 'snapshot' AND _cdc_lsn OPERATOR(mssql_cdc.>) '$l0'::mssql_cdc.lsn}),
	$ct_n, "every change after L0 is in the staging table exactly once ($ct_n change rows)");
is( $node->safe_psql('postgres', q{
	SELECT count(*) FROM (SELECT _cdc_lsn, _cdc_seqval, _cdc_op FROM src_dbo_c1 GROUP BY 1, 2, 3 HAVING count(*) > 1) d}),
	'0', 'no change row twice');

$node->stop;
$si->stop;
done_testing();
