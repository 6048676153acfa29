# A primary-key change recorded as an update pair 3/4 (stand-in switch
# --unique-update in-place-keys, ENGINE.md) that does not assign a LOB
# column: CDC records the column as NULL with update-mask bit 0 (in the 3
# always, in the 4 with the stand-in option lob_op4_unchanged_null; text
# keeps its value in the 4 but its bit is 0 too).  The mirror's row at the
# new key must get the value the old key had (doc/mirror.md "Unchanged LOB
# columns"): a single move, chains of moves in one window, a move after the
# LOB was set in the same window, a statement that shifts keys in place
# (UPDATE ... SET id = id + 1, whose pairs' before-images are the rows as
# they were before the statement), a swap; a move that assigns the LOB
# writes the new value, one that assigns NULL writes NULL.  For a table
# with before-images in its changelog, one without, and a mirror-only one;
# verify() agrees.
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

my @tables = qw(ml mn mo);
my $si = StandIn->start(capture_interval => 0.1,
	args => StandIn::real_server() ? [] : [ '--unique-update', 'in-place-keys' ]);
my @rows = (1 .. 9, 40 .. 44);
$si->tsql_ok(q{EXEC sys.sp_cdc_enable_db},
	map({ ("CREATE TABLE dbo.$_ (id int NOT NULL PRIMARY KEY, v int, doc varchar(max), nt nvarchar(max), tx text)",
		   'INSERT INTO dbo.' . $_ . ' (id, v, doc, nt, tx) VALUES '
			 . join(', ', map { "($_, $_, 'doc-$_', N'nt-$_', 'tx-$_')" } @rows),
		   "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL") }
		@tables));
for (1 .. 100)
{
	last if $si->tsql('SELECT sys.fn_cdc_get_max_lsn()') =~ /0x[0-9A-F]{20}/;
	usleep(100_000);
}
my $node = PostgreSQL::Test::Cluster->new('movelob');
$node->init;
$si->setup_node($node);
$node->start;
$si->create_source($node, 'src');
$node->safe_psql('postgres',
	q{SELECT mssql_cdc.add_table('src', 'dbo.ml', mirror => true);
	  SELECT mssql_cdc.add_table('src', 'dbo.mn', mirror => true, update_before => false);
	  SELECT mssql_cdc.add_table('src', 'dbo.mo', mirror => true, changelog => false)});
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 3 FROM mssql_cdc.status WHERE state = 'streaming'}), 'the tables stream');
$si->ctl('set_option', 'name=lob_op4_unchanged_null', 'value=true') unless StandIn::real_server();

sub ms_select
{
	my ($t) = @_;
	return "SELECT 'R=' + CAST(id AS varchar(10)) + '|' + ISNULL(CAST(v AS varchar(10)), '~') + '|'"
	  . " + ISNULL(doc, '~') + '|' + ISNULL(CAST(nt AS varchar(max)), '~') + '|'"
	  . " + ISNULL(CAST(tx AS varchar(max)), '~') FROM dbo.$t ORDER BY id";
}

sub pg_select
{
	my ($t) = @_;
	return "SELECT format('%s|%s|%s|%s|%s', id, coalesce(v::text, '~'), coalesce(doc, '~'),"
	  . " coalesce(nt, '~'), coalesce(tx, '~')) FROM public.src_dbo_${t}_mirror ORDER BY id";
}

sub check
{
	my ($what) = @_;
	foreach my $t (@tables)
	{
		my ($equal, $src, $mir) = wait_mirror_equal($node, $si, ms_select($t), pg_select($t), 60);
		ok($equal, "dbo.$t: $what") or diag "source:\n$src\nmirror:\n$mir";
	}
}

# one window each (a transaction is never split)
foreach my $t (@tables)
{
	$si->tsql_ok("UPDATE dbo.$t SET id = 11 WHERE id = 1");
}
check('a key change that leaves the LOB columns alone keeps their values');

foreach my $t (@tables)
{
	$si->tsql_ok(
		# a chain in one transaction
		"BEGIN TRANSACTION; UPDATE dbo.$t SET id = 21 WHERE id = 2; UPDATE dbo.$t SET id = 22, v = 222 WHERE id = 21;"
		  . " UPDATE dbo.$t SET id = 23 WHERE id = 22; COMMIT",
		# the LOB set in between, then moved on
		"BEGIN TRANSACTION; UPDATE dbo.$t SET id = 31 WHERE id = 3; UPDATE dbo.$t SET doc = 'doc-3b' WHERE id = 31;"
		  . " UPDATE dbo.$t SET id = 32 WHERE id = 31; COMMIT",
		# set, then moved
		"BEGIN TRANSACTION; UPDATE dbo.$t SET tx = 'tx-4b', nt = N'nt-4b' WHERE id = 4; UPDATE dbo.$t SET id = 47 WHERE id = 4;"
		  . " COMMIT",
		# assigned by the key change: a value, NULL
		"UPDATE dbo.$t SET id = 51, doc = 'doc-5b', tx = 'tx-5b' WHERE id = 5",
		"UPDATE dbo.$t SET id = 61, doc = NULL, nt = NULL WHERE id = 6",
		# a swap
		"UPDATE dbo.$t SET id = CASE id WHEN 7 THEN 8 WHEN 8 THEN 7 END WHERE id IN (7, 8)",
		# a shift over several rows (44 -> 45 first is free, 40 -> 41 meets 41)
		"UPDATE dbo.$t SET id = id + 1 WHERE id BETWEEN 40 AND 45");
}
check('chains, a swap, a shift and key changes that assign the LOB columns');

# all of it again in one transaction per table, after a change of the LOB
foreach my $t (@tables)
{
	$si->tsql_ok("BEGIN TRANSACTION; UPDATE dbo.$t SET doc = 'doc-9b' WHERE id = 9;"
		  . " UPDATE dbo.$t SET id = id + 100 WHERE id > 8; UPDATE dbo.$t SET id = id - 99 WHERE id = 109;"
		  . " UPDATE dbo.$t SET id = id + 1 WHERE id BETWEEN 141 AND 146; COMMIT");
}
check('shifts and a chain in one transaction after a change of the LOB');
is($node->safe_psql('postgres', q{SELECT count(*) FROM mssql_cdc.errors}), '0', 'no window failed')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.errors');

my @f = split /\|/, $node->safe_psql('postgres',
	q{CALL mssql_cdc.verify('src', chunk_rows => 5, recheck_timeout => '60 s')});
my $src_total = 0;
$src_total += ($si->tsql("SELECT 'N=' + CAST(COUNT(*) AS varchar(10)) FROM dbo.$_") =~ /N=(\d+)/)[0] for @tables;
is(join(',', @f[1 .. 7]), "3,$src_total,$src_total,0,0,0,0",
	"verify(): 3 tables, $src_total rows on each side, nothing missing, extra, different or unconfirmed")
  or diag $node->safe_psql('postgres', "SELECT * FROM mssql_cdc.verify_runs; SELECT * FROM mssql_cdc.verify_mismatches LIMIT 20");

$node->stop;
$si->stop;
done_testing();
