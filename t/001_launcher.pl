# Launcher lifecycle: start, idle without the extension, notice CREATE and
# DROP EXTENSION, reconcile at commit of API calls (and not on rollback),
# reload settings, stop quickly on SIGTERM and come back, survive a crash
# restart, and refuse to load without shared_preload_libraries.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use Launcher qw(launcher_barrier);
use Time::HiRes qw(time usleep);

my $launcher_row =
  "SELECT pid FROM pg_stat_activity WHERE backend_type = 'mssql_cdc launcher'";


my $node = PostgreSQL::Test::Cluster->new('launcher');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'mssql_cdc'
mssql_cdc.database = 'cdcdb'
mssql_cdc.poll_interval = '200ms'
log_min_messages = debug1
# the SIGKILL test below needs the postmaster's crash restart
restart_after_crash = on
});
$node->start;

# --- the configured database does not exist yet: the launcher fails to
# connect, and the postmaster keeps restarting it until it does.
$node->wait_for_log(qr/FATAL:  database "cdcdb" does not exist/);
$node->safe_psql('postgres', 'CREATE DATABASE cdcdb');

# --- it appears in pg_stat_activity under its own backend type
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity
		  WHERE backend_type = 'mssql_cdc launcher' AND datname = 'cdcdb'"),
	'launcher runs in mssql_cdc.database with backend_type "mssql_cdc launcher"');
my $pid = $node->safe_psql('postgres', $launcher_row);
like($pid, qr/^\d+$/, "launcher pid $pid");

# --- without the extension it idles, and says so once
$node->wait_for_log(
	qr/mssql_cdc launcher is idle: extension "mssql_cdc" is not installed in database "cdcdb"/);
ok($node->log_contains(qr/mssql_cdc launcher started in database "cdcdb"/),
	'the launcher logs the database it started in');

# --- SIGHUP: same process, new setting seen by the launcher itself
$node->append_conf('postgresql.conf', "mssql_cdc.poll_interval = '250ms'");
my $offset = -s $node->logfile;
$node->reload;
$node->wait_for_log(
	qr/mssql_cdc launcher reloaded its configuration: poll_interval = 250 ms/,
	$offset);
is($node->safe_psql('postgres', $launcher_row), $pid, 'reload keeps the launcher');

# After more loop iterations the idle notice must still be there only once.
launcher_barrier($node);
my @idle = (slurp_file($node->logfile) =~ /mssql_cdc launcher is idle/g);
is(scalar @idle, 1, 'idle state is logged once, not per wake-up');

# --- the extension in some other database is not the launcher's business,
# and installing it there warns that nothing will be captured
my ($ret, $stdout, $stderr) =
  $node->psql('postgres', 'CREATE EXTENSION mssql_cdc');
is($ret, 0, 'CREATE EXTENSION works in another database');
like(
	$stderr,
	qr/WARNING:  mssql_cdc is being installed in database "postgres", but its launcher serves database "cdcdb"/,
	'with a warning that the launcher serves another database');
$offset = -s $node->logfile;
launcher_barrier($node);
unlike(substr(slurp_file($node->logfile), $offset),
	qr/found the extension/, 'launcher ignores the extension in other databases');
ok( $node->poll_query_until(
		'postgres', q{SELECT state = 'idle' AND wait_event_type = 'Extension'
		  FROM pg_stat_activity WHERE backend_type = 'mssql_cdc launcher'}),
	'between wake-ups the launcher is idle in an Extension wait');

# --- CREATE EXTENSION is noticed
$offset = -s $node->logfile;
$node->safe_psql('cdcdb', 'CREATE EXTENSION mssql_cdc');
$node->wait_for_log(
	qr/mssql_cdc launcher found the extension in database "cdcdb"/, $offset);
is($node->safe_psql('cdcdb', 'SELECT mssql_cdc.launcher_pid()'),
	$pid, 'mssql_cdc.launcher_pid() reports the launcher');
is($node->safe_psql('cdcdb', 'SELECT count(*) FROM mssql_cdc.worker_state()'),
	'0', 'no worker slots while no source is configured');

# --- API calls wake the launcher when they commit, and only then.
# The source row is written directly (as the API's own hints tell a
# superuser to do) so this test needs no SQL Server; the hand edit itself
# wakes the launcher (catalog trigger), which finds nothing to run yet.
$offset = -s $node->logfile;
$node->safe_psql(
	'cdcdb', q{
CREATE SERVER erp FOREIGN DATA WRAPPER mssql_cdc
  OPTIONS (host '127.0.0.1', port '1433', database 'erp');
CREATE USER MAPPING FOR CURRENT_USER SERVER erp
  OPTIONS (username 'cdc_reader', password 'secret');
INSERT INTO mssql_cdc.servers (server_name, run_as, paused)
  VALUES ('erp', current_user, true);
INSERT INTO mssql_cdc.tables (server_name, source_schema, source_table,
                              staging_schema, staging_table)
  VALUES ('erp', 'dbo', 'orders', 'public', 'erp_dbo_orders');
});
# Deterministic, not just "eventually": the periodic resync is a minute
# away, so only the commit-time wake-up can explain a reconciliation that
# has happened by the end of the next loop iteration.
launcher_barrier($node);
like(substr(slurp_file($node->logfile), $offset),
	qr/mssql_cdc launcher: 0 source\(s\) should run/,
	'a hand edit of the source catalog wakes the launcher at commit');

# While erp is paused nothing else makes the launcher reconcile (no slots,
# next periodic resync a minute away), so the first reconciliation after
# these calls must be the one for the committed resume ("1 source(s)"); a
# wake-up from a rolled-back call would show up before it as "0 source(s)".
$offset = -s $node->logfile;
$node->safe_psql('cdcdb', q{BEGIN; SELECT mssql_cdc.resume('erp'); ROLLBACK;});
$node->safe_psql('cdcdb',
	q{BEGIN; SAVEPOINT s; SELECT mssql_cdc.resume('erp'); ROLLBACK TO s; COMMIT;});
$node->safe_psql('cdcdb',
	q{BEGIN; SAVEPOINT s; SELECT mssql_cdc.resume('erp'); RELEASE s; COMMIT;});
$node->wait_for_log(qr/mssql_cdc launcher: 1 source\(s\) should run/, $offset);
my ($first_reconcile) =
  substr(slurp_file($node->logfile), $offset) =~ /(\d+) source\(s\) should run/;
is($first_reconcile, '1',
	'rolled-back calls and savepoints do not wake the launcher; a released savepoint does');

$node->wait_for_log(
	qr/mssql_cdc launcher: starting a worker for source "erp"/, $offset);
pass('a resumed source with tables gets a worker start');

SKIP:
{
	skip 'this build has a source worker', 1
	  unless $node->log_contains(qr/but this build has no source worker/, $offset);
	# The launcher claims a slot, finds no worker to start and frees it again.
	ok( $node->poll_query_until(
			'cdcdb', 'SELECT count(*) = 0 FROM mssql_cdc.worker_state()'),
		'worker_state() shows no process that does not exist');
}

$offset = -s $node->logfile;
$node->safe_psql('cdcdb', q{SELECT mssql_cdc.pause('erp')});
$node->wait_for_log(qr/mssql_cdc launcher: 0 source\(s\) should run/, $offset);
pass('pause wakes the launcher, which no longer wants the source');

# --- DROP EXTENSION: back to idle (and nothing should run)
$offset = -s $node->logfile;
$node->safe_psql('cdcdb', 'DROP EXTENSION mssql_cdc CASCADE');
$node->wait_for_log(qr/mssql_cdc launcher is idle/, $offset);
$node->safe_psql('cdcdb', 'CREATE EXTENSION mssql_cdc');
$node->wait_for_log(qr/mssql_cdc launcher found the extension/, $offset);
pass('launcher follows DROP and CREATE EXTENSION');

# --- SIGTERM (pg_terminate_backend): gone within a second, then restarted
my $t0 = time;
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
while (kill(0, $pid) && time - $t0 < 10)
{
	usleep(5_000);
}
my $stop_ms = int((time - $t0) * 1000);
diag("launcher exited ${stop_ms} ms after SIGTERM");
cmp_ok($stop_ms, '<', 1000, 'launcher stops within one second of SIGTERM');
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) = 1 FROM ($launcher_row) l WHERE pid <> $pid"),
	'a terminated launcher is started again');
$pid = $node->safe_psql('postgres', $launcher_row);
ok($node->log_contains(qr/mssql_cdc launcher shutting down/),
	'SIGTERM shutdown is logged');

# --- SIGKILL: the postmaster treats it as a crash and restarts everything;
# the launcher must come back with the rest of the server.
$offset = -s $node->logfile;
kill 'KILL', $pid;
$node->wait_for_log(qr/all server processes terminated; reinitializing/, $offset);
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) = 1 FROM ($launcher_row) l WHERE pid <> $pid"),
	'launcher is back after a crash restart');
my $new_pid = $node->safe_psql('postgres', $launcher_row);
ok( $node->poll_query_until(
		'cdcdb', "SELECT mssql_cdc.launcher_pid() = $new_pid"),
	'shared memory names the new launcher after the crash restart');

$node->stop;

# --- without shared_preload_libraries the library refuses to load, clearly
my $plain = PostgreSQL::Test::Cluster->new('no_preload');
$plain->init;
$plain->start;
($ret, $stdout, $stderr) =
  $plain->psql('postgres', 'CREATE EXTENSION mssql_cdc');
isnt($ret, 0, 'CREATE EXTENSION fails without preload');
like(
	$stderr,
	qr/ERROR:  mssql_cdc must be loaded via shared_preload_libraries/,
	'with the preload error');
like($stderr, qr/HINT:  Add mssql_cdc to shared_preload_libraries/,
	'and a hint that says how to fix it');
($ret, $stdout, $stderr) = $plain->psql('postgres', q{LOAD 'mssql_cdc'});
like(
	$stderr,
	qr/mssql_cdc must be loaded via shared_preload_libraries/,
	'LOAD fails the same way');
is($plain->safe_psql('postgres', 'SELECT 1'), '1', 'server is unharmed');
is( $plain->safe_psql(
		'postgres', "SELECT count(*) FROM pg_extension WHERE extname = 'mssql_cdc'"),
	'0',
	'no half-created extension is left behind');
$plain->stop;

done_testing();
