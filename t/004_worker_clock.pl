# The worker's clock: every time the worker writes is the time of the event,
# not the start of its process.  A background process gets a new
# transaction start time only from SetCurrentStatementStartTimestamp(), so a
# long-lived worker that forgot it would date every error, checkpoint and
# snapshot back to its own start.
#
# Each event below happens to a worker that has run for several seconds
# (checked through pg_stat_activity.backend_start), and each time written is
# compared with clock_timestamp() taken just before the event: a time older
# than that is wrong, by at least the worker's age on the broken code.
#
# Events: a window (table_state.updated_at), an error (errors.occurred_at,
# status.last_error_at), a resnapshot (snapshot_started_at against
# resnapshot_requested_at, snapshot_rows_per_second while it runs) and a
# capture job stall (the warning's errors.occurred_at, capture_stall.c).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Launcher qw(wait_worker_pid);
use StandIn;
use Test::More;
use Time::HiRes qw(usleep);

# How long the worker has run before each event; a broken clock is off by
# at least that much, a right one by none (the event follows the mark).
my $worker_age = 4;

my $si = StandIn->start(capture_interval => 0.1);
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.c (id int NOT NULL PRIMARY KEY, val int NOT NULL)},
	join(' ', map { "INSERT INTO dbo.c VALUES ($_, $_);" } 1 .. 30),
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'c', @role_name = NULL});

my $node = PostgreSQL::Test::Cluster->new('clock');
$node->init;
$si->setup_node($node,
	conf => "mssql_cdc.snapshot_chunk_rows = 10\nmssql_cdc.capture_stall_timeout = 2\n");
$node->start;
$si->create_source($node, 'src');
$si->add_table_when_started($node,
	q{SELECT mssql_cdc.add_table('src', 'dbo.c', snapshot_mode => 'initial')});
ok($node->poll_query_until('postgres', q{SELECT state = 'streaming' FROM mssql_cdc.status}),
	'the initial snapshot is done');
my $next_id = 31;

sub clock
{
	return $node->safe_psql('postgres', 'SELECT clock_timestamp()');
}

# Wait until the current worker has run for $worker_age seconds; returns
# its pid and backend_start.
sub long_lived_worker
{
	my $pid = wait_worker_pid($node, 60);
	die 'no worker' unless defined $pid;
	$node->poll_query_until('postgres',
		"SELECT clock_timestamp() - backend_start > interval '$worker_age s' FROM pg_stat_activity WHERE pid = $pid")
	  or die "worker $pid did not stay up";
	my $start = $node->safe_psql('postgres', "SELECT backend_start FROM pg_stat_activity WHERE pid = $pid");
	note "worker $pid started at $start";
	return ($pid, $start);
}

# Is $ts (a query's result) not older than the mark?  The names carry the
# values, for the record.
sub not_before
{
	my ($what, $expr, $mark, $from) = @_;
	my ($ok, $value) = split /\|/, $node->safe_psql('postgres',
		"SELECT ($expr) >= '$mark'::timestamptz, ($expr) FROM $from");
	ok($ok eq 't', "$what: $value, not before $mark");
}

# --- a window: the checkpoint's updated_at -------------------------------------
{
	my ($pid, $start) = long_lived_worker();
	my $mark = clock();
	my $id = $next_id++;
	$si->tsql_ok("INSERT INTO dbo.c VALUES ($id, $id)");
	ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM public.src_dbo_c WHERE id = $id"),
		'window: the change arrived');
	not_before('window: table_state.updated_at', 'updated_at', $mark, 'mssql_cdc.table_state');
	is(wait_worker_pid($node, 5), $pid, 'window: by the same long-lived worker');
}

# --- an error: errors.occurred_at and status.last_error_at -------------------
{
	my ($pid, $start) = long_lived_worker();
	my $since = $node->safe_psql('postgres', 'SELECT coalesce(max(error_id), 0) FROM mssql_cdc.errors');
	my $mark = clock();
	$si->ctl('drop_after_rows', 'rows=0', 'match=lsn_time_mapping AS m');
	my $id = $next_id++;
	$si->tsql_ok("INSERT INTO dbo.c VALUES ($id, $id)");
	my $errors = "mssql_cdc.errors WHERE error_id > $since AND condition <> 'capture_job_stalled'";
	ok($node->poll_query_until('postgres', "SELECT count(*) > 0 FROM $errors"), 'error: recorded');
	my $error_id = $node->safe_psql('postgres', "SELECT min(error_id) FROM $errors");
	like($node->safe_psql('postgres', "SELECT message FROM mssql_cdc.errors WHERE error_id = $error_id"),
		qr/lost the connection/, 'error: the dropped connection');
	not_before('error: errors.occurred_at', 'occurred_at', $mark,
		"mssql_cdc.errors WHERE error_id = $error_id");
	not_before('error: status.last_error_at', 'last_error_at', $mark, 'mssql_cdc.status');
	ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid"),
		'error: the long-lived worker took it and exited');
	ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM public.src_dbo_c WHERE id = $id"),
		'error: the change arrives after the retry');
}

# --- a resnapshot: snapshot_started_at, snapshot_rows_per_second -------------
{
	my ($pid, $start) = long_lived_worker();
	# the second chunk waits 3 s, so the snapshot is seen while it runs
	$si->ctl('stall', 'seconds=3', 'match=[id] > ');
	my $mark = clock();
	$node->safe_psql('postgres', q{SELECT mssql_cdc.resnapshot('src', 'dbo.c')});
	ok( $node->poll_query_until('postgres',
			q{SELECT state = 'snapshotting' AND snapshot_rows = 10 FROM mssql_cdc.status}),
		'resnapshot: the first chunk is copied, the second one stalls');
	my ($later, $requested, $started) = split /\|/, $node->safe_psql('postgres',
		q{SELECT snapshot_started_at >= resnapshot_requested_at, resnapshot_requested_at, snapshot_started_at
		  FROM mssql_cdc.table_state});
	ok($later eq 't', "resnapshot: snapshot_started_at $started is not before resnapshot_requested_at $requested");
	not_before('resnapshot: snapshot_started_at', 'snapshot_started_at', $mark, 'mssql_cdc.table_state');
	# started at or after the mark: at least 10 rows per (now - mark) seconds
	my ($fast, $rate, $bound) = split /\|/, $node->safe_psql('postgres', qq{
		SELECT snapshot_rows_per_second >= round(10 / extract(epoch FROM now() - '$mark'::timestamptz), 1) - 0.1,
		       snapshot_rows_per_second, round(10 / extract(epoch FROM now() - '$mark'::timestamptz), 1)
		FROM mssql_cdc.status});
	ok($fast eq 't', "resnapshot: snapshot_rows_per_second $rate, at least $bound (10 rows since the call)");
	is(wait_worker_pid($node, 5), $pid, 'resnapshot: by the same long-lived worker');
	ok($node->poll_query_until('postgres', q{SELECT state = 'streaming' FROM mssql_cdc.status}),
		'resnapshot: done');
}

# --- a capture job stall: the warning's errors.occurred_at --------------------
{
	my ($pid, $start) = long_lived_worker();
	my $since = $node->safe_psql('postgres', 'SELECT coalesce(max(error_id), 0) FROM mssql_cdc.errors');
	my $mark = clock();
	$si->ctl('capture_freeze');
	ok( $node->poll_query_until('postgres',
			"SELECT count(*) = 1 FROM mssql_cdc.errors WHERE error_id > $since AND condition = 'capture_job_stalled'"),
		'capture stall: the warning is recorded');
	not_before('capture stall: errors.occurred_at', 'occurred_at', $mark,
		"mssql_cdc.errors WHERE error_id > $since AND condition = 'capture_job_stalled'");
	is(wait_worker_pid($node, 5), $pid, 'capture stall: seen by the same long-lived worker');
	$si->ctl('capture_resume');
}

$node->stop;
$si->stop;
done_testing();
