# Mirror tables (issue 15), against the SQL Server stand-in:
# point 5: a mirror is published with logical replication (primary key as
# replica identity) to a subscriber that has no mssql_cdc, whose plain
# table (columns taken from the publisher's pg_catalog) equals the source
# after the initial copy and after streamed inserts, updates, deletes and
# a key-shifting update;
# point 2: changes committed at the source while the initial copy runs (a
# chunk held in the stand-in) converge: a row deleted after its chunk was
# copied, one deleted in the chunk being read, one inserted in a range not
# yet copied (copied and streamed), rows updated before and after their
# chunk.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use MirrorCheck;
use Test::More;
use Time::HiRes qw(time usleep);

my $si = StandIn->start(capture_interval => 0.1);
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{ALTER DATABASE cdcdb SET ALLOW_SNAPSHOT_ISOLATION ON},
	q{CREATE TABLE dbo.r (id int NOT NULL PRIMARY KEY, name nvarchar(30), amount decimal(12,2), at datetime2(3))},
	q{CREATE TABLE dbo.ov (id int NOT NULL PRIMARY KEY, v nvarchar(20))},
	join(' ', map { "INSERT INTO dbo.r VALUES ($_, N'n$_', $_.25, '2024-01-0" . ($_ % 9 + 1) . " 10:00:00.$_');" } 1 .. 20),
	# even keys 2..60: chunks of 10 are 2..20, 22..40, 42..60
	join(' ', map { my $k = 2 * $_; "INSERT INTO dbo.ov VALUES ($k, N'v$k');" } 1 .. 30),
	map({ "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
		qw(r ov)));
for (1 .. 100)
{
	last if $si->tsql('SELECT sys.fn_cdc_get_max_lsn()') =~ /0x[0-9A-F]{20}/;
	usleep(100_000);
}

my $pub = PostgreSQL::Test::Cluster->new('publisher');
$pub->init(allows_streaming => 'logical');
$si->setup_node($pub, conf => 'mssql_cdc.snapshot_chunk_rows = 10');
$pub->start;
$si->create_source($pub, 'src');

my $r_ms = q{SELECT 'R=' + CAST(id AS varchar(10)) + '|' + COALESCE(name, N'null') + '|' + COALESCE(CAST(amount AS varchar(20)), 'null') + '|' + COALESCE(CONVERT(varchar(30), at, 121), 'null') FROM dbo.r ORDER BY id};
my $r_pg = q{SELECT format('%s|%s|%s|%s', id, coalesce(name, 'null'), coalesce(amount::text, 'null'), coalesce(to_char(at, 'YYYY-MM-DD HH24:MI:SS.MS'), 'null')) FROM public.src_dbo_r_mirror ORDER BY id};
my $ov_ms = q{SELECT 'R=' + CAST(id AS varchar(10)) + '|' + COALESCE(v, N'null') FROM dbo.ov ORDER BY id};
my $ov_pg = q{SELECT format('%s|%s', id, coalesce(v, 'null')) FROM public.src_dbo_ov_mirror ORDER BY id};

# ---------------------------------------------------------------------------
# Point 5: a subscriber without mssql_cdc
# ---------------------------------------------------------------------------
$pub->safe_psql('postgres', q{SELECT mssql_cdc.add_table('src', 'dbo.r', mirror => true)});
ok($pub->poll_query_until('postgres',
		q{SELECT phase = 'streaming' FROM mssql_cdc.table_state ts JOIN mssql_cdc.tables t USING (table_id) WHERE source_table = 'r'}),
	'dbo.r copied and streaming')
  or diag $pub->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors');
my ($eq, $src, $got) = wait_mirror_equal($pub, $si, $r_ms, $r_pg, 60);
ok($eq, 'the publisher mirror equals the source') or diag "source:\n$src\nmirror:\n$got";

# the subscriber: a plain cluster (no shared_preload_libraries, no
# extension), one table with the mirror's columns, types and key
my $sub = PostgreSQL::Test::Cluster->new('subscriber');
$sub->init;
$sub->start;
my $cols = $pub->safe_psql('postgres', q{
SELECT string_agg(quote_ident(attname) || ' ' || format_type(atttypid, atttypmod)
                  || CASE WHEN attnotnull THEN ' NOT NULL' ELSE '' END, ', ' ORDER BY attnum)
  FROM pg_attribute WHERE attrelid = 'public.src_dbo_r_mirror'::regclass AND attnum > 0 AND NOT attisdropped});
my $key = $pub->safe_psql('postgres', q{
SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY k.i)
  FROM pg_index x, unnest(x.indkey) WITH ORDINALITY k(attnum, i), pg_attribute a
 WHERE x.indrelid = 'public.src_dbo_r_mirror'::regclass AND x.indisprimary
   AND a.attrelid = x.indrelid AND a.attnum = k.attnum});
is($key, 'id', 'the mirror key is the source key');
$sub->safe_psql('postgres', "CREATE TABLE public.src_dbo_r_mirror ($cols, PRIMARY KEY ($key))");
is($sub->safe_psql('postgres',
		q{SELECT count(*) FROM pg_extension WHERE extname = 'mssql_cdc'} ) . '|'
	  . $sub->safe_psql('postgres', 'SHOW shared_preload_libraries'),
	'0|', 'the subscriber has no mssql_cdc');
is($sub->safe_psql('postgres',
		q{SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum) FROM pg_attribute WHERE attrelid = 'public.src_dbo_r_mirror'::regclass AND attnum > 0}),
	'id integer, name character varying(30), amount numeric(12,2), at timestamp(3) without time zone',
	'its table has the mirror columns and types');

$pub->safe_psql('postgres', 'CREATE PUBLICATION mir FOR TABLE public.src_dbo_r_mirror');
my $connstr = $pub->connstr . ' dbname=postgres';
$sub->safe_psql('postgres', "CREATE SUBSCRIPTION mir_sub CONNECTION '$connstr' PUBLICATION mir");
$sub->wait_for_subscription_sync($pub, 'mir_sub');
($eq, $src, $got) = wait_mirror_equal($sub, $si, $r_ms, $r_pg, 60);
ok($eq, 'after the initial copy the subscriber equals the source') or diag "source:\n$src\nsubscriber:\n$got";

# streamed changes, each confirmed on the publisher's mirror first, then
# on the subscriber once it has caught up
sub streamed_ok
{
	my ($what, @sql) = @_;
	$si->tsql_ok(@sql);
	my ($e, $s, $g) = wait_mirror_equal($pub, $si, $r_ms, $r_pg, 60);
	ok($e, "$what: the publisher mirror equals the source")
	  or diag "source:\n$s\nmirror:\n$g\n" . $pub->safe_psql('postgres', 'SELECT * FROM mssql_cdc.errors');
	$pub->wait_for_catchup('mir_sub');
	($e, $s, $g) = wait_mirror_equal($sub, $si, $r_ms, $r_pg, 60);
	ok($e, "$what: the subscriber equals the source") or diag "source:\n$s\nsubscriber:\n$g";
	return;
}
streamed_ok('inserts, updates, deletes',
	q{INSERT INTO dbo.r VALUES (30, N'thirty', 30.50, '2024-02-01 08:00:00.125'), (31, NULL, NULL, NULL)},
	q{UPDATE dbo.r SET name = N'renamed', amount = 0.01 WHERE id = 2},
	q{DELETE FROM dbo.r WHERE id IN (3, 4)},
	q{BEGIN TRANSACTION; INSERT INTO dbo.r VALUES (32, N'in tx', 1.00, NULL); UPDATE dbo.r SET at = NULL WHERE id = 5; DELETE FROM dbo.r WHERE id = 6; COMMIT});
streamed_ok('a key-shifting update', q{UPDATE dbo.r SET id = id + 1});
streamed_ok('a key swap', q{UPDATE dbo.r SET id = CASE id WHEN 8 THEN 9 WHEN 9 THEN 8 END WHERE id IN (8, 9)});
is($sub->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_subscription WHERE subname = 'mir_sub' AND pid IS NOT NULL}),
	'1', 'the subscription apply worker is still running (no conflict stopped it)');

# ---------------------------------------------------------------------------
# Point 2: changes during the initial copy converge
# ---------------------------------------------------------------------------
# the second chunk (22..40) is held after its first rows were sent: its
# rows are read, the first chunk (2..20) is committed, 42..60 not read yet
$si->ctl('stall', 'after_rows=2', 'hold=true', 'match=[id] > ');
$pub->safe_psql('postgres', q{SELECT mssql_cdc.add_table('src', 'dbo.ov', mirror => true)});
my $deadline = time + 60;
usleep(50_000) until $si->ctl('faults') =~ /"held": \[\{/ || time > $deadline;
like($si->ctl('faults'), qr/"held": \[\{/, 'the second chunk of dbo.ov is held');
is($pub->safe_psql('postgres',
		q{SELECT state || ':' || snapshot_rows FROM mssql_cdc.status WHERE source_table = 'dbo.ov'}),
	'snapshotting:10', 'the first chunk is copied, the table is snapshotting');
is($pub->safe_psql('postgres', q{SELECT count(*) FROM public.src_dbo_ov_mirror}), '10',
	'the mirror holds the first chunk');
$si->tsql_ok(
	q{DELETE FROM dbo.ov WHERE id = 4},                  # copied, then deleted
	q{UPDATE dbo.ov SET v = N'after copy' WHERE id = 6}, # copied, then updated
	q{DELETE FROM dbo.ov WHERE id = 30},                 # read by the held chunk, then deleted
	q{UPDATE dbo.ov SET v = N'after read' WHERE id = 32},# read by the held chunk, then updated
	q{INSERT INTO dbo.ov VALUES (45, N'new')},          # not yet copied: copied and streamed
	q{UPDATE dbo.ov SET v = N'before copy' WHERE id = 50},# not yet copied: copied new, and streamed
	q{DELETE FROM dbo.ov WHERE id = 52},                 # not yet copied: never copied, delete streamed
	q{BEGIN TRANSACTION; INSERT INTO dbo.ov VALUES (3, N'ins'); UPDATE dbo.ov SET v = N'twice' WHERE id = 3; UPDATE dbo.ov SET v = N'twice' WHERE id = 54; COMMIT});
# the changes are in the change table before the copy goes on
my $ct_n = 0;
$deadline = time + 30;
while (time < $deadline)
{
	($ct_n) = $si->tsql(q{SELECT 'N=' + CAST(COUNT(*) AS varchar(10)) FROM cdc.dbo_ov_CT WHERE __$operation <> 3})
	  =~ /N=(\d+)/;
	last if ($ct_n // 0) >= 10;
	usleep(100_000);
}
is($ct_n, 10, 'the capture job recorded the ten changes');
is($pub->safe_psql('postgres',
		q{SELECT state || ':' || snapshot_rows FROM mssql_cdc.status WHERE source_table = 'dbo.ov'}),
	'snapshotting:10', 'they were committed while the initial copy was running');
like($si->ctl('release'), qr/"released": 1/, 'the chunk is released');
ok($pub->poll_query_until('postgres',
		q{SELECT phase = 'streaming' FROM mssql_cdc.table_state ts JOIN mssql_cdc.tables t USING (table_id) WHERE source_table = 'ov'}),
	'the copy of dbo.ov finished')
  or diag $pub->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors');
($eq, $src, $got) = wait_mirror_equal($pub, $si, $ov_ms, $ov_pg, 60);
ok($eq, 'the mirror converged to the source') or diag "source:\n$src\nmirror:\n$got";
like($src, qr/^3\|twice$/m, 'the source has the rows changed during the copy (3)');
like($src, qr/^45\|new$/m, 'and (45)');
unlike($src, qr/^(4|30|52)\|/m, 'and not the deleted ones');
# the changelog shows that copy and stream really overlapped
is($pub->safe_psql('postgres', q{
SELECT string_agg(id || ':' || ops, ',' ORDER BY id)
  FROM (SELECT id, string_agg(_cdc_op::text, '+' ORDER BY _cdc_lsn, _cdc_seqval) ops
          FROM public.src_dbo_ov WHERE id IN (4, 30, 45, 50, 52) AND _cdc_op <> 'update_before' GROUP BY id) x}),
	'4:snapshot+delete,30:snapshot+delete,45:snapshot+insert,50:snapshot+update_after,52:delete',
	'copied rows were deleted, inserted and updated again by the stream; 52 deleted without being copied');
is($pub->safe_psql('postgres', q{SELECT count(*) FROM mssql_cdc.errors}), '0', 'no window failed on the way');

$sub->stop;
$pub->stop;
$si->stop;
done_testing();
