# Parallel initial copy (issue 16 points 2 and 4): four tables of one
# source added for an initial copy are copied at once, each on its own TDS
# session (server option snapshot_connections), while a streaming table
# keeps getting its windows; the worker is SIGKILLed during the copy, and
# SQL Server ends its chunk sessions (KILL, recorded as a table's lost
# connection), and each table resumes from its own committed resume key:
# no row missing, none staged twice.  In steady state a chunk costs one
# request (the chunk's batch; worker_state() requests_sent /
# snapshot_chunks).
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

my $si = StandIn->start(capture_interval => 0.2);
my $rows = 400;
my @copy = map { "c$_" } 1 .. 4;
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{ALTER DATABASE cdcdb SET ALLOW_SNAPSHOT_ISOLATION ON},
	q{CREATE TABLE dbo.live (id int NOT NULL PRIMARY KEY, v int)},
	map({ "CREATE TABLE dbo.$_ (id int NOT NULL PRIMARY KEY, v int, note nvarchar(20))" } @copy));
$si->ctl('fill_table', 'database=cdcdb', "table=dbo.$_", "rows=$rows") for @copy;
$si->tsql_ok(
	map({ "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
		('live', @copy)));

my $node = PostgreSQL::Test::Cluster->new('parsnap');
$node->init;
# small chunks, so that each copy takes many chunks
$si->setup_node($node, conf => "mssql_cdc.snapshot_chunk_rows = 5\nmssql_cdc.poll_interval = 100\nrestart_after_crash = on");
$node->start;
$si->create_source($node, 'src');

sub q1 { return $node->safe_psql('postgres', $_[0]); }

sub diag_state
{
	diag q1(q{SELECT t.source_table, ts.phase, ts.snapshot_rows, ts.checkpoint_lsn
	          FROM mssql_cdc.tables t LEFT JOIN mssql_cdc.table_state ts USING (table_id) ORDER BY 1});
	diag q1(q{SELECT * FROM mssql_cdc.errors});
}

my ($ret, $out, $err) = $node->psql('postgres',
	q{ALTER SERVER src OPTIONS (ADD snapshot_connections '4')});
is($ret, 0, 'snapshot_connections is a server option') or diag $err;

$si->add_table($node, 'src', 'dbo.live');
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM mssql_cdc.table_state WHERE phase = 'streaming'}),
	'the streaming table streams');
# a round trip of 20 ms: every chunk takes a while, the copies overlap visibly
$si->ctl('rtt', 'ms=20');
$si->add_table($node, 'src', "dbo.$_", snapshot_mode => 'initial') for @copy;

# while the copies run: watch how many are in progress at once, SIGKILL
# the worker a few times, and insert into the streaming table
my ($max_at_once, $kills, $live_rows, $live_seen_during) = (0, 0, 0, 0);
my ($lane_spid, $errors_before);
my $in_progress = q{SELECT count(*) FROM mssql_cdc.table_state JOIN mssql_cdc.tables USING (table_id)
                    WHERE source_table LIKE 'c_' AND phase = 'snapshotting' AND snapshot_rows > 0};
my $copying = q{SELECT count(*) FROM mssql_cdc.table_state JOIN mssql_cdc.tables USING (table_id)
                WHERE source_table LIKE 'c_' AND phase <> 'streaming'};
my $deadline = time + 240;
while (time < $deadline)
{
	my ($r1, $n) = $node->psql('postgres', $in_progress);
	$max_at_once = $n if $r1 == 0 && $n =~ /^\d+$/ && $n > $max_at_once;
	my ($r2, $left) = $node->psql('postgres', $copying);
	last if $r2 == 0 && $left eq '0';
	if ($kills < 2 && $r1 == 0 && $n =~ /^\d+$/ && $n >= 1)
	{
		my $pid = wait_worker_pid($node, 30);
		if (defined $pid && kill_worker_and_wait($node, $pid))
		{
			$kills++;
			next;
		}
	}
	# then SQL Server ends the chunk sessions (KILL; one of them at least
	# has a copy in progress): the worker records the lost connection and
	# copies on from the resume keys
	if ($kills == 2 && !defined $lane_spid && $r1 == 0 && $n =~ /^\d+$/ && $n >= 1)
	{
		my $open = decode_json($si->ctl('requests'));
		my @lanes;
		for my $sess (@{ $open->{sessions} })
		{
			next unless ($sess->{app} // '') eq 'mssql_cdc';
			push @lanes, $sess->{spid}
			  if grep { /BEGIN TRANSACTION; SELECT TOP \(5\)/ } keys %{ $sess->{by_prefix} };
		}
		if (@lanes)
		{
			# a session listed may have ended since (the worker closes its
			# chunk sessions when the copies it saw are done, and after an
			# error): SQL Server answers its KILL with 6106; one must hit
			my $before = q1('SELECT coalesce(max(error_id), 0) FROM mssql_cdc.errors');
			my $out = $si->tsql(map { "KILL $_" } @lanes);
			die "KILL failed:\n$out\n" if $out =~ /^Msg (?!6106 )\d+/m;
			my $missed = () = $out =~ /^Msg 6106 /mg;
			if ($missed < @lanes)
			{
				$lane_spid = "@lanes";
				$errors_before = $before;
			}
			next;
		}
	}
	$live_rows++;
	$si->tsql_ok("INSERT INTO dbo.live VALUES ($live_rows, $live_rows)");
	my ($r3, $got) = $node->psql('postgres', 'SELECT count(*) FROM src_dbo_live');
	$live_seen_during = $got if $r3 == 0 && $got =~ /^\d+$/ && $got > $live_seen_during;
	usleep(200_000);
}
$si->ctl('rtt', 'ms=0');
ok($node->poll_query_until('postgres', q{SELECT count(*) = 5 FROM mssql_cdc.table_state WHERE phase = 'streaming'}),
	'every copy finished, all five tables stream')
  or diag_state();
cmp_ok($max_at_once, '>=', 2, "copies overlapped (up to $max_at_once tables in progress at once)");
is($kills, 2, 'the worker was SIGKILLed twice during the copies');
ok(defined $lane_spid, 'the chunk sessions were killed on the source during the copies (' . ($lane_spid // '') . ')');
is( q1(qq{SELECT string_agg(DISTINCT e.sqlstate || ' ' || e.condition || ' ' || t.source_table, ', ')
          FROM mssql_cdc.errors e JOIN mssql_cdc.tables t USING (table_id)
          WHERE e.error_id > $errors_before AND t.source_table LIKE 'c_'}) =~ /^08006 connection_lost c\d/ ? 1 : 0,
	1, 'the killed chunk session is recorded as the lost connection of its table')
  or diag q1(qq{SELECT * FROM mssql_cdc.errors WHERE error_id > $errors_before});
cmp_ok($live_seen_during, '>=', 2, "the streaming table got windows during the copies ($live_seen_during rows)");

for my $t (@copy)
{
	is(q1(qq{SELECT count(*), count(DISTINCT id), min(id), max(id) FROM src_dbo_$t WHERE _cdc_op = 'snapshot'}),
		"$rows|$rows|1|$rows", "$t: every row once after the kills");
}
ok($node->poll_query_until('postgres', "SELECT count(*) = $live_rows FROM src_dbo_live"),
	'the streaming table has every row');

# the chunk batches came from several sessions of the worker
my $requests = decode_json($si->ctl('requests'));
my %chunk_sessions;
for my $s (@{ $requests->{sessions} }, @{ $requests->{closed_sessions} })
{
	for my $p (keys %{ $s->{by_prefix} })
	{
		$chunk_sessions{ $s->{spid} } = 1 if $p =~ /BEGIN TRANSACTION; SELECT TOP \(5\)/;
	}
}
# one at a time, each worker process (the first and one per kill) reads on one session
cmp_ok(scalar(keys %chunk_sessions), '>', $kills + 1, 'chunks were read on several sessions of one process');

# steady state: one request per chunk.  A resnapshot of one table at a
# 20 ms round trip with a poll interval of 2 s: each chunk is one batch,
# read ahead while the previous chunk commits and used as sent (the
# stand-in counts as many chunk batches as the worker counts chunks); the
# table's start and each poll's own requests come on top, the fewer the
# longer the poll interval (about 50 requests at 1 s on a quiet machine).
$node->append_conf('postgresql.conf', 'mssql_cdc.poll_interval = 2000');
$node->reload;
$si->ctl('rtt', 'ms=20');
$si->ctl('requests', 'reset=true');
my $before = q1(q{SELECT requests_sent || ' ' || snapshot_chunks FROM mssql_cdc.worker_state() WHERE server_name = 'src'});
q1(q{SELECT mssql_cdc.resnapshot('src', 'dbo.c1')});
ok($node->poll_query_until('postgres', q{SELECT phase = 'streaming' FROM mssql_cdc.table_state JOIN mssql_cdc.tables USING (table_id) WHERE source_table = 'c1'}),
	'the resnapshot finished')
  or diag_state();
my $after = q1(q{SELECT requests_sent || ' ' || snapshot_chunks FROM mssql_cdc.worker_state() WHERE server_name = 'src'});
$si->ctl('rtt', 'ms=0');
my ($r0, $c0) = split / /, $before;
my ($r1, $c1) = split / /, $after;
my $chunks = $c1 - $c0;
my $per_chunk = ($r1 - $r0) / ($chunks || 1);
diag sprintf('resnapshot: %d requests for %d chunks (%.2f per chunk)', $r1 - $r0, $chunks, $per_chunk);
cmp_ok($chunks, '>=', $rows / 5, 'the resnapshot took its chunks');
# the start (describing the table, L0, the estimate) and the polls of the
# iterations (max LSN, capture instances, the streaming table's windows)
# are spread over the chunks
cmp_ok($per_chunk, '<=', 2, 'at most two requests per chunk, everything included');
my $batches = 0;
$requests = decode_json($si->ctl('requests'));
diag explain($requests) if $ENV{MSSQL_CDC_TEST_DUMP_REQUESTS};
for my $s (@{ $requests->{sessions} }, @{ $requests->{closed_sessions} })
{
	for my $p (keys %{ $s->{by_prefix} })
	{
		$batches += $s->{by_prefix}{$p} if $p =~ /BEGIN TRANSACTION; SELECT TOP \(5\)/;
	}
}
is($batches, $chunks, 'one chunk batch per chunk: each batch read ahead was used');

$node->stop;
$si->stop;
done_testing();
