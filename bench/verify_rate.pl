# verify() rows per second (issue 15 point 6), on the stand-in: dbo.narrow
# (the bench's 5-column table) filled by fill_table, copied into a mirror,
# then CALL mssql_cdc.verify() on the quiet table, timed by its own
# elapsed.  Not a test: run it with the TAP harness, e.g.
#   /work/dev/ptest <worktree> <name> tap bench/verify_rate.pl
# (VERIFY_ROWS=n for another size).  Figures: bench/results/verify.md.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../t/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;
use Time::HiRes qw(usleep time);

my $rows = $ENV{VERIFY_ROWS} // 100000;
my $si = StandIn->start(capture_interval => 0.05);
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{ALTER DATABASE cdcdb SET ALLOW_SNAPSHOT_ISOLATION ON},
	q{CREATE TABLE dbo.narrow (id int NOT NULL PRIMARY KEY, a bigint, s nvarchar(20), ts datetime2(7), d decimal(18,4))});
$si->ctl('fill_table', 'table=dbo.narrow', "rows=$rows", 'database=cdcdb');
$si->tsql_ok(q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'narrow', @role_name = NULL});

my $node = PostgreSQL::Test::Cluster->new('verify_rate');
$node->init;
$si->setup_node($node, conf => "shared_buffers = 256MB\nmax_wal_size = 4GB");
$node->start;
$si->create_source($node, 'src');
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('src', 'dbo.narrow', mirror => true)});
$node->poll_query_until('postgres', q{SELECT phase = 'streaming' FROM mssql_cdc.table_state}, 't')
  or die 'no snapshot';
for my $chunk (10000, 1000)
{
	my $out = $node->safe_psql('postgres',
		"CALL mssql_cdc.verify('src', 'dbo.narrow', chunk_rows => $chunk)");
	my @f = split /\|/, $out;
	my $secs = $node->safe_psql('postgres',
		"SELECT extract(epoch FROM elapsed) FROM mssql_cdc.verify_runs WHERE run_id = $f[0]");
	is(join(',', @f[4 .. 7]), '0,0,0,0', "chunk_rows $chunk: no mismatch");
	diag sprintf('VERIFY rows=%d chunk_rows=%d seconds=%.2f rows_per_second=%.0f',
		$f[2], $chunk, $secs, $f[2] / $secs);
}
$node->stop;
done_testing();
