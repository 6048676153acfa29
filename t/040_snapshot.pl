# Initial snapshot (snapshot_mode 'initial') against the SQL Server stand-in:
# keyset paging over key types whose SQL Server order differs from
# Postgres' (uniqueidentifier, case-insensitive strings, 100 ns datetime2,
# composite keys); 'snapshot' rows at L0 with unique seqvals; the hand-over
# to streaming with concurrent writes converging to the source; progress
# in mssql_cdc.status; no-PK refusal; resnapshot and remove_table.
use strict;
use warnings;

use FindBin;
use IPC::Run;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;
use Time::HiRes qw(time usleep);

my $si = StandIn->start(capture_interval => 0.2);

# uniqueidentifiers whose SQL Server order (last byte group first) is not
# their text order: the paging must follow SQL Server
my @guids;
for my $i (1 .. 23)
{
	push @guids, sprintf('%08x-%04x-%04x-%04x-%012x',
		(23 - $i) * 7919, ($i * 31) % 65536, $i, ($i * 977) % 65536, (($i * 7) % 23) * 1000003);
}

$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{ALTER DATABASE cdcdb SET ALLOW_SNAPSHOT_ISOLATION ON},
	q{CREATE TABLE dbo.s1 (id int NOT NULL PRIMARY KEY, v int, note nvarchar(40))},
	q{CREATE TABLE dbo.g (id uniqueidentifier NOT NULL PRIMARY KEY, n int)},
	q{CREATE TABLE dbo.cs (code varchar(20) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL PRIMARY KEY, n int)},
	q{CREATE TABLE dbo.dt (ts datetime2(7) NOT NULL PRIMARY KEY, n int)},
	q{CREATE TABLE dbo.comp (a int NOT NULL, b nvarchar(10) NOT NULL, n int, PRIMARY KEY (a, b))},
	q{CREATE TABLE dbo.nopk (id int, v int)});
$si->ctl('fill_table', 'database=cdcdb', 'table=dbo.s1', 'rows=2000');
$si->tsql_ok(
	join(' ', map { "INSERT INTO dbo.g VALUES (CAST(N'$guids[$_]' AS uniqueidentifier), $_);" } 0 .. $#guids),
	q{INSERT INTO dbo.cs VALUES ('a', 1), ('B', 2), ('c', 3), ('D', 4), ('e''q', 5), ('F', 6), ('g', 7), ('H', 8), ('i', 9)},
	join(' ', map { sprintf(q{INSERT INTO dbo.dt VALUES ('2024-05-01 10:00:00.%07d', %d);}, $_, $_) } 1 .. 13),
	join(' ', map { my $a = int($_ / 4); my $b = ('x', 'Y', 'z', 'W')[$_ % 4]; "INSERT INTO dbo.comp VALUES ($a, N'$b', $_);" } 0 .. 17),
	q{INSERT INTO dbo.nopk VALUES (1, 1), (1, 1)},
	map({ "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
		qw(s1 g cs dt comp nopk)));

my $node = PostgreSQL::Test::Cluster->new('snapshot');
$node->init;
$si->setup_node($node, conf => 'mssql_cdc.snapshot_chunk_rows = 4');
$node->start;
$si->create_source($node, 'src');

# ---------------------------------------------------------------------------
# No primary key: 'initial' is refused clearly, 'never' streams
# ---------------------------------------------------------------------------
my ($ret, $out, $err) = $node->psql('postgres',
	q{SELECT mssql_cdc.add_table('src', 'dbo.nopk')});
isnt($ret, 0, 'add_table refuses snapshot_mode initial for a table without primary key');
like($err, qr/no primary key.*\n.*\n.*HINT:.*snapshot_mode => 'never'/, 'the error says why and what to do');
like($err, qr/ERROR:  0A000|ERROR:.*no primary key/, 'feature-not-supported error');
is($node->safe_psql('postgres', 'SELECT count(*) FROM mssql_cdc.tables'), '0', 'nothing was registered');

# ---------------------------------------------------------------------------
# Snapshots of the paging-sensitive key types
# ---------------------------------------------------------------------------
$si->add_table($node, 'src', "dbo.$_", snapshot_mode => 'initial') for qw(g cs dt comp);

ok( $node->poll_query_until(
		'postgres',
		q{SELECT count(*) = 4 FROM mssql_cdc.table_state WHERE phase = 'streaming'}),
	'the four snapshots finished and the tables stream')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors');

sub snapshot_rows_of
{
	my ($stg, $cols, $order) = @_;
	$order //= $cols;
	return $node->safe_psql('postgres',
		"SELECT string_agg($cols, ',' ORDER BY $order) FROM $stg WHERE _cdc_op = 'snapshot'");
}

is(snapshot_rows_of('src_dbo_g', 'n::text'),
	join(',', sort { $a cmp $b } 0 .. $#guids), 'uniqueidentifier keys: every row copied once');
is( $node->safe_psql('postgres', q{SELECT count(DISTINCT id) FROM src_dbo_g}),
	scalar(@guids), 'uniqueidentifier keys: no duplicates');
is(snapshot_rows_of('src_dbo_cs', 'code', 'n'), q{a,B,c,D,e'q,F,g,H,i}, 'case-insensitive string keys: all rows, case kept');
is( $node->safe_psql('postgres', q{SELECT count(*) FROM src_dbo_dt WHERE _cdc_op = 'snapshot'}),
	'13', 'datetime2(7) keys that differ only in 100 ns: every row copied once');
is(snapshot_rows_of('src_dbo_dt', 'n::text', 'n'), join(',', 1 .. 13), 'datetime2(7) keys: the right rows');
is(snapshot_rows_of('src_dbo_comp', 'n::text', 'n'), join(',', 0 .. 17),
	'composite keys: every row copied once');

# snapshot rows: _cdc_lsn = L0 = snapshot_lsn, unique ascending seqvals, no commit time
is( $node->safe_psql('postgres', q{
	SELECT bool_and(s._cdc_lsn OPERATOR(mssql_cdc.=) ts.snapshot_lsn
	                AND s._cdc_commit_time IS NULL AND s._cdc_update_mask IS NULL)
	       AND count(DISTINCT s._cdc_seqval) = count(*)
	FROM src_dbo_comp s, mssql_cdc.table_state ts JOIN mssql_cdc.tables t USING (table_id)
	WHERE t.source_table = 'comp' AND s._cdc_op = 'snapshot'}),
	't', "snapshot rows carry L0, distinct seqvals, NULL commit time and update mask");
is( $node->safe_psql('postgres', q{
	SELECT string_agg(t.source_table || ':' || (ts.checkpoint_lsn OPERATOR(mssql_cdc.>=) ts.snapshot_lsn)
	                  || ':' || ts.snapshot_rows, ',' ORDER BY t.source_table)
	FROM mssql_cdc.tables t JOIN mssql_cdc.table_state ts USING (table_id)}),
	'comp:true:18,cs:true:9,dt:true:13,g:true:23',
	'streaming continues from the snapshot LSN; snapshot_rows counted');
is( $node->safe_psql('postgres',
		q{SELECT string_agg(source_table || ':' || snapshot_percent, ',' ORDER BY source_table) FROM mssql_cdc.status}),
	'dbo.comp:100.0,dbo.cs:100.0,dbo.dt:100.0,dbo.g:100.0', 'status shows the snapshots complete');

# changes after the snapshot stream on
$si->tsql_ok(q{INSERT INTO dbo.cs VALUES ('j', 10)}, q{UPDATE dbo.g SET n = 100 WHERE n = 0});
ok( $node->poll_query_until('postgres',
		q{SELECT (SELECT count(*) FROM src_dbo_cs WHERE _cdc_op = 'insert' AND code = 'j') = 1
		     AND (SELECT count(*) FROM src_dbo_g WHERE _cdc_op = 'update_after' AND n = 100) = 1}),
	'changes after the snapshot are streamed');

# ---------------------------------------------------------------------------
# Concurrent writes while a table snapshots (2000 rows in chunks of 4)
# ---------------------------------------------------------------------------
my $writes = join("\n", map {
	my $i = $_;
	"UPDATE dbo.s1 SET v = -$i, note = N'u$i' WHERE id = " . (($i * 37) % 2000 + 1) . "\ngo\n"
	  . ($i % 5 == 0 ? "DELETE FROM dbo.s1 WHERE id = " . (($i * 53) % 2000 + 1) . "\ngo\n" : '')
	  . ($i % 3 == 0 ? "INSERT INTO dbo.s1 VALUES (" . (10000 + $i) . ", $i, N'new')\ngo\n" : '')
} 1 .. 60);
$si->add_table($node, 'src', 'dbo.s1', snapshot_mode => 'initial');
ok( $node->poll_query_until('postgres',
		q{SELECT state = 'snapshotting' AND snapshot_rows > 0 FROM mssql_cdc.status WHERE source_table = 'dbo.s1'}),
	'the snapshot of dbo.s1 is running');
# chunks run between these writes
my ($wout, $werr) = ('', '');
IPC::Run::run(
	[ 'tsql', '-H', '127.0.0.1', '-p', $si->port, '-U', 'sa', '-P', 'Passw0rd!', '-D', 'cdcdb' ],
	'<', \"$writes\nexit\n", '>', \$wout, '2>', \$werr);
unlike($wout . $werr, qr/^Msg \d+/m, 'concurrent writes succeeded');
is( $node->safe_psql('postgres',
		q{SELECT state FROM mssql_cdc.status WHERE source_table = 'dbo.s1'}),
	'snapshotting', 'the snapshot was still running when the writes ended (they were concurrent)');

ok( $node->poll_query_until('postgres',
		q{SELECT phase = 'streaming' FROM mssql_cdc.table_state ts JOIN mssql_cdc.tables t USING (table_id)
		  WHERE t.source_table = 's1'}),
	'the snapshot under concurrent writes finished')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors');

# wait until streaming has caught up with the source
sub source_max_lsn
{
	my $o = $si->tsql(q{SELECT 'L=' + CONVERT(varchar(30), sys.fn_cdc_get_max_lsn(), 1)});
	my ($l) = $o =~ /L=(0x[0-9A-Fa-f]+)/;
	return $l;
}
my $maxl = source_max_lsn();
ok( $node->poll_query_until('postgres',
		qq{SELECT checkpoint_lsn OPERATOR(mssql_cdc.>=) '$maxl'::mssql_cdc.lsn
		   FROM mssql_cdc.table_state ts JOIN mssql_cdc.tables t USING (table_id) WHERE t.source_table = 's1'}),
	'streaming caught up after the snapshot');

# The staging content replayed idempotently (snapshot rows at L0, then
# every change after L0 in LSN order) must equal the source.
sub converged
{
	my ($stg) = @_;
	return $node->safe_psql('postgres', qq{
WITH l0 AS (SELECT _cdc_lsn AS l FROM $stg WHERE _cdc_op = 'snapshot' ORDER BY _cdc_lsn DESC LIMIT 1),
ev AS (SELECT s.* FROM $stg s, l0
       WHERE (s._cdc_op = 'snapshot' AND s._cdc_lsn OPERATOR(mssql_cdc.=) l0.l)
          OR (s._cdc_op IN ('insert', 'update_after', 'delete') AND s._cdc_lsn OPERATOR(mssql_cdc.>) l0.l)),
last AS (SELECT DISTINCT ON (id) * FROM ev ORDER BY id, _cdc_lsn DESC, _cdc_seqval DESC, (_cdc_op = 'delete'))
SELECT string_agg(id || ':' || coalesce(v::text, 'null') || ':' || coalesce(note, 'null'), ',' ORDER BY id)
FROM last WHERE _cdc_op <> 'delete'});
}
my $src = $si->tsql(q{SELECT 'R=' + CAST(id AS varchar(10)) + ':' + COALESCE(CAST(v AS varchar(10)), 'null') + ':' + COALESCE(note, N'null') FROM dbo.s1 ORDER BY id});
my @src_rows = $src =~ /^R=(\S+)\s*$/mg;
cmp_ok(scalar(@src_rows), '>', 1900, 'read the source rows');
is(converged('src_dbo_s1'), join(',', @src_rows), 'snapshot + replayed changes converge to the source');
is( $node->safe_psql('postgres',
		q{SELECT count(*) = count(DISTINCT id) FROM src_dbo_s1 WHERE _cdc_op = 'snapshot'}),
	't', 'no key appears twice in the snapshot');

# every change after L0 exactly once: compare with the change table
my $l0 = $node->safe_psql('postgres',
	q{SELECT snapshot_lsn FROM mssql_cdc.table_state ts JOIN mssql_cdc.tables t USING (table_id) WHERE t.source_table = 's1'});
my $ct = $si->tsql("SELECT 'N=' + CAST(COUNT(*) AS varchar(10)) FROM cdc.dbo_s1_CT WHERE __\$start_lsn > $l0");
my ($ct_n) = $ct =~ /N=(\d+)/;
is( $node->safe_psql('postgres',
		qq{SELECT count(*) FROM src_dbo_s1 WHERE _cdc_op <> 'snapshot' AND _cdc_lsn OPERATOR(mssql_cdc.>) '$l0'::mssql_cdc.lsn}),
	$ct_n, "every change after L0 is in the staging table exactly once ($ct_n)");

# ---------------------------------------------------------------------------
# resnapshot: a new set of snapshot rows at a new L0, history kept
# ---------------------------------------------------------------------------
my $before = $node->safe_psql('postgres', q{SELECT count(*) FROM src_dbo_cs});
$node->safe_psql('postgres', q{SELECT mssql_cdc.resnapshot('src', 'dbo.cs')});
ok( $node->poll_query_until('postgres',
		q{SELECT phase = 'streaming' AND snapshot_rows = 10
		  FROM mssql_cdc.table_state ts JOIN mssql_cdc.tables t USING (table_id) WHERE t.source_table = 'cs'}),
	'resnapshot copied the table again')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status');
is( $node->safe_psql('postgres', q{SELECT count(*) FROM src_dbo_cs}), $before + 10,
	'the staging table kept its history and got 10 new snapshot rows');
is( $node->safe_psql('postgres',
		q{SELECT count(DISTINCT _cdc_lsn) FROM src_dbo_cs WHERE _cdc_op = 'snapshot'}),
	'2', 'the new snapshot rows carry a new L0');

# ---------------------------------------------------------------------------
# remove_table while streaming: capture stops, the others go on
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', q{SELECT mssql_cdc.remove_table('src', 'dbo.dt')});
my $dt_rows = $node->safe_psql('postgres', q{SELECT count(*) FROM src_dbo_dt});
$si->tsql_ok(q{INSERT INTO dbo.dt VALUES ('2030-01-01', 99)}, q{INSERT INTO dbo.cs VALUES ('k', 11)});
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM src_dbo_cs WHERE code = 'k'}),
	'the other tables keep streaming after remove_table');
is($node->safe_psql('postgres', q{SELECT count(*) FROM src_dbo_dt}), $dt_rows,
	'the removed table gets no more rows');

# remove_table during a snapshot: the snapshot stops at its next chunk
$node->safe_psql('postgres', q{SELECT mssql_cdc.resnapshot('src', 'dbo.s1')});
ok( $node->poll_query_until('postgres',
		q{SELECT state = 'snapshotting' AND snapshot_rows > 0 FROM mssql_cdc.status WHERE source_table = 'dbo.s1'}),
	'a new snapshot of dbo.s1 is running');
$node->safe_psql('postgres', q{SELECT mssql_cdc.remove_table('src', 'dbo.s1')});
my $s1_rows = $node->safe_psql('postgres', q{SELECT count(*) FROM src_dbo_s1});
usleep(1_000_000);
is($node->safe_psql('postgres', q{SELECT count(*) FROM src_dbo_s1}), $s1_rows,
	'no snapshot chunk is copied after remove_table');
$si->tsql_ok(q{INSERT INTO dbo.cs VALUES ('m', 12)});
ok( $node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM src_dbo_cs WHERE code = 'm'}),
	'the worker goes on with the other tables');

# ---------------------------------------------------------------------------
# A database without snapshot isolation: READ COMMITTED fallback, logged
# ---------------------------------------------------------------------------
$si->tsql_ok(q{ALTER DATABASE cdcdb SET ALLOW_SNAPSHOT_ISOLATION OFF});
$node->restart;		# a new connection checks the setting again
$node->safe_psql('postgres', q{SELECT mssql_cdc.resnapshot('src', 'dbo.comp')});
ok( $node->poll_query_until('postgres',
		q{SELECT phase = 'streaming' AND snapshot_rows = 18
		  FROM mssql_cdc.table_state ts JOIN mssql_cdc.tables t USING (table_id) WHERE t.source_table = 'comp'}),
	'a snapshot without snapshot isolation completes');
ok( $node->log_contains(qr/does not allow snapshot isolation, snapshot chunks read under READ COMMITTED/),
	'the fallback to READ COMMITTED is logged');
is($node->safe_psql('postgres', q{SELECT count(*) FROM mssql_cdc.errors}), '0', 'no errors were recorded')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.errors');

$node->stop;
$si->stop;
done_testing();
