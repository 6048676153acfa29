# verify() of a mirror whose source has a primary key of two columns
# (doc/mirror.md "verify()"): the keys of a chunk travel as one array per
# key column, unnested together; an equal mirror gives no mismatch, and a
# changed value, a deleted row and an extra row are reported with both key
# columns.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;

my $si = StandIn->start(capture_interval => 0.1);
my $rows = join(', ', map { sprintf("(%d, N'k%d', %d)", $_ % 7, $_, $_) } 1 .. 60);
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.ck (a int NOT NULL, b nvarchar(10) NOT NULL, v int NULL, PRIMARY KEY (a, b))},
	"INSERT INTO dbo.ck VALUES $rows",
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'ck', @role_name = NULL});

my $node = PostgreSQL::Test::Cluster->new('verifyck');
$node->init;
$si->setup_node($node);
$node->start;
$si->create_source($node, 'src');
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('src', 'dbo.ck', mirror => true)});
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM mssql_cdc.table_state WHERE phase = 'streaming'}),
	'the table streams');
ok($node->poll_query_until('postgres', q{SELECT count(*) = 60 FROM public.src_dbo_ck_mirror}),
	'its mirror holds the 60 rows');

my $call = q{CALL mssql_cdc.verify('src', 'dbo.ck', chunk_rows => 7, recheck_timeout => '30 s')};
my ($ret, $out, $err) = $node->psql('postgres', $call);
is($ret, 0, 'verify() of a two-column key runs') or diag $err;
my @f = split /\|/, $out;
is(join(',', @f[1 .. 7]), '1,60,60,0,0,0,0', 'an equal mirror: 60 rows on each side, no mismatch');

$node->safe_psql('postgres', q{
	SET session_replication_role = replica;
	UPDATE public.src_dbo_ck_mirror SET v = -1 WHERE a = 3 AND b = 'k10';
	DELETE FROM public.src_dbo_ck_mirror WHERE a = 1 AND b = 'k15';
	INSERT INTO public.src_dbo_ck_mirror (a, b, v) VALUES (2, 'zz', 0);
});
($ret, $out, $err) = $node->psql('postgres', $call);
is($ret, 0, 'verify() runs again') or diag $err;
@f = split /\|/, $out;
is(join(',', @f[1 .. 7]), '1,60,60,1,1,1,0', 'one missing, one extra, one different');
is($node->safe_psql('postgres',
		qq{SELECT string_agg(kind || ' ' || (key->>'a') || '/' || (key->>'b'), '; ' ORDER BY kind)
		   FROM mssql_cdc.verify_mismatches WHERE run_id = $f[0]}),
	'different 3/k10; extra 2/zz; missing 1/k15', 'with both key columns');

$node->stop;
$si->stop;
done_testing();
