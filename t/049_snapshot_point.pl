# The snapshot point is taken when the copy starts (issue 14 point 3).
# Several tables added for an initial copy, with snapshot_connections 1,
# are copied one at a time; each
# records its L0 (table_state.snapshot_lsn) when its own copy begins, not
# when it was queued: while the first table is copied the second stays
# 'pending' without an L0, and a change committed during the first copy is
# below the second table's L0 (it is in its copy, not replayed).  Both
# tables end with every row once.
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
my $big = 2000;
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.big (id int NOT NULL PRIMARY KEY, v int)},
	q{CREATE TABLE dbo.late (id int NOT NULL PRIMARY KEY, v int)},
	q{CREATE TABLE dbo.tick (id int NOT NULL PRIMARY KEY, v int)},
	(map { my $lo = $_ * 500; 'INSERT INTO dbo.big VALUES ' . join(', ', map { "($_, $_)" } $lo + 1 .. $lo + 500) } 0 .. 3),
	q{INSERT INTO dbo.late VALUES (1, 1), (2, 2), (3, 3)},
	map({ "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
		qw(big late tick)));

my $node = PostgreSQL::Test::Cluster->new('snappoint');
$node->init;
# small chunks: the copy of dbo.big takes a while
$si->setup_node($node, conf => 'mssql_cdc.snapshot_chunk_rows = 5');
$node->start;
$si->create_source($node, 'src');
# one table at a time (several at once: t/105_parallel_snapshot.pl), so
# that the second one waits for the first
$node->safe_psql('postgres', q{ALTER SERVER src OPTIONS (ADD snapshot_connections '1')});

sub q1 { return $node->safe_psql('postgres', $_[0]); }

sub diag_state
{
	diag q1(q{SELECT t.source_table, ts.phase, ts.snapshot_lsn, ts.snapshot_rows, ts.checkpoint_lsn
	          FROM mssql_cdc.tables t LEFT JOIN mssql_cdc.table_state ts USING (table_id) ORDER BY 1});
}

sub state_of
{
	my ($table, $col) = @_;
	return q1(qq{SELECT coalesce(ts.${col}::text, '<null>') FROM mssql_cdc.tables t
	             LEFT JOIN mssql_cdc.table_state ts USING (table_id) WHERE t.source_table = '$table'});
}

$si->add_table($node, 'src', 'dbo.tick');
# and a round trip of 20 ms: its 400 chunks take seconds, however fast
# the worker reads ahead, so the change below lands while it still runs
$si->ctl('rtt', 'ms=20') unless $si->is_real;
$si->add_table($node, 'src', 'dbo.big', snapshot_mode => 'initial');
$si->add_table($node, 'src', 'dbo.late', snapshot_mode => 'initial');

ok( $node->poll_query_until('postgres', q{
		SELECT phase = 'snapshotting' AND snapshot_rows > 0 FROM mssql_cdc.table_state
		JOIN mssql_cdc.tables USING (table_id) WHERE source_table = 'big'}),
	'the first table is being copied')
  or diag_state();
is(state_of('late', 'phase'), 'pending', 'the second table waits in phase pending');
is(state_of('late', 'snapshot_lsn'), '<null>', 'without an L0 yet');

# a change committed while the first copy runs; it reaches the streaming table
$si->tsql_ok(q{BEGIN TRANSACTION; INSERT INTO dbo.tick VALUES (1, 1); INSERT INTO dbo.late VALUES (4, 4); COMMIT});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM src_dbo_tick}),
	'the streaming table got the change during the copy')
  or diag_state();
my $tick_lsn = q1(q{SELECT _cdc_lsn FROM src_dbo_tick});
is(state_of('big', 'phase'), 'snapshotting', 'the first copy was still running then')
  or diag_state();
$si->ctl('rtt', 'ms=0') unless $si->is_real;

ok( $node->poll_query_until('postgres', q{
		SELECT count(*) = 3 FROM mssql_cdc.table_state WHERE phase = 'streaming'}),
	'both copies done, all three tables stream')
  or diag_state();
my $big_l0 = state_of('big', 'snapshot_lsn');
my $late_l0 = state_of('late', 'snapshot_lsn');
is(q1(qq{SELECT '$late_l0'::mssql_cdc.lsn OPERATOR(mssql_cdc.>=) '$tick_lsn'::mssql_cdc.lsn}),
	't', "the second table's L0 ($late_l0) is taken when its copy begins, after the change at $tick_lsn");
is(q1(qq{SELECT '$big_l0'::mssql_cdc.lsn OPERATOR(mssql_cdc.<) '$tick_lsn'::mssql_cdc.lsn}),
	't', "the first table's L0 ($big_l0) is before it");
is(q1(q{SELECT count(*), count(DISTINCT id) FROM src_dbo_big}), "$big|$big", 'the big table has every row once');

$si->tsql_ok(q{INSERT INTO dbo.late VALUES (5, 5)});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM src_dbo_late WHERE id = 5}),
	'the second table streams on')
  or diag_state();
is( q1(q{SELECT string_agg(id || ':' || _cdc_op, ' ' ORDER BY _cdc_lsn, _cdc_seqval, id) FROM src_dbo_late}),
	'1:snapshot 2:snapshot 3:snapshot 4:snapshot 5:insert',
	'the change during the first copy is part of the second copy, not replayed after it');

$node->stop;
$si->stop;
done_testing();
