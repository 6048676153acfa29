# Mirror tables added, rebuilt and dropped on a live table (issue 15
# points 1 and 3, doc/mirror.md): alter_table(mirror => true) on a
# streaming table fills the new mirror by a resnapshot, and a reader never
# sees it half filled; resnapshot() rebuilds a mirror aside while a
# reader polls it: the reader never misses a row that exists at the source
# throughout, and a row that is not at the source is gone afterwards; the
# mirror keeps its OID; changelog => false stops the changelog,
# mirror => false stops the mirror and keeps the table; mirror => false and
# remove_table during a rebuild drop the shadow; verify() refuses a table
# that is being copied.
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

my $si = StandIn->start(capture_interval => 0.1);
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{ALTER DATABASE cdcdb SET ALLOW_SNAPSHOT_ISOLATION ON},
	q{CREATE TABLE dbo.a1 (id int NOT NULL PRIMARY KEY, v int, note nvarchar(20))},
	q{CREATE TABLE dbo.n1 (id int NOT NULL PRIMARY KEY)});
$si->ctl('fill_table', 'database=cdcdb', 'table=dbo.a1', 'rows=300');
$si->tsql_ok(map({ "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" } qw(a1 n1)));
for (1 .. 100)
{
	last if $si->tsql('SELECT sys.fn_cdc_get_max_lsn()') =~ /0x[0-9A-F]{20}/;
	usleep(100_000);
}

my $node = PostgreSQL::Test::Cluster->new('mirror_alter');
$node->init;
$si->setup_node($node, conf => 'mssql_cdc.snapshot_chunk_rows = 3');
$node->start;
$si->create_source($node, 'src');

my $ms = q{SELECT 'R=' + CAST(id AS varchar(10)) + '|' + COALESCE(CAST(v AS varchar(10)), 'null') + '|' + COALESCE(note, N'null') FROM dbo.a1 ORDER BY id};
my $pg = q{SELECT format('%s|%s|%s', id, coalesce(v::text, 'null'), coalesce(note, 'null')) FROM public.src_dbo_a1_mirror ORDER BY id};

$node->safe_psql('postgres', q{SELECT mssql_cdc.add_table('src', 'dbo.a1')});
$si->add_table($node, 'src', 'dbo.n1');
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 2 FROM mssql_cdc.table_state WHERE phase = 'streaming'}),
	'changelog-only tables stream');
$si->tsql_ok(q{UPDATE dbo.a1 SET v = 1 WHERE id <= 10}, q{DELETE FROM dbo.a1 WHERE id = 11});

# ---------------------------------------------------------------------------
# A mirror for a 'never' table: refused; for a streaming table: filled by a
# resnapshot, empty until the copy is whole
# ---------------------------------------------------------------------------
my ($ret, $out, $err) = $node->psql('postgres',
	q{SELECT mssql_cdc.alter_table('src', 'dbo.n1', mirror => true)});
like($err, qr/a mirror cannot be added to table dbo\.n1, which has snapshot_mode 'never'/,
	'a mirror for a table that is never copied is refused');

# a reader in its own session: every count it sees of the mirror
my $reader_sql = sub {
	my ($lo, $hi, $seconds) = @_;
	return qq{
DO \$\$
DECLARE n bigint; seen text := ''; t0 timestamptz := clock_timestamp();
BEGIN
  WHILE clock_timestamp() < t0 + interval '$seconds s' LOOP
    SELECT count(*) INTO n FROM public.src_dbo_a1_mirror WHERE id BETWEEN $lo AND $hi;
    IF position(',' || n || ',' IN seen || ',') = 0 THEN seen := seen || ',' || n; END IF;
    PERFORM pg_sleep(0.002);
  END LOOP;
  RAISE NOTICE 'counts seen:%', seen;
END \$\$;};
};

$node->safe_psql('postgres', q{SELECT mssql_cdc.alter_table('src', 'dbo.a1', mirror => true)});
is($node->safe_psql('postgres',
		q{SELECT format('%s.%s %s', mirror_schema, mirror_table, changelog) FROM mssql_cdc.tables WHERE source_table = 'a1'}),
	'public.src_dbo_a1_mirror t', 'alter_table named the new mirror');
my $bg = $node->background_psql('postgres', on_error_stop => 0);
$bg->query_safe(q{SET client_min_messages = notice});
$bg->{stderr} = "";
$bg->query($reader_sql->(1, 300, 8));
my ($eq, $src, $mir) = wait_mirror_equal($node, $si, $ms, $pg, 60);
ok($eq, 'the added mirror equals the source') or diag "source:\n$src\nmirror:\n$mir";
my $full = $node->safe_psql('postgres', q{SELECT count(*) FROM public.src_dbo_a1_mirror});
my $notices = $bg->{stderr} // '';
note "reader: $notices";
my ($counts) = $notices =~ /counts seen:,?([\d,]*)/;
ok(defined $counts && $counts =~ /^(0,)?\Q$full\E$|^0$/,
	"the reader saw the new mirror empty or whole, never in part (saw: " . ($counts // 'nothing') . ")");

# ---------------------------------------------------------------------------
# resnapshot under a polling reader: the rows of ids 1..100 (99, id 11 was
# deleted) exist throughout
# ---------------------------------------------------------------------------
my $oid = $node->safe_psql('postgres', q{SELECT 'public.src_dbo_a1_mirror'::regclass::oid});
# a row the source does not have (a divergence a resnapshot must repair)
$node->safe_psql('postgres', q{INSERT INTO public.src_dbo_a1_mirror VALUES (99999, 0, 'stray')});
$bg->{stderr} = '';
$node->safe_psql('postgres', q{SELECT mssql_cdc.resnapshot('src', 'dbo.a1')});
# while it is copied again its mirror does not follow the source: verify()
# refuses it before reading anything
($ret, $out, $err) = $node->psql('postgres', q{\set VERBOSITY verbose
CALL mssql_cdc.verify('src', 'dbo.a1')});
like($err, qr/55000: table dbo\.a1 of server "src" is not streaming \(phase (pending|snapshotting)\)/,
	'verify() refuses a table that is being copied (SQLSTATE 55000)');
$si->tsql_ok(q{UPDATE dbo.a1 SET v = v + 1 WHERE id > 200}, q{INSERT INTO dbo.a1 VALUES (1000, 1, N'new')});
$bg->query($reader_sql->(1, 100, 4));
$notices = $bg->{stderr} // '';
note "reader: $notices";
($counts) = $notices =~ /counts seen:,?([\d,]*)/;
is($counts, '99', 'during the resnapshot the reader always saw all 99 rows of ids 1..100 that exist at the source');
ok($node->poll_query_until('postgres',
		q{SELECT phase = 'streaming' FROM mssql_cdc.table_state JOIN mssql_cdc.tables USING (table_id) WHERE source_table = 'a1'}),
	'the resnapshot finished');
($eq, $src, $mir) = wait_mirror_equal($node, $si, $ms, $pg, 60);
ok($eq, 'after the resnapshot the mirror equals the source (the stray row is gone)')
  or diag "source:\n$src\nmirror:\n$mir";
is($node->safe_psql('postgres', q{SELECT 'public.src_dbo_a1_mirror'::regclass::oid}), $oid,
	'the mirror was rebuilt in place (same OID)');
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_class WHERE relname LIKE '%_rebuild'}), '0',
	'the rebuild shadow is gone');

# ---------------------------------------------------------------------------
# mirror only, then no mirror
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', q{SELECT mssql_cdc.alter_table('src', 'dbo.a1', changelog => false)});
my $staged = $node->safe_psql('postgres', q{SELECT count(*) FROM public.src_dbo_a1});
$si->tsql_ok(q{UPDATE dbo.a1 SET note = N'mirror only' WHERE id = 5});
($eq, $src, $mir) = wait_mirror_equal($node, $si, $ms, $pg, 60);
ok($eq, 'mirror-only: the mirror follows the source');
is($node->safe_psql('postgres', q{SELECT count(*) FROM public.src_dbo_a1}), $staged,
	'mirror-only: no changelog rows were added');

$node->safe_psql('postgres', q{SELECT mssql_cdc.alter_table('src', 'dbo.a1', mirror => false)});
is($node->safe_psql('postgres',
		q{SELECT format('%s %s', mirror_table IS NULL, changelog) FROM mssql_cdc.tables WHERE source_table = 'a1'}),
	't t', 'mirror => false: no mirror, the changelog is back');
$si->tsql_ok(q{UPDATE dbo.a1 SET note = N'after drop' WHERE id = 6});
ok($node->poll_query_until('postgres',
		q{SELECT count(*) > 0 FROM public.src_dbo_a1 WHERE note = 'after drop'}),
	'the change reached the changelog');
is($node->safe_psql('postgres', q{SELECT count(*) FROM public.src_dbo_a1_mirror WHERE note = 'after drop'}),
	'0', 'the dropped mirror is kept but no longer changed');

# ---------------------------------------------------------------------------
# mirror => false or remove_table during a rebuild: the half-built shadow
# goes, the mirror stays (as the staging table does)
# ---------------------------------------------------------------------------
like($node->safe_psql('postgres', q{
BEGIN;
SELECT mssql_cdc.alter_table('src', 'dbo.a1', mirror_table => 'public.a1_dropped');
SELECT count(*) FROM pg_class WHERE relname = 'a1_dropped_rebuild';
SELECT mssql_cdc.alter_table('src', 'dbo.a1', mirror => false);
COMMIT;}), qr/^\s*1\s*$/, 'a new mirror is being rebuilt when it is dropped again');
is($node->safe_psql('postgres',
		q{SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class WHERE relname LIKE 'a1_dropped%' AND relkind = 'r'}),
	'a1_dropped', 'mirror => false dropped the rebuild shadow and kept the mirror');
like($node->safe_psql('postgres', q{
BEGIN;
SELECT mssql_cdc.alter_table('src', 'dbo.a1', mirror_table => 'public.a1_again');
SELECT count(*) FROM pg_class WHERE relname = 'a1_again_rebuild';
SELECT mssql_cdc.remove_table('src', 'dbo.a1');
COMMIT;}), qr/^\s*1\s*$/, 'a new mirror is being rebuilt when its table is removed');
is($node->safe_psql('postgres',
		q{SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class WHERE relname LIKE 'a1_again%' AND relkind = 'r'}),
	'a1_again', 'remove_table dropped the rebuild shadow and kept the mirror');

$bg->quit;
$node->stop;
done_testing();
