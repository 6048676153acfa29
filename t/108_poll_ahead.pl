# The poll sent ahead (issue 16 point 2, src/worker_poll_ahead.c): while a
# table is copied, the worker sends the poll that begins its next iteration
# when the iteration's last snapshot chunk starts, and the next iteration
# reads that reply instead of asking again.  At a simulated round trip of
# 40 ms every iteration ends with such a chunk.  What must hold:
#  - the polls are taken from the batches sent ahead
#    (worker_state().polls_ahead), and not once the copy is over and the
#    worker sleeps between polls (a reply from before a sleep is never used);
#  - an older max LSN only shortens a window: every change of a streaming
#    table made during the copy arrives exactly once, in order;
#  - SQL Server ending the worker's own session (KILL), on which a poll is
#    in flight ahead, and a SIGKILL of the worker lose and repeat nothing:
#    the copy and the stream go on from their committed positions;
#  - a change after the copy still arrives within a few polls.
use strict;
use warnings;

use FindBin;
use JSON::PP;
use lib "$FindBin::RealBin/lib";
use Launcher qw(kill_worker_and_wait wait_worker_pid);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;
use Time::HiRes qw(time usleep);

my $si = StandIn->start(capture_interval => 0.1);
my $rows = 600;
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.live (id int NOT NULL PRIMARY KEY, v int)},
	q{CREATE TABLE dbo.copied (id int NOT NULL PRIMARY KEY, v int, note nvarchar(20))});
$si->ctl('fill_table', 'database=cdcdb', 'table=dbo.copied', "rows=$rows");
$si->tsql_ok(
	map({ "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
		qw(live copied)));

my $node = PostgreSQL::Test::Cluster->new('pollahead');
$node->init;
$si->setup_node($node,
	conf => "mssql_cdc.snapshot_chunk_rows = 10\nmssql_cdc.poll_interval = 100\nrestart_after_crash = on");
$node->start;
$si->create_source($node, 'src');

sub q1 { return $node->safe_psql('postgres', $_[0]); }

sub counters
{
	my ($w, $a) = split /\|/,
	  q1(q{SELECT windows, polls_ahead FROM mssql_cdc.worker_state() WHERE server_name = 'src'});
	return ($w // 0, $a // 0);
}

$si->add_table($node, 'src', 'dbo.live');
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM mssql_cdc.table_state WHERE phase = 'streaming'}),
	'the streaming table streams');

$si->ctl('rtt', 'ms=40');
$si->add_table($node, 'src', 'dbo.copied', snapshot_mode => 'initial');

# the main session of the worker: the one whose requests are the polls
sub main_spids
{
	my $reply = decode_json($si->ctl('requests'));
	my @spids;
	for my $sess (@{ $reply->{sessions} })
	{
		next unless ($sess->{app} // '') eq 'mssql_cdc';
		push @spids, $sess->{spid}
		  if grep { /^SELECT name, is_cdc_enabled FROM sys\.databases/ } keys %{ $sess->{by_prefix} };
	}
	return @spids;
}

my ($live, $ahead_max, $session_killed, $worker_killed) = (0, 0, 0, 0);
my $copying = q{SELECT phase <> 'streaming' FROM mssql_cdc.table_state JOIN mssql_cdc.tables USING (table_id)
                WHERE source_table = 'copied'};
my $deadline = time + 240;
while (time < $deadline)
{
	my ($r, $still) = $node->psql('postgres', $copying);
	last if $r == 0 && $still eq 'f';
	my ($r2, $copied) = $node->psql('postgres',
		q{SELECT snapshot_rows FROM mssql_cdc.table_state JOIN mssql_cdc.tables USING (table_id)
		  WHERE source_table = 'copied'});
	my ($w, $a) = counters();
	$ahead_max = $a if $a > $ahead_max;
	# a third into the copy: SQL Server ends the worker's own session
	if (!$session_killed && $r2 == 0 && $copied =~ /^\d+$/ && $copied >= $rows / 3 && $a > 0)
	{
		my @spids = main_spids();
		if (@spids)
		{
			my $out = $si->tsql(map { "KILL $_" } @spids);
			$session_killed = 1 if $out !~ /^Msg (?!6106 )\d+/m;
		}
	}
	# two thirds: the worker process is SIGKILLed
	if ($session_killed && !$worker_killed && $r2 == 0 && $copied =~ /^\d+$/ && $copied >= 2 * $rows / 3)
	{
		my $pid = wait_worker_pid($node, 30);
		$worker_killed = 1 if defined $pid && kill_worker_and_wait($node, $pid);
	}
	$live++;
	$si->tsql_ok("INSERT INTO dbo.live VALUES ($live, $live)");
	usleep(150_000);
}
ok($node->poll_query_until('postgres', q{SELECT count(*) = 2 FROM mssql_cdc.table_state WHERE phase = 'streaming'}),
	'the copy finished') or diag q1('SELECT * FROM mssql_cdc.errors');
ok($session_killed, "SQL Server ended the worker's own session during the copy");
ok($worker_killed, 'the worker was SIGKILLed during the copy');
cmp_ok($ahead_max, '>', 0, "polls were taken from batches sent ahead ($ahead_max before the kills reset the count)");

is(q1(q{SELECT count(*), count(DISTINCT id), min(id), max(id) FROM src_dbo_copied WHERE _cdc_op = 'snapshot'}),
	"$rows|$rows|1|$rows", 'every row of the copy once');

# every change of the streaming table once, in commit order
ok($node->poll_query_until('postgres', "SELECT count(*) = $live FROM src_dbo_live"),
	"the $live changes of the streaming table arrived");
is(q1(q{SELECT count(DISTINCT id), bool_and(_cdc_op = 'insert') FROM src_dbo_live}), "$live|t",
	'each change of the streaming table once');
is(q1(q{SELECT count(*) FROM (SELECT id, lag(id) OVER (ORDER BY _cdc_lsn) AS prev
        FROM src_dbo_live) x WHERE prev IS NOT NULL AND prev > id}), '0',
	'in commit order');

# the copy is over: the worker sleeps between polls and sends none ahead
$si->ctl('rtt', 'ms=0');
my ($w0, $a0) = counters();
sleep 2;
my ($w1, $a1) = counters();
cmp_ok($w1 - $w0, '>=', 5, 'idle: the worker polls (' . ($w1 - $w0) . ' polls in 2 s)');
is($a1 - $a0, 0, 'idle: no poll is taken from a batch sent ahead');

# and a change now still arrives promptly
$live++;
$si->tsql_ok("INSERT INTO dbo.live VALUES ($live, $live)");
my $t0 = time;
ok($node->poll_query_until('postgres', "SELECT count(*) = $live FROM src_dbo_live"), 'a change after the copy arrives');
cmp_ok(time - $t0, '<', 10, 'within a few polls');

$node->stop;
$si->stop;
done_testing();
