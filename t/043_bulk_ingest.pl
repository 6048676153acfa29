# The bulk staging writer (staging_writer.c) against the SQL Server
# stand-in, with batches of 3 rows so that every unit spans several
# batches: the bulk path and the row-by-row fallback (a user trigger, row-
# level security) give the same staging contents in streaming and in
# snapshots, and the trigger fires once per row; a primary-key violation
# in a later batch rolls the whole window back with no progress; a user's
# CHECK constraint rejects a row with the standard message and no
# progress; a source transaction split over many batches commits whole;
# user-added columns get their defaults, generated columns their values,
# dropped columns stay empty; a revoked INSERT privilege gives the
# standard permission error.
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

# three tables of the same shape: bulk, trigger (SPI), row-level security (SPI)
my $shape = q{(id int NOT NULL PRIMARY KEY, name nvarchar(40), amount decimal(12,3),
	ts datetime2(7), g uniqueidentifier, bin varbinary(16), f float, small smallmoney,
	flag bit, d date, dto datetimeoffset(3))};
$shape =~ s/\s+/ /g;
my @same = qw(tb tt tr);

sub value_row
{
	my ($id) = @_;
	my $name = $id % 7 == 0 ? 'NULL' : "N'n$id'";
	return sprintf(q{(%d, %s, %d.%03d, '2024-02-29 23:59:59.999999%d', '6F9619FF-8B86-D011-B42D-00C04FC964%02X', 0x%06X, %s, %d.%04d, %d, '2001-01-%02d', '2020-06-01 12:00:00.123 +05:30')},
		$id, $name, $id * 13, $id % 1000, $id % 10, $id % 256, $id * 7919,
		$id % 5 == 0 ? 'NULL' : "$id.25e-3", $id, $id % 10000, $id % 2, $id % 28 + 1);
}

$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	(map { "CREATE TABLE dbo.$_ $shape" } @same),
	q{CREATE TABLE dbo.chk (id int NOT NULL PRIMARY KEY, v int)},
	q{CREATE TABLE dbo.pk (id int NOT NULL PRIMARY KEY, v int)},
	q{CREATE TABLE dbo.whole (id int NOT NULL PRIMARY KEY, v int)},
	q{CREATE TABLE dbo.dflt (id int NOT NULL PRIMARY KEY, v int)},
	q{CREATE TABLE dbo.pv (id int NOT NULL PRIMARY KEY, v int)},
	q{CREATE TABLE dbo.lob (id int NOT NULL PRIMARY KEY, doc nvarchar(max))},
	(map { my $t = $_; "INSERT INTO dbo.$t VALUES " . join(', ', map { value_row($_) } 1 .. 20) } @same),
	map({ "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
		@same, qw(chk pk whole dflt pv lob)));

my $node = PostgreSQL::Test::Cluster->new('bulk');
$node->init;
$si->setup_node($node,
	conf => "mssql_cdc.insert_batch_rows = 3\nmssql_cdc.snapshot_chunk_rows = 7");
$node->start;
$si->create_source($node, 'src');

$si->add_table($node, 'src', "dbo.$_", snapshot_mode => 'initial') for @same;
$si->add_table($node, 'src', "dbo.$_") for qw(chk pk whole dflt lob);
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 8 FROM mssql_cdc.table_state WHERE phase = 'streaming'}),
	'all tables are streaming (the first three after their snapshot)')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors');
is($node->safe_psql('postgres', 'SELECT count(*) FROM src_dbo_tb'), '20',
	'the bulk snapshot copied 20 rows in chunks of 7 and batches of 3');

sub checkpoint_of
{
	my ($table) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT checkpoint_lsn FROM mssql_cdc.table_state JOIN mssql_cdc.tables USING (table_id)
		WHERE source_table = '$table'});
}

# The commit LSN of a change, from the change table (waits for the capture job)
sub change_lsn
{
	my ($ci, $id) = @_;
	for (1 .. 300)
	{
		my $o = $si->tsql("SELECT 'L=' + CONVERT(varchar(30), __\$start_lsn, 1) FROM cdc.${ci}_CT WHERE id = $id");
		return $1 if $o =~ /L=(0x[0-9A-Fa-f]+)/;
		usleep(100_000);
	}
	die "the capture job never recorded id $id of $ci";
}

# the table's checkpoint is still before the commit LSN $lsn
sub checkpoint_before
{
	my ($table, $lsn) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT checkpoint_lsn OPERATOR(mssql_cdc.<) '$lsn'::mssql_cdc.lsn
		FROM mssql_cdc.table_state JOIN mssql_cdc.tables USING (table_id)
		WHERE source_table = '$table'});
}

sub wait_for_error
{
	my ($re_sql, $what) = @_;
	ok( $node->poll_query_until('postgres',
			"SELECT count(*) > 0 FROM mssql_cdc.errors WHERE message LIKE '$re_sql'"),
		$what)
	  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.errors');
}

# ---------------------------------------------------------------------------
# Bulk path and fallback give identical staging contents
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', q{
CREATE TABLE trig_log (id int, op text);
CREATE FUNCTION log_row() RETURNS trigger LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.trig_log VALUES (NEW.id, NEW._cdc_op::text); RETURN NULL; END$$;
CREATE TRIGGER staged AFTER INSERT ON src_dbo_tt FOR EACH ROW EXECUTE FUNCTION log_row();
ALTER TABLE src_dbo_tr ENABLE ROW LEVEL SECURITY;
});
my $tt_before = $node->safe_psql('postgres', 'SELECT count(*) FROM src_dbo_tt');

# snapshots again, now through both paths
$node->safe_psql('postgres', "SELECT mssql_cdc.resnapshot('src', 'dbo.$_')") for @same;
ok( $node->poll_query_until('postgres', q{
		SELECT count(*) = 3 FROM mssql_cdc.table_state JOIN mssql_cdc.tables USING (table_id)
		WHERE source_table IN ('tb', 'tt', 'tr') AND phase = 'streaming' AND snapshot_rows = 20}),
	'the three tables were snapshotted again')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors');

# the same changes to the three tables, in one source transaction each
my @dml = (
	'INSERT INTO dbo.%s VALUES ' . join(', ', map { value_row($_) } 21 .. 30),
	q{UPDATE dbo.%s SET name = N'changed', amount = -0.5 WHERE id BETWEEN 3 AND 9},
	q{DELETE FROM dbo.%s WHERE id IN (2, 22, 14)},
	q{UPDATE dbo.%s SET bin = NULL, g = NULL, ts = '0001-01-01 00:00:00' WHERE id = 25});
for my $t (@same)
{
	$si->tsql_ok('BEGIN TRANSACTION; ' . join('; ', map { sprintf($_, $t) } @dml) . '; COMMIT');
}

my $expected_rows = 20 + 20 + 10 + 2 * 7 + 3 + 2;
ok( $node->poll_query_until('postgres', qq{
		SELECT bool_and(n = $expected_rows) FROM (
		  SELECT count(*) AS n FROM src_dbo_tb UNION ALL SELECT count(*) FROM src_dbo_tt
		  UNION ALL SELECT count(*) FROM src_dbo_tr) c}),
	"every table got its $expected_rows rows")
  or diag $node->safe_psql('postgres', q{
	SELECT (SELECT count(*) FROM src_dbo_tb), (SELECT count(*) FROM src_dbo_tt), (SELECT count(*) FROM src_dbo_tr);
	SELECT * FROM mssql_cdc.errors});

sub contents
{
	my ($stg) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT string_agg(concat_ws('|', id, name, amount, ts, g, bin, f, small, flag, d, dto AT TIME ZONE 'UTC',
		                            _cdc_op, _cdc_update_mask, _cdc_commit_time IS NULL),
		                  E'\\n' ORDER BY _cdc_lsn, _cdc_seqval)
		FROM $stg});
}
my $tb = contents('src_dbo_tb');
is(contents('src_dbo_tt'), $tb, 'the trigger table (row by row) has the same contents as the bulk table');
is(contents('src_dbo_tr'), $tb, 'the row-level-security table (row by row) has the same contents');
like($tb, qr/\|delete\|/, 'the contents include deletes');
like($tb, qr/\|update_after\|/, 'and updates');
like($tb, qr/^1\|n1\|13\.001\|2024-02-29 23:59:59\.999999\|6f9619ff-8b86-d011-b42d-00c04fc96401\|\\x001eef\|0\.00125\|1\.0001\|t\|2001-01-02\|2020-06-01 06:30:00\.123\|snapshot\|t$/m,
	'a bulk row has the exact values (binary conversions, datetimeoffset in UTC)')
  or diag((split /\n/, $tb)[0]);
is( $node->safe_psql('postgres', "SELECT count(*) FROM trig_log"),
	$node->safe_psql('postgres', 'SELECT count(*) FROM src_dbo_tt') - $tt_before,
	'the AFTER trigger fired once per row written after it was created');
ok($node->log_contains(qr/staging table "src_dbo_tt" is written row by row because it has triggers/),
	'the trigger table is logged as written row by row');
ok($node->log_contains(qr/staging table "src_dbo_tr" is written row by row because row-level security is enabled/),
	'the row-level-security table is logged as written row by row');
ok(!$node->log_contains(qr/staging table "src_dbo_tb" is written row by row/),
	'the plain table takes the bulk path');

# ---------------------------------------------------------------------------
# A source transaction split over many batches commits whole
# ---------------------------------------------------------------------------
$si->tsql_ok('BEGIN TRANSACTION; '
	  . join('; ', map { "INSERT INTO dbo.whole VALUES ($_, $_)" } 1 .. 200)
	  . '; COMMIT');
my %seen;
my $deadline = time + 60;
while (time < $deadline)
{
	my $n = $node->safe_psql('postgres', 'SELECT count(*) FROM src_dbo_whole');
	$seen{$n}++;
	last if $n eq '200';
	usleep(5_000);
}
is($seen{200} // 0, 1, 'the 200-row transaction arrived');
is(join(',', grep { $_ ne '0' && $_ ne '200' } sort { $a <=> $b } keys %seen), '',
	'a reader saw nothing or all of it, never a part (67 batches of 3 rows)');
note sprintf('%d samples saw 0 rows before the 200-row transaction arrived', $seen{0} // 0);

# ---------------------------------------------------------------------------
# Wide LOB rows: a batch is cut by its size, the worker's memory stays small
# ---------------------------------------------------------------------------
my $pid = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mssql_cdc worker'});
sub rss_anon_kb
{
	open(my $fh, '<', "/proc/$pid/status") or return 0;
	while (<$fh>) { return $1 if /^RssAnon:\s+(\d+) kB/ }
	return 0;
}
my $lob_chars = 2_000_000;
my $lob_rows = 30;
$si->tsql_ok('BEGIN TRANSACTION; '
	  . join('; ', map { "INSERT INTO dbo.lob VALUES ($_, REPLICATE(CAST(N'x' AS nvarchar(max)), $lob_chars))" } 1 .. $lob_rows)
	  . '; COMMIT');
my $peak_kb = 0;
$deadline = time + 300;
while (time < $deadline)
{
	my $kb = rss_anon_kb();
	$peak_kb = $kb if $kb > $peak_kb;
	last if $node->safe_psql('postgres', 'SELECT count(*) FROM src_dbo_lob') eq $lob_rows;
	usleep(20_000);
}
is( $node->safe_psql('postgres', q{SELECT count(*) || ':' || min(length(doc)) || ':' || max(length(doc)) FROM src_dbo_lob}),
	"$lob_rows:$lob_chars:$lob_chars", "$lob_rows rows of $lob_chars characters arrived in one window");
note sprintf('worker peak RssAnon while applying %d MB of LOB rows: %.1f MB',
	$lob_rows * $lob_chars / 1e6, $peak_kb / 1024);
cmp_ok($peak_kb, '>', 0, 'sampled the worker memory');
cmp_ok($peak_kb / 1024, '<', 100, 'the worker stayed under 100 MB of private memory');

# The same rows copied by a snapshot: a chunk (7 rows, 14 MB) is more than
# a chunk keeps in memory before its next batch is sent (8 MB,
# src/snapshot.c), so the rows kept go in first and the rest as they are
# read; each exactly once, in key order, and memory stays bounded
$si->tsql_ok(q{CREATE TABLE dbo.lobsnap (id int NOT NULL PRIMARY KEY, doc nvarchar(max))},
	(map { "INSERT INTO dbo.lobsnap VALUES ($_, REPLICATE(CAST(N'x' AS nvarchar(max)), $lob_chars))" } 1 .. $lob_rows),
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'lobsnap', @role_name = NULL});
$si->add_table_when_started($node,
	q{SELECT mssql_cdc.add_table('src', 'dbo.lobsnap', snapshot_mode => 'initial')});
$peak_kb = 0;
$deadline = time + 300;
while (time < $deadline)
{
	my $kb = rss_anon_kb();
	$peak_kb = $kb if $kb > $peak_kb;
	last if $node->safe_psql('postgres',
		q{SELECT phase FROM mssql_cdc.table_state s JOIN mssql_cdc.tables t USING (table_id) WHERE t.source_table = 'lobsnap'}) eq 'streaming';
	usleep(20_000);
}
is( $node->safe_psql('postgres',
		q{SELECT count(*) || ':' || count(DISTINCT id) || ':' || min(length(doc)) || ':' || max(length(doc)) FROM src_dbo_lobsnap WHERE _cdc_op = 'snapshot'}),
	"$lob_rows:$lob_rows:$lob_chars:$lob_chars",
	"the snapshot copied $lob_rows rows of $lob_chars characters once each, in chunks larger than it keeps");
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM (SELECT id, row_number() OVER (ORDER BY _cdc_seqval) AS n FROM src_dbo_lobsnap) r WHERE id <> n}),
	'0', 'in key order (_cdc_seqval follows the key)');
note sprintf('worker peak RssAnon while copying %d MB of LOB rows: %.1f MB',
	$lob_rows * $lob_chars / 1e6, $peak_kb / 1024);
cmp_ok($peak_kb / 1024, '<', 100, 'the worker stayed under 100 MB of private memory in the snapshot');

# ---------------------------------------------------------------------------
# A primary-key violation in a later batch rolls the whole window back
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', q{SELECT mssql_cdc.pause('src')});
my $pk_checkpoint = checkpoint_of('pk');
$si->tsql_ok('BEGIN TRANSACTION; '
	  . join('; ', map { "INSERT INTO dbo.pk VALUES ($_, $_)" } 1 .. 8)
	  . '; COMMIT');
my $ct;
for (1 .. 300)
{
	$ct = $si->tsql(q{SELECT 'L=' + CONVERT(varchar(30), __$start_lsn, 1) + ' S=' + CONVERT(varchar(30), __$seqval, 1) + ' C=' + CAST(__$command_id AS varchar(10)) FROM cdc.dbo_pk_CT WHERE id = 7});
	last if $ct =~ /L=0x/;
	usleep(100_000);
}
my ($pk_lsn, $pk_seqval, $pk_command) = $ct =~ /L=(0x[0-9A-Fa-f]+) S=(0x[0-9A-Fa-f]+) C=(\d+)/;
ok(defined $pk_seqval, 'the capture job recorded the 8-row transaction');
# the 7th change of the window (third batch) will collide with this row
$node->safe_psql('postgres', qq{
	INSERT INTO src_dbo_pk (id, v, _cdc_lsn, _cdc_command_id, _cdc_seqval, _cdc_op)
	VALUES (-1, -1, '$pk_lsn', $pk_command, '$pk_seqval', 'insert')});
$node->safe_psql('postgres', q{SELECT mssql_cdc.resume('src')});
wait_for_error('duplicate key value violates unique constraint "src_dbo_pk_pkey"%',
	'the window fails with the standard unique violation');
is($node->safe_psql('postgres', 'SELECT count(*) FROM src_dbo_pk WHERE id > 0'), '0',
	'none of the 6 rows before the collision was kept');
is(checkpoint_of('pk'), $pk_checkpoint, 'the checkpoint did not move');
is(checkpoint_before('pk', $pk_lsn), 't', 'it is before the failing transaction');
$node->safe_psql('postgres', 'DELETE FROM src_dbo_pk WHERE id = -1');
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 8 AND count(DISTINCT id) = 8 FROM src_dbo_pk}),
	'after the conflicting row is gone the retry applies all 8 rows once')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.errors');

# ---------------------------------------------------------------------------
# A user's CHECK constraint rejects a row: standard message, no progress
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', 'ALTER TABLE src_dbo_chk ADD CONSTRAINT v_small CHECK (v < 100)');
$si->tsql_ok('BEGIN TRANSACTION; '
	  . join('; ', map { "INSERT INTO dbo.chk VALUES ($_, " . ($_ == 7 ? 500 : $_) . ")" } 1 .. 8)
	  . '; COMMIT');
wait_for_error('new row for relation "src_dbo_chk" violates check constraint "v_small"',
	'the window fails with the standard check-constraint message');
is($node->safe_psql('postgres', 'SELECT count(*) FROM src_dbo_chk'), '0', 'no row of the window was kept');
is(checkpoint_before('chk', change_lsn('dbo_chk', 7)), 't',
	'the checkpoint stayed before the failing transaction');
$node->safe_psql('postgres', 'ALTER TABLE src_dbo_chk DROP CONSTRAINT v_small');
ok( $node->poll_query_until('postgres', q{SELECT count(*) = 8 FROM src_dbo_chk}),
	'without the constraint the retry applies the 8 rows');

# ---------------------------------------------------------------------------
# User-added columns: defaults, generated values, a dropped column
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', q{
ALTER TABLE src_dbo_dflt ADD COLUMN note text NOT NULL DEFAULT 'fresh',
  ADD COLUMN loaded_at timestamptz DEFAULT clock_timestamp(),
  ADD COLUMN gone int, ADD COLUMN rid bigserial,
  ADD COLUMN doubled int GENERATED ALWAYS AS (v * 2) STORED;
ALTER TABLE src_dbo_dflt DROP COLUMN gone;
});
$si->tsql_ok(q{BEGIN TRANSACTION; INSERT INTO dbo.dflt VALUES (1, 10), (2, 20), (3, NULL), (4, 40); COMMIT});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 4 FROM src_dbo_dflt}),
	'rows arrive in a staging table with user-added columns')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.errors');
is( $node->safe_psql('postgres', q{
	SELECT string_agg(concat_ws(':', id, v, note, loaded_at IS NOT NULL, doubled), ',' ORDER BY id),
	       count(DISTINCT rid) FROM src_dbo_dflt}),
	'1:10:fresh:t:20,2:20:fresh:t:40,3:fresh:t,4:40:fresh:t:80|4',
	'defaults (constant, volatile, serial) and generated values are filled in');

# ---------------------------------------------------------------------------
# Privileges: the run_as role without INSERT gets the standard error
# ---------------------------------------------------------------------------
$si->create_source($node, 'priv');
$node->safe_psql('postgres', qq{
CREATE ROLE alice;
GRANT USAGE ON FOREIGN SERVER priv TO alice;
CREATE USER MAPPING FOR alice SERVER priv OPTIONS (username '@{[ $si->user ]}', password '@{[ $si->password ]}');
DO \$\$DECLARE f regprocedure;
BEGIN
  FOR f IN SELECT oid::regprocedure FROM pg_proc
           WHERE proname = 'add_table' AND pronamespace = 'mssql_cdc'::regnamespace
  LOOP EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO alice', f); END LOOP;
END\$\$;
GRANT CREATE ON SCHEMA public TO alice;
});
$node->safe_psql('postgres',
	q{SET ROLE alice; SELECT mssql_cdc.add_table('priv', 'dbo.pv', snapshot_mode => 'never')});
ok( $node->poll_query_until('postgres', q{
		SELECT phase = 'streaming' FROM mssql_cdc.table_state JOIN mssql_cdc.tables USING (table_id)
		WHERE server_name = 'priv'}),
	'the non-superuser source streams');
$si->tsql_ok(q{INSERT INTO dbo.pv VALUES (1, 1)});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM priv_dbo_pv}),
	'the run_as role writes its staging table in bulk');
$node->safe_psql('postgres', q{REVOKE INSERT ON priv_dbo_pv FROM alice; GRANT INSERT (id, v) ON priv_dbo_pv TO alice});
$si->tsql_ok(q{BEGIN TRANSACTION; INSERT INTO dbo.pv VALUES (2, 2), (3, 3), (4, 4), (5, 5); COMMIT});
wait_for_error('permission denied for table priv_dbo_pv%',
	'without INSERT on every written column the window fails with the standard error');
is($node->safe_psql('postgres', 'SELECT count(*) FROM priv_dbo_pv'), '1', 'nothing was written');
$node->safe_psql('postgres', q{GRANT INSERT ON priv_dbo_pv TO alice});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 5 FROM priv_dbo_pv}),
	'after GRANT the retry applies the changes once');

$node->stop;
$si->stop;
done_testing();
