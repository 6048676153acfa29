# Settings: defaults, units, ranges, contexts (what needs a restart, what a
# reload) and the reserved mssql_cdc.* prefix.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('settings');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'mssql_cdc'");
$node->start;

my %defaults = (
	'mssql_cdc.database' => 'postgres',
	'mssql_cdc.max_workers' => '8',
	'mssql_cdc.poll_interval' => '1s',
	'mssql_cdc.batch_max_transactions' => '1000',
	'mssql_cdc.batch_max_rows' => '100000',
	'mssql_cdc.capture_stall_timeout' => '5min',
	'mssql_cdc.insert_batch_rows' => '1000',
	'mssql_cdc.retry_max_backoff' => '5min',
	'mssql_cdc.snapshot_chunk_rows' => '10000',
	'mssql_cdc.table_failures_before_park' => '5',);
foreach my $name (sort keys %defaults)
{
	is($node->safe_psql('postgres', "SHOW $name"),
		$defaults{$name}, "$name defaults to $defaults{$name}");
}

# Ranges and units as doc/configuration.md's table gives them.
is( $node->safe_psql(
		'postgres', q{SELECT string_agg(name || '=' || min_val || '..' || max_val || coalesce(' ' || unit, ''),
		  ',' ORDER BY name) FROM pg_settings WHERE name LIKE 'mssql_cdc.%' AND vartype = 'integer'}),
	'mssql_cdc.batch_max_rows=1..2147483647,mssql_cdc.batch_max_transactions=1..2147483647,'
	  . 'mssql_cdc.capture_stall_timeout=0..2147483 s,mssql_cdc.insert_batch_rows=1..100000,'
	  . 'mssql_cdc.max_workers=1..1024,mssql_cdc.poll_interval=10..2147483647 ms,'
	  . 'mssql_cdc.retry_max_backoff=1..86400 s,mssql_cdc.snapshot_chunk_rows=1..10000000,'
	  . 'mssql_cdc.table_failures_before_park=1..1000',
	'ranges and units of the settings');

is( $node->safe_psql(
		'postgres', q{SELECT string_agg(name || '=' || context, ',' ORDER BY name)
		  FROM pg_settings WHERE name LIKE 'mssql_cdc.%'}),
	'mssql_cdc.batch_max_rows=sighup,mssql_cdc.batch_max_transactions=sighup,'
	  . 'mssql_cdc.capture_stall_timeout=sighup,'
	  . 'mssql_cdc.database=postmaster,mssql_cdc.insert_batch_rows=sighup,'
	  . 'mssql_cdc.max_workers=postmaster,'
	  . 'mssql_cdc.poll_interval=sighup,mssql_cdc.retry_max_backoff=sighup,'
	  . 'mssql_cdc.snapshot_chunk_rows=sighup,mssql_cdc.table_failures_before_park=sighup',
	'restart-only and reloadable settings');

# With the default database the launcher serves "postgres".
ok( $node->poll_query_until(
		'postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
		  WHERE backend_type = 'mssql_cdc launcher' AND datname = 'postgres'}),
	'launcher connects to the default database');

# Units: postgresql.conf and ALTER SYSTEM accept time units.
$node->safe_psql('postgres',
	q{ALTER SYSTEM SET mssql_cdc.poll_interval = '5s';
	  ALTER SYSTEM SET mssql_cdc.retry_max_backoff = '2min'});
$node->reload;
ok( $node->poll_query_until(
		'postgres', q{SELECT current_setting('mssql_cdc.poll_interval') = '5s'
		  AND current_setting('mssql_cdc.retry_max_backoff') = '2min'}),
	'time units are accepted and shown');

my ($ret, $stdout, $stderr) =
  $node->psql('postgres', q{ALTER SYSTEM SET mssql_cdc.poll_interval = '5ms'});
like($stderr, qr/5 ms is outside the valid range for parameter "mssql_cdc.poll_interval" \(10 \.\./,
	'poll_interval below 10 ms is refused');

($ret, $stdout, $stderr) =
  $node->psql('postgres', q{SET mssql_cdc.batch_max_rows = 10});
like($stderr, qr/parameter "mssql_cdc.batch_max_rows" cannot be changed now/,
	'reloadable settings cannot be changed per session');

# A restart-only setting is pending until the restart.
$node->safe_psql('postgres', q{ALTER SYSTEM SET mssql_cdc.max_workers = 3});
$node->reload;
ok( $node->poll_query_until(
		'postgres', q{SELECT pending_restart FROM pg_settings
		  WHERE name = 'mssql_cdc.max_workers'}),
	'max_workers needs a restart');
$node->restart;
is($node->safe_psql('postgres', 'SHOW mssql_cdc.max_workers'),
	'3', 'max_workers takes effect after the restart');

# The prefix is reserved: a typo is an error, not a silent placeholder.
($ret, $stdout, $stderr) =
  $node->psql('postgres', q{SET mssql_cdc.pol_interval = '1s'});
like($stderr, qr/invalid configuration parameter name "mssql_cdc.pol_interval"/,
	'unknown mssql_cdc.* settings are refused');

$node->stop;
done_testing();
