# What the worker needs from SQL Server, login by login (issue 12, point 6
# and the permission side of point 1): mssql_cdc.check_server() tries
# every object the worker reads -- cdc.lsn_time_mapping,
# cdc.captured_columns, cdc.index_columns, sys.dm_cdc_log_scan_sessions,
# and per captured table its source, its change table (data_query_mode
# 'direct') and its query function ('function') -- says which read path
# works for the login and names the exact GRANT each missing one needs.
# Logins: db_owner; the gating role only; the gating role plus SELECT ON
# SCHEMA::cdc; nothing.  "Not found" says "dropped, or not visible to this
# login" where SQL Server's metadata visibility can be the cause.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;
use Time::HiRes qw(time usleep);

my %password = (owner => 'Own3r-pass!', gate => 'G4te-pass!', gate_cdc => 'G4teCdc-pass!',
	nothing => 'N0thing-pass!');
my $si = StandIn->start(capture_interval => 0.2);
$si->tsql_ok(
	(map { "CREATE LOGIN $_ WITH PASSWORD = '$password{$_}'" } sort keys %password),
	(map { "CREATE USER $_ FOR LOGIN $_" } sort keys %password),
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, amount int)},
	q{CREATE TABLE dbo.notes (id int NOT NULL PRIMARY KEY, body nvarchar(40))},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = N'cdc_gate'},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'notes', @role_name = N'cdc_gate'},
	q{ALTER ROLE db_owner ADD MEMBER owner},
	q{GRANT SELECT ON dbo.orders TO gate},
	q{GRANT SELECT ON dbo.notes TO gate},
	q{ALTER ROLE cdc_gate ADD MEMBER gate},
	q{GRANT SELECT ON dbo.orders TO gate_cdc},
	q{GRANT SELECT ON dbo.notes TO gate_cdc},
	q{ALTER ROLE cdc_gate ADD MEMBER gate_cdc},
	q{GRANT SELECT ON SCHEMA::cdc TO gate_cdc},
	q{INSERT INTO dbo.orders VALUES (1, 10)});

my $node = PostgreSQL::Test::Cluster->new('permissions');
$node->init;
$si->setup_node($node);
$node->start;
$si->create_source($node, 'src');
$si->add_table_when_started($node, "SELECT mssql_cdc.add_table('src', 'dbo.$_', snapshot_mode => 'never')")
  for qw(orders notes);
# the checks below switch the server's login; the worker sits it out
$node->safe_psql('postgres', q{SELECT mssql_cdc.pause('src')});

sub use_login
{
	my ($login) = @_;
	$node->safe_psql('postgres',
		"ALTER USER MAPPING FOR CURRENT_USER SERVER src OPTIONS (SET username '$login', SET password '$password{$login}')");
}

# check_name => [ok, detail]
sub checks
{
	my %rows;
	for my $line (split /\n/,
		$node->safe_psql('postgres', q{SELECT check_name, ok, detail FROM mssql_cdc.check_server('src')}))
	{
		my ($name, $ok, $detail) = split /\|/, $line, 3;
		$rows{$name} = [ $ok, $detail ];
	}
	return \%rows;
}

sub check_names
{
	return join(',', split /\n/,
		$node->safe_psql('postgres', q{SELECT check_name FROM mssql_cdc.check_server('src')}));
}

# ---------------------------------------------------------------------------
# db_owner: everything works
# ---------------------------------------------------------------------------
use_login('owner');
is(check_names(),
	'connect,encryption,database,cdc_enabled,snapshot_isolation,max_lsn,capture_instances,snapshot_sessions,lsn_time_mapping,'
	  . 'captured_columns,index_columns,scan_sessions,read_path,table dbo.orders,table dbo.notes',
	'check_server: the permission rows follow connect, encryption and the five prerequisites, one row per captured table');
my $c = checks();
is_deeply([ map { $c->{$_}[0] } qw(lsn_time_mapping captured_columns index_columns scan_sessions read_path),
		'table dbo.orders', 'table dbo.notes' ], [ ('t') x 7 ], 'db_owner: every object is readable');
is($c->{read_path}[1],
	q{data_query_mode 'direct' (the default) works for 2 of 2 tables; 'direct' (cdc.[<capture instance>_CT]) works for 2, 'function' (cdc.fn_cdc_get_all_changes_<capture instance>) for 2},
	'db_owner: both read paths work');
is($c->{'table dbo.orders'}[1],
	q{source table readable; capture instance dbo_orders; change table [cdc].[dbo_orders_CT] readable (data_query_mode 'direct'); query function readable (data_query_mode 'function')},
	'db_owner: the table row names each object');

# ---------------------------------------------------------------------------
# the gating role (and SELECT on the sources) only: the function path
# ---------------------------------------------------------------------------
use_login('gate');
$c = checks();
is($c->{lsn_time_mapping}[0], 'f', 'gate: cdc.lsn_time_mapping is not readable');
like($c->{lsn_time_mapping}[1],
	qr/^Msg 229: The SELECT permission was denied on the object 'lsn_time_mapping', database 'cdcdb', schema 'cdc'\.; the worker reads cdc\.lsn_time_mapping for window ends on transaction boundaries and commit times: GRANT SELECT ON SCHEMA::\[cdc\] TO \[gate\]; \(or GRANT SELECT ON \[cdc\]\.\[lsn_time_mapping\] TO \[gate\];\)$/,
	'gate: the detail names the GRANT, for the database user');
for my $t (qw(captured_columns index_columns))
{
	is($c->{$t}[0], 'f', "gate: cdc.$t is not readable");
	like($c->{$t}[1], qr/GRANT SELECT ON SCHEMA::\[cdc\] TO \[gate\]; \(or GRANT SELECT ON \[cdc\]\.\[$t\] TO \[gate\];\)$/,
		"gate: cdc.$t names its GRANT");
}
is($c->{scan_sessions}[0], 'f', 'gate: sys.dm_cdc_log_scan_sessions is not readable');
like($c->{scan_sessions}[1], qr/optional, but .*: GRANT VIEW DATABASE STATE TO \[gate\];$/,
	'gate: VIEW DATABASE STATE is named, and why it matters');
is_deeply($c->{read_path},
	[ 'f', q{data_query_mode 'direct' (the default) works for 0 of 2 tables; 'direct' (cdc.[<capture instance>_CT]) works for 0, 'function' (cdc.fn_cdc_get_all_changes_<capture instance>) for 2; the rows below say which GRANT each table needs} ],
	'gate: only the function path works');
is($c->{'table dbo.orders'}[0], 'f', 'gate: dbo.orders cannot be read the default way');
like($c->{'table dbo.orders'}[1],
	qr/^source table readable; capture instance dbo_orders; change table \[cdc\]\.\[dbo_orders_CT\] not readable \(Msg 229: The SELECT permission was denied on the object 'dbo_orders_CT', database 'cdcdb', schema 'cdc'\.\): for data_query_mode 'direct' GRANT SELECT ON SCHEMA::\[cdc\] TO \[gate\]; \(or GRANT SELECT ON \[cdc\]\.\[dbo_orders_CT\] TO \[gate\];\); query function readable \(data_query_mode 'function'\)$/,
	'gate: the change table needs SELECT on schema cdc, the function works');

# ---------------------------------------------------------------------------
# the gating role plus SELECT ON SCHEMA::cdc: both paths
# ---------------------------------------------------------------------------
use_login('gate_cdc');
$c = checks();
is_deeply([ map { $c->{$_}[0] } qw(lsn_time_mapping captured_columns index_columns read_path),
		'table dbo.orders', 'table dbo.notes' ], [ ('t') x 6 ], 'gate + schema cdc: everything the worker reads');
is($c->{scan_sessions}[0], 'f', 'gate + schema cdc: but not the scan sessions (VIEW DATABASE STATE)');
like($c->{read_path}[1], qr/works for 2 of 2 tables; 'direct' .* works for 2, 'function' .* for 2$/,
	'gate + schema cdc: both read paths work');

# ---------------------------------------------------------------------------
# nothing: not even the tables are visible
# ---------------------------------------------------------------------------
use_login('nothing');
$c = checks();
is($c->{capture_instances}[0], 'f', 'nothing: no capture instance visible');
is_deeply($c->{read_path}, [ 'f', q{data_query_mode 'direct' (the default) works for 0 of 2 tables; 'direct' (cdc.[<capture instance>_CT]) works for 0, 'function' (cdc.fn_cdc_get_all_changes_<capture instance>) for 0; the rows below say which GRANT each table needs} ],
	'nothing: no read path works');
like($c->{'table dbo.orders'}[1],
	qr/^source table not readable \(dropped, or not visible to this login: Msg 229: [^)]*\): GRANT SELECT ON \[dbo\]\.\[orders\] TO \[nothing\];; sys\.sp_cdc_help_change_data_capture: the table does not exist or is not visible to this login \(Msg 22981: Object does not exist or access is denied\.\); capture instance dbo_orders; change table \[cdc\]\.\[dbo_orders_CT\] not readable \(Msg 229: [^)]*\): for data_query_mode 'direct' GRANT SELECT ON SCHEMA::\[cdc\] TO \[nothing\]; \(or GRANT SELECT ON \[cdc\]\.\[dbo_orders_CT\] TO \[nothing\];\); query function not readable \(Msg 229: [^)]*\): for data_query_mode 'function' ALTER ROLE <gating role> ADD MEMBER \[nothing\]; or, for an instance without a gating role, GRANT SELECT ON \[cdc\]\.\[fn_cdc_get_all_changes_dbo_orders\] TO \[nothing\];/,
	'nothing: each object of the table with its GRANT, the table "not visible" rather than just missing');

# describe_source: not found, because not visible
my ($ret, $out, $err) = $node->psql('postgres', q{SELECT * FROM mssql_cdc.describe_source('src', 'dbo.orders')});
like($err,
	qr/ERROR:\s+table dbo\.orders does not exist on server "src" \(dropped, or not visible to this login\).*HINT:\s+Names are matched exactly as SQL Server stores them\.  SQL Server hides a table from a login without permission on it: GRANT SELECT ON \[dbo\]\.\[orders\] TO the login\./s,
	'describe_source: "not found" says it may be "not visible to this login"');

# the worker with that login: the first object it reads is refused, a
# permission the user can grant (retried, not parked)
$node->safe_psql('postgres', q{SELECT mssql_cdc.resume('src')});
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 2 FROM mssql_cdc.status WHERE state = 'error' AND condition = 'permission_denied'}),
	'worker as "nothing": permission_denied')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status');
like($node->safe_psql('postgres', q{SELECT last_error || ' / ' || hint FROM mssql_cdc.status WHERE source_table = 'dbo.orders'}),
	qr/The SELECT permission was denied on the object 'lsn_time_mapping'.* \/ .*GRANT SELECT ON SCHEMA::cdc/,
	'worker as "nothing": the message names the object, the hint the GRANT');

# back to a login that may read everything: the tables recover
$node->safe_psql('postgres', q{SELECT mssql_cdc.pause('src')});
use_login('gate_cdc');
$node->safe_psql('postgres', q{SELECT mssql_cdc.resume('src')});
$node->safe_psql('postgres', "SELECT mssql_cdc.resnapshot('src', 'dbo.$_')") for qw(orders notes);
ok( $node->poll_query_until('postgres', q{SELECT count(*) = 2 FROM mssql_cdc.status WHERE state = 'streaming'}),
	'with the grants in place both tables stream again')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status');

$node->stop;
done_testing();
