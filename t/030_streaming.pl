# Streaming CDC windows into staging tables, against the SQL Server
# stand-in: single- and multi-table source transactions land with their
# exact contents and in commit order; a 100k-row source transaction is
# applied whole (a concurrent reader never sees a part of it); an idle
# table's checkpoint still advances; the status view shows the live
# worker; pause/resume/remove_table stop and start the worker.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;
use Time::HiRes qw(time usleep);

my $si = StandIn->start(capture_interval => 0.2, databases => ['nocdc']);

$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.t1 (id int NOT NULL PRIMARY KEY, name nvarchar(50), amount decimal(10,2))},
	q{CREATE TABLE dbo.t2 (id int NOT NULL PRIMARY KEY, note varchar(20))},
	q{CREATE TABLE dbo.t3 (id int NOT NULL PRIMARY KEY)},
	q{CREATE TABLE dbo.big (id int NOT NULL PRIMARY KEY, v int)},
	q{CREATE TABLE dbo.digits (n int NOT NULL PRIMARY KEY)},
	q{INSERT INTO dbo.digits VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)},
	map({ "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
		qw(t1 t2 t3 big)),
	# before capture starts: must never reach Postgres (snapshot_mode never)
	q{INSERT INTO dbo.t1 VALUES (100, N'before', 0)});

# wait until the capture job has the pre-existing row
sub wait_for_capture
{
	my ($ci, $count) = @_;
	for (1 .. 300)
	{
		my $out = $si->tsql("SELECT 'n=' + CAST(COUNT(*) AS varchar(20)) FROM cdc.${ci}_CT");
		return 1 if $out =~ /n=(\d+)/ && $1 >= $count;
		usleep(100_000);
	}
	return 0;
}
ok(wait_for_capture('dbo_t1', 1), 'capture job recorded the row inserted before add_table');

my $node = PostgreSQL::Test::Cluster->new('streaming');
$node->init(allows_streaming => 'logical');
$si->setup_node($node);
$node->start;
$si->create_source($node, 'src');
$si->create_source($node, 'nocdc', database => 'nocdc');
$si->tsql_ok(q{CREATE TABLE dbo.plain (id int NOT NULL PRIMARY KEY)});
$si->tsql_ok('USE nocdc', q{CREATE TABLE dbo.t1 (id int NOT NULL PRIMARY KEY)});

# ---------------------------------------------------------------------------
# add_table checks the source; any error leaves nothing behind
# ---------------------------------------------------------------------------
sub add_table_error
{
	my ($server, $table, $re, $what) = @_;
	my ($ret, $out, $err) = $node->psql('postgres',
		"SELECT mssql_cdc.add_table('$server', '$table', snapshot_mode => 'never')");
	isnt($ret, 0, "add_table fails: $what");
	like($err, $re, "add_table error names the problem: $what");
	is( $node->safe_psql('postgres',
			q{SELECT (SELECT count(*) FROM mssql_cdc.tables) || '/' || (SELECT count(*) FROM mssql_cdc.servers)
			      || '/' || (SELECT count(*) FROM pg_class WHERE relname LIKE 'src\_%' OR relname LIKE 'nocdc\_%')}),
		'0/0/0', "nothing created: $what");
}
add_table_error('nosuch', 'dbo.t1', qr/server "nosuch" does not exist/, 'unknown server');
add_table_error('src', 'dbo.missing', qr/missing/, 'missing source table');
add_table_error('src', 'dbo.plain', qr/dbo\.plain .*not enabled for change data capture/,
	'table without CDC');
add_table_error('nocdc', 'dbo.t1', qr/sp_cdc_enable_db/, 'database without CDC');
add_table_error('src', "dbo.t1', capture_instance => 'nosuch_ci", qr/nosuch_ci/,
	'unknown capture instance');

# snapshot_mode never: the position is recorded by add_table itself
$si->add_table($node, 'src', "dbo.$_") for qw(t1 t2 big);
is( $node->safe_psql('postgres',
		q{SELECT string_agg(phase || ':' || (checkpoint_lsn IS NOT NULL), ',') FROM mssql_cdc.table_state}),
	'streaming:true,streaming:true,streaming:true',
	'add_table with snapshot_mode never records phase streaming and the start LSN');
is( $node->safe_psql('postgres',
		q{SELECT string_agg(staging_table, ',' ORDER BY staging_table) FROM mssql_cdc.status}),
	'public.src_dbo_big,public.src_dbo_t1,public.src_dbo_t2',
	'add_table created the staging tables');

ok( $node->poll_query_until(
		'postgres',
		q{SELECT count(*) = 3 FROM mssql_cdc.status WHERE state = 'streaming' AND checkpoint_lsn IS NOT NULL}),
	'all three tables are streaming')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status');

# ---------------------------------------------------------------------------
# Single- and multi-table transactions
# ---------------------------------------------------------------------------
$si->tsql_ok(
	q{BEGIN TRANSACTION; INSERT INTO dbo.t1 VALUES (1, N'a', 1.50); INSERT INTO dbo.t1 VALUES (2, N'b', 2.25); COMMIT},
	q{UPDATE dbo.t1 SET name = N'bb' WHERE id = 2},
	q{DELETE FROM dbo.t1 WHERE id = 1},
	q{BEGIN TRANSACTION; INSERT INTO dbo.t2 VALUES (10, 'x'); UPDATE dbo.t1 SET amount = 9.99 WHERE id = 2; COMMIT},
	q{UPDATE dbo.t1 SET id = 3 WHERE id = 2});

ok( $node->poll_query_until(
		'postgres',
		q{SELECT (SELECT count(*) FROM public.src_dbo_t1) = 9 AND (SELECT count(*) FROM public.src_dbo_t2) = 1}),
	'all changes arrived')
  or diag $node->safe_psql('postgres', 'SELECT * FROM public.src_dbo_t1; SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors');

is( $node->safe_psql(
		'postgres',
		q{SELECT string_agg(format('%s|%s|%s|%s', id, name, amount, _cdc_op), E'\n'
		                    ORDER BY _cdc_lsn, _cdc_seqval, _cdc_op)
		    FROM public.src_dbo_t1}),
	join("\n",
		'1|a|1.50|insert', '2|b|2.25|insert',
		'2|b|2.25|update_before', '2|bb|2.25|update_after',
		'1|a|1.50|delete',
		'2|bb|2.25|update_before', '2|bb|9.99|update_after',
		# a primary key change is a delete and an insert in SQL Server CDC
		'2|bb|9.99|delete', '3|bb|9.99|insert'),
	'staging t1: exact contents in commit order (primary key order), nothing from before add_table');

is( $node->safe_psql(
		'postgres',
		q{SELECT count(DISTINCT _cdc_lsn) FROM public.src_dbo_t1 WHERE _cdc_op = 'insert' AND id IN (1, 2)}),
	'1', 'the two inserts of one source transaction share one commit LSN');
is( $node->safe_psql(
		'postgres',
		q{SELECT t2._cdc_lsn::text = t1._cdc_lsn::text FROM public.src_dbo_t2 t2
		    JOIN public.src_dbo_t1 t1 ON t1._cdc_op = 'update_after' AND t1.amount = 9.99}),
	't', 'a multi-table source transaction has the same commit LSN in both staging tables');
is( $node->safe_psql(
		'postgres',
		q{SELECT count(*) FROM public.src_dbo_t1
		   WHERE _cdc_commit_time IS NULL OR abs(extract(epoch FROM now() - _cdc_commit_time)) > 600}),
	'0', 'commit times are set and close to now (server-local time converted with its offset)');
is( $node->safe_psql(
		'postgres',
		q{SELECT string_agg(encode(_cdc_update_mask, 'hex'), ',' ORDER BY _cdc_lsn, _cdc_seqval, _cdc_op)
		    FROM public.src_dbo_t1}),
	# all bits for inserts/deletes; only the changed column (name = 2, amount = 3) for updates
	'07,07,02,02,07,04,04,07,07',
	'update masks are copied exactly');

my $t1_state = $node->safe_psql('postgres',
	q{SELECT rows_applied, transactions_applied FROM mssql_cdc.status WHERE source_table = 'dbo.t1'});
is($t1_state, '9|5', 'counters: 9 rows in 5 source transactions for t1');
is( $node->safe_psql('postgres',
		q{SELECT checkpoint_lsn::text >= (SELECT max(_cdc_lsn::text) FROM public.src_dbo_t1) FROM mssql_cdc.status WHERE source_table = 'dbo.t1'}),
	't', 'the checkpoint covers every applied row');

# ---------------------------------------------------------------------------
# The status view shows the live worker
# ---------------------------------------------------------------------------
my $pid = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mssql_cdc worker'});
like($pid, qr/^\d+$/, 'one worker process, backend_type "mssql_cdc worker"');
is( $node->safe_psql('postgres',
		q{SELECT application_name FROM pg_stat_activity WHERE backend_type = 'mssql_cdc worker'}),
	'mssql_cdc worker src', 'application_name names the source');
ok( $node->poll_query_until(
		'postgres',
		qq{SELECT bool_and(worker_pid = $pid AND source_max_lsn IS NOT NULL AND lag_seconds IS NOT NULL)
		     FROM mssql_cdc.status}),
	'status: worker_pid, source_max_lsn and lag_seconds are filled');

# ---------------------------------------------------------------------------
# An idle table's checkpoint still advances (cleanup must not overtake it)
# ---------------------------------------------------------------------------
my $t2_before = $node->safe_psql('postgres',
	q{SELECT checkpoint_lsn FROM mssql_cdc.status WHERE source_table = 'dbo.t2'});
$si->tsql_ok(q{INSERT INTO dbo.t3 VALUES (1)}, q{INSERT INTO dbo.t3 VALUES (2)});
ok( $node->poll_query_until(
		'postgres',
		qq{SELECT checkpoint_lsn::text > '$t2_before' FROM mssql_cdc.status WHERE source_table = 'dbo.t2'}),
	'the idle table\'s checkpoint advances past changes of other tables');
is($node->safe_psql('postgres', 'SELECT count(*) FROM public.src_dbo_t2'),
	'1', 'no rows for the idle table');

# ---------------------------------------------------------------------------
# A 100k-row source transaction is applied whole
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', q{ALTER SYSTEM SET mssql_cdc.batch_max_rows = 1000});
$node->reload;
my $t0 = time;
$si->tsql_ok(q{INSERT INTO dbo.big (id, v)
  SELECT a.n + 10 * b.n + 100 * c.n + 1000 * d.n + 10000 * e.n, a.n
    FROM dbo.digits a CROSS JOIN dbo.digits b CROSS JOIN dbo.digits c
         CROSS JOIN dbo.digits d CROSS JOIN dbo.digits e});
note sprintf('source transaction of 100000 rows took %.1f s', time - $t0);
my %seen;
my $deadline = time + 240;
my $count = 0;
while (time < $deadline)
{
	$count = $node->safe_psql('postgres', 'SELECT count(*) FROM public.src_dbo_big');
	$seen{$count}++;
	last if $count == 100000;
	usleep(20_000);
}
note 'counts seen: ' . join(', ', map { "$_ x$seen{$_}" } sort { $a <=> $b } keys %seen);
is($count, 100000, 'all 100000 rows arrived');
is_deeply([ sort { $a <=> $b } keys %seen ], [ grep { $seen{$_} } 0, 100000 ],
	'a concurrent reader only ever saw 0 or 100000 rows (the transaction was never split)');
is( $node->safe_psql('postgres',
		q{SELECT count(DISTINCT _cdc_lsn) || '|' || count(DISTINCT id) FROM public.src_dbo_big}),
	'1|100000', 'one commit LSN, every row once');

# ---------------------------------------------------------------------------
# pause / resume / remove_table
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', q{SELECT mssql_cdc.pause('src')});
ok( $node->poll_query_until(
		'postgres',
		q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'mssql_cdc worker'}),
	'pause stops the worker');
$si->tsql_ok(q{INSERT INTO dbo.t2 VALUES (11, 'paused')});
ok(wait_for_capture('dbo_t2', 2), 'change made while paused is captured on SQL Server');
sleep 1;
is($node->safe_psql('postgres', 'SELECT count(*) FROM public.src_dbo_t2'),
	'1', 'nothing is applied while paused');
$node->safe_psql('postgres', q{SELECT mssql_cdc.resume('src')});
ok( $node->poll_query_until(
		'postgres',
		q{SELECT count(*) = 2 FROM public.src_dbo_t2}),
	'resume starts the worker again and it catches up');
isnt($node->safe_psql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mssql_cdc worker'}),
	$pid, 'a new worker process');

$node->safe_psql('postgres', q{SELECT mssql_cdc.remove_table('src', 'dbo.t2')});
$si->tsql_ok(q{INSERT INTO dbo.t2 VALUES (12, 'removed')}, q{INSERT INTO dbo.t1 VALUES (50, N'after remove', 1)});
ok( $node->poll_query_until(
		'postgres',
		q{SELECT count(*) = 1 FROM public.src_dbo_t1 WHERE id = 50}),
	'the other tables keep streaming after remove_table');
is($node->safe_psql('postgres', 'SELECT count(*) FROM public.src_dbo_t2'),
	'2', 'a removed table gets no more rows (its staging table is kept)');

$node->safe_psql('postgres', q{SELECT mssql_cdc.remove_table('src', 'dbo.t1'); SELECT mssql_cdc.remove_table('src', 'dbo.big')});
ok( $node->poll_query_until(
		'postgres',
		q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'mssql_cdc worker'}),
	'removing the last table stops the worker');

is($node->safe_psql('postgres', q{SELECT count(*) FROM mssql_cdc.errors}),
	'0', 'no errors were recorded')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.errors');

# ---------------------------------------------------------------------------
# The worker writes staging tables as the run_as role, never as superuser
# ---------------------------------------------------------------------------
$si->create_source($node, 'priv');
$node->safe_psql('postgres', qq{
CREATE ROLE alice;
GRANT USAGE ON FOREIGN SERVER priv TO alice;
CREATE USER MAPPING FOR alice SERVER priv OPTIONS (username '@{[ $si->user ]}', password '@{[ $si->password ]}');
GRANT EXECUTE ON FUNCTION mssql_cdc.add_table TO alice;
GRANT CREATE ON SCHEMA public TO alice;
});
$node->safe_psql('postgres',
	q{SET ROLE alice; SELECT mssql_cdc.add_table('priv', 'dbo.t1', snapshot_mode => 'never')});
is( $node->safe_psql('postgres',
		q{SELECT tableowner FROM pg_tables WHERE tablename = 'priv_dbo_t1'}),
	'alice', 'the staging table is owned by the run_as role');
$si->tsql_ok(q{INSERT INTO dbo.t1 VALUES (60, N'as alice', 1)});
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM public.priv_dbo_t1 WHERE id = 60}),
	'the worker of a non-superuser source applies changes');

$node->safe_psql('postgres', q{REVOKE INSERT ON public.priv_dbo_t1 FROM alice});
$si->tsql_ok(q{INSERT INTO dbo.t1 VALUES (61, N'denied', 1)});
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) > 0 FROM mssql_cdc.errors
		   WHERE server_name = 'priv' AND message LIKE 'permission denied for table priv_dbo_t1%'}),
	'without INSERT privilege the window fails with permission denied (no superuser write)')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.errors');
is($node->safe_psql('postgres', q{SELECT count(*) FROM public.priv_dbo_t1 WHERE id = 61}),
	'0', 'nothing was written while the privilege was missing');
is($node->safe_psql('postgres', q{SELECT state FROM mssql_cdc.status WHERE server = 'priv'}),
	'error', 'the status shows the failing source');
$node->safe_psql('postgres', q{GRANT INSERT ON public.priv_dbo_t1 TO alice});
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM public.priv_dbo_t1 WHERE id = 61}),
	'after GRANT the retry applies the change');
ok( $node->poll_query_until('postgres',
		q{SELECT state = 'streaming' FROM mssql_cdc.status WHERE server = 'priv'}),
	'and the state is streaming again');
is($node->safe_psql('postgres', q{SELECT count(*) FROM public.priv_dbo_t1}),
	'2', 'each change once');

$node->stop;
$si->stop;
done_testing();
