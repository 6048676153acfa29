# A primary-key change may reach CDC as delete + insert or as an update
# pair 3/4 (real-server-behaviour.md: it "can be stored as a delete plus an
# insert"; the stand-in switch --unique-update in-place-keys records it as
# 3/4, ENGINE.md).  The mirror must follow it either way, also for a table
# that keeps no before-images in its changelog (update_before => false):
# the old key must not stay behind, and the before-images read only for
# the mirror do not count in rows_applied.  A before-image whose update
# keeps the key is of no use to the mirror: it is not even written to the
# staging table (and deleted again) when the changelog keeps none.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use MirrorCheck;
use Test::More;
use Time::HiRes qw(usleep);

my @shapes = StandIn::real_server()
  ? ([ 'real', [] ])
  : ([ 'split', [] ], [ 'in-place-keys', [ '--unique-update', 'in-place-keys' ] ]);

my $n = 0;
foreach my $shape (@shapes)
{
	my ($name, $args) = @$shape;
	my $si = StandIn->start(capture_interval => 0.1, args => $args);
	$si->tsql_ok(
		q{EXEC sys.sp_cdc_enable_db},
		q{CREATE TABLE dbo.kb (id int NOT NULL PRIMARY KEY, v int)},
		q{CREATE TABLE dbo.kn (id int NOT NULL PRIMARY KEY, v int)},
		q{CREATE TABLE dbo.kv (id int NOT NULL PRIMARY KEY, v int)},
		q{INSERT INTO dbo.kb VALUES (1, 10), (2, 20), (3, 30)},
		q{INSERT INTO dbo.kn VALUES (1, 10), (2, 20), (3, 30)},
		q{INSERT INTO dbo.kv VALUES (1, 10), (2, 20), (3, 30)},
		map({ "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
			qw(kb kn kv)));
	for (1 .. 100)
	{
		last if $si->tsql('SELECT sys.fn_cdc_get_max_lsn()') =~ /0x[0-9A-F]{20}/;
		usleep(100_000);
	}
	my $node = PostgreSQL::Test::Cluster->new('keys' . $n++);
	$node->init;
	$si->setup_node($node);
	$node->start;
	$si->create_source($node, 'src');
	$node->safe_psql('postgres',
		q{SELECT mssql_cdc.add_table('src', 'dbo.kb', mirror => true);
		  SELECT mssql_cdc.add_table('src', 'dbo.kn', mirror => true, update_before => false);
		  SELECT mssql_cdc.add_table('src', 'dbo.kv', mirror => true, update_before => false)});
	ok($node->poll_query_until('postgres',
			q{SELECT count(*) = 3 FROM mssql_cdc.status WHERE state = 'streaming'}), "$name: the tables stream");

	$si->tsql_ok(map { ("UPDATE dbo.$_ SET id = id + 10 WHERE id = 1", "UPDATE dbo.$_ SET id = id + 100",
				"UPDATE dbo.$_ SET v = v + 1 WHERE id = 102") } qw(kb kn));
	foreach my $t (qw(kb kn))
	{
		my ($equal, $src, $mir) = wait_mirror_equal($node, $si,
			"SELECT 'R=' + CAST(id AS varchar(10)) + '|' + CAST(v AS varchar(10)) FROM dbo.$t ORDER BY id",
			"SELECT format('%s|%s', id, v) FROM public.src_dbo_${t}_mirror ORDER BY id");
		ok($equal, "$name: the mirror of dbo.$t follows primary-key changes"
			  . ($t eq 'kn' ? ' without before-images in the changelog' : ''))
		  or diag "source:\n$src\nmirror:\n$mir";
	}
	is($node->safe_psql('postgres', q{SELECT count(*) FROM src_dbo_kn WHERE _cdc_op = 'update_before'}), '0',
		"$name: the changelog without before-images has none");
	# rows_applied counts the changes the table keeps, not the before-images
	# read only for the mirror
	foreach my $t (qw(kb kn))
	{
		is($node->safe_psql('postgres',
				qq{SELECT s.rows_applied = (SELECT count(*) FROM public.src_dbo_$t WHERE _cdc_op <> 'snapshot')
					 FROM mssql_cdc.status s WHERE s.source_table = 'dbo.$t'}),
			't', "$name: rows_applied of dbo.$t is the number of changes in its changelog")
		  or diag $node->safe_psql('postgres',
			qq{SELECT rows_applied FROM mssql_cdc.status WHERE source_table = 'dbo.$t'; SELECT _cdc_op, count(*) FROM public.src_dbo_$t GROUP BY 1});
	}

	# updates that keep the key: their before-images are not staged at all
	$si->tsql_ok(q{UPDATE dbo.kv SET v = v + 1}, q{UPDATE dbo.kv SET v = v + 1 WHERE id = 2});
	my ($equal, $src, $mir) = wait_mirror_equal($node, $si,
		"SELECT 'R=' + CAST(id AS varchar(10)) + '|' + CAST(v AS varchar(10)) FROM dbo.kv ORDER BY id",
		"SELECT format('%s|%s', id, v) FROM public.src_dbo_kv_mirror ORDER BY id");
	ok($equal, "$name: the mirror of dbo.kv follows updates that keep the key")
	  or diag "source:\n$src\nmirror:\n$mir";
	# the worker's table statistics reach pg_stat_user_tables when it exits
	$node->restart;
	is($node->safe_psql('postgres',
			q{SELECT n_tup_ins || ' ' || n_tup_del FROM pg_stat_user_tables WHERE relid = 'public.src_dbo_kv'::regclass}),
		'7 0', "$name: the staging table got the 3 copied rows and 4 after-images, no before-image to delete");
	$node->stop;
	$si->stop;
}

done_testing();
