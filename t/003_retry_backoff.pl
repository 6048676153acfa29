# Worker slots and retry backoff, driven through the one launch failure that
# exists without a source worker: the source's run_as role does not exist.
# Shows a slot in mssql_cdc.worker_state() with its retry schedule, backoff
# doubling, the mssql_cdc.retry_max_backoff cap (changed by reload), retry
# without any wake-up from outside, and release of the slot once the problem
# is fixed or the source is paused.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use Launcher qw(launcher_barrier);


my $node = PostgreSQL::Test::Cluster->new('backoff');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'mssql_cdc'
mssql_cdc.poll_interval = '100ms'
log_min_messages = debug1
});
$node->start;

# The source is written directly into the catalog, paused and with a
# run_as role that does not exist (the API's own error hint tells a
# superuser to fix run_as by editing this column), so no SQL Server is
# needed.  resume() commits the change and wakes the launcher.
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION mssql_cdc;
CREATE SERVER erp FOREIGN DATA WRAPPER mssql_cdc
  OPTIONS (host '127.0.0.1', port '1433', database 'erp');
CREATE USER MAPPING FOR CURRENT_USER SERVER erp
  OPTIONS (username 'cdc_reader', password 'secret');
INSERT INTO mssql_cdc.servers (server_name, run_as, paused)
  VALUES ('erp', 'ghost', true);
INSERT INTO mssql_cdc.tables (server_name, source_schema, source_table,
                              staging_schema, staging_table)
  VALUES ('erp', 'dbo', 'orders', 'public', 'erp_dbo_orders');
});
is($node->safe_psql('postgres', 'SELECT count(*) FROM mssql_cdc.worker_state()'),
	'0', 'a paused source has no slot');
$node->safe_psql('postgres', q{SELECT mssql_cdc.resume('erp')});

ok( $node->poll_query_until(
		'postgres', q{SELECT pid IS NULL AND phase = 'backoff'
		  AND consecutive_failures = 1 AND next_attempt_at IS NOT NULL
		  AND source_max_lsn IS NULL AND last_poll_at IS NULL
		  FROM mssql_cdc.worker_state() WHERE server_name = 'erp'}),
	'failed start: slot in backoff, no process, one failure, next attempt scheduled');
ok( $node->log_contains(
		qr/WARNING:  mssql_cdc source "erp" is not started: its role "ghost" does not exist/),
	'the reason is logged');
my $first = $node->safe_psql('postgres',
	q{SELECT extract(epoch FROM next_attempt_at) FROM mssql_cdc.worker_state()
	   WHERE server_name = 'erp' AND consecutive_failures = 1});

# The launcher retries on its own when the backoff expires; the second
# delay is twice the first (1 s, 2 s, ...), less at most 12.5 % jitter.  The
# second attempt cannot happen before the first was due, so this lower bound
# holds however slow the machine is.
ok( $node->poll_query_until(
		'postgres', q{SELECT consecutive_failures >= 2
		  FROM mssql_cdc.worker_state() WHERE server_name = 'erp'}),
	'retried without outside wake-up');
my $second = $node->safe_psql('postgres',
	q{SELECT extract(epoch FROM next_attempt_at) FROM mssql_cdc.worker_state()
	   WHERE server_name = 'erp' AND consecutive_failures = 2});
SKIP:
{
	skip 'third attempt already made before the second was sampled', 1
	  if $first eq '' || $second eq '';
	cmp_ok($second - $first, '>=', 1.75,
		sprintf('backoff doubles: second delay %.3f s', $second - $first));
}

# Cap the backoff at one second; every later attempt is at most 1 s out.
$node->append_conf('postgresql.conf', "mssql_cdc.retry_max_backoff = '1s'");
$node->reload;
my $now_failures = $node->safe_psql('postgres',
	q{SELECT consecutive_failures FROM mssql_cdc.worker_state() WHERE server_name = 'erp'});
ok( $node->poll_query_until(
		'postgres', qq{SELECT consecutive_failures >= $now_failures + 3
		  FROM mssql_cdc.worker_state() WHERE server_name = 'erp'}),
	'keeps retrying');
is( $node->safe_psql(
		'postgres', q{SELECT next_attempt_at <= now() + interval '1 s'
		  FROM mssql_cdc.worker_state() WHERE server_name = 'erp'}),
	't',
	'retry_max_backoff caps the delay after a reload');

# Fix the cause: the next attempt gets past the role check to the start of
# the worker process.
my $offset = -s $node->logfile;
$node->safe_psql('postgres', 'CREATE ROLE ghost');
$node->wait_for_log(
	qr/mssql_cdc launcher: starting a worker for source "erp"/, $offset);
pass('once the role exists the retry starts the worker');
SKIP:
{
	skip 'this build has a source worker', 1
	  unless $node->log_contains(qr/but this build has no source worker/, $offset);
	ok( $node->poll_query_until(
			'postgres', 'SELECT count(*) = 0 FROM mssql_cdc.worker_state()'),
		'without a worker implementation the slot is freed again');
}

# A hand edit alone (no API call) is noticed at once: the catalog trigger
# wakes the launcher at commit, long before its one-minute resync.
$node->safe_psql('postgres',
	q{UPDATE mssql_cdc.servers SET run_as = 'ghost2' WHERE server_name = 'erp'});
launcher_barrier($node);
is( $node->safe_psql(
		'postgres', q{SELECT count(*) FROM mssql_cdc.worker_state()
		  WHERE phase = 'backoff'}),
	'1',
	'a hand-edited run_as is picked up at commit, without an API call');
$node->safe_psql('postgres', q{SELECT mssql_cdc.pause('erp')});
ok( $node->poll_query_until(
		'postgres', 'SELECT count(*) = 0 FROM mssql_cdc.worker_state()'),
	'pause frees the slot of a source in backoff');

$node->stop;
done_testing();
