# Retention prunes a big partitioned staging table by dropping whole
# partitions (issue 18).  A partition is filled with MSSQL_CDC_PRUNE_ROWS
# staged rows (default 1,000,000; bench/README.md reports a run with
# 10,000,000), then closed by the worker at a window boundary and dropped by
# retention.  Asserts only correctness (the rows are gone, the stream goes
# on, the subscriber-facing table keeps its newer rows); the times of the
# rollover and of the drop are reported, not asserted.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;
use Time::HiRes qw(time);

my $rows = $ENV{MSSQL_CDC_PRUNE_ROWS} // 1_000_000;

my $si = StandIn->start(capture_interval => 0.2);
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.big (id int NOT NULL PRIMARY KEY, v nvarchar(20))},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'big', @role_name = NULL});

my $node = PostgreSQL::Test::Cluster->new('prune');
$node->init;
$si->setup_node($node, conf => "max_wal_size = 4GB\nshared_buffers = 256MB");
$node->start;
$si->create_source($node, 'src');
# partitions are closed only after a day: the big one is filled first
$si->add_table_when_started($node,
	q{SELECT mssql_cdc.add_table('src', 'dbo.big', snapshot_mode => 'never', partition_interval => '1 day')});

# staged rows as the worker writes them, at LSNs below every real one
my $t0 = time;
$node->safe_psql('postgres', qq{
INSERT INTO src_dbo_big (id, v, _cdc_lsn, _cdc_seqval, _cdc_op, _cdc_commit_time, _cdc_command_id)
SELECT g, 'old ' || g,
       ('\\x00000001'::bytea || int4send(g) || '\\x0000'::bytea)::mssql_cdc.lsn,
       ('\\x00000000000000000001'::bytea)::mssql_cdc.lsn, 'insert', now() - interval '30 days', 1
  FROM generate_series(1, $rows) g});
note sprintf('filled %d staged rows in %.1f s (%s)', $rows, time - $t0,
	$node->safe_psql('postgres', q{SELECT pg_size_pretty(pg_total_relation_size('src_dbo_big_p1'))}));

# a real change, then the partition is due: closed at the next window boundary
$si->tsql_ok(q{INSERT INTO dbo.big VALUES (-1, N'new')});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM src_dbo_big WHERE id = -1}), 'a change streams');
$node->safe_psql('postgres', q{SELECT mssql_cdc.alter_table('src', 'dbo.big', partition_interval => '1 second')});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 2 FROM mssql_cdc.staging_partitions}, 't'),
	'the big partition is closed');
my ($closed) = slurp_file($node->logfile) =~ /partition src_dbo_big_p1 closed below LSN \S+ in ([\d.]+) ms/;
note "closing the partition of $rows rows (CHECK scan, DETACH, ATTACH without scan) took $closed ms";

$si->tsql_ok(q{INSERT INTO dbo.big VALUES (-2, N'newer')});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM src_dbo_big WHERE id = -2}), 'the stream goes on');
# newest change in it: the real one, just now; retention 1 second
$node->safe_psql('postgres', q{SELECT mssql_cdc.alter_table('src', 'dbo.big', retention => '1 second')});
ok($node->poll_query_until('postgres',
		q{SELECT NOT EXISTS (SELECT 1 FROM mssql_cdc.staging_partitions WHERE partition_number = 1)}),
	'retention drops the big partition');
my ($dropped) = slurp_file($node->logfile) =~ /partition src_dbo_big_p1 dropped by retention in ([\d.]+) ms/;
ok(defined $dropped, 'the drop is logged with its time');
note "pruning $rows staged rows (DROP of their partition) took $dropped ms";
is($node->safe_psql('postgres', q{SELECT count(*) FROM src_dbo_big}), '1', 'only the newer change is left');
is($node->safe_psql('postgres', q{SELECT v FROM src_dbo_big}), 'newer', 'and it is intact');
$si->tsql_ok(q{INSERT INTO dbo.big VALUES (-3, N'newest')});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 2 FROM src_dbo_big}), 'streaming continues after the drop');
is($node->safe_psql('postgres', q{SELECT count(*) FROM mssql_cdc.errors}), '0', 'no errors');

$node->stop;
$si->stop;
done_testing();
