# Diagnosis that matches SQL Server (issue 12, point 6), against the
# stand-in:
# (a) the last capture instance of a database dropped: SQL Server empties
#     cdc.lsn_time_mapping, so sys.fn_cdc_get_max_lsn() is NULL.  The table
#     is reported as a dropped capture instance, not as "waiting for the
#     capture job" and never as capture_job_stalled;
# (b) the named sys.sp_cdc_help_change_data_capture raises 22985 for a
#     table that is no longer enabled: the worker parks the table with its
#     own message and condition, and does not retry the raw error;
# (c) the capture-stall heuristic under every dummy-row cadence the
#     stand-in can play (every idle cycle, never, every few seconds): an
#     idle database never reads as a stalled capture job; a stopped one
#     does where the login may read sys.dm_cdc_log_scan_sessions, and
#     without that view once a captured table changes and the change is
#     not captured.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;
use Time::HiRes qw(time usleep);

my $si = StandIn->start(capture_interval => 0.2, databases => [ 'lonely', 'idle' ]);
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.t1 (id int NOT NULL PRIMARY KEY, v int)},
	q{CREATE TABLE dbo.t2 (id int NOT NULL PRIMARY KEY, v int)},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't1', @role_name = NULL},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't2', @role_name = NULL});
$si->tsql_ok(
	'USE lonely',
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.solo (id int NOT NULL PRIMARY KEY, v int)},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'solo', @role_name = NULL});
# idle: one login that may read sys.dm_cdc_log_scan_sessions (db_owner),
# one that may read everything else but not that view
$si->tsql_ok(
	q{CREATE LOGIN plain WITH PASSWORD = 'Pl41n-reader!'},
	'USE idle',
	q{CREATE USER plain FOR LOGIN plain},
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.q1 (id int NOT NULL PRIMARY KEY, v int)},
	q{CREATE TABLE dbo.q2 (id int NOT NULL PRIMARY KEY, v int)},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'q1', @role_name = NULL},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'q2', @role_name = NULL},
	q{GRANT SELECT ON dbo.q2 TO plain},
	q{GRANT SELECT ON SCHEMA::cdc TO plain});

my $node = PostgreSQL::Test::Cluster->new('diagnosis');
$node->init;
$si->setup_node($node, conf => "mssql_cdc.capture_stall_timeout = 2\n");
$node->start;
$si->create_source($node, 'src');
$si->create_source($node, 'lone', database => 'lonely');
$si->create_source($node, 'seen', database => 'idle');
my ($host, $port) = ($si->host, $si->port);
$node->safe_psql('postgres', qq{
CREATE SERVER unseen FOREIGN DATA WRAPPER mssql_cdc
  OPTIONS (host '$host', port '$port', database 'idle', query_timeout '10', login_timeout '5');
CREATE USER MAPPING FOR CURRENT_USER SERVER unseen
  OPTIONS (username 'plain', password 'Pl41n-reader!');
});
# t1 is copied by a snapshot (so a resnapshot describes it again), t2 streams
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('src', 'dbo.t1', snapshot_mode => 'initial')});
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('src', 'dbo.t2', snapshot_mode => 'never')});
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('lone', 'dbo.solo', snapshot_mode => 'never')});

# poll a boolean query for up to $seconds (a failing run does not sit out
# the default three minutes)
sub wait_for
{
	my ($sql, $seconds) = @_;
	my $deadline = time + $seconds;
	while (time < $deadline)
	{
		my ($ret, $out) = $node->psql('postgres', $sql);
		return 1 if $ret == 0 && $out eq 't';
		usleep(100_000);
	}
	return 0;
}

sub diag_state
{
	diag $node->safe_psql('postgres',
		'SELECT server, source_table, state, condition, last_error FROM mssql_cdc.status ORDER BY 1, 2;'
		  . ' SELECT server_name, warning, last_error FROM mssql_cdc.servers ORDER BY 1;'
		  . ' SELECT error_id, server_name, condition, message FROM mssql_cdc.errors ORDER BY error_id DESC LIMIT 8');
}

sub status_of
{
	my ($server, $table, $col) = @_;
	return $node->safe_psql('postgres',
		"SELECT $col FROM mssql_cdc.status WHERE server = '$server' AND source_table = '$table'");
}

sub server_warning
{
	my ($server) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(warning, '') FROM mssql_cdc.servers WHERE server_name = '$server'");
}

ok(wait_for(q{SELECT count(*) = 3 FROM mssql_cdc.status WHERE state = 'streaming'}, 60),
	'the three tables stream')
  or diag_state();

# ---------------------------------------------------------------------------
# (a) the last capture instance of database "lonely" is dropped
# ---------------------------------------------------------------------------
$si->tsql_ok('USE lonely', q{INSERT INTO dbo.solo VALUES (1, 10)});
ok(wait_for(q{SELECT count(*) = 1 FROM public.lone_dbo_solo}, 60), '(a) the insert before the drop arrives');
my $log_from = -s $node->logfile;
my $drop_at = time;
$si->tsql_ok('USE lonely',
	q{EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'solo', @capture_instance = N'dbo_solo'});
is($si->tsql_ok('USE lonely', q{SELECT CASE WHEN sys.fn_cdc_get_max_lsn() IS NULL THEN 'null' END AS m})
	  =~ /^null$/m ? 1 : 0, 1, '(a) on the source the max LSN is NULL now');
ok( wait_for(q{SELECT state = 'error' AND condition = 'capture_instance_missing'
	  FROM mssql_cdc.status WHERE server = 'lone'}, 30),
	'(a) the table stops with condition capture_instance_missing')
  or diag_state();
is( status_of('lone', 'dbo.solo', 'last_error'),
	qq{Capture instance "dbo_solo" of table dbo.solo was dropped on server "lone" (sys.sp_cdc_disable_table), and the table has no other capture instance: its changes can no longer be read. }
	  . q{Enable a new capture instance (EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'solo', @role_name = NULL) and call mssql_cdc.resnapshot() to copy the table again, or stop capturing it with mssql_cdc.remove_table().},
	'(a) the error says the capture instance was dropped and how to recover');
# well past capture_stall_timeout (2 s): still no stall warning
sleep(1) while time < $drop_at + 6;
is(server_warning('lone'), '', '(a) no capture_job_stalled warning for the source');
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM mssql_cdc.errors WHERE server_name = 'lone' AND condition = 'capture_job_stalled'}),
	'0', '(a) no capture_job_stalled in mssql_cdc.errors');
unlike(slurp_file($node->logfile, $log_from), qr/waiting for the capture job/,
	'(a) the log does not say "waiting for the capture job"');

# ---------------------------------------------------------------------------
# (b) 22985 from the named sys.sp_cdc_help_change_data_capture
# ---------------------------------------------------------------------------
# t1's capture instance is dropped (t2 keeps the mapping alive): parked
$si->tsql_ok(q{EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N't1', @capture_instance = N'dbo_t1'});
ok( wait_for(q{SELECT state = 'error' AND condition = 'capture_instance_missing'
	  FROM mssql_cdc.status WHERE server = 'src' AND source_table = 'dbo.t1'}, 30),
	'(b) t1 stops when its capture instance is dropped')
  or diag_state();
# the user asks for a new snapshot before enabling the table again: the
# worker describes t1 through the named procedure, which raises 22985
$node->safe_psql('postgres', q{SELECT mssql_cdc.resnapshot('src', 'dbo.t1')});
ok( wait_for(q{SELECT state = 'error' AND condition = 'capture_instance_missing'
	  AND last_error LIKE 'table dbo.t1 of server "src" is not enabled for change data capture%'
	  FROM mssql_cdc.status WHERE server = 'src' AND source_table = 'dbo.t1'}, 30),
	'(b) 22985: t1 is parked with the worker\'s own message and condition')
  or diag_state();
like(status_of('src', 'dbo.t1', 'hint'),
	qr/^A db_owner runs EXEC sys\.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N't1', \@role_name = NULL; then call mssql_cdc\.resnapshot\(\)/,
	'(b) the hint says how to enable the table again');
my $errors_then = $node->safe_psql('postgres', q{SELECT count(*) FROM mssql_cdc.errors WHERE server_name = 'src'});
sleep(4);
is($node->safe_psql('postgres', q{SELECT count(*) FROM mssql_cdc.errors WHERE server_name = 'src'}),
	$errors_then, '(b) parked, not retried: no new errors');
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM mssql_cdc.errors WHERE server_name = 'src' AND message LIKE '%22985%'}),
	'0', '(b) the raw SQL Server error is never the reported failure');
is(status_of('src', 'dbo.t2', 'state'), 'streaming', '(b) the other table of the source streams on');
# the way back: enable the table, resnapshot
$si->tsql_ok(q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't1', @role_name = NULL},
	q{INSERT INTO dbo.t1 VALUES (5, 50)});
$node->safe_psql('postgres', q{SELECT mssql_cdc.resnapshot('src', 'dbo.t1')});
ok(wait_for(q{SELECT state = 'streaming' FROM mssql_cdc.status WHERE server = 'src' AND source_table = 'dbo.t1'}, 60),
	'(b) enabled again and resnapshot: t1 streams')
  or diag_state();

# ---------------------------------------------------------------------------
# (c) the capture-stall heuristic under each dummy-row cadence
# ---------------------------------------------------------------------------
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('seen', 'dbo.q1', snapshot_mode => 'never')});
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('unseen', 'dbo.q2', snapshot_mode => 'never')});
ok(wait_for(q{SELECT count(*) = 2 FROM mssql_cdc.status WHERE server IN ('seen', 'unseen') AND state = 'streaming'}, 60),
	'(c) both idle sources stream')
  or diag_state();

# The capture job runs, but SQL Server writes no dummy rows: an idle
# database whose max LSN does not move for longer than the timeout.
$si->ctl('capture_options', 'dummy_rows=never');
sleep(7);
is(server_warning('seen'), '', '(c) no dummy rows, idle: no stall judged (login with the scan-session view)');
is(server_warning('unseen'), '', '(c) no dummy rows, idle: no stall judged (login without it)');

# The capture job stops: seen from sys.dm_cdc_log_scan_sessions
$si->ctl('capture_freeze');
ok(wait_for(q{SELECT warning = 'capture_job_stalled' FROM mssql_cdc.servers WHERE server_name = 'seen'}, 30),
	'(c) no dummy rows, job stopped: stall judged from the scan sessions')
  or diag_state();
like($node->safe_psql('postgres', q{SELECT last_error FROM mssql_cdc.servers WHERE server_name = 'seen'}),
	qr/^The capture job of SQL Server \(server "seen"\) is not advancing: sys\.fn_cdc_get_max_lsn\(\) has not moved for \d+ seconds and its last log scan \(sys\.dm_cdc_log_scan_sessions\) ended \d+ seconds ago\.$/,
	'(c) the warning says how the stall was judged');
sleep(4);
is(server_warning('unseen'), '',
	'(c) without the view, a stopped job on an idle database cannot be told from a running one: no warning');
# a captured table changes while the job is stopped: that is evidence
$si->tsql_ok('USE idle', q{INSERT INTO dbo.q2 VALUES (1, 2)});
ok(wait_for(q{SELECT warning = 'capture_job_stalled' FROM mssql_cdc.servers WHERE server_name = 'unseen'}, 30),
	'(c) without the view: a change the job does not capture is judged a stall')
  or diag_state();
like($node->safe_psql('postgres', q{SELECT last_error FROM mssql_cdc.servers WHERE server_name = 'unseen'}),
	qr/^The capture job of SQL Server \(server "unseen"\) is not advancing: sys\.fn_cdc_get_max_lsn\(\) has not moved for \d+ seconds although table dbo\.q2 changed \d+ seconds ago \(its row count in sys\.partitions\)\.$/,
	'(c) the warning without the view says it was judged from a changed table');
$si->ctl('capture_resume');
ok(wait_for(q{SELECT bool_and(warning IS NULL) FROM mssql_cdc.servers WHERE server_name IN ('seen', 'unseen')}, 30),
	'(c) the job runs again: both warnings clear')
  or diag_state();
ok(wait_for(q{SELECT count(*) = 1 FROM public.unseen_dbo_q2}, 30), '(c) the change made during the stall arrives')
  or diag_state();

# Dummy rows at every idle cycle (0.2 s), and at most one every 5 s
# (longer than the timeout): idle is never a stall.
$si->ctl('capture_options', 'dummy_rows=every');
sleep(4);
is(server_warning('seen'), '', '(c) dummy rows every cycle, idle: no stall (with the view)');
is(server_warning('unseen'), '', '(c) dummy rows every cycle, idle: no stall (without it)');
$si->ctl('capture_options', 'dummy_rows=5');
sleep(12);
is(server_warning('seen'), '', '(c) a dummy row every 5 s, idle: no stall (with the view)');
is(server_warning('unseen'), '', '(c) a dummy row every 5 s, idle: no stall (without it)');
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM mssql_cdc.errors WHERE server_name IN ('seen', 'unseen') AND condition = 'capture_job_stalled'}),
	'2', '(c) the only stalls recorded are the two real ones');
$si->ctl('capture_options', 'dummy_rows=every');

# every change still arrives once
$si->tsql_ok('USE idle', q{INSERT INTO dbo.q1 VALUES (1, 1)}, q{INSERT INTO dbo.q2 VALUES (2, 2)});
ok(wait_for(q{SELECT (SELECT count(*) FROM public.seen_dbo_q1) = 1 AND (SELECT count(*) FROM public.unseen_dbo_q2) = 2}, 60),
	'(c) changes flow after the stalls, once each')
  or diag_state();

$node->stop;
done_testing();
