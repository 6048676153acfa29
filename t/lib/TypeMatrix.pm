# The type matrix of t/050_type_matrix.pl, shared with t/101_mirror_types.pl:
# every SQL Server type of doc/type-mapping.md with its minimum, maximum,
# NULL and tricky values, the PostgreSQL column type it is staged as and the
# PostgreSQL literal expected for each value (written by hand, not derived
# from src/tds_convert*.c).
package TypeMatrix;

use strict;
use warnings;
use Exporter 'import';

our @EXPORT = qw(@cases $nrows create_sql insert_sql update_sql expected_expr);
our (@cases, $nrows);

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

@cases = (
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
		  [ q{'23:59:59.9999999'}, '24:00:00' ],
		  # the first value that rounds to 24:00:00, and the last that does not
		  [ q{'23:59:59.9999995'}, '24:00:00' ],
		  [ q{'23:59:59.9999994'}, '23:59:59.999999' ] ] ],
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
		  [ q{'2024-01-01T00:00:00-14:00'}, '2024-01-01 14:00:00+00' ],
		  # half up on the 100 ns digit, as datetime2(7)
		  [ q{'2024-06-15T08:30:00.0000005+00:00'}, '2024-06-15 08:30:00.000001+00' ] ] ],
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
$nrows = 0;
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

# the T-SQL literals of row $row (1-based): the row-th value of every case,
# NULL beyond a case's values
sub row_values
{
	my ($row) = @_;
	return map { $row <= @{ $_->[3] } ? $_->[3][ $row - 1 ][0] : 'NULL' } @cases;
}

# insert row $row's values under key $id (default: $row)
sub insert_sql
{
	my ($table, $row, $id) = @_;
	return "INSERT INTO dbo.$table (id, " . join(', ', map { $_->[0] } @cases) . ") VALUES ("
	  . ($id // $row) . ', ' . join(', ', row_values($row)) . ')';
}

# set every case column of key $id to row $row's values
sub update_sql
{
	my ($table, $row, $id) = @_;
	my @vals = row_values($row);
	return "UPDATE dbo.$table SET " . join(', ', map { "$cases[$_][0] = $vals[$_]" } 0 .. $#cases)
	  . " WHERE id = $id";
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

1;
