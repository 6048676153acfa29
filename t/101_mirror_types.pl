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
# one: the consumer rule of doc/type-mapping.md.  dbo.mtypes has the key id
# int and every case in non-key columns (also those that cannot be a
# primary key); dbo.mkeys has the key types together as its primary key,
# with inserts, updates, a key change and a delete.  A mirror value changed
# by hand is found (the comparison can fail).
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

# dbo.mkeys: the key types in one primary key (id first, so that rows
# differ; under SQL Server's 16 columns and 900 bytes), each row with
# the case's non-NULL values in turn; no datetime2(7)/time(7)/
# datetimeoffset(7) key: values apart in their 100-ns digit are one
# PostgreSQL value
my @key_cases = grep { my $n = $_->[0]; grep { $n eq $_ } qw(c_tinyint c_bigint c_dec38_0 c_money c_date c_time3
	  c_datetime c_dt2_3 c_dto0 c_char c_nvarchar c_varbinary c_guid) } @cases;
my @key_names = ('id', map { $_->[0] } @key_cases);
my $keys_rows = $nrows - 1;

sub key_values
{
	my ($row) = @_;
	return map { my @v = grep { $_->[0] ne 'NULL' } @{ $_->[3] }; $v[ ($row - 1) % @v ][0] } @key_cases;
}

sub keys_insert_sql
{
	my ($row, $id) = @_;
	return 'INSERT INTO dbo.mkeys (' . join(', ', @key_names, 'v', 'doc') . ') VALUES ('
	  . join(', ', $id, key_values($row), $row, "N'doc-$row'") . ')';
}

my $si = StandIn->start(capture_interval => 0.2);
$si->tsql_ok(q{EXEC sys.sp_cdc_enable_db}, create_sql('mtypes'),
	'CREATE TABLE dbo.mkeys (id int NOT NULL, ' . join(', ', map { "$_->[0] $_->[1] NOT NULL" } @key_cases)
	  . ', v int, doc nvarchar(max), PRIMARY KEY (' . join(', ', @key_names) . '))');
# copied by the initial snapshot
$si->tsql_ok(insert_sql('mtypes', $_)) for 1 .. $nrows;
$si->tsql_ok(keys_insert_sql($_, $_)) for 1 .. $keys_rows;
$si->tsql_ok(map { "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
	  qw(mtypes mkeys));

my $node = PostgreSQL::Test::Cluster->new('mtypes');
$node->init;
$si->setup_node($node, conf => 'mssql_cdc.snapshot_chunk_rows = 3');
$node->start;
$si->create_source($node, 'src');
$si->add_table_when_started($node,
	q{SELECT mssql_cdc.add_table('src', 'dbo.mtypes', snapshot_mode => 'initial', mirror => true)});
$node->safe_psql('postgres', q{SELECT mssql_cdc.add_table('src', 'dbo.mkeys', snapshot_mode => 'initial', mirror => true)});

# the mirror's columns: the staging table's data columns, same names, order
# and types; its primary key the source's
for my $t ([ 'mtypes', scalar(@cases) + 2, 'id' ], [ 'mkeys', @key_names + 2, join(',', @key_names) ])
{
	my ($name, $ncols, $pk) = @$t;
	my $columns = q{SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum)
  FROM pg_attribute WHERE attrelid = '%s'::regclass AND attnum > 0 AND NOT attisdropped AND attname NOT LIKE '\\_cdc\\_%%'};
	is($node->safe_psql('postgres', sprintf($columns, "public.src_dbo_${name}_mirror")),
		$node->safe_psql('postgres', sprintf($columns, "public.src_dbo_$name")),
		"$name: the mirror columns have the staging table data columns' names and types");
	is($node->safe_psql('postgres',
			qq{SELECT count(*) FROM pg_attribute WHERE attrelid = 'public.src_dbo_${name}_mirror'::regclass AND attnum > 0 AND NOT attisdropped}),
		$ncols, "$name: every source column is in the mirror");
	is($node->safe_psql('postgres', qq{
SELECT string_agg(a.attname, ',' ORDER BY k.i)
  FROM pg_index x, unnest(x.indkey) WITH ORDINALITY k(attnum, i), pg_attribute a
 WHERE x.indrelid = 'public.src_dbo_${name}_mirror'::regclass AND x.indisprimary
   AND a.attrelid = x.indrelid AND a.attnum = k.attnum}), $pk, "$name: the mirror's primary key is the source's");
}

# The expected value of a column for the key of live row l: the latest
# change's value; for a LOB column the latest insert/update_after/snapshot
# value that is not an unchanged-LOB NULL (mask bit of the column 0).
sub expected_col
{
	my ($t, $col, $ordinal, $lob) = @_;
	return "l.$col" unless $lob;
	my $k = $ordinal - 1;
	my $same_key = join(' AND ', map { "s.$_ = l.$_" } @{ $t->{keys} });
	return qq{(SELECT s.$col FROM $t->{staging} s WHERE $same_key
	   AND s._cdc_op IN ('snapshot', 'insert', 'update_after')
	   AND NOT (s._cdc_op = 'update_after' AND s.$col IS NULL
	            AND get_bit(s._cdc_update_mask, (length(s._cdc_update_mask) - 1 - $k / 8) * 8 + $k % 8) = 0)
	 ORDER BY $order LIMIT 1)};
}

sub live_cte
{
	my ($t) = @_;
	my $keys = join(', ', @{ $t->{keys} });
	return qq{WITH latest AS (SELECT DISTINCT ON ($keys) * FROM $t->{staging} ORDER BY $keys, $order),
live AS (SELECT * FROM latest WHERE _cdc_op NOT IN ('delete', 'update_before'))};
}

# the keys whose mirror value of $col differs from the expected one
sub mirror_diff
{
	my ($t, $col, $ordinal, $lob) = @_;
	my $exp = expected_col($t, $col, $ordinal, $lob);
	my $keys = join(', ', map { "l.$_" } @{ $t->{keys} });
	return $node->safe_psql('postgres', live_cte($t) . qq{
SELECT string_agg(format('key %s: mirror %s (%s bytes), staging %s (%s bytes)', row($keys),
         coalesce(left(m.$col\::text, 40), 'NULL'), octet_length(m.$col\::text),
         coalesce(left(e.v::text, 40), 'NULL'), octet_length(e.v::text)), E'\\n' ORDER BY $keys)
  FROM live l JOIN $t->{mirror} m USING ($t->{using}), LATERAL (SELECT $exp) e(v)
 WHERE md5(m.$col\::text) IS DISTINCT FROM md5(e.v::text)});
}

sub check_mirror
{
	my ($t, $how) = @_;
	my $keys = join(", ',', ", map { "$_\::text" } @{ $t->{keys} });
	my $keylist = "string_agg(concat($keys), ';' ORDER BY " . join(', ', @{ $t->{keys} }) . ')';
	is($node->safe_psql('postgres', "SELECT $keylist FROM $t->{mirror}"),
		$node->safe_psql('postgres', live_cte($t) . " SELECT $keylist FROM live"),
		"$how: the mirror has exactly the keys whose latest change is not a delete");
	for my $c (@{ $t->{cols} })
	{
		my ($col, $ordinal, $lob, $mstype) = @$c;
		is(mirror_diff($t, $col, $ordinal, $lob), '',
			"$how: $mstype $col equals the staging value of every key");
	}
}

# ordinals: id 1, the cases 2.., c_rowversion last
my $matrix = {
	staging => $staging,
	mirror => $mirror,
	keys => ['id'],
	using => 'id',
	cols => [ (map { [ $cases[$_][0], $_ + 2, $lob_type{ $cases[$_][1] }, $cases[$_][1] ] } 0 .. $#cases),
		[ 'c_rowversion', @cases + 2, 0, 'rowversion' ] ] };
my $keyed = {
	staging => 'public.src_dbo_mkeys',
	mirror => 'public.src_dbo_mkeys_mirror',
	keys => \@key_names,
	using => join(', ', @key_names),
	cols => [ [ 'v', @key_names + 1, 0, 'int' ], [ 'doc', @key_names + 2, 1, 'nvarchar(max)' ] ] };

sub wait_marker
{
	my ($id, $how) = @_;
	$si->tsql_ok("INSERT INTO dbo.mtypes (id) VALUES ($id)", keys_insert_sql(1, $id));
	ok($node->poll_query_until('postgres', "SELECT (SELECT count(*) FROM $mirror WHERE id = $id)
	    + (SELECT count(*) FROM public.src_dbo_mkeys_mirror WHERE id = $id) = 2"),
		"$how: the changes reached the mirror")
	  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors');
}

# ---------------------------------------------------------------------------
# Initial copy
# ---------------------------------------------------------------------------
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 2 FROM mssql_cdc.status WHERE state = 'streaming' AND checkpoint_lsn IS NOT NULL}),
	'dbo.mtypes and dbo.mkeys are copied and streaming')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors');
is($node->safe_psql('postgres', "SELECT count(*) FROM $staging WHERE _cdc_op = 'snapshot'"),
	$nrows, "the copy staged all $nrows rows");
check_mirror($matrix, 'initial copy');
is($node->safe_psql('postgres', "SELECT count(*) FROM $keyed->{mirror}"), $keys_rows,
	"keys, initial copy: the mirror has the $keys_rows rows");
check_mirror($keyed, 'keys, initial copy');

# ---------------------------------------------------------------------------
# Streaming: inserts; updates of every column (values reversed, so values
# become NULL and NULLs values); a delete
# ---------------------------------------------------------------------------
$si->tsql_ok(insert_sql('mtypes', $_, 100 + $_)) for 1 .. $nrows;
$si->tsql_ok(update_sql('mtypes', $nrows + 1 - $_, $_)) for 1 .. $nrows;
$si->tsql_ok(q{DELETE FROM dbo.mtypes WHERE id = 2});
# updates that leave every LOB alone: the stand-in records their values
$si->tsql_ok(q{UPDATE dbo.mtypes SET c_int = 7 WHERE id > 100});
# dbo.mkeys: inserts, updates of the values, a key changed in every key
# column, a delete
$si->tsql_ok(keys_insert_sql($_, 100 + $_)) for 1 .. $keys_rows;
$si->tsql_ok(q{UPDATE dbo.mkeys SET v = NULL, doc = N'' WHERE id = 1},
	q{UPDATE dbo.mkeys SET v = -v, doc = NULL WHERE id > 100},
	'UPDATE dbo.mkeys SET ' . join(', ', map { "$key_cases[$_][0] = " . (key_values(2))[$_] } 0 .. $#key_cases)
	  . ' WHERE id = 3',
	q{DELETE FROM dbo.mkeys WHERE id = 4});
wait_marker(900, 'streaming');
check_mirror($matrix, 'streamed inserts, updates, a delete');
# 1 .. 10 without 4, 101 .. 110, 900; id 3 under its new key
is($node->safe_psql('postgres', "SELECT count(*) || ' ' || count(*) FILTER (WHERE id = 3 AND c_bigint = 9223372036854775807) FROM $keyed->{mirror}"),
	2 * $keys_rows . ' 1', 'keys, streaming: the mirror has the rows, id 3 under its new key');
check_mirror($keyed, 'keys, streamed inserts, updates, a key change, a delete');

# ---------------------------------------------------------------------------
# Updates that leave the LOBs alone, recorded as NULL with mask bit 0;
# also in one transaction after an update that set them
# ---------------------------------------------------------------------------
$si->ctl('set_option', 'name=lob_op4_unchanged_null', 'value=true');
$si->tsql_ok(q{UPDATE dbo.mtypes SET c_int = 8 WHERE id > 100 AND id < 900});
$si->tsql_ok(q{UPDATE dbo.mtypes SET c_bit = 1 WHERE id < 100});
$si->tsql_ok(q{UPDATE dbo.mkeys SET doc = N'set' WHERE id = 5}, q{UPDATE dbo.mkeys SET v = 0 WHERE id < 100});
$si->tsql_ok('BEGIN TRANSACTION; ' . update_sql('mtypes', 2, 3) . '; UPDATE dbo.mtypes SET c_int = 9 WHERE id = 3; '
	  . update_sql('mtypes', 1, 104) . '; UPDATE dbo.mtypes SET c_smallint = 9 WHERE id = 104; COMMIT');
wait_marker(901, 'unchanged LOBs');
$si->ctl('set_option', 'name=lob_op4_unchanged_null', 'value=false');
# the case is real: the staging table's latest change has a LOB as NULL
# with mask bit 0 where the mirror has a value
my @lobs = map { [ $cases[$_][0], $_ + 2 ] } grep { $lob_type{ $cases[$_][1] } } 0 .. $#cases;
cmp_ok(
	$node->safe_psql('postgres', live_cte($matrix) . " SELECT count(*) FROM live l JOIN $mirror m USING (id) WHERE "
		  . join(' OR ', map { my $k = $_->[1] - 1;
				"(l.$_->[0] IS NULL AND m.$_->[0] IS NOT NULL AND get_bit(l._cdc_update_mask, (length(l._cdc_update_mask) - 1 - $k / 8) * 8 + $k % 8) = 0)" } @lobs)),
	'>', 0, 'some latest changes hold an unchanged LOB as NULL with mask bit 0');
check_mirror($matrix, 'updates leaving LOBs unchanged');
check_mirror($keyed, 'keys, updates leaving a LOB unchanged');

# ---------------------------------------------------------------------------
# resnapshot: the copy is rebuilt aside and merged into the mirror (rows
# that differ are written); a row the source no longer has is gone
# ---------------------------------------------------------------------------
$si->tsql_ok(q{DELETE FROM dbo.mtypes WHERE id = 5}, update_sql('mtypes', 4, 6));
wait_marker(902, 'before the resnapshot');
$node->safe_psql('postgres', "INSERT INTO $mirror (id, c_xml) VALUES (99999, '<stray/>')");
$node->safe_psql('postgres', q{SELECT mssql_cdc.resnapshot('src', 'dbo.mtypes')});
ok( $node->poll_query_until('postgres', qq{SELECT (SELECT phase = 'streaming' FROM mssql_cdc.table_state
	     JOIN mssql_cdc.tables USING (table_id) WHERE source_table = 'mtypes')
	 AND NOT EXISTS (SELECT FROM $mirror WHERE id = 99999)}),
	'the resnapshot finished')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors');
check_mirror($matrix, 'after a resnapshot');

# the comparison sees a difference: one value moved in the mirror
$node->safe_psql('postgres', "UPDATE $mirror SET c_int = c_int + 1 WHERE id = 3");
like(mirror_diff($matrix, 'c_int', 0, 0), qr/^key \(3\): mirror 10 .*staging 9 /, 'a changed mirror value is found');

is($node->safe_psql('postgres', 'SELECT count(*) FROM mssql_cdc.errors'), '0', 'no errors');

$node->stop;
done_testing();
