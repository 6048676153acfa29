# Partitioned staging tables (issue 18): add_table(partition_interval =>,
# retention =>) makes the staging table range-partitioned on _cdc_lsn; the
# worker closes the open partition at a window boundary once it is
# partition_interval old (never while a reader holds the table: it does not
# queue behind readers), and drops whole closed partitions past retention.
# Published with publish_via_partition_root, a subscriber gets every change
# under the staging table's own name, and the partition drops are not
# published as deletes: the subscriber keeps every row.  reset_table refuses
# a point whose partition retention dropped.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;
use Time::HiRes qw(time usleep);

my $si = StandIn->start(capture_interval => 0.2);
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.p (id int NOT NULL PRIMARY KEY, v nvarchar(20))},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'p', @role_name = NULL});

my $pub = PostgreSQL::Test::Cluster->new('publisher');
$pub->init(allows_streaming => 'logical');
$si->setup_node($pub);
$pub->start;
$si->create_source($pub, 'src');
$si->add_table_when_started($pub,
	q{SELECT mssql_cdc.add_table('src', 'dbo.p', snapshot_mode => 'never',
	                             partition_interval => '1 second', retention => '4 seconds')});

is($pub->safe_psql('postgres', q{SELECT relkind FROM pg_class WHERE relname = 'src_dbo_p'}),
	'p', 'the staging table is partitioned');
is($pub->safe_psql('postgres', q{SELECT pg_get_partkeydef('src_dbo_p'::regclass)}),
	'RANGE (_cdc_lsn)', 'by range of _cdc_lsn (the first column of its primary key)');
is($pub->safe_psql('postgres',
		q{SELECT partition_number || ':' || partition_name || ':' || coalesce(from_lsn::text, 'min') || ':' || coalesce(to_lsn::text, 'max')
		    FROM mssql_cdc.staging_partitions}),
	'1:src_dbo_p_p1:min:max', 'one open partition to start with');

# the subscriber: the extension for the types, a plain table of the same name
my $sub = PostgreSQL::Test::Cluster->new('subscriber');
$sub->init;
$si->setup_node($sub);
$sub->start;
$sub->safe_psql('postgres', 'CREATE EXTENSION mssql_cdc');
$sub->safe_psql('postgres', $pub->safe_psql('postgres', q{SELECT mssql_cdc.staging_ddl('src', 'dbo.p')}));
$pub->safe_psql('postgres',
	'CREATE PUBLICATION cdc FOR TABLE public.src_dbo_p WITH (publish_via_partition_root = true)');
$sub->safe_psql('postgres',
	"CREATE SUBSCRIPTION cdc_sub CONNECTION '@{[ $pub->connstr ]} dbname=postgres' PUBLICATION cdc");
$sub->wait_for_subscription_sync($pub, 'cdc_sub');

sub partitions
{
	return $pub->safe_psql('postgres',
		q{SELECT string_agg(partition_number::text, ',' ORDER BY partition_number) FROM mssql_cdc.staging_partitions});
}

sub insert_batch
{
	my ($first) = @_;
	$si->tsql_ok(join(' ', 'BEGIN TRANSACTION;',
		map({ "INSERT INTO dbo.p VALUES ($_, N'v$_');" } $first .. $first + 9), 'COMMIT'));
	ok($pub->poll_query_until('postgres', "SELECT count(*) = 1 FROM src_dbo_p WHERE id = $first + 9"),
		"batch $first staged");
}

# ---------------------------------------------------------------------------
# rollover at window boundaries; a reader that holds the table delays it
# ---------------------------------------------------------------------------
insert_batch(1);
my $lsn_b1 = $pub->safe_psql('postgres', q{SELECT _cdc_lsn FROM src_dbo_p WHERE id = 1});
ok($pub->poll_query_until('postgres', q{SELECT count(*) = 2 FROM mssql_cdc.staging_partitions}),
	'the open partition is closed once it is partition_interval old');
is($pub->safe_psql('postgres',
		q{SELECT count(*) FROM ONLY src_dbo_p_p1}), '10', 'the closed partition holds the first batch');
my $bound = $pub->safe_psql('postgres',
	q{SELECT pg_get_expr(relpartbound, oid) FROM pg_class WHERE relname = 'src_dbo_p_p1'});
like($bound, qr/^FOR VALUES FROM \(MINVALUE\) TO \('0x[0-9A-F]{20}'\)$/, "its bounds are final: $bound");
is($pub->safe_psql('postgres',
		q{SELECT to_lsn::text FROM mssql_cdc.staging_partitions WHERE partition_number = 1}),
	($bound =~ /'(0x[0-9A-F]+)'/)[0], 'as the catalog records them');
is($pub->safe_psql('postgres',
		q{SELECT bool_and(_cdc_lsn::text < (SELECT to_lsn::text FROM mssql_cdc.staging_partitions WHERE partition_number = 1))
		    FROM src_dbo_p}), 't', 'every staged change lies below the bound it was closed at');

# an empty open partition stays open however old it is
sleep 2;
is(partitions(), '1,2', 'no empty partition is closed');

# a reader that holds the staging table: changes stream on, the rollover waits
my ($in, $out) = ('', '');
my $reader = IPC::Run::start([ 'psql', '-XAtq', '-d', $pub->connstr('postgres'), '-f', '-' ],
	'<', \$in, '>', \$out, '2>', \$out, IPC::Run::timeout(60));
$in .= "BEGIN; SELECT count(*) FROM src_dbo_p; SELECT 'holding';\n";
$reader->pump until $out =~ /holding/;
insert_batch(11);
sleep 2;
is(partitions(), '1,2', 'while a reader holds the table the worker does not close the partition');
$in .= "COMMIT;\n\\q\n";
$reader->finish;
ok($pub->poll_query_until('postgres', q{SELECT max(partition_number) = 3 FROM mssql_cdc.staging_partitions}),
	'after the reader is gone it does');

# ---------------------------------------------------------------------------
# retention drops whole partitions; the subscriber keeps every row
# ---------------------------------------------------------------------------
insert_batch(21);
ok($pub->poll_query_until('postgres',
		q{SELECT NOT EXISTS (SELECT 1 FROM mssql_cdc.staging_partitions WHERE partition_number = 1)}),
	'retention drops the oldest partition');
is($pub->safe_psql('postgres', q{SELECT to_regclass('src_dbo_p_p1') IS NULL}), 't', 'the table is gone');
ok($pub->log_contains(qr/partition src_dbo_p_p1 dropped by retention in [\d.]+ ms/), 'the worker logs the drop');
is($pub->safe_psql('postgres', q{SELECT count(*) FROM src_dbo_p WHERE id <= 10}), '0',
	'its rows are gone from the publisher');
ok($sub->poll_query_until('postgres', q{SELECT count(*) = 30 FROM src_dbo_p}),
	'the subscriber has every change of the three batches');
is($sub->safe_psql('postgres', q{SELECT count(DISTINCT id) || '/' || min(id) || '/' || max(id) FROM src_dbo_p}),
	'30/1/30', 'the drop was not published as deletes');
is($pub->safe_psql('postgres',
		q{SELECT string_agg(c.relname, ',' ORDER BY c.relname) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		   WHERE i.inhparent = 'src_dbo_p'::regclass}),
	$pub->safe_psql('postgres',
		q{SELECT string_agg(partition_name::text, ',' ORDER BY partition_name) FROM mssql_cdc.staging_partitions}),
	'the catalog lists exactly the partitions the table has');

# a point CDC still keeps, but whose partition retention dropped, cannot be
# staged again
$pub->safe_psql('postgres', q{SELECT mssql_cdc.pause('src', 'dbo.p')});	# no drops meanwhile
my $rows = $pub->safe_psql('postgres', q{SELECT count(*) FROM src_dbo_p});
my ($ret, $o, $err) = $pub->psql('postgres', qq{SELECT mssql_cdc.reset_table('src', 'dbo.p', '$lsn_b1')});
like($err, qr/is older than the staging table's oldest partition.*Retention dropped the partitions of changes before LSN/s,
	'reset_table refuses a point before the oldest partition');
is($pub->safe_psql('postgres', q{SELECT count(*) FROM src_dbo_p}), $rows, 'and changes nothing');

is($pub->safe_psql('postgres', q{SELECT count(*) FROM mssql_cdc.errors}), '0', 'no errors')
  or diag $pub->safe_psql('postgres', 'SELECT * FROM mssql_cdc.errors');

$sub->stop;
$pub->stop;
$si->stop;
done_testing();
