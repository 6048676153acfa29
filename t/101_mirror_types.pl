# The type matrix through the mirror (issue 15, doc/mirror.md): every SQL
# Server type of t/lib/TypeMatrix.pm (the cases of t/050_type_matrix.pl)
# in a table added with mirror => true.  After the initial copy, and after
# streamed inserts, updates (every column to other values, values to NULL
# and NULL to values), updates that leave the LOB columns alone (with the
# stand-in recording them as their value and, lob_op4_unchanged_null, as
# NULL with update-mask bit 0) and a delete, every mirror row equals the
# staging table's latest change of its key, column by column, as the text
# of the PostgreSQL value; the mirror's column types are the staging
# table's.  For a LOB column of an update_after that is NULL with mask bit
# 0 (not a value), the expected value is the key's latest change that has
# one: the consumer rule of doc/type-mapping.md.  The key is id int; the
# types that cannot be a primary key are all in non-key columns.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use TypeMatrix;
use Test::More;

my $staging = 'public.src_dbo_mtypes';
my $mirror = 'public.src_dbo_mtypes_mirror';
my $order = '_cdc_lsn DESC, _cdc_command_id DESC, _cdc_seqval DESC, _cdc_op DESC';
my %lob_type = map { $_ => 1 } ('varchar(max)', 'nvarchar(max)', 'varbinary(max)', 'xml', 'text', 'ntext', 'image');

my $si = StandIn->start(capture_interval => 0.2);
$si->tsql_ok(q{EXEC sys.sp_cdc_enable_db}, create_sql('mtypes'));
# copied by the initial snapshot
$si->tsql_ok(insert_sql('mtypes', $_)) for 1 .. $nrows;
$si->tsql_ok(q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'mtypes', @role_name = NULL});

my $node = PostgreSQL::Test::Cluster->new('mtypes');
$node->init;
$si->setup_node($node, conf => 'mssql_cdc.snapshot_chunk_rows = 3');
$node->start;
$si->create_source($node, 'src');
$si->add_table_when_started($node,
	q{SELECT mssql_cdc.add_table('src', 'dbo.mtypes', snapshot_mode => 'initial', mirror => true)});

# the mirror's columns: the staging table's data columns, same names, order and types
is( $node->safe_psql('postgres', qq{
SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum)
  FROM pg_attribute WHERE attrelid = '$mirror'::regclass AND attnum > 0 AND NOT attisdropped}),
	$node->safe_psql('postgres', qq{
SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum)
  FROM pg_attribute WHERE attrelid = '$staging'::regclass AND attnum > 0 AND NOT attisdropped
   AND attname NOT LIKE '\\_cdc\\_%'}),
	'the mirror columns have the staging table data columns\' names and types');
is($node->safe_psql('postgres',
		qq{SELECT count(*) FROM pg_attribute WHERE attrelid = '$mirror'::regclass AND attnum > 0 AND NOT attisdropped}),
	scalar(@cases) + 2, 'every case column is in the mirror (and id, c_rowversion)');

# The expected value of a column for the key of live row l: the latest
# change's value; for a LOB column the latest insert/update_after/snapshot
# value that is not an unchanged-LOB NULL (mask bit of the column 0).
sub expected_col
{
	my ($col, $ordinal, $lob) = @_;
	return "l.$col" unless $lob;
	my $k = $ordinal - 1;
	return qq{(SELECT s.$col FROM $staging s WHERE s.id = l.id
	   AND s._cdc_op IN ('snapshot', 'insert', 'update_after')
	   AND NOT (s._cdc_op = 'update_after' AND s.$col IS NULL
	            AND get_bit(s._cdc_update_mask, (length(s._cdc_update_mask) - 1 - $k / 8) * 8 + $k % 8) = 0)
	 ORDER BY $order LIMIT 1)};
}

my $live_cte = qq{WITH latest AS (SELECT DISTINCT ON (id) * FROM $staging ORDER BY id, $order),
live AS (SELECT * FROM latest WHERE _cdc_op NOT IN ('delete', 'update_before'))};

sub check_mirror
{
	my ($how) = @_;
	is($node->safe_psql('postgres', "SELECT string_agg(id::text, ',' ORDER BY id) FROM $mirror"),
		$node->safe_psql('postgres', "$live_cte SELECT string_agg(id::text, ',' ORDER BY id) FROM live"),
		"$how: the mirror has exactly the keys whose latest change is not a delete");
	# ordinals: id 1, the cases 2.., c_rowversion last
	my @cols = ((map { [ $cases[$_][0], $_ + 2, $lob_type{ $cases[$_][1] }, $cases[$_][1] ] } 0 .. $#cases),
		[ 'c_rowversion', @cases + 2, 0, 'rowversion' ]);
	for my $c (@cols)
	{
		my ($col, $ordinal, $lob, $mstype) = @$c;
		my $exp = expected_col($col, $ordinal, $lob);
		my $bad = $node->safe_psql('postgres', qq{$live_cte
SELECT string_agg(format('id %s: mirror %s (%s bytes), staging %s (%s bytes)', l.id,
         coalesce(left(m.$col\::text, 40), 'NULL'), octet_length(m.$col\::text),
         coalesce(left(e.v::text, 40), 'NULL'), octet_length(e.v::text)), E'\\n' ORDER BY l.id)
  FROM live l JOIN $mirror m USING (id), LATERAL (SELECT $exp) e(v)
 WHERE md5(m.$col\::text) IS DISTINCT FROM md5(e.v::text)});
		is($bad, '', "$how: $mstype $col equals the staging value of every key");
	}
}

sub wait_marker
{
	my ($id, $how) = @_;
	ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM $mirror WHERE id = $id"),
		"$how: the changes reached the mirror")
	  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors');
}

# ---------------------------------------------------------------------------
# Initial copy
# ---------------------------------------------------------------------------
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM mssql_cdc.status WHERE state = 'streaming' AND checkpoint_lsn IS NOT NULL}),
	'dbo.mtypes is copied and streaming')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors');
is($node->safe_psql('postgres', "SELECT count(*) FROM $staging WHERE _cdc_op = 'snapshot'"),
	$nrows, "the copy staged all $nrows rows");
check_mirror('initial copy');

# ---------------------------------------------------------------------------
# Streaming: inserts; updates of every column (values reversed, so values
# become NULL and NULLs values); a delete
# ---------------------------------------------------------------------------
$si->tsql_ok(insert_sql('mtypes', $_, 100 + $_)) for 1 .. $nrows;
$si->tsql_ok(update_sql('mtypes', $nrows + 1 - $_, $_)) for 1 .. $nrows;
$si->tsql_ok(q{DELETE FROM dbo.mtypes WHERE id = 2});
# updates that leave every LOB alone: the stand-in records their values
$si->tsql_ok(q{UPDATE dbo.mtypes SET c_int = 7 WHERE id > 100});
$si->tsql_ok(q{INSERT INTO dbo.mtypes (id) VALUES (900)});
wait_marker(900, 'streaming');
check_mirror('streamed inserts, updates, a delete');

# ---------------------------------------------------------------------------
# Updates that leave the LOBs alone, recorded as NULL with mask bit 0;
# also in one transaction after an update that set them
# ---------------------------------------------------------------------------
$si->ctl('set_option', 'name=lob_op4_unchanged_null', 'value=true');
$si->tsql_ok(q{UPDATE dbo.mtypes SET c_int = 8 WHERE id > 100 AND id < 900});
$si->tsql_ok(q{UPDATE dbo.mtypes SET c_bit = 1 WHERE id < 100});
$si->tsql_ok('BEGIN TRANSACTION; ' . update_sql('mtypes', 2, 3) . '; UPDATE dbo.mtypes SET c_int = 9 WHERE id = 3; '
	  . update_sql('mtypes', 1, 104) . '; UPDATE dbo.mtypes SET c_smallint = 9 WHERE id = 104; COMMIT');
$si->tsql_ok(q{INSERT INTO dbo.mtypes (id) VALUES (901)});
wait_marker(901, 'unchanged LOBs');
$si->ctl('set_option', 'name=lob_op4_unchanged_null', 'value=false');
# the case is real: the staging table's latest change has a LOB as NULL
# with mask bit 0 where the mirror has a value
my @lobs = map { [ $cases[$_][0], $_ + 2 ] } grep { $lob_type{ $cases[$_][1] } } 0 .. $#cases;
cmp_ok(
	$node->safe_psql('postgres', "$live_cte SELECT count(*) FROM live l JOIN $mirror m USING (id) WHERE "
		  . join(' OR ', map { my $k = $_->[1] - 1;
				"(l.$_->[0] IS NULL AND m.$_->[0] IS NOT NULL AND get_bit(l._cdc_update_mask, (length(l._cdc_update_mask) - 1 - $k / 8) * 8 + $k % 8) = 0)" } @lobs)),
	'>', 0, 'some latest changes hold an unchanged LOB as NULL with mask bit 0');
check_mirror('updates leaving LOBs unchanged');

is($node->safe_psql('postgres', 'SELECT count(*) FROM mssql_cdc.errors'), '0', 'no errors');

$node->stop;
done_testing();
