# Staging tables in a publication: a second node subscribes, and a
# multi-table SQL Server transaction becomes visible there atomically
# (the worker commits it in one Postgres transaction, and logical
# replication applies transactions whole).
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
	q{CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, amount decimal(12,2), note nvarchar(40))},
	q{CREATE TABLE dbo.order_lines (order_id int NOT NULL, line int NOT NULL, qty int, PRIMARY KEY (order_id, line))},
	q{CREATE TABLE dbo.digits (n int NOT NULL PRIMARY KEY)},
	q{INSERT INTO dbo.digits VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'order_lines', @role_name = NULL});
for (1 .. 100)
{
	last if $si->tsql('SELECT sys.fn_cdc_get_max_lsn()') =~ /0x[0-9A-F]{20}/;
	usleep(100_000);
}

my $pub = PostgreSQL::Test::Cluster->new('publisher');
$pub->init(allows_streaming => 'logical');
$si->setup_node($pub);
$pub->start;
$si->create_source($pub, 'src');
$si->add_table($pub, 'src', $_) for qw(dbo.orders dbo.order_lines);

# the subscriber has the extension too (types mssql_cdc.lsn and
# mssql_cdc.operation) and the same staging tables, created from the
# publisher's DDL; it has no sources, so its launcher stays idle
my $sub = PostgreSQL::Test::Cluster->new('subscriber');
$sub->init;
$si->setup_node($sub);
$sub->start;
$sub->safe_psql('postgres', 'CREATE EXTENSION mssql_cdc');
for my $t (qw(dbo.orders dbo.order_lines))
{
	my $ddl = $pub->safe_psql('postgres', "SELECT mssql_cdc.staging_ddl('src', '$t')");
	$sub->safe_psql('postgres', $ddl);
}

$pub->safe_psql('postgres',
	'CREATE PUBLICATION cdc FOR TABLE public.src_dbo_orders, public.src_dbo_order_lines');
my $connstr = $pub->connstr . ' dbname=postgres';
$sub->safe_psql('postgres',
	"CREATE SUBSCRIPTION cdc_sub CONNECTION '$connstr' PUBLICATION cdc");
$sub->wait_for_subscription_sync($pub, 'cdc_sub');

# ---------------------------------------------------------------------------
# A simple change reaches the subscriber with all metadata
# ---------------------------------------------------------------------------
$si->tsql_ok(q{INSERT INTO dbo.orders VALUES (1, 10.50, N'first')});
ok( $sub->poll_query_until('postgres', 'SELECT count(*) = 1 FROM public.src_dbo_orders'),
	'a change reaches the subscriber');
is( $sub->safe_psql('postgres',
		q{SELECT id || '|' || amount || '|' || note || '|' || _cdc_op FROM public.src_dbo_orders}),
	'1|10.50|first|insert', 'with its values and operation');
is( $sub->safe_psql('postgres', q{SELECT _cdc_lsn::text FROM public.src_dbo_orders}),
	$pub->safe_psql('postgres', q{SELECT _cdc_lsn::text FROM public.src_dbo_orders}),
	'and the same commit LSN as on the publisher');

# ---------------------------------------------------------------------------
# A multi-table source transaction appears atomically on the subscriber
# ---------------------------------------------------------------------------
$si->tsql_ok(q{BEGIN TRANSACTION;
  INSERT INTO dbo.orders VALUES (2, 99.99, N'big');
  INSERT INTO dbo.order_lines (order_id, line, qty)
    SELECT 2, a.n + 10 * b.n + 100 * c.n + 1000 * d.n, a.n
      FROM dbo.digits a CROSS JOIN dbo.digits b CROSS JOIN dbo.digits c CROSS JOIN dbo.digits d;
  COMMIT});
my %seen;
my $state = '';
my $deadline = time + 120;
while (time < $deadline)
{
	$state = $sub->safe_psql('postgres',
		q{SELECT (SELECT count(*) FROM public.src_dbo_orders) || '/' || (SELECT count(*) FROM public.src_dbo_order_lines)});
	$seen{$state}++;
	last if $state eq '2/10000';
	usleep(10_000);
}
note 'subscriber states seen: ' . join(', ', map { "$_ x$seen{$_}" } sort keys %seen);
is($state, '2/10000', 'the whole transaction arrived on the subscriber');
is_deeply([ sort grep { $_ ne '1/0' && $_ ne '2/10000' } keys %seen ], [],
	'the subscriber never showed a part of the source transaction');
is( $sub->safe_psql('postgres',
		q{SELECT count(DISTINCT l._cdc_lsn) FROM public.src_dbo_order_lines l
		    JOIN public.src_dbo_orders o ON o._cdc_lsn::text = l._cdc_lsn::text AND o.id = 2}),
	'1', 'order and lines share one commit LSN on the subscriber');

$sub->stop;
$pub->stop;
$si->stop;
done_testing();
