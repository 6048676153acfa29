# A SQL Server that admits fewer sessions than snapshot_connections asks
# for (sp_configure 'user connections', Azure SQL's session limits, a logon
# trigger): the parallel copy opens one session per table copying at once,
# and a login refused with 17809 must not stop the source.  The copies go
# on with the sessions that could log in, one table after another if need
# be, every row once, the streaming tables keep their windows, and the
# worker says once what it could not open and what to do.
use strict;
use warnings;

use FindBin;
use JSON::PP;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;
use Time::HiRes qw(time usleep);

my $si = StandIn->start(capture_interval => 0.2);
plan skip_all => 'needs the stand-in (it sets the session limit)' if $si->is_real;

my $rows = 150;
my @copy = map { "c$_" } 1 .. 3;
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{ALTER DATABASE cdcdb SET ALLOW_SNAPSHOT_ISOLATION ON},
	q{CREATE TABLE dbo.live (id int NOT NULL PRIMARY KEY, v int)},
	map({ "CREATE TABLE dbo.$_ (id int NOT NULL PRIMARY KEY, v int)" } @copy));
$si->ctl('fill_table', 'database=cdcdb', "table=dbo.$_", "rows=$rows") for @copy;
$si->tsql_ok(
	map({ "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
		('live', @copy)));

my $node = PostgreSQL::Test::Cluster->new('seslimit');
$node->init;
$si->setup_node($node, conf => "mssql_cdc.snapshot_chunk_rows = 5\nmssql_cdc.poll_interval = 100");
$node->start;
$si->create_source($node, 'src');

sub q1 { return $node->safe_psql('postgres', $_[0]); }

sub diag_state
{
	diag q1(q{SELECT t.source_table, ts.phase, ts.snapshot_rows, ts.checkpoint_lsn
	          FROM mssql_cdc.tables t LEFT JOIN mssql_cdc.table_state ts USING (table_id) ORDER BY 1});
	diag q1(q{SELECT * FROM mssql_cdc.errors});
	diag q1(q{SELECT * FROM mssql_cdc.status});
}

# snapshot_connections keeps its default, 4
$si->add_table($node, 'src', 'dbo.live');
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM mssql_cdc.table_state WHERE phase = 'streaming'}),
	'the streaming table streams');
$si->tsql_ok('INSERT INTO dbo.live VALUES (1, 1)');
ok($node->poll_query_until('postgres', 'SELECT count(*) = 1 FROM src_dbo_live'), 'a first change arrived');

my $logged_in = decode_json($si->ctl('user_connections'))->{logged_in};
is($logged_in, 1, 'the worker holds one session while it only streams');
# the tables are added while the source is paused (add_table logs in to
# describe each one); then only the worker's own session and one more may
# be logged in
q1(q{SELECT mssql_cdc.pause('src')});
$si->add_table($node, 'src', "dbo.$_", snapshot_mode => 'initial') for @copy;
my $deadline = time + 30;
usleep(100_000) while time < $deadline && decode_json($si->ctl('user_connections'))->{logged_in} > 0;
$si->ctl('user_connections', 'max=2');
my $errors_before = q1('SELECT coalesce(max(error_id), 0) FROM mssql_cdc.errors');
my $log_offset = -s $node->logfile;
q1(q{SELECT mssql_cdc.resume('src')});

ok( $node->poll_query_until(
		'postgres', q{SELECT count(*) = 4 FROM mssql_cdc.table_state WHERE phase = 'streaming'}),
	'every copy finished with one snapshot session')
  or diag_state();
my $refused = () = slurp_file($node->logfile, $log_offset) =~ /17809/g;
cmp_ok($refused, '>=', 1, 'SQL Server refused a snapshot session (17809) and the worker said so');
like(
	slurp_file($node->logfile, $log_offset),
	qr/WARNING:[^\n]*could not open another snapshot session[^\n]*\n[^\n]*DETAIL:[^\n]*17809.*?HINT:[^\n]*snapshot_connections/s,
	'the warning names the refusal and what to change');
is(q1("SELECT count(*) FROM mssql_cdc.errors WHERE error_id > $errors_before"),
	'0', 'a refused extra session is not an error of the source or of a table');
for my $t (@copy)
{
	is(q1(qq{SELECT count(*), count(DISTINCT id), min(id), max(id) FROM src_dbo_$t WHERE _cdc_op = 'snapshot'}),
		"$rows|$rows|1|$rows", "$t: every row once");
}

# the streaming table kept going; the limit stays, and the worker needs
# only its own session now (the test's tsql takes the other)
$deadline = time + 30;
usleep(100_000) while time < $deadline && decode_json($si->ctl('user_connections'))->{logged_in} > 1;
is(decode_json($si->ctl('user_connections'))->{logged_in}, 1, 'the snapshot session closed with the last copy');
$si->tsql_ok('INSERT INTO dbo.live VALUES (2, 2)');
ok($node->poll_query_until('postgres', 'SELECT count(*) = 2 FROM src_dbo_live'), 'the streaming table streams on');

$si->ctl('user_connections', 'max=0');
$node->stop;
$si->stop;
done_testing();
