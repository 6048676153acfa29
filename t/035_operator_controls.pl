# Operator controls with changes flowing (issue 18): pause and resume of one
# table while the others stream on (its checkpoint stays, it catches up and
# rejoins their windows; a retention overrun while paused follows its
# policy), add_table(start_at => LSN | time), reset_table() back and forward
# (staging rows after the point removed in the same transaction: every
# change exactly once), and snapshot_filter (checked by SQL Server; the
# copy is filtered, the stream is not).  Plain T-SQL only, so it also runs
# against a real SQL Server (MSSQL_CDC_TEST_SERVER).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;

my $si = StandIn->start(capture_interval => 0.2);
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.a (id int NOT NULL PRIMARY KEY, v nvarchar(20))},
	q{CREATE TABLE dbo.b (id int NOT NULL PRIMARY KEY, v nvarchar(20))},
	q{CREATE TABLE dbo.c (id int NOT NULL PRIMARY KEY, v nvarchar(20))},
	q{CREATE TABLE dbo.f (id int NOT NULL PRIMARY KEY, region nchar(2) NOT NULL, v int)},
	q{INSERT INTO dbo.f VALUES (1, N'EU', 10), (2, N'US', 20), (3, N'EU', 30), (4, N'US', 40), (5, N'EU', 50)},
	map({ "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
		qw(a b c f)));

my $node = PostgreSQL::Test::Cluster->new('controls');
$node->init;
$si->setup_node($node);
$node->start;
$si->create_source($node, 'src');

sub q1 { return $node->safe_psql('postgres', $_[0]); }

sub contents
{
	my ($table) = @_;
	return q1(qq{SELECT coalesce(string_agg(id || ':' || coalesce(v, '-') || ':' || _cdc_op, ' '
	                     ORDER BY _cdc_lsn, _cdc_seqval, _cdc_op), '') FROM public.$table});
}

sub checkpoint_of
{
	my ($table) = @_;
	return q1(qq{SELECT checkpoint_lsn FROM mssql_cdc.status WHERE source_table = '$table'});
}

$si->add_table($node, 'src', "dbo.$_") for qw(a b);
$si->tsql_ok(q{BEGIN TRANSACTION; INSERT INTO dbo.a VALUES (1, N'a1'); INSERT INTO dbo.b VALUES (1, N'b1'); COMMIT});
ok($node->poll_query_until('postgres',
		q{SELECT (SELECT count(*) FROM src_dbo_a) = 1 AND (SELECT count(*) FROM src_dbo_b) = 1}),
	'both tables stream');

# ---------------------------------------------------------------------------
# pause one table: the other streams on, the paused one's checkpoint stays
# ---------------------------------------------------------------------------
q1(q{SELECT mssql_cdc.pause('src', 'dbo.a')});
is(q1(q{SELECT string_agg(source_table || '=' || state, ',' ORDER BY source_table) FROM mssql_cdc.status}),
	'dbo.a=paused,dbo.b=streaming', 'status: the paused table is paused, the other streams');
my $a_paused_at = checkpoint_of('dbo.a');
$si->tsql_ok(q{INSERT INTO dbo.a VALUES (2, N'a2')},
	q{BEGIN TRANSACTION; INSERT INTO dbo.a VALUES (3, N'a3'); INSERT INTO dbo.b VALUES (2, N'b2'); COMMIT},
	q{UPDATE dbo.b SET v = N'b2x' WHERE id = 2});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 4 FROM src_dbo_b}),
	'the other table streams on while one is paused');
my $b_now = checkpoint_of('dbo.b');
ok($node->poll_query_until('postgres',
		qq{SELECT checkpoint_lsn::text > '$b_now' FROM mssql_cdc.status WHERE source_table = 'dbo.b'}),
	'and its checkpoint moves with the source');
is(checkpoint_of('dbo.a'), $a_paused_at, 'the paused table\'s checkpoint stays');
is(contents('src_dbo_a'), '1:a1:insert', 'nothing applied to the paused table');

q1(q{SELECT mssql_cdc.resume('src', 'dbo.a')});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 3 FROM src_dbo_a}), 'after resume it catches up');
is(contents('src_dbo_a'), '1:a1:insert 2:a2:insert 3:a3:insert', 'with exactly the changes it missed');
ok($node->poll_query_until('postgres',
		q{SELECT count(DISTINCT checkpoint_lsn::text) = 1 FROM mssql_cdc.status}),
	'and rejoins the other table\'s windows (same checkpoint)');
$si->tsql_ok(q{BEGIN TRANSACTION; INSERT INTO dbo.a VALUES (4, N'a4'); INSERT INTO dbo.b VALUES (4, N'b4'); COMMIT});
ok($node->poll_query_until('postgres',
		q{SELECT (SELECT count(*) FROM src_dbo_a WHERE id = 4) = 1 AND (SELECT count(*) FROM src_dbo_b WHERE id = 4) = 1}),
	'both apply the next cross-table transaction');
is(q1(q{SELECT (SELECT _cdc_lsn::text FROM src_dbo_a WHERE id = 4) = (SELECT _cdc_lsn::text FROM src_dbo_b WHERE id = 4)}),
	't', 'with one commit LSN');

# ---------------------------------------------------------------------------
# reset_table: back to an earlier point (read again, nothing twice), forward
# (skipped), by LSN and by commit time
# ---------------------------------------------------------------------------
my $full_a = contents('src_dbo_a');
my $lsn_a2 = q1(q{SELECT _cdc_lsn FROM src_dbo_a WHERE id = 2});
is(q1(qq{SELECT mssql_cdc.reset_table('src', 'dbo.a', '$lsn_a2')}), '3',
	'reset_table back to an LSN removes the 3 staging rows at or after it');
is(q1(q{SELECT phase FROM mssql_cdc.table_state s JOIN mssql_cdc.tables t USING (table_id) WHERE source_table = 'a'}),
	'streaming', 'the table streams from there');
ok($node->poll_query_until('postgres', q{SELECT count(*) = 4 FROM src_dbo_a}), 'the worker reads them again');
is(contents('src_dbo_a'), $full_a, 'every change exactly once, in order');

# (a4 was committed well after a3: commit times compare at datetime precision)
my $time_a4 = q1(q{SELECT _cdc_commit_time FROM src_dbo_a WHERE id = 4});
is(q1(qq{SELECT mssql_cdc.reset_table('src', 'dbo.a', '$time_a4')}), '1',
	'reset_table to a commit time removes the rows committed at or after it');
ok($node->poll_query_until('postgres', q{SELECT count(*) = 4 FROM src_dbo_a}), 'and they are read again');
is(contents('src_dbo_a'), $full_a, 'exactly once');

# forward, like ALTER SUBSCRIPTION ... SKIP: the changes in between are skipped
q1(q{SELECT mssql_cdc.pause('src', 'dbo.a')});
$si->tsql_ok(q{INSERT INTO dbo.a VALUES (5, N'a5')}, q{INSERT INTO dbo.a VALUES (6, N'a6')});
my $lsn_a6 = $si->captured_lsn('dbo_a', 6);
$si->tsql_ok(q{INSERT INTO dbo.a VALUES (7, N'a7')});
$si->captured_lsn('dbo_a', 7);
is(q1(qq{SELECT mssql_cdc.reset_table('src', 'dbo.a', mssql_cdc.lsn_increment('$lsn_a6')::text)}), '0',
	'reset_table forward past a6 (nothing staged after the point)');
q1(q{SELECT mssql_cdc.resume('src', 'dbo.a')});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 5 FROM src_dbo_a}), 'the table streams from the point');
is(contents('src_dbo_a'), "$full_a 7:a7:insert", 'a5 and a6 were skipped, a7 is there once');

# ---------------------------------------------------------------------------
# outside retention: refused, nothing changed
# ---------------------------------------------------------------------------
my $lsn_a1 = q1(q{SELECT _cdc_lsn FROM src_dbo_a WHERE id = 1});
my $lsn_a7 = q1(q{SELECT _cdc_lsn FROM src_dbo_a WHERE id = 7});
$si->tsql_ok("EXEC sys.sp_cdc_cleanup_change_table \@capture_instance = N'dbo_a', \@low_water_mark = $lsn_a7");
my $state_a = q{SELECT phase || '/' || reset_at || '/' || (SELECT count(*) FROM src_dbo_a)
  FROM mssql_cdc.table_state s JOIN mssql_cdc.tables t USING (table_id) WHERE source_table = 'a'};
my $before = q1($state_a);
my ($ret, $out, $err) = $node->psql('postgres', qq{SELECT mssql_cdc.reset_table('src', 'dbo.a', '$lsn_a1')});
isnt($ret, 0, 'reset_table to a point CDC cleanup removed fails');
like($err, qr/is older than the changes CDC keeps for capture instance "dbo_a".*oldest point CDC still keeps is $lsn_a7/s,
	'with the oldest point still kept');
($ret, $out, $err) = $node->psql('postgres', q{SELECT mssql_cdc.reset_table('src', 'dbo.a', '2000-01-01 00:00:00+00')});
like($err, qr/is older than the changes CDC keeps/, 'a time before retention is refused too');
($ret, $out, $err) = $node->psql('postgres', q{SELECT mssql_cdc.reset_table('src', 'dbo.a', '0x7FFFFFFF000000000001')});
like($err, qr/is beyond the source's max LSN/, 'an LSN beyond the source is refused');
is(q1($state_a), $before, 'nothing changed by the refused calls (no reset, no row deleted)');

# ---------------------------------------------------------------------------
# a retention overrun while paused follows the table's policy after resume
# ---------------------------------------------------------------------------
q1(q{SELECT mssql_cdc.pause('src', 'dbo.b')});
$si->tsql_ok(q{INSERT INTO dbo.b VALUES (5, N'b5')}, q{INSERT INTO dbo.b VALUES (6, N'b6')});
my $lsn_b6 = $si->captured_lsn('dbo_b', 7);
$si->tsql_ok("EXEC sys.sp_cdc_cleanup_change_table \@capture_instance = N'dbo_b', \@low_water_mark = $lsn_b6");
$si->tsql_ok(q{INSERT INTO dbo.a VALUES (8, N'a8')});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 6 FROM src_dbo_a}), 'the other table streams meanwhile');
q1(q{SELECT mssql_cdc.resume('src', 'dbo.b')});
ok($node->poll_query_until('postgres',
		q{SELECT state = 'error' AND condition = 'retention_overrun' FROM mssql_cdc.status WHERE source_table = 'dbo.b'}),
	'after resume the overrun parks the table (policy error)')
  or diag q1('SELECT * FROM mssql_cdc.status');
is(q1(q{SELECT count(*) FROM src_dbo_b WHERE id >= 5}), '0', 'nothing applied past the gap');
# the way out when the lost changes do not matter: reset to the oldest point kept
q1(qq{SELECT mssql_cdc.reset_table('src', 'dbo.b', '$lsn_b6')});
ok($node->poll_query_until('postgres',
		q{SELECT state = 'streaming' FROM mssql_cdc.status WHERE source_table = 'dbo.b'}),
	'reset_table to the oldest point kept ends the error');
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM src_dbo_b WHERE id = 6}),
	'and streams from there');

# ---------------------------------------------------------------------------
# add_table(start_at => ...): from an LSN, from a commit time
# ---------------------------------------------------------------------------
$si->tsql_ok(q{INSERT INTO dbo.c VALUES (1, N'c1')});
$si->captured_lsn('dbo_c', 1);
$si->tsql_ok(q{INSERT INTO dbo.c VALUES (2, N'c2')});
my $lsn_c2 = $si->captured_lsn('dbo_c', 2);

$si->tsql_ok(q{UPDATE dbo.c SET v = N'c2x' WHERE id = 2});
$si->captured_lsn('dbo_c', 4);
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT mssql_cdc.add_table('src', 'dbo.c', snapshot_mode => 'never', start_at => '0x00000000000000000001')});
like($err, qr/older than the changes CDC keeps/, 'add_table refuses a start_at outside retention');
is(q1(q{SELECT count(*) FROM mssql_cdc.tables WHERE source_table = 'c'}) . '/'
	  . q1(q{SELECT to_regclass('src_dbo_c') IS NULL}), '0/t', 'and leaves nothing behind');
q1(qq{SELECT mssql_cdc.add_table('src', 'dbo.c', snapshot_mode => 'never', start_at => '$lsn_c2')});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 3 FROM src_dbo_c}), 'start_at an LSN: streams from there');
is(contents('src_dbo_c'), '2:c2:insert 2:c2:update_before 2:c2x:update_after',
	'the changes from the point on, nothing before it');
my $time_upd = q1(q{SELECT _cdc_commit_time FROM src_dbo_c WHERE _cdc_op = 'update_after'});
q1(q{SELECT mssql_cdc.remove_table('src', 'dbo.c'); DROP TABLE src_dbo_c});
q1(qq{SELECT mssql_cdc.add_table('src', 'dbo.c', start_at => '$time_upd')});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 2 FROM src_dbo_c}), 'start_at a time: streams from there');
is(contents('src_dbo_c'), '2:c2:update_before 2:c2x:update_after',
	'from the first transaction committed at or after it (no snapshot, although snapshot_mode is initial)');

# ---------------------------------------------------------------------------
# snapshot_filter
# ---------------------------------------------------------------------------
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT mssql_cdc.add_table('src', 'dbo.f', snapshot_filter => '[regoin] = N''EU''')});
like($err, qr/SQL Server \(server "src"\) refuses snapshot_filter.*Msg 207/s,
	'a filter SQL Server cannot bind is refused (Msg 207)');
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT mssql_cdc.add_table('src', 'dbo.f', snapshot_filter => '[region] = N''EU'' AND')});
like($err, qr/refuses snapshot_filter/, 'so is one it cannot parse');
is(q1(q{SELECT count(*) FROM mssql_cdc.tables WHERE source_table = 'f'}), '0', 'nothing was added');
q1(q{SELECT mssql_cdc.add_table('src', 'dbo.f', snapshot_filter => '[region] = N''EU''')});
ok($node->poll_query_until('postgres',
		q{SELECT state = 'streaming' FROM mssql_cdc.status WHERE source_table = 'dbo.f'}),
	'the filtered snapshot finishes');
is(q1(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM src_dbo_f WHERE _cdc_op = 'snapshot'}),
	'1,3,5', 'only the rows of the filter are copied');
$si->tsql_ok(q{UPDATE dbo.f SET v = 41 WHERE id = 4}, q{INSERT INTO dbo.f VALUES (6, N'US', 60)});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 6 FROM src_dbo_f}),
	'changes of rows outside the filter are streamed');
q1(q{SELECT mssql_cdc.alter_table('src', 'dbo.f', snapshot_filter => '[region] = N''US'' AND [v] > 20')});
is(q1(q{SELECT snapshot_filter FROM mssql_cdc.tables WHERE source_table = 'f'}),
	q{[region] = N'US' AND [v] > 20}, 'alter_table changes the filter');
q1(q{SELECT mssql_cdc.resnapshot('src', 'dbo.f')});
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 2 FROM src_dbo_f WHERE _cdc_op = 'snapshot' AND region = 'US'}),
	'a resnapshot copies with the new filter');
is(q1(q{SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM src_dbo_f s
         WHERE _cdc_op = 'snapshot' AND _cdc_lsn::text = (SELECT max(_cdc_lsn::text) FROM src_dbo_f WHERE _cdc_op = 'snapshot')}),
	'4:41,6:60', 'exactly the rows of the new filter');
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT mssql_cdc.alter_table('src', 'dbo.f', snapshot_filter => 'nosuch > 1')});
like($err, qr/refuses snapshot_filter.*Msg 207/s, 'alter_table asks SQL Server too');
is(q1(q{SELECT snapshot_filter FROM mssql_cdc.tables WHERE source_table = 'f'}),
	q{[region] = N'US' AND [v] > 20}, 'and keeps the filter when it refuses');

is(q1(q{SELECT count(*) FROM mssql_cdc.errors WHERE condition IS DISTINCT FROM 'retention_overrun'}), '0',
	'no other error was recorded')
  or diag q1('SELECT * FROM mssql_cdc.errors');

$node->stop;
$si->stop;
done_testing();
