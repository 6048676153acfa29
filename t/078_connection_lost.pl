# A session the server closes is a lost connection: SQL Server restarting,
# or KILL of the worker's session, while the worker is idle, while it waits
# for an answer and while it reads a result.  Each time the worker records 08006 "lost the connection
# to SQL Server" with condition connection_lost (doc/troubleshooting.md,
# doc/connecting.md), reconnects by itself, and the staging table ends up
# equal to the source: nothing of the cut window is kept, nothing is lost.
#
# KILL of a running request (test/standin/ENGINE.md, "KILL") is UNCONFIRMED
# in what the killed session receives before the close: nothing, a DONE
# with the error bit, or Msg 596 (severity 21) and that DONE.  Every round
# uses another of them.  The scenarios repeat: the outcome used to depend on
# where db-lib happened to notice the close.
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

my $rounds = 6;
my @notices = qw(none done_error error_596);

my $si = StandIn->start(capture_interval => 0.1);
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.k (id int NOT NULL PRIMARY KEY, val int NOT NULL)},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'k', @role_name = NULL});

my $node = PostgreSQL::Test::Cluster->new('connection_lost');
$node->init;
# a poll a second: between polls the worker's session is idle
$si->setup_node($node, conf => "mssql_cdc.poll_interval = 1000\nmssql_cdc.retry_max_backoff = 1\n");
$node->start;
$si->create_source($node, 'src', query_timeout => 20);
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('src', 'dbo.k', snapshot_mode => 'never')});
ok($node->poll_query_until('postgres', q{SELECT state = 'streaming' FROM mssql_cdc.status}), 'streaming');

my @expected;
my $next_id = 1;

# one source transaction of three inserts
sub insert_tx
{
	my @stmts;
	for (1 .. 3)
	{
		my $id = $next_id++;
		push @stmts, "INSERT INTO dbo.k VALUES ($id, " . ($id * 10) . ')';
		push @expected, "insert|$id|" . ($id * 10);
	}
	$si->tsql_ok('BEGIN TRANSACTION; ' . join('; ', @stmts) . '; COMMIT');
}

sub diag_state
{
	diag $node->safe_psql('postgres',
		'SELECT * FROM mssql_cdc.status; SELECT error_id, sqlstate, condition, message, detail FROM mssql_cdc.errors ORDER BY error_id DESC LIMIT 3');
}

sub staging_matches
{
	my ($what) = @_;
	my $n = scalar @expected;
	ok($node->poll_query_until('postgres', "SELECT count(*) >= $n FROM public.src_dbo_k"),
		"$what: all $n rows arrived")
	  or diag_state();
	my @got = split /\n/, $node->safe_psql('postgres',
		"SELECT _cdc_op || '|' || id || '|' || val FROM public.src_dbo_k ORDER BY _cdc_lsn, _cdc_seqval, _cdc_op");
	is_deeply(\@got, \@expected, "$what: staging equals the source exactly (no loss, no duplicate)")
	  or @expected = @got;
	ok( $node->poll_query_until('postgres',
			q{SELECT state = 'streaming' AND condition IS NULL FROM mssql_cdc.status}),
		"$what: streaming again, no condition left")
	  or diag_state();
}

sub last_error_id
{
	return $node->safe_psql('postgres', 'SELECT coalesce(max(error_id), 0) FROM mssql_cdc.errors');
}

# The worker's session on the stand-in (application name mssql_cdc).
sub worker_spid
{
	my $deadline = time + 30;
	while (time < $deadline)
	{
		my ($spid) = $si->ctl('connections') =~ /"app": "mssql_cdc"[^}]*"spid": (\d+)/;
		return $spid if defined $spid;
		usleep(50_000);
	}
	die 'the worker has no session on the stand-in';
}

# The worker reads a change result and waits in the middle of it: the
# stand-in sends one row of the next change query, then nothing.  A change
# query of a window without rows takes the fault without stalling; then
# the fault is armed again.
sub worker_in_result
{
	my ($seq) = $si->ctl('log', 'limit=1') =~ /"seq": (\d+)/;
	for (1 .. 10)
	{
		$si->ctl('capture_freeze');
		insert_tx();
		$si->ctl('stall', 'seconds=30', 'after_rows=1', 'match=lsn_time_mapping AS m');
		$si->ctl('capture_resume');
		my $deadline = time + 30;
		while (time < $deadline)
		{
			last if $si->ctl('faults') !~ /"kind"/;
			usleep(20_000);
		}
		# the row is out when the stand-in logged the stall after it
		$deadline = time + 2;
		while (time < $deadline)
		{
			return if $si->ctl('log', "since=$seq") =~ /"after_rows": 1, "event": "fault", "fault": "stall"/;
			usleep(20_000);
		}
	}
	die 'the worker never waited in the middle of a change result';
}

# The worker has sent the next change query and waits for its answer: the
# stand-in holds the response back.
sub worker_waiting
{
	my ($seq) = $si->ctl('log', 'limit=1') =~ /"seq": (\d+)/;
	$si->ctl('capture_freeze');
	insert_tx();
	$si->ctl('stall', 'seconds=30', 'match=lsn_time_mapping AS m');
	$si->ctl('capture_resume');
	my $deadline = time + 30;
	while (time < $deadline)
	{
		return if $si->ctl('log', "since=$seq") =~ /"event": "fault", "fault": "stall", "seconds"/;
		usleep(20_000);
	}
	die 'the worker never waited for a change result';
}

# The first error after $since: 08006 "lost the connection", connection_lost.
sub lost_connection
{
	my ($what, $since) = @_;
	my $row = '';
	my $deadline = time + 60;
	while (time < $deadline)
	{
		$row = $node->safe_psql('postgres',
			qq{SELECT sqlstate || E'\\x01' || message || E'\\x01' || coalesce(condition, '') || E'\\x01' || coalesce(detail, '')
			   FROM mssql_cdc.errors WHERE error_id > $since ORDER BY error_id LIMIT 1});
		last if $row ne '';
		usleep(50_000);
	}
	my ($sqlstate, $message, $condition, $detail) = split /\x01/, $row, 4;
	ok(defined $message, "$what: an error was recorded") or return diag_state();
	is($sqlstate, '08006', "$what: SQLSTATE 08006");
	like($message, qr/^lost the connection to SQL Server \(server "src"\) while /,
		"$what: \"$message\"") or diag "detail: $detail";
	is($condition, 'connection_lost', "$what: condition connection_lost");
}

for my $round (1 .. $rounds)
{
	my $notice = $notices[ ($round - 1) % @notices ];
	$si->ctl('kill_notice', "notice=$notice");

	my $what = "round $round: SQL Server restart, worker idle";
	my $since = last_error_id();
	$si->ctl('restart');
	insert_tx();
	lost_connection($what, $since);
	staging_matches($what);

	$what = "round $round: SQL Server restart, worker in a result";
	worker_in_result();
	$since = last_error_id();
	$si->ctl('restart');
	lost_connection($what, $since);
	$si->ctl('clear');
	staging_matches($what);

	$what = "round $round: KILL, worker idle";
	$since = last_error_id();
	my $spid = worker_spid();
	$si->tsql_ok("KILL $spid");
	insert_tx();
	lost_connection($what, $since);
	staging_matches($what);

	$what = "round $round: KILL ($notice), worker waiting for the answer";
	worker_waiting();
	$spid = worker_spid();
	$since = last_error_id();
	$si->tsql_ok("KILL $spid");
	lost_connection($what, $since);
	$si->ctl('clear');
	staging_matches($what);

	$what = "round $round: KILL ($notice), worker in a result";
	worker_in_result();
	$spid = worker_spid();
	$since = last_error_id();
	$si->tsql_ok("KILL $spid");
	lost_connection($what, $since);
	$si->ctl('clear');
	staging_matches($what);
}

$node->stop;
$si->stop;
done_testing();
