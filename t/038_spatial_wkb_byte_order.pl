# geometry/geography with PostGIS (issue 18) under both byte orders of
# STAsBinary(): the Microsoft pages do not say which one SQL Server writes
# (UNCONFIRMED, test/standin/ENGINE.md), so the stand-in can send either and
# the worker's SRID splice must follow the WKB's own flag.  Streaming and
# snapshot rows, every shape kind, SRIDs below and above 2^16.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;

my $si = StandIn->start(capture_interval => 0.2);
my $node = PostgreSQL::Test::Cluster->new('wkb');
$node->init;
$si->setup_node($node);
$node->start;
plan skip_all => 'PostGIS is not installed (scripts/install-deps installs postgresql-15-postgis-3)'
  unless $node->safe_psql('postgres', q{SELECT count(*) FROM pg_available_extensions WHERE name = 'postgis'}) eq '1';
$node->safe_psql('postgres', 'CREATE EXTENSION postgis');
$si->create_source($node, 'src');
$si->tsql_ok(q{EXEC sys.sp_cdc_enable_db});

my @shapes = (
	[ q{geometry::STGeomFromText('POINT (1.25 -2.5)', 3857)}, 'SRID=3857;POINT(1.25 -2.5)' ],
	[ q{geometry::STGeomFromText('MULTIPOLYGON (((0 0, 1 0, 1 1, 0 0)), ((5 5, 6 5, 6 6, 5 5)))', 900913)},
	  'SRID=900913;MULTIPOLYGON(((0 0,1 0,1 1,0 0)),((5 5,6 5,6 6,5 5)))' ],
	[ q{geometry::STGeomFromText('GEOMETRYCOLLECTION (POINT (1 2), LINESTRING (0 0, 1 1))', 0)},
	  'GEOMETRYCOLLECTION(POINT(1 2),LINESTRING(0 0,1 1))' ],
	[ q{geography::STGeomFromText('POLYGON ((-122.358 47.653, -122.348 47.649, -122.348 47.658, -122.358 47.653))', 4326)},
	  'SRID=4326;POLYGON((-122.358 47.653,-122.348 47.649,-122.348 47.658,-122.358 47.653))' ],
);

foreach my $order (qw(little big))
{
	$si->ctl('wkb_byte_order', "order=$order");
	my $t = "s_$order";
	$si->tsql_ok("CREATE TABLE dbo.$t (id int NOT NULL PRIMARY KEY, g geometry, gg geography)");
	# row 0 before add_table (snapshot), rows 1.. streamed
	my @values = map { $_->[0] =~ /^geography/ ? "NULL, $_->[0]" : "$_->[0], NULL" } @shapes;
	$si->tsql_ok("INSERT INTO dbo.$t VALUES (0, $values[0])",
		"EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$t', \@role_name = NULL");
	$si->add_table_when_started($node, "SELECT mssql_cdc.add_table('src', 'dbo.$t')");
	ok($node->poll_query_until('postgres', "SELECT state = 'streaming' FROM mssql_cdc.status WHERE source_table = 'dbo.$t'"),
		"$order-endian WKB: snapshot copied");
	$si->tsql_ok(map { "INSERT INTO dbo.$t VALUES ($_, $values[$_])" } 1 .. $#values);
	ok($node->poll_query_until('postgres', "SELECT count(*) = @{[ scalar @shapes ]} FROM public.src_dbo_$t"),
		"$order-endian WKB: changes streamed");
	is($node->safe_psql('postgres',
			"SELECT string_agg(ST_AsEWKT(coalesce(g::geometry, gg::geometry)), E'\\n' ORDER BY id) FROM public.src_dbo_$t"),
		join("\n", map { $_->[1] } @shapes), "$order-endian WKB: every shape with its SRID");
}
is($node->safe_psql('postgres', q{SELECT count(*) FROM mssql_cdc.errors}), '0', 'no errors')
  or diag $node->safe_psql('postgres', 'SELECT message FROM mssql_cdc.errors LIMIT 3');

$node->stop;
$si->stop;
done_testing();
