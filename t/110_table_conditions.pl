# The conditions of one source table that doc/troubleshooting.md promises,
# driven through the real worker with plain T-SQL: what a user sees in
# mssql_cdc.status (state, condition, hint, last_error) and
# mssql_cdc.errors, that the source's other tables go on, and that the
# documented remedy works.
#
#  - source_table_missing: the table is dropped on SQL Server (its capture
#    instance goes with it: "change data capture metadata that is
#    associated with the table is automatically removed", page "Enable and
#    disable change data capture"), or the login loses SELECT on it
#    (metadata visibility hides the table and its instance).  The table
#    stops, the others go on; restore it (or GRANT) and resnapshot(), or
#    remove_table().
#  - unsupported_value: a NUL character in a captured string.  No row of
#    the failed windows is kept; the change stays in the change table, so
#    the table is parked and the others go on; correcting the row and a
#    resnapshot() once the correction is captured bring it back.  In a
#    snapshot, correcting the row lets the copy go on, and the correction's
#    before-image then parks the table.
#  - no_primary_key: a table to be copied whose source lost its key (one
#    added after the table was enabled for CDC, which SQL Server lets drop).
#  - a login that still sees the table but may not SELECT it is told that
#    it may not read the capture instance (capture_instance_missing).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;

my $si = StandIn->start(capture_interval => 0.2);
$si->tsql_ok(
	q{CREATE LOGIN lim WITH PASSWORD = 'L1mited-pass!'},
	q{CREATE USER lim FOR LOGIN lim},
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.keep (id int NOT NULL PRIMARY KEY, v nvarchar(20))},
	q{CREATE TABLE dbo.gone (id int NOT NULL PRIMARY KEY, v nvarchar(20))},
	q{CREATE TABLE dbo.txt (id int NOT NULL PRIMARY KEY, a varchar(20), n nvarchar(20))},
	# enabled without a key: the key added afterwards is not the instance's
	q{CREATE TABLE dbo.nokey (id int NOT NULL, v nvarchar(20))},
	q{CREATE TABLE dbo.vis (id int NOT NULL PRIMARY KEY, v nvarchar(20))},
	q{CREATE TABLE dbo.hid (id int NOT NULL PRIMARY KEY, v nvarchar(20))},
	q{INSERT INTO dbo.gone VALUES (1, N'g1')},
	q{INSERT INTO dbo.txt VALUES (1, 'a1', N'n1')},
	q{INSERT INTO dbo.nokey VALUES (1, N'k1'), (2, N'k2')},
	q{INSERT INTO dbo.hid VALUES (1, N'h1')},
	map({ "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
		qw(keep gone txt nokey vis hid)),
	q{ALTER TABLE dbo.nokey ADD CONSTRAINT pk_nokey PRIMARY KEY (id)},
	q{GRANT SELECT ON dbo.vis TO lim},
	q{GRANT SELECT ON dbo.hid TO lim},
	q{GRANT SELECT ON SCHEMA::cdc TO lim});

my $node = PostgreSQL::Test::Cluster->new('table_conditions');
$node->init;
$si->setup_node($node);
$node->start;
$si->create_source($node, 'src');
my ($host, $port, $tls) = ($si->host, $si->port, $si->tls_options);
$node->safe_psql('postgres', qq{
CREATE SERVER lim FOREIGN DATA WRAPPER mssql_cdc
  OPTIONS (host '$host', port '$port', database 'cdcdb', query_timeout '10', login_timeout '5'$tls);
CREATE USER MAPPING FOR CURRENT_USER SERVER lim OPTIONS (username 'lim', password 'L1mited-pass!');
});

sub q1 { return $node->safe_psql('postgres', $_[0]); }

sub status_of
{
	my ($server, $table, $cols) = @_;
	return q1("SELECT $cols FROM mssql_cdc.status WHERE server = '$server' AND source_table = '$table'");
}

sub diag_status
{
	diag q1(q{SELECT server, source_table, state, condition, last_error, hint FROM mssql_cdc.status ORDER BY 1, 2});
	diag q1(q{SELECT error_id, table_id, condition, remote_error_number, message FROM mssql_cdc.errors ORDER BY error_id});
}

sub contents
{
	my ($staging) = @_;
	return q1(qq{SELECT coalesce(string_agg(id || ':' || coalesce(v, '-') || ':' || _cdc_op, ' '
	                     ORDER BY _cdc_lsn, _cdc_seqval, _cdc_op), '') FROM public.$staging});
}

# the source's other table streams on: a new row of it arrives
my $keep_id = 0;
sub keep_streams
{
	my ($what) = @_;
	$keep_id++;
	$si->tsql_ok("INSERT INTO dbo.keep VALUES ($keep_id, N'k$keep_id')");
	ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM public.src_dbo_keep WHERE id = $keep_id"),
		"$what: the source's other table streams on")
	  or diag_status();
}

# the table stopped with the condition, and mssql_cdc.errors has it
sub parked
{
	my ($what, $server, $table, $condition, $error_re, $hint_re) = @_;
	ok( $node->poll_query_until('postgres',
			"SELECT state = 'error' AND condition = '$condition' FROM mssql_cdc.status WHERE server = '$server' AND source_table = '$table'"),
		"$what: $table stops in state error with condition $condition")
	  or diag_status();
	like(status_of($server, $table, 'last_error'), $error_re, "$what: last_error says what happened");
	like(status_of($server, $table, 'hint'), $hint_re, "$what: the hint says what to do");
	is( q1("SELECT count(*) > 0 FROM mssql_cdc.errors e JOIN mssql_cdc.tables t USING (table_id)
	        WHERE t.server_name = '$server' AND e.condition = '$condition'
	          AND t.source_schema || '.' || t.source_table = '$table'"),
		't', "$what: mssql_cdc.errors has it for the table");
}

# resnapshot() the table, and it streams again without a condition
sub resnapshot_streams
{
	my ($server, $table, $what) = @_;
	q1("SELECT mssql_cdc.resnapshot('$server', '$table')");
	ok( $node->poll_query_until('postgres',
			"SELECT state = 'streaming' AND condition IS NULL FROM mssql_cdc.status WHERE server = '$server' AND source_table = '$table'"),
		$what)
	  or diag_status();
}

$si->add_table($node, 'src', 'dbo.keep');
$si->add_table($node, 'src', 'dbo.gone', snapshot_mode => 'initial');
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 2 FROM mssql_cdc.status WHERE server = 'src' AND state = 'streaming'}),
	'the tables of src stream')
  or diag_status();
is(contents('src_dbo_gone'), '1:g1:snapshot', 'the copy of dbo.gone');
keep_streams('before any fault');

# ---------------------------------------------------------------------------
# 1. DROP TABLE on SQL Server: source_table_missing
# ---------------------------------------------------------------------------
$si->tsql_ok(q{INSERT INTO dbo.gone VALUES (2, N'g2')});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 2 FROM public.src_dbo_gone}),
	'dbo.gone streams before it is dropped');
$si->tsql_ok(q{DROP TABLE dbo.gone});
parked('dropped table', 'src', 'dbo.gone', 'source_table_missing',
	qr/^Table dbo\.gone does not exist on server "src" any more, or the login cannot see it \(dropped, or not visible to this login\): its capture instance "dbo_gone" is gone with it/,
	qr/^Restore the table and enable a capture instance for it \(EXEC sys\.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'gone'.*GRANT SELECT ON \[dbo\]\.\[gone\] TO the login; then call mssql_cdc\.resnapshot\(\) to copy it again\. Or stop capturing it with mssql_cdc\.remove_table\(\)\.$/);
keep_streams('dropped table');
is(contents('src_dbo_gone'), '1:g1:snapshot 2:g2:insert', 'dropped table: its staging rows stay');

# the remedy: restore the table and its capture instance, then resnapshot()
$si->tsql_ok(
	q{CREATE TABLE dbo.gone (id int NOT NULL PRIMARY KEY, v nvarchar(20))},
	q{INSERT INTO dbo.gone VALUES (1, N'g1'), (2, N'g2'), (3, N'g3')},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'gone', @role_name = NULL});
$si->tsql_ok(q{INSERT INTO dbo.gone VALUES (4, N'g4')});
$si->captured_lsn('dbo_gone', 1);
resnapshot_streams('src', 'dbo.gone', 'restored table: resnapshot() copies it and it streams again');
is( q1(q{SELECT string_agg(id || ':' || v, ' ' ORDER BY id) FROM public.src_dbo_gone
	        WHERE _cdc_op = 'snapshot' AND _cdc_lsn::text > (SELECT _cdc_lsn::text FROM public.src_dbo_gone WHERE id = 2 AND _cdc_op = 'insert')}),
	'1:g1 2:g2 3:g3 4:g4', 'restored table: the new copy has every row of the restored table');
$si->tsql_ok(q{UPDATE dbo.gone SET v = N'g4x' WHERE id = 4});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM public.src_dbo_gone WHERE v = 'g4x' AND _cdc_op = 'update_after'}),
	'restored table: its changes stream');

# ---------------------------------------------------------------------------
# 2. the login loses SELECT on the table (REVOKE)
# ---------------------------------------------------------------------------
$si->add_table($node, 'lim', 'dbo.vis');
$si->add_table($node, 'lim', 'dbo.hid', snapshot_mode => 'initial');
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 2 FROM mssql_cdc.status WHERE server = 'lim' AND state = 'streaming'}),
	'the tables of lim stream')
  or diag_status();
$si->tsql_ok(q{REVOKE SELECT ON dbo.hid FROM lim});
$si->tsql_ok(q{INSERT INTO dbo.hid VALUES (2, N'h2')}, q{INSERT INTO dbo.vis VALUES (1, N'v1')});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM public.lim_dbo_vis}),
	'REVOKE: the other table of the source streams on')
  or diag_status();
# metadata visibility: without any permission on it the login does not see
# the table (nor its capture instance): the same condition as a dropped one
parked('REVOKE', 'lim', 'dbo.hid', 'source_table_missing',
	qr/^Table dbo\.hid does not exist on server "lim" any more, or the login cannot see it/,
	qr/GRANT SELECT ON \[dbo\]\.\[hid\] TO the login; then call mssql_cdc\.resnapshot\(\)/);
is(contents('lim_dbo_hid'), '1:h1:snapshot', 'REVOKE: nothing of it copied without the permission');
$si->tsql_ok(q{INSERT INTO dbo.vis VALUES (2, N'v2')});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 2 FROM public.lim_dbo_vis}),
	'REVOKE: the other table streams on while it is stopped');
# resnapshot() before the GRANT: the copy cannot describe the table either
q1(q{SELECT mssql_cdc.resnapshot('lim', 'dbo.hid')});
parked('REVOKE, resnapshot without the GRANT', 'lim', 'dbo.hid', 'source_table_missing',
	qr/^table dbo\.hid does not exist on server "lim" \(dropped, or not visible to this login\)/,
	qr/GRANT SELECT ON \[dbo\]\.\[hid\] TO the login; then call mssql_cdc\.resnapshot\(\)/);
$si->tsql_ok(q{GRANT SELECT ON dbo.hid TO lim});
resnapshot_streams('lim', 'dbo.hid', 'GRANT and resnapshot(): the table streams again');
is( q1(q{SELECT string_agg(id || ':' || v, ' ' ORDER BY id) FROM public.lim_dbo_hid WHERE _cdc_op = 'snapshot' AND id = 2}),
	'2:h2', 'GRANT and resnapshot(): the change made meanwhile is in the new copy');
# the other remedy: remove_table()
$si->tsql_ok(q{REVOKE SELECT ON dbo.hid FROM lim}, q{INSERT INTO dbo.hid VALUES (3, N'h3')});
parked('REVOKE again', 'lim', 'dbo.hid', 'source_table_missing', qr/dbo\.hid/, qr/remove_table\(\)/);
q1(q{SELECT mssql_cdc.remove_table('lim', 'dbo.hid')});
is(q1(q{SELECT count(*) FROM mssql_cdc.status WHERE server = 'lim'}), '1', 'remove_table(): the table is gone from status');
$si->tsql_ok(q{INSERT INTO dbo.vis VALUES (3, N'v3')});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 3 FROM public.lim_dbo_vis}),
	'remove_table(): the other table streams on');
is( q1(q{SELECT state || coalesce(condition, '') FROM mssql_cdc.status WHERE server = 'lim'}), 'streaming',
	'remove_table(): nothing wrong is left on the source');

# ---------------------------------------------------------------------------
# 3. a NUL character in a captured string: unsupported_value
# ---------------------------------------------------------------------------
$si->add_table($node, 'src', 'dbo.txt', snapshot_mode => 'initial');
ok($node->poll_query_until('postgres', q{SELECT state = 'streaming' FROM mssql_cdc.status WHERE source_table = 'dbo.txt'}),
	'dbo.txt streams');
keep_streams('before the NUL');
my $errors_before = q1('SELECT coalesce(max(error_id), 0) FROM mssql_cdc.errors');
# one source transaction across both tables
$si->tsql_ok(q{BEGIN TRANSACTION; INSERT INTO dbo.txt VALUES (2, 'x' + CHAR(0) + 'y', N'n2'); INSERT INTO dbo.keep VALUES (100, N'k100'); COMMIT});
ok( $node->poll_query_until('postgres',
		q{SELECT state = 'error' AND condition = 'unsupported_value' FROM mssql_cdc.status WHERE source_table = 'dbo.txt'}),
	'NUL: state error, condition unsupported_value')
  or diag_status();
ok( $node->poll_query_until('postgres',
		"SELECT count(*) >= 2 FROM mssql_cdc.errors WHERE error_id > $errors_before AND condition = 'unsupported_value'"),
	'NUL: the worker retries')
  or diag_status();
is(q1(q{SELECT count(*) FROM public.src_dbo_txt}), '1', 'NUL: no row of the failed windows was committed for the table');
is(q1(q{SELECT count(*) FROM public.src_dbo_keep WHERE id = 100}), '0', 'NUL: nor of the same transaction for the other table');
# the change stays in the change table: the windows keep failing, and the
# table is parked so that the others go on
ok( $node->poll_query_until('postgres',
		q{SELECT hint LIKE '%The table was parked after 5 failed windows in a row%' FROM mssql_cdc.status WHERE source_table = 'dbo.txt'}),
	'NUL: the table is parked')
  or diag_status();
parked('NUL', 'src', 'dbo.txt', 'unsupported_value',
	qr/^SQL Server sent a character value containing a NUL byte, which PostgreSQL text cannot store$/,
	qr/^A source value cannot be stored in PostgreSQL .*Correct the row on the source and, once SQL Server's capture job has recorded the correction, call mssql_cdc\.resnapshot\(server, source_table\).* The table was parked after 5 failed windows in a row .*the other tables of the source stream on/);
like( q1("SELECT string_agg(DISTINCT t.source_table, ',') FROM mssql_cdc.errors e JOIN mssql_cdc.tables t USING (table_id) WHERE error_id > $errors_before"),
	qr/^txt$/, 'NUL: every failure is recorded for the table that has the value');
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM public.src_dbo_keep WHERE id = 100}),
	'NUL: the other table gets its part of the transaction once the table is parked')
  or diag_status();
keep_streams('NUL');
is(q1(q{SELECT count(*) FROM public.src_dbo_txt}), '1', 'NUL: still nothing of it copied');
# resume() continues a table parked for its staging table, not this one
$node->psql('postgres', q{SELECT mssql_cdc.resume('src', 'dbo.txt')});
is(status_of('src', 'dbo.txt', q{state || ' ' || condition}), 'error unsupported_value',
	'NUL: resume() leaves it parked (it would read the same change again)');

$si->tsql_ok(q{UPDATE dbo.txt SET a = 'xy' WHERE id = 2});
# the insert and both images of the correction
$si->captured_lsn('dbo_txt', 3);
resnapshot_streams('src', 'dbo.txt', 'NUL: after the row is corrected, resnapshot() copies the table and it streams');
is( q1(q{SELECT string_agg(id || ':' || a || ':' || n, ' ' ORDER BY id) FROM public.src_dbo_txt WHERE _cdc_op = 'snapshot' AND _cdc_lsn::text > (SELECT min(_cdc_lsn::text) FROM public.src_dbo_txt)}),
	'1:a1:n1 2:xy:n2', 'NUL: the new copy has the corrected row');
$si->tsql_ok(q{UPDATE dbo.txt SET n = N'n2x' WHERE id = 2});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM public.src_dbo_txt WHERE n = 'n2x' AND _cdc_op = 'update_after'}),
	'NUL: its changes stream again');

# a NUL in a row being copied: the chunk fails and is retried (streaming
# tables go on between the retries); correcting the row is enough
$si->tsql_ok(q{CREATE TABLE dbo.txt2 (id int NOT NULL PRIMARY KEY, n nvarchar(20))},
	q{INSERT INTO dbo.txt2 VALUES (1, N'p' + NCHAR(0) + N'q')},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'txt2', @role_name = NULL});
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('src', 'dbo.txt2')});
ok( $node->poll_query_until('postgres',
		q{SELECT state = 'error' AND condition = 'unsupported_value' FROM mssql_cdc.status WHERE source_table = 'dbo.txt2'}),
	'NUL in the copy: unsupported_value')
  or diag_status();
keep_streams('NUL in the copy');
$si->tsql_ok(q{UPDATE dbo.txt2 SET n = N'pq' WHERE id = 1});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM public.src_dbo_txt2 WHERE _cdc_op = 'snapshot'}),
	'NUL in the copy: once the row is corrected the copy goes on')
  or diag_status();
is(q1(q{SELECT n FROM public.src_dbo_txt2 WHERE _cdc_op = 'snapshot'}), 'pq', 'NUL in the copy: the copy has the corrected row');
# but the correction is a change whose before-image has the old value
ok( $node->poll_query_until('postgres',
		q{SELECT hint LIKE '%The table was parked%' AND condition = 'unsupported_value' FROM mssql_cdc.status WHERE source_table = 'dbo.txt2'}),
	'NUL in the copy: streaming the correction parks the table')
  or diag_status();
$si->captured_lsn('dbo_txt2', 2);
resnapshot_streams('src', 'dbo.txt2', 'NUL in the copy: resnapshot() once the correction is captured, and it streams');
$si->tsql_ok(q{INSERT INTO dbo.txt2 VALUES (2, N'r')});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM public.src_dbo_txt2 WHERE id = 2 AND _cdc_op = 'insert'}),
	'NUL in the copy: its changes stream');
keep_streams('NUL in the copy, after the resnapshot');

# ---------------------------------------------------------------------------
# 4. no_primary_key: the source loses its key before the copy
# ---------------------------------------------------------------------------
q1(q{BEGIN; SELECT mssql_cdc.add_table('src', 'dbo.nokey', snapshot_mode => 'initial'); SELECT mssql_cdc.pause('src', 'dbo.nokey'); COMMIT});
is(status_of('src', 'dbo.nokey', 'state'), 'paused', 'dbo.nokey waits paused');
$si->tsql_ok(q{ALTER TABLE dbo.nokey DROP CONSTRAINT pk_nokey});
q1(q{SELECT mssql_cdc.resume('src', 'dbo.nokey')});
parked('key dropped', 'src', 'dbo.nokey', 'no_primary_key', qr/no primary key/, qr/primary key.*resnapshot\(\)/);
keep_streams('key dropped');
is(q1(q{SELECT count(*) FROM public.src_dbo_nokey}), '0', 'key dropped: nothing copied');
$si->tsql_ok(q{ALTER TABLE dbo.nokey ADD CONSTRAINT pk_nokey PRIMARY KEY (id)});
resnapshot_streams('src', 'dbo.nokey', 'key added again: resnapshot() copies the table');
is(contents('src_dbo_nokey'), '1:k1:snapshot 2:k2:snapshot', 'key added again: the copy');

# ---------------------------------------------------------------------------
# 2b. a login that still sees the table (another permission on it) but may
# not SELECT it: not "missing", the instance is not readable for it
# ---------------------------------------------------------------------------
$si->tsql_ok(q{ALTER ROLE db_datawriter ADD MEMBER lim}, q{REVOKE SELECT ON dbo.vis FROM lim},
	q{INSERT INTO dbo.vis VALUES (4, N'v4')});
parked('visible, not readable', 'lim', 'dbo.vis', 'capture_instance_missing',
	qr/^Table dbo\.vis of server "lim" is still enabled for change data capture, but the login may not read its capture instance "dbo_vis" any more\./,
	qr/^Grant the login SELECT on the table/);
$si->tsql_ok(q{GRANT SELECT ON dbo.vis TO lim});
resnapshot_streams('lim', 'dbo.vis', 'visible, not readable: after the GRANT and resnapshot() it streams again');
# a 'never' table continues from its checkpoint: the change made meanwhile, once
ok($node->poll_query_until('postgres', q{SELECT count(*) = 4 FROM public.lim_dbo_vis}),
	'visible, not readable: the change made meanwhile arrives')
  or diag_status();
is(contents('lim_dbo_vis'), '1:v1:insert 2:v2:insert 3:v3:insert 4:v4:insert',
	'visible, not readable: every change once');

done_testing();
