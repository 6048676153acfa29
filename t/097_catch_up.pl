# Tables that catch up join the others (issue 14, point 2).  A table that is
# behind the others of its source (here: resumed after a pause) must gain on
# them and meet them while they still have a backlog, also when windows are
# as small as batch_max_transactions = 2, and from the meeting on every
# source transaction that changed both tables must land in ONE PostgreSQL
# transaction (the same xmin in both staging tables).  mssql_cdc.status
# shows the table as catching up while it is behind.  Plain T-SQL only.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;
use Time::HiRes qw(usleep);

my $si = StandIn->start(capture_interval => 0.1);
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.a (id int NOT NULL PRIMARY KEY, v int)},
	q{CREATE TABLE dbo.b (id int NOT NULL PRIMARY KEY, v int)},
	map({ "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
		qw(a b)));

my $node = PostgreSQL::Test::Cluster->new('catchup');
$node->init;
$si->setup_node($node, conf => 'mssql_cdc.batch_max_transactions = 2');
$node->start;
$si->create_source($node, 'src');

# (the LSN operators live in schema mssql_cdc)
sub q1 { return $node->safe_psql('postgres', "SET search_path = public, mssql_cdc; $_[0]"); }

# psql that returns the error instead of dying, so every check reports
sub query
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', "SET search_path = public, mssql_cdc; $sql");
	return $ret == 0 ? $out : "ERROR: $err";
}

sub diagnose
{
	diag query(q{SELECT * FROM mssql_cdc.status ORDER BY source_table});
	diag query(q{SELECT * FROM mssql_cdc.errors});
}

# cross-table source transactions: ids $from..$to, each in a and b
sub cross_transactions
{
	my ($from, $to) = @_;
	my @batches;
	for my $i ($from .. $to)
	{
		push @batches,
		  "BEGIN TRANSACTION; INSERT INTO dbo.a VALUES ($i, $i); INSERT INTO dbo.b VALUES ($i, $i); COMMIT";
	}
	$si->tsql_ok(@batches);
}

$si->add_table($node, 'src', "dbo.$_") for qw(a b);
cross_transactions(1, 1);
ok($node->poll_query_until('postgres',
		q{SELECT (SELECT count(*) FROM src_dbo_a) = 1 AND (SELECT count(*) FROM src_dbo_b) = 1}),
	'both tables stream');
is(q1(q{SELECT (SELECT xmin::text FROM src_dbo_a) = (SELECT xmin::text FROM src_dbo_b)}), 't',
	'a cross-table transaction of tables in step lands in one PostgreSQL transaction');
is(query(q{SELECT string_agg(source_table || '=' || catching_up::text, ',' ORDER BY source_table) FROM mssql_cdc.status}),
	'dbo.a=false,dbo.b=false', 'status: no table is catching up');

# ---------------------------------------------------------------------------
# dbo.b falls behind: paused while 40 cross-table transactions stream into
# dbo.a; then, with the whole source paused, a backlog of 400 more builds up
# ---------------------------------------------------------------------------
q1(q{SELECT mssql_cdc.pause('src', 'dbo.b')});
cross_transactions(2, 41);
ok($node->poll_query_until('postgres', q{SELECT count(*) = 41 FROM src_dbo_a}),
	'dbo.a streams on while dbo.b is paused');
q1(q{SELECT mssql_cdc.pause('src')});
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'mssql_cdc worker'}),
	'the source worker stopped');
cross_transactions(42, 441);
my $last = $si->captured_lsn('dbo_a', 441);

q1(q{SELECT mssql_cdc.resume('src', 'dbo.b')});
my $a_at = q1(q{SELECT checkpoint_lsn FROM mssql_cdc.status WHERE source_table = 'dbo.a'});
is(query(q{SELECT string_agg(source_table || '=' || catching_up::text || '/' || coalesce(catching_up_to::text, '-'), ','
                          ORDER BY source_table) FROM mssql_cdc.status}),
	"dbo.a=false/-,dbo.b=true/$a_at",
	'status: the resumed table is catching up to the checkpoint of the table ahead');

# ---------------------------------------------------------------------------
# the worker runs again: dbo.b must meet dbo.a while dbo.a still has a
# backlog (each window of dbo.a takes 2 of its 400 transactions)
# ---------------------------------------------------------------------------
q1(q{SELECT mssql_cdc.resume('src')});
my $met;
for (1 .. 1200)
{
	my $row = q1(q{SELECT string_agg(checkpoint_lsn::text, ',' ORDER BY source_table) FROM mssql_cdc.status});
	if ($row =~ /^(0x[0-9A-F]+),\1$/)
	{
		$met = $1;
		last;
	}
	usleep(50_000);
}
ok(defined $met, 'the tables meet (the same checkpoint)') or diagnose();
$met //= $last;
ok(q1(qq{SELECT '$met'::lsn < '$last'::lsn}) eq 't',
	"they met at $met, before dbo.a had worked off its backlog (up to $last)");

ok($node->poll_query_until('postgres',
		q{SELECT (SELECT count(*) FROM src_dbo_a) = 441 AND (SELECT count(*) FROM src_dbo_b) = 441}),
	'every transaction arrived in both tables')
  or diagnose();
is(q1(q{SELECT count(*) FROM (SELECT id FROM src_dbo_a GROUP BY id HAVING count(*) > 1
                              UNION ALL SELECT id FROM src_dbo_b GROUP BY id HAVING count(*) > 1) d}),
	'0', 'exactly once');
my $after = q1(qq{SELECT count(*) FROM src_dbo_a WHERE _cdc_lsn > '$met'::lsn});
cmp_ok($after, '>=', 200, "most of the backlog came after the meeting ($after transactions)");
is(q1(qq{SELECT count(*) FROM src_dbo_a a JOIN src_dbo_b b USING (id)
          WHERE a._cdc_lsn > '$met'::lsn AND a.xmin::text <> b.xmin::text}),
	'0', 'from the meeting on, every cross-table transaction has the same xmin in both staging tables');
is(q1(q{SELECT count(*) FROM src_dbo_a a JOIN src_dbo_b b USING (id) WHERE a._cdc_lsn <> b._cdc_lsn}),
	'0', 'with one commit LSN');
is(q1(q{SELECT count(DISTINCT xmin::text) >= 100 FROM src_dbo_a WHERE _cdc_lsn > '} . $met . q{'::lsn}),
	't', 'in windows of at most a few transactions (batch_max_transactions = 2)');
is(query(q{SELECT string_agg(source_table || '=' || catching_up::text, ',' ORDER BY source_table) FROM mssql_cdc.status}),
	'dbo.a=false,dbo.b=false', 'status: no table is catching up any more');

# the tables stay together for new transactions
cross_transactions(442, 451);
ok($node->poll_query_until('postgres',
		q{SELECT (SELECT count(*) FROM src_dbo_a) = 451 AND (SELECT count(*) FROM src_dbo_b) = 451}),
	'new cross-table transactions arrive');
is(q1(q{SELECT count(*) FROM src_dbo_a a JOIN src_dbo_b b USING (id) WHERE a.id > 441 AND a.xmin::text <> b.xmin::text}),
	'0', 'each in one PostgreSQL transaction');

done_testing();
