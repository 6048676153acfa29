# Type matrix, end to end: every SQL Server type of the reference table
# with its minimum, maximum, NULL and tricky values goes through the
# stand-in, FreeTDS and the worker into a staging table, and each staged
# value is compared with a PostgreSQL literal written here by hand (not
# derived from src/tds_convert.c).  The same cases run twice: streamed
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
use Test::More;
use Time::HiRes qw(usleep);

# ---------------------------------------------------------------------------
# The cases: [column, SQL Server type, expected PostgreSQL column type,
#             [[T-SQL literal, expected PostgreSQL literal or undef = NULL], ...]]
# Every case gets NULL as a value too.  Expected literals are what a person
# reading SQL Server's documentation expects, rounded by the documented rule
# (100 ns digit half up; datetime in 1/300 s ticks shown to 3 digits).
# ---------------------------------------------------------------------------
my $nines38 = '9' x 38;
my $tiny38 = '0.' . ('0' x 37) . '1';
my $ten_mb_text = '0123456789abcdef';    # 16 bytes, repeated 655360 times = 10 MiB
my $ten_mb_reps = 655360;

my @cases = (
	[ 'c_bit', 'bit', 'boolean', [ [ '1', 'true' ], [ '0', 'false' ] ] ],
	[ 'c_tinyint', 'tinyint', 'smallint', [ [ '0', '0' ], [ '255', '255' ] ] ],
	[ 'c_smallint', 'smallint', 'smallint', [ [ '-32768', '-32768' ], [ '32767', '32767' ] ] ],
	[ 'c_int', 'int', 'integer',
		[ [ '-2147483648', '-2147483648' ], [ '2147483647', '2147483647' ], [ '0', '0' ] ] ],
	[ 'c_bigint', 'bigint', 'bigint',
		[ [ '-9223372036854775808', '-9223372036854775808' ],
		  [ '9223372036854775807', '9223372036854775807' ] ] ],
	[ 'c_dec1', 'decimal(1,0)', 'numeric(1,0)', [ [ '9', '9' ], [ '-9', '-9' ], [ '0', '0' ] ] ],
	[ 'c_dec38_0', 'decimal(38,0)', 'numeric(38,0)',
		[ [ $nines38, $nines38 ], [ "-$nines38", "-$nines38" ], [ '1', '1' ] ] ],
	[ 'c_dec38_38', 'numeric(38,38)', 'numeric(38,38)',
		[ [ "0.$nines38", "0.$nines38" ], [ "-0.$nines38", "-0.$nines38" ],
		  [ $tiny38, $tiny38 ], [ '0', '0' ] ] ],
	[ 'c_dec18_4', 'decimal(18,4)', 'numeric(18,4)',
		[ [ '-12345678901234.5678', '-12345678901234.5678' ], [ '0.0001', '0.0001' ],
		  [ '-0.0001', '-0.0001' ] ] ],
	[ 'c_money', 'money', 'numeric(19,4)',
		[ [ '-922337203685477.5808', '-922337203685477.5808' ],
		  [ '922337203685477.5807', '922337203685477.5807' ],
		  [ '0.0001', '0.0001' ], [ '-0.0001', '-0.0001' ] ] ],
	[ 'c_smallmoney', 'smallmoney', 'numeric(10,4)',
		[ [ '-214748.3648', '-214748.3648' ], [ '214748.3647', '214748.3647' ] ] ],
	[ 'c_real', 'real', 'real',
		[ [ '3.4028235E+38', '3.4028235e+38' ], [ '-3.4028235E+38', '-3.4028235e+38' ],
		  [ '1.1754944E-38', '1.1754944e-38' ], [ '0.1', '0.1' ] ] ],
	[ 'c_float24', 'float(24)', 'real', [ [ '-1.5', '-1.5' ], [ '16777216', '16777216' ] ] ],
	[ 'c_float', 'float', 'double precision',
		[ [ '1.7976931348623157E+308', '1.7976931348623157e+308' ],
		  [ '-1.7976931348623157E+308', '-1.7976931348623157e+308' ],
		  [ '2.2250738585072014E-308', '2.2250738585072014e-308' ],
		  [ '0.1', '0.1' ], [ '123456789.123456789', '123456789.12345679' ] ] ],
	[ 'c_date', 'date', 'date',
		[ [ q{'0001-01-01'}, '0001-01-01' ], [ q{'9999-12-31'}, '9999-12-31' ],
		  [ q{'2024-02-29'}, '2024-02-29' ] ] ],
	[ 'c_time7', 'time(7)', 'time(6) without time zone',
		[ [ q{'00:00:00'}, '00:00:00' ],
		  # half up on the 100 ns digit; the last value rounds to 24:00:00
		  [ q{'12:34:56.1234565'}, '12:34:56.123457' ],
		  [ q{'12:34:56.1234564'}, '12:34:56.123456' ],
		  [ q{'23:59:59.9999999'}, '24:00:00' ] ] ],
	[ 'c_time0', 'time(0)', 'time(0) without time zone',
		[ [ q{'23:59:59'}, '23:59:59' ], [ q{'00:00:00'}, '00:00:00' ] ] ],
	[ 'c_time3', 'time(3)', 'time(3) without time zone',
		[ [ q{'12:00:00.123'}, '12:00:00.123' ], [ q{'23:59:59.999'}, '23:59:59.999' ] ] ],
	[ 'c_datetime', 'datetime', 'timestamp(3) without time zone',
		[ [ q{'1753-01-01T00:00:00'}, '1753-01-01 00:00:00' ],
		  [ q{'9999-12-31T23:59:59.997'}, '9999-12-31 23:59:59.997' ],
		  # 1 tick = 1/300 s = 3.333 ms, shown to 3 digits
		  [ q{'2024-02-29T12:00:00.003'}, '2024-02-29 12:00:00.003' ],
		  [ q{'2024-02-29T12:00:00.007'}, '2024-02-29 12:00:00.007' ],
		  [ q{'1899-12-31T23:59:59.997'}, '1899-12-31 23:59:59.997' ] ] ],
	[ 'c_smalldatetime', 'smalldatetime', 'timestamp(0) without time zone',
		[ [ q{'1900-01-01T00:00:00'}, '1900-01-01 00:00:00' ],
		  [ q{'2079-06-06T23:59:00'}, '2079-06-06 23:59:00' ] ] ],
	[ 'c_dt2_7', 'datetime2(7)', 'timestamp(6) without time zone',
		[ [ q{'0001-01-01T00:00:00'}, '0001-01-01 00:00:00' ],
		  # the max sentinel rounds half up into the next day (and year)
		  [ q{'9999-12-31T23:59:59.9999999'}, '10000-01-01 00:00:00' ],
		  [ q{'9999-12-31T23:59:59.9999994'}, '9999-12-31 23:59:59.999999' ],
		  [ q{'2024-12-31T23:59:59.9999995'}, '2025-01-01 00:00:00' ],
		  [ q{'2024-06-15T08:30:00.0000005'}, '2024-06-15 08:30:00.000001' ] ] ],
	[ 'c_dt2_0', 'datetime2(0)', 'timestamp(0) without time zone',
		[ [ q{'2024-06-30T23:59:59'}, '2024-06-30 23:59:59' ] ] ],
	[ 'c_dt2_3', 'datetime2(3)', 'timestamp(3) without time zone',
		[ [ q{'2024-06-30T23:59:59.999'}, '2024-06-30 23:59:59.999' ] ] ],
	[ 'c_dto7', 'datetimeoffset(7)', 'timestamp(6) with time zone',
		[ [ q{'2024-03-10T12:00:00.1234567+05:45'}, '2024-03-10 06:15:00.123457+00' ],
		  [ q{'0001-01-01T14:00:00+14:00'}, '0001-01-01 00:00:00+00' ],
		  [ q{'9999-12-31T09:59:59.9999999-14:00'}, '10000-01-01 00:00:00+00' ],
		  [ q{'2024-01-01T00:00:00-14:00'}, '2024-01-01 14:00:00+00' ] ] ],
	[ 'c_dto0', 'datetimeoffset(0)', 'timestamp(0) with time zone',
		[ [ q{'2024-01-01T00:00:00+14:00'}, '2023-12-31 10:00:00+00' ] ] ],
	[ 'c_char', 'char(10)', 'character(10)', [ [ q{'abc'}, 'abc' ], [ q{''}, '' ] ] ],
	[ 'c_varchar', 'varchar(20)', 'character varying(20)',
		# code page 1252: the euro sign is byte 0x80 there
		[ [ q{''}, '' ], [ q{'Grüße €'}, 'Grüße €' ], [ q{'it''s'}, q{it's} ] ] ],
	[ 'c_varchar_max', 'varchar(max)', 'text',
		[ [ q{''}, '' ], [ q{REPLICATE(CAST('x' AS varchar(max)), 100000)}, undef, q{repeat('x', 100000)} ] ] ],
	[ 'c_nchar', 'nchar(5)', 'character(5)', [ [ q{N'ab'}, 'ab' ], [ q{N'日本語'}, '日本語' ] ] ],
	[ 'c_nvarchar', 'nvarchar(40)', 'character varying(40)',
		[ [ q{N'😀 non-BMP 𝄞'}, '😀 non-BMP 𝄞' ], [ q{N''}, '' ], [ q{N'日本語 ü'}, '日本語 ü' ] ] ],
	# two UTF-16 code units, one character
	[ 'c_nvarchar2', 'nvarchar(2)', 'character varying(2)', [ [ q{N'😀'}, '😀' ] ] ],
	[ 'c_nvarchar_max', 'nvarchar(max)', 'text',
		[ [ q{N''}, '' ],
		  [ q{REPLICATE(CAST(N'ü😀' AS nvarchar(max)), 40000)}, undef, q{repeat('ü😀', 40000)} ] ] ],
	[ 'c_text', 'text', 'text', [ [ q{'plain text'}, 'plain text' ], [ q{''}, '' ] ] ],
	[ 'c_ntext', 'ntext', 'text', [ [ q{N'ü😀'}, 'ü😀' ] ] ],
	[ 'c_binary', 'binary(4)', 'bytea', [ [ '0x01', '\x01000000' ], [ '0xDEADBEEF', '\xdeadbeef' ] ] ],
	[ 'c_varbinary', 'varbinary(8)', 'bytea', [ [ '0x', '\x' ], [ '0x00FF', '\x00ff' ] ] ],
	[ 'c_varbinary_max', 'varbinary(max)', 'bytea',
		[ [ '0x', '\x' ],
		  # 10 MiB: the bytes of an ASCII string (a real SQL Server needs
		  # sp_configure 'max text repl size', -1 to capture it)
		  [ "CAST(REPLICATE(CAST('$ten_mb_text' AS varchar(max)), $ten_mb_reps) AS varbinary(max))", undef,
			"convert_to(repeat('$ten_mb_text', $ten_mb_reps), 'UTF8')" ] ] ],
	[ 'c_image', 'image', 'bytea', [ [ '0x00', '\x00' ], [ '0xFF00', '\xff00' ] ] ],
	[ 'c_guid', 'uniqueidentifier', 'uuid',
		# the first three groups are little-endian on the wire
		[ [ q{'6F9619FF-8B86-D011-B42D-00C04FC964FF'}, '6f9619ff-8b86-d011-b42d-00c04fc964ff' ],
		  [ q{'01020304-0506-0708-090A-0B0C0D0E0F10'}, '01020304-0506-0708-090a-0b0c0d0e0f10' ],
		  [ q{'00000000-0000-0000-0000-000000000000'}, '00000000-0000-0000-0000-000000000000' ],
		  [ q{'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF'}, 'ffffffff-ffff-ffff-ffff-ffffffffffff' ] ] ],
	[ 'c_xml', 'xml', 'xml',
		[ [ q{N'<a b="1">ü &amp; 😀</a>'}, '<a b="1">ü &amp; 😀</a>' ],
		  # SQL Server keeps the parsed document: empty elements read <b />,
		  # attributes in double quotes ("Define the Serialization of XML Data")
		  [ q{N'<r><b/><c  x=''1''/></r>'}, '<r><b /><c x="1" /></r>' ] ] ],
	[ 'c_variant', 'sql_variant', 'text',
		# each base type as exact text: ISO dates with every digit, money with
		# 4 decimals, binary as 0x hex (CAST to nvarchar would drop digits)
		[ [ 'CAST(42 AS int)', '42' ], [ q{CAST(N'ü😀' AS nvarchar(10))}, 'ü😀' ],
		  [ q{CAST('2024-01-02T03:04:05.997' AS datetime)}, '2024-01-02 03:04:05.997' ],
		  [ q{CAST('2024-01-02T03:04:05.1234567' AS datetime2(7))}, '2024-01-02 03:04:05.1234567' ],
		  [ 'CAST(100.1234 AS money)', '100.1234' ],
		  [ 'CAST(0x0102 AS varbinary(10))', '0x0102' ],
		  [ 'CAST(12.500 AS decimal(10,3))', '12.500' ],
		  # text of a decimal: always the full decimal form, never 1E-38
		  [ 'CAST(0.00000000000000000000000000000000000001 AS decimal(38,38))', '0.00000000000000000000000000000000000001' ],
		  # the longest values a variant holds: 8000 bytes
		  [ q{CAST(REPLICATE('v', 8000) AS varchar(8000))}, undef, q{repeat('v', 8000)} ],
		  [ q{CAST(CAST(REPLICATE('«', 8000) AS varchar(8000)) AS varbinary(8000))}, undef,
			q{'0x' || repeat('AB', 8000)} ] ] ],
	[ 'c_hier', 'hierarchyid', 'text',
		[ [ q{hierarchyid::Parse('/1/3/')}, '/1/3/' ], [ q{hierarchyid::Parse('/')}, '/' ] ] ],
	[ 'c_geom', 'geometry', 'text',
		[ [ q{geometry::STGeomFromText('POINT (1 2)', 0)}, 'POINT (1 2)' ] ] ],
	[ 'c_geog', 'geography', 'text',
		[ [ q{geography::STGeomFromText('POINT (-122.35 47.65)', 4326)}, 'POINT (-122.35 47.65)' ] ] ],
);

# rows: row i holds the i-th value of every case, then NULL, then NULLs
my $nrows = 0;
for my $c (@cases)
{
	push @{ $c->[3] }, [ 'NULL', undef, 'NULL' ];
	$nrows = @{ $c->[3] } if @{ $c->[3] } > $nrows;
}

sub create_sql
{
	my ($table) = @_;
	return "CREATE TABLE dbo.$table (id int NOT NULL PRIMARY KEY, "
	  . join(', ', map { "$_->[0] $_->[1]" } @cases)
	  . ", c_rowversion rowversion)";
}

sub insert_sql
{
	my ($table, $row) = @_;
	my @vals = map { $row <= @{ $_->[3] } ? $_->[3][ $row - 1 ][0] : 'NULL' } @cases;
	return "INSERT INTO dbo.$table (id, " . join(', ', map { $_->[0] } @cases) . ") VALUES ($row, "
	  . join(', ', @vals) . ')';
}

# the expected value as a PostgreSQL expression of the staging column's type
sub expected_expr
{
	my ($case, $value) = @_;
	return $value->[2] if defined $value->[2];
	return 'NULL' unless defined $value->[1];
	my $lit = $value->[1];
	$lit =~ s/'/''/g;
	return "'$lit'";
}

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
