# Type matrix, end to end: every SQL Server type of the reference table
# with its minimum, maximum, NULL and tricky values goes through the
# stand-in, FreeTDS and the worker into a staging table, and each staged
# value is compared with a PostgreSQL literal written by hand (t/lib/TypeMatrix.pm, not
# derived from src/tds_convert*.c).  The same cases run twice: streamed
# (inserts after add_table, snapshot_mode never) and copied by the initial
# snapshot (rows present before add_table, snapshot_mode initial).  Until
# the snapshot path copies rows, its value assertions run as TODO.
#
# Also: LOB semantics in the changelog.  An update that leaves a
# varchar(max)/nvarchar(max)/varbinary(max) column alone stages NULL for
# it in the update_before row with update-mask bit 0; text/ntext/image are
# NULL in delete and update_before rows whatever their value (see
# doc/type-mapping.md "LOB columns in the changelog").
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use TypeMatrix;
use Test::More;
use Time::HiRes qw(usleep);

my $si = StandIn->start(capture_interval => 0.2);
$si->tsql_ok(q{EXEC sys.sp_cdc_enable_db}, create_sql('matrix'), create_sql('matrix_snap'));
# the snapshot table is filled before add_table
$si->tsql_ok(insert_sql('matrix_snap', $_)) for 1 .. $nrows;
$si->tsql_ok(map { "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
	  qw(matrix matrix_snap));

my $node = PostgreSQL::Test::Cluster->new('types');
$node->init;
$si->setup_node($node);
$node->start;
$si->create_source($node, 'src');
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('src', 'dbo.matrix', snapshot_mode => 'never')});

ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM mssql_cdc.status WHERE state = 'streaming' AND checkpoint_lsn IS NOT NULL}),
	'dbo.matrix is streaming')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors');

# staging column types, as the policy says
sub check_column_types
{
	my ($staging) = @_;
	my %types = map { split /\|/, $_, 2 } split /\n/, $node->safe_psql('postgres', qq{
SELECT attname || '|' || format_type(atttypid, atttypmod) FROM pg_attribute
 WHERE attrelid = '$staging'::regclass AND attnum > 0 AND NOT attisdropped});
	for my $c (@cases)
	{
		is($types{ $c->[0] }, $c->[2], "$staging.$c->[0]: $c->[1] is staged as $c->[2]");
	}
	is($types{c_rowversion}, 'bytea', "$staging.c_rowversion: rowversion is staged as bytea");
}

# every value of every case, compared as text of the staging column's type
sub check_values
{
	my ($staging, $op, $how) = @_;
	for my $c (@cases)
	{
		my ($col, $mstype, $pgtype, $values) = @$c;
		for my $i (1 .. @$values)
		{
			my $v = $values->[ $i - 1 ];
			my $exp = expected_expr($c, $v);
			my $res = $node->safe_psql('postgres', qq{
SELECT (SELECT count(*) FROM $staging WHERE id = $i AND _cdc_op = '$op') || '|' ||
       coalesce((SELECT (md5(s.${col}::text) IS NOT DISTINCT FROM md5(($exp)::${pgtype}::text))::text
                   || '|' || coalesce(left(s.${col}::text, 80), 'NULL') || '|' || coalesce(octet_length(s.${col}::text), 0)
                   FROM $staging s WHERE id = $i AND _cdc_op = '$op'), 'missing')});
			my $label = defined $v->[1] ? $v->[1] : ($v->[0] eq 'NULL' ? 'NULL' : $v->[2]);
			$label = substr($label, 0, 40) . '...' if length($label) > 43;
			ok($res =~ /^1\|true\|/, "$how $mstype $col row $i: $label")
			  or diag "got (rows|equal|value|length): $res; expected $exp";
		}
	}
}

# rowversion: 8 bytes, equal to what SQL Server shows
sub source_rowversions
{
	my ($table, $how) = @_;
	my $out = $si->tsql_ok("SELECT 'rv=' + CONVERT(varchar(20), c_rowversion, 1) + '=' + CAST(id AS varchar(10)) FROM dbo.$table");
	my %rv = map { (split /=/)[ 2, 1 ] } ($out =~ /(rv=0x[0-9A-Fa-f]+=\d+)/g);
	is(scalar(keys %rv), $nrows, "$how: SQL Server shows a rowversion for every row");
	return \%rv;
}

sub check_rowversions
{
	my ($rv, $staging, $op, $how) = @_;
	my $bad = 0;
	for my $id (sort keys %$rv)
	{
		my $got = $node->safe_psql('postgres',
			"SELECT encode(c_rowversion, 'hex') FROM $staging WHERE id = $id AND _cdc_op = '$op'");
		$bad++, diag "row $id: '$got' vs $rv->{$id}" if lc($got) ne lc(substr($rv->{$id}, 2));
	}
	is($bad, 0, "$how: rowversion staged as its 8 bytes");
}

# ---------------------------------------------------------------------------
# Streaming
# ---------------------------------------------------------------------------
$si->tsql_ok(insert_sql('matrix', $_)) for 1 .. $nrows;
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = $nrows FROM public.src_dbo_matrix", 't'),
	"streaming: all $nrows rows arrived")
  or diag $node->safe_psql('postgres', q{
SELECT string_agg(id::text, ',') FROM public.src_dbo_matrix;
SELECT row_to_json(s) FROM mssql_cdc.status s; SELECT row_to_json(e) FROM mssql_cdc.errors e});
check_column_types('public.src_dbo_matrix');
check_values('public.src_dbo_matrix', 'insert', 'streaming');
check_rowversions(source_rowversions('matrix', 'streaming'), 'public.src_dbo_matrix', 'insert', 'streaming');

# an insert's update mask has one bit per captured column, all set; with
# more than 8 columns it spans bytes, the partial byte first (big-endian)
{
	my $ncols = @cases + 2;    # id, the cases, c_rowversion
	my $nbytes = int(($ncols + 7) / 8);
	my $expected = sprintf('%02x', 2**($ncols - 8 * ($nbytes - 1)) - 1) . ('ff' x ($nbytes - 1));
	is( $node->safe_psql('postgres',
			q{SELECT string_agg(DISTINCT encode(_cdc_update_mask, 'hex'), ',') FROM public.src_dbo_matrix}),
		$expected, "streaming: insert update masks have all $ncols bits set");
}

# ---------------------------------------------------------------------------
# Snapshot (snapshot_mode initial): the same cases, copied
# ---------------------------------------------------------------------------
$si->add_table_when_started($node,
	q{SELECT mssql_cdc.add_table('src', 'dbo.matrix_snap', snapshot_mode => 'initial')});
check_column_types('public.src_dbo_matrix_snap');
my $snap_rv = source_rowversions('matrix_snap', 'snapshot');
{
	# a bounded wait (not poll_query_until's 180 s): while the snapshot path
	# does not exist the rows never come
	my $arrived = 0;
	for (1 .. 600)
	{
		$arrived = $node->safe_psql('postgres',
			"SELECT count(*) = $nrows FROM public.src_dbo_matrix_snap WHERE _cdc_op = 'snapshot'") eq 't';
		last if $arrived;
		usleep(100_000);
	}
	local $TODO = $arrived ? undef
	  : 'the snapshot (copy) path is being built in src/snapshot.c; these pass once it copies the rows';
	ok($arrived, "snapshot: all $nrows rows copied");
	check_values('public.src_dbo_matrix_snap', 'snapshot', 'snapshot');
	check_rowversions($snap_rv, 'public.src_dbo_matrix_snap', 'snapshot', 'snapshot');
}

# ---------------------------------------------------------------------------
# LOB semantics in the changelog
# ---------------------------------------------------------------------------
$si->tsql_ok(q{CREATE TABLE dbo.lobs (id int NOT NULL PRIMARY KEY, n int, vmax varchar(max), nvmax nvarchar(max),
	    vbmax varbinary(max), t text, nt ntext, img image)},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'lobs', @role_name = NULL});
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('src', 'dbo.lobs', snapshot_mode => 'never')});
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM mssql_cdc.status WHERE source_table = 'dbo.lobs' AND state = 'streaming' AND checkpoint_lsn IS NOT NULL}),
	'dbo.lobs is streaming');
$si->tsql_ok(q{INSERT INTO dbo.lobs VALUES (1, 0, 'v', N'nü', 0x0102, 't', N'ntü', 0x03)},
	# only n changes: the LOBs are unchanged
	q{UPDATE dbo.lobs SET n = 1 WHERE id = 1},
	# vmax changes to NULL (a real NULL: mask bit 1), nvmax to a new value
	q{UPDATE dbo.lobs SET vmax = NULL, nvmax = N'neu' WHERE id = 1},
	q{DELETE FROM dbo.lobs WHERE id = 1});
ok($node->poll_query_until('postgres', 'SELECT count(*) = 6 FROM public.src_dbo_lobs', 't'),
	'LOB changes arrived');

# mask bits: ordinal 1 = id ... 8 = img; one byte, ordinal k is bit k-1
# (get_bit numbers from the low bit of the first byte)
my $lob_rows = $node->safe_psql('postgres', q{
SELECT string_agg(format('%s n=%s vmax=%s/%s nvmax=%s/%s vbmax=%s/%s t=%s nt=%s img=%s',
         _cdc_op, n,
         coalesce(vmax, 'NULL'), get_bit(_cdc_update_mask, 2),
         coalesce(nvmax, 'NULL'), get_bit(_cdc_update_mask, 3),
         coalesce(encode(vbmax, 'hex'), 'NULL'), get_bit(_cdc_update_mask, 4),
         coalesce(t, 'NULL'), coalesce(nt, 'NULL'), coalesce(encode(img, 'hex'), 'NULL')),
       E'\n' ORDER BY _cdc_lsn, _cdc_seqval, _cdc_op)
  FROM public.src_dbo_lobs});
my @lob = split /\n/, $lob_rows;
is($lob[0], 'insert n=0 vmax=v/1 nvmax=nü/1 vbmax=0102/1 t=t nt=ntü img=03',
	'insert: every LOB has its value, all mask bits set');
like($lob[1], qr/^update_before n=0 vmax=NULL\/0 nvmax=NULL\/0 vbmax=NULL\/0 t=NULL nt=NULL img=NULL$/,
	'update_before of an update that leaves the LOBs alone: (max) columns NULL with mask bit 0; text/ntext/image NULL');
like($lob[2], qr/^update_after n=1 vmax=(v|NULL)\/0 nvmax=(nü|NULL)\/0 vbmax=(0102|NULL)\/0 /,
	'update_after of that update: (max) columns unchanged (value, or NULL with mask bit 0)');
is($lob[3], 'update_before n=1 vmax=v/1 nvmax=nü/1 vbmax=NULL/0 t=NULL nt=NULL img=NULL',
	'update_before of an update of two LOBs: changed ones carry their old value and mask bit 1');
like($lob[4], qr/^update_after n=1 vmax=NULL\/1 nvmax=neu\/1 vbmax=(0102|NULL)\/0 /,
	'update_after: a LOB set to NULL is NULL with mask bit 1 (a real NULL)');
is($lob[5], 'delete n=1 vmax=NULL/1 nvmax=neu/1 vbmax=0102/1 t=NULL nt=NULL img=NULL',
	'delete: (max) columns hold their value; text/ntext/image are NULL');

# the rule a consumer applies (doc/type-mapping.md): a NULL with mask bit 0
# means "unchanged", so the current value is the last one with bit 1
is( $node->safe_psql('postgres', q{
SELECT coalesce(encode((SELECT vbmax FROM public.src_dbo_lobs
                         WHERE id = 1 AND _cdc_op IN ('insert', 'update_after')
                           AND get_bit(_cdc_update_mask, 4) = 1
                         ORDER BY _cdc_lsn DESC, _cdc_seqval DESC LIMIT 1), 'hex'), 'NULL')}),
	'0102', 'the documented consumer rule recovers the unchanged varbinary(max) value');

# ---------------------------------------------------------------------------
# geometry/geography with PostGIS: PostGIS types with their SRID, exact
# coordinates; tables added before PostGIS keep their text columns
# ---------------------------------------------------------------------------
SKIP:
{
	skip 'PostGIS is not installed (scripts/install-deps installs postgresql-15-postgis-3)', 12
	  unless $node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_available_extensions WHERE name = 'postgis'}) eq '1';
	$node->safe_psql('postgres', 'CREATE EXTENSION postgis');
	$si->tsql_ok(q{CREATE TABLE dbo.spatial (id int NOT NULL PRIMARY KEY, g geometry, gg geography)},
		q{INSERT INTO dbo.spatial VALUES (1, geometry::STGeomFromText('POLYGON ((0 0, 10 0, 10 10, 0 0))', 3857),
		    geography::STGeomFromText('POINT (-122.35 47.65)', 4326))},
		q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'spatial', @role_name = NULL});
	is($node->safe_psql('postgres',
			q{SELECT string_agg(column_name || '=' || postgres_type, ',' ORDER BY column_name)
			    FROM mssql_cdc.describe_source('src', 'dbo.spatial') WHERE column_name IN ('g', 'gg')}),
		'g=public.geometry,gg=public.geography', 'describe_source shows the PostGIS types');
	$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('src', 'dbo.spatial', snapshot_mode => 'initial')});
	is($node->safe_psql('postgres',
			q{SELECT string_agg(attname || '=' || format_type(atttypid, atttypmod), ',' ORDER BY attnum)
			    FROM pg_attribute WHERE attrelid = 'public.src_dbo_spatial'::regclass AND attname IN ('g', 'gg')}),
		'g=geometry,gg=geography', 'the staging columns are PostGIS geometry and geography');
	ok($node->poll_query_until('postgres',
			q{SELECT state = 'streaming' FROM mssql_cdc.status WHERE source_table = 'dbo.spatial'}),
		'the snapshot is copied');
	$si->tsql_ok(q{INSERT INTO dbo.spatial VALUES
		(2, geometry::STGeomFromText('POINT (0.1234567890123456789 -1e-300)', 0), NULL),
		(3, NULL, geography::STGeomFromText('LINESTRING (-122.36 47.656, -122.343 47.656)', 4326))});
	ok($node->poll_query_until('postgres', q{SELECT count(*) = 3 FROM public.src_dbo_spatial}), 'changes stream');
	my $rows = $node->safe_psql('postgres', q{
		SELECT string_agg(format('%s %s %s %s', id, _cdc_op, coalesce(ST_AsEWKT(g), 'NULL'), coalesce(ST_AsEWKT(gg), 'NULL')),
		                  E'\n' ORDER BY id) FROM public.src_dbo_spatial});
	is($rows, join("\n",
		'1 snapshot SRID=3857;POLYGON((0 0,10 0,10 10,0 0)) SRID=4326;POINT(-122.35 47.65)',
		'2 insert POINT(0.123456789012346 -1e-300) NULL',
		'3 insert NULL SRID=4326;LINESTRING(-122.36 47.656,-122.343 47.656)'),
		'values land with their SRID, geography as longitude/latitude, NULL as NULL');
	is($node->safe_psql('postgres',
			q{SELECT ST_X(g) = 0.1234567890123456789::float8 AND ST_Y(g) = -1e-300::float8 FROM public.src_dbo_spatial WHERE id = 2}),
		't', 'coordinates are exact (WKB doubles, not printed digits)');
	is($node->safe_psql('postgres', q{SELECT ST_SRID(g) FROM public.src_dbo_spatial WHERE id = 2}), '0', 'SRID 0 kept');
	is($node->safe_psql('postgres', q{SELECT spatial_postgis FROM mssql_cdc.tables WHERE source_table = 'spatial'}),
		't', 'the table records its spatial mapping');
	# dbo.matrix was added before PostGIS: it keeps its text columns and streams on
	$si->tsql_ok(q{INSERT INTO dbo.matrix (id, c_geom) VALUES (9999, geometry::STGeomFromText('POINT (5 6)', 0))});
	ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM public.src_dbo_matrix WHERE id = 9999}),
		'a table added before PostGIS streams on');
	is($node->safe_psql('postgres', q{SELECT c_geom || '/' || pg_typeof(c_geom) FROM public.src_dbo_matrix WHERE id = 9999}),
		'POINT (5 6)/text', 'with its text form');
	is($node->safe_psql('postgres', q{SELECT mssql_cdc.map_type('geography')}), 'public.geography',
		'map_type shows the PostGIS mapping');
	is($node->safe_psql('postgres', q{SELECT count(*) FROM mssql_cdc.errors}), '0', 'no errors');
}

$node->stop;
done_testing();
