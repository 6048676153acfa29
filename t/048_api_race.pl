# No lost API requests (issue 14 point 6): the worker parks a table only
# from the phase and checkpoint it saw.  Here the worker finds a retention
# overrun (policy 'error') and, while it is held in a query to SQL Server
# before it parks the table, the user calls resnapshot().  The request
# committed first wins: the table is copied again instead of being parked
# in phase 'error' over the request.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;
use Time::HiRes qw(usleep);

my $si = StandIn->start(capture_interval => 0.2);
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.m (id int NOT NULL PRIMARY KEY, v int)},
	q{INSERT INTO dbo.m VALUES (1, 1), (2, 2)},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'm', @role_name = NULL});

my $node = PostgreSQL::Test::Cluster->new('apirace');
$node->init;
$si->setup_node($node);
$node->start;
$si->create_source($node, 'src');

sub q1 { return $node->safe_psql('postgres', $_[0]); }

sub diag_state
{
	diag q1(q{SELECT source_table, state, condition, checkpoint_lsn, last_error FROM mssql_cdc.status});
	diag q1(q{SELECT phase, snapshot_lsn, snapshot_rows, resnapshot_requested_at FROM mssql_cdc.table_state});
}

$si->add_table($node, 'src', 'dbo.m', snapshot_mode => 'initial');
ok($node->poll_query_until('postgres', q{SELECT state = 'streaming' FROM mssql_cdc.status}),
	'copied, streaming')
  or diag_state();
$si->tsql_ok(q{INSERT INTO dbo.m VALUES (3, 3)});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 3 FROM src_dbo_m}), 'a change streamed')
  or diag_state();

# changes removed by cleanup while the source is paused: a retention overrun
q1(q{SELECT mssql_cdc.pause('src')});
$node->poll_query_until('postgres',
	q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'mssql_cdc worker'});
$si->tsql_ok(q{INSERT INTO dbo.m VALUES (4, 4)}, q{INSERT INTO dbo.m VALUES (5, 5)});
for (1 .. 100)
{
	last if $si->tsql('SELECT COUNT(*) FROM cdc.dbo_m_CT WHERE id >= 4') =~ /^\s*2\s*$/m;
	usleep(100_000);
}
$si->ctl('cleanup', 'capture_instance=dbo_m');

# the worker's first low-watermark query waits 6 s (query_timeout is 10 s):
# it has read the table as streaming and decides to park it after that
$si->ctl('stall', 'seconds=6', 'match=fn_cdc_get_min_lsn', 'times=1');
q1(q{SELECT mssql_cdc.resume('src')});
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'mssql_cdc worker'}),
	'the worker runs again');
sleep 2;
# meanwhile the user asks for a new copy
q1(q{SELECT mssql_cdc.resnapshot('src', 'dbo.m')});
my $asked = q1(q{SELECT resnapshot_requested_at FROM mssql_cdc.table_state});

ok( $node->poll_query_until('postgres', q{
		SELECT phase = 'streaming' AND snapshot_started_at IS NOT NULL
		       AND snapshot_started_at >= resnapshot_requested_at
		FROM mssql_cdc.table_state}),
	'the resnapshot committed while the worker was deciding won: the table was copied again')
  or diag_state();
is(q1(q{SELECT count(*) FROM mssql_cdc.table_state WHERE phase = 'error'}), '0', 'the table is not parked');
is(q1(q{SELECT resnapshot_requested_at FROM mssql_cdc.table_state}), $asked, 'the request is the one made');
is( q1(q{SELECT string_agg(DISTINCT id::text, ',' ORDER BY id::text) FROM src_dbo_m WHERE _cdc_op = 'snapshot'
		AND _cdc_lsn OPERATOR(mssql_cdc.=) (SELECT snapshot_lsn FROM mssql_cdc.table_state)}),
	'1,2,3,4,5', 'the new copy has every row, also those cleanup removed from the change table');
ok( $node->log_contains(qr/table dbo\.m of source "src" is not stopped: it was changed/),
	'the worker logs that the request won');

$si->ctl('clear');
$node->stop;
$si->stop;
done_testing();
