# mssql_cdc.verify() (issue 15 point 6, doc/mirror.md "verify()") against
# the SQL Server stand-in, on a mirror the worker maintains: no mismatch on
# an equal mirror; under a steady write load on the source, with the worker
# streaming, exactly the divergences injected into the mirror are reported
# (a changed value, a deleted row, an extra row, NULL against an empty
# string, a timestamp one microsecond off) and none of the concurrent
# changes; progress is visible from another session while it runs; a table
# without a mirror is refused; on an idle source (no later transaction, no
# dummy mapping rows) a divergence is still confirmed; a run that fails half
# way is recorded as failed, with its error.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use MirrorCheck;
use Test::More;
use Time::HiRes qw(usleep);

my $si = StandIn->start(capture_interval => 0.1);
my $rows = join(', ',
	map { sprintf("(%d, %s, '2024-01-02 03:04:%02d.1234560', %d.25)", $_, $_ == 7 ? 'NULL' : "N'n$_'", $_ % 60, $_) }
	  1 .. 300);
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{ALTER DATABASE cdcdb SET ALLOW_SNAPSHOT_ISOLATION ON},
	q{CREATE TABLE dbo.v (id int NOT NULL PRIMARY KEY, name nvarchar(50) NULL, ts datetime2(7) NULL, amount decimal(10,2) NULL)},
	q{CREATE TABLE dbo.nomirror (id int NOT NULL PRIMARY KEY, v int)},
	"INSERT INTO dbo.v VALUES $rows",
	map({ "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
		qw(v nomirror)));
for (1 .. 100)
{
	last if $si->tsql('SELECT sys.fn_cdc_get_max_lsn()') =~ /0x[0-9A-F]{20}/;
	usleep(100_000);
}

my $node = PostgreSQL::Test::Cluster->new('verify');
$node->init;
$si->setup_node($node);
$node->start;
$si->create_source($node, 'src');
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('src', 'dbo.v', mirror => true)});
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('src', 'dbo.nomirror')});
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 2 FROM mssql_cdc.table_state WHERE phase = 'streaming'}),
	'both tables streaming')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors');

my $v_ms = q{SELECT 'R=' + CAST(id AS varchar(10)) + '|' + COALESCE(name, N'null') + '|' + COALESCE(CONVERT(varchar(30), ts, 121), 'null') + '|' + COALESCE(CAST(amount AS varchar(20)), 'null') FROM dbo.v ORDER BY id};
my $v_pg = q{SELECT format('%s|%s|%s|%s', id, coalesce(name, 'null'), coalesce(to_char(ts, 'YYYY-MM-DD HH24:MI:SS.US') || '0', 'null'), coalesce(amount::text, 'null')) FROM public.src_dbo_v_mirror ORDER BY id};
my ($eq, $src, $mir) = wait_mirror_equal($node, $si, $v_ms, $v_pg, 60);
ok($eq, 'the mirror equals the source') or diag "source:\n$src\nmirror:\n$mir";

my $call = q{CALL mssql_cdc.verify('src', 'dbo.v', chunk_rows => 20, recheck_timeout => '90 s')};
my $summary = q{source_rows, mirror_rows, missing, extra, different, unconfirmed};

# ---------------------------------------------------------------------------
# An equal mirror of a quiet source
# ---------------------------------------------------------------------------
my $out = $node->safe_psql('postgres', $call);
my @f = split /\|/, $out;
is(join(',', @f[1 .. 7]), '1,300,300,0,0,0,0',
	'an equal mirror: 300 rows compared on each side, no mismatch');
is($node->safe_psql('postgres',
		qq{SELECT state, chunks, source_rows, finished_at IS NOT NULL, elapsed > '0' FROM mssql_cdc.verify_runs WHERE run_id = $f[0]}),
	'done|15|300|t|t', 'its row in verify_runs: done, 15 chunks of 20, how long it took');

# ---------------------------------------------------------------------------
# Refused: a table without a mirror, a table that is not captured
# ---------------------------------------------------------------------------
my ($ret, $o, $err) = $node->psql('postgres',
	q{\set VERBOSITY verbose
CALL mssql_cdc.verify('src', 'dbo.nomirror')});
like($err, qr/55000: table dbo\.nomirror of server "src" has no mirror table/,
	'a table without a mirror is refused (SQLSTATE 55000)');
like($err, qr/HINT:  Keep a mirror with mssql_cdc\.add_table\(\.\.\., mirror => true\)/, 'with a hint');
($ret, $o, $err) = $node->psql('postgres', q{CALL mssql_cdc.verify('src', 'dbo.nothere')});
like($err, qr/table dbo\.nothere of server "src" is not captured/, 'an unknown table is refused');

# ---------------------------------------------------------------------------
# Divergences injected into the mirror while the source takes a steady
# write load on other rows (updates, inserts, deletes; the worker streams
# them into the mirror all along)
# ---------------------------------------------------------------------------
my $load = '';
for my $k (1 .. 4000)
{
	my $r = 100 + ($k * 37) % 200;
	my $new = 1000 + $k;
	my $old = $new - 5;
	$load .= "BEGIN TRANSACTION; UPDATE dbo.v SET amount = amount + 1, name = N'w$k' WHERE id = $r;"
	  . " INSERT INTO dbo.v VALUES ($new, N'new', NULL, 1);"
	  . " DELETE FROM dbo.v WHERE id = $old; COMMIT TRANSACTION; WAITFOR DELAY '00:00:00.010'\ngo\n";
}
$load .= "exit\n";
my $load_file = PostgreSQL::Test::Utils::tempdir() . '/load.sql';
open(my $fh, '>', $load_file) or die;
print $fh $load;
close($fh);
my ($lout, $lerr) = ('', '');
my $loader = IPC::Run::start(
	[ 'tsql', '-H', $si->host, '-p', $si->port, '-U', $si->user, '-P', $si->password, '-D', $si->database ],
	'<', $load_file, '>', \$lout, '2>', \$lerr);
my $max_before = $si->tsql_ok(q{SELECT 'M=' + CAST(MAX(id) AS varchar(10)) FROM dbo.v});
$node->poll_query_until('postgres', q{SELECT count(*) > 0 FROM public.src_dbo_v_mirror WHERE id > 1010})
  or diag 'the load did not reach the mirror';

$node->safe_psql('postgres', q{
UPDATE public.src_dbo_v_mirror SET amount = amount + 0.01 WHERE id = 3;
DELETE FROM public.src_dbo_v_mirror WHERE id = 5;
INSERT INTO public.src_dbo_v_mirror VALUES (999, 'extra', NULL, 9);
UPDATE public.src_dbo_v_mirror SET name = '' WHERE id = 7;
UPDATE public.src_dbo_v_mirror SET ts = ts + interval '1 microsecond' WHERE id = 9;
});

# run verify from another session and watch its progress from this one
my ($vout, $verr) = ('', '');
my $verifier = IPC::Run::start(
	[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-c', $call ],
	'>', \$vout, '2>', \$verr);
my $seen_running = 0;
for (1 .. 1200)
{
	$seen_running = 1
	  if $node->safe_psql('postgres',
		q{SELECT count(*) FROM mssql_cdc.verify_runs WHERE state IN ('running', 'rechecking') AND pid <> pg_backend_pid()}) > 0;
	last unless $verifier->pumpable;
	$verifier->pump_nb;
	usleep(50_000);
}
$verifier->finish;
ok($seen_running, 'progress of the running verify() is visible from another session');
is($verr, '', 'verify() under load ran without an error');
my $max_after = $si->tsql_ok(q{SELECT 'M=' + CAST(MAX(id) AS varchar(10)) FROM dbo.v});
isnt($max_after, $max_before, 'the source kept changing while verify() ran');
$loader->kill_kill;

@f = split /\|/, $vout;
is(join(',', @f[4 .. 7]), '1,1,3,0',
	'under load: exactly the injected divergences (1 missing, 1 extra, 3 different, none unconfirmed)')
  or diag $vout . "\n" . $node->safe_psql('postgres', "SELECT * FROM mssql_cdc.verify_runs; SELECT * FROM mssql_cdc.verify_mismatches");
is($node->safe_psql('postgres', qq{
SELECT string_agg(kind || ' ' || (key->>'id') || ' ' || coalesce(array_to_string(columns, ','), '-'), '; ' ORDER BY (key->>'id')::int)
  FROM mssql_cdc.verify_mismatches WHERE run_id = $f[0]}),
	'different 3 amount; missing 5 -; different 7 name; different 9 ts; extra 999 -',
	'their keys and differing columns are in verify_mismatches: a changed value, a deleted row, NULL vs empty, 1 microsecond, an extra row');
is($node->safe_psql('postgres', qq{
SELECT count(*) FILTER (WHERE m.mirror_lsn OPERATOR(mssql_cdc.<=) s.checkpoint_lsn) || '/' || count(*)
  FROM mssql_cdc.verify_mismatches m, mssql_cdc.status s
 WHERE m.run_id = $f[0] AND s.source_table = 'dbo.v'}),
	'5/5', 'each reported key names the mirror checkpoint it was confirmed at');
diag 'under load: ' . $node->safe_psql('postgres',
	qq{SELECT format('%s rows, %s candidates, %s settled as concurrent changes, %s', source_rows, candidates, rechecked, elapsed) FROM mssql_cdc.verify_runs WHERE run_id = $f[0]});

# ---------------------------------------------------------------------------
# An idle source: no transaction commits after the re-check's read, and the
# capture job writes no dummy mapping rows (stand-in dummy_rows never), so
# fn_cdc_map_time_to_lsn finds no later transaction.  An empty log scan
# session that began after the read (sys.dm_cdc_log_scan_sessions) bounds
# it instead: a divergence is confirmed, and nothing else is reported.
# Both ways the stand-in can show consecutive empty sessions (a row each,
# or folded into one).
# ---------------------------------------------------------------------------
$si->ctl('capture_options', 'dummy_rows=never');
# the load is over: let the capture job and the worker drain it
for (1 .. 2)
{
	sleep(1);
	$node->poll_query_until('postgres',
		q{SELECT checkpoint_lsn OPERATOR(mssql_cdc.>=) source_max_lsn FROM mssql_cdc.status WHERE source_table = 'dbo.v'})
	  or diag 'the worker did not catch up';
}
my %injected = map { $_ => 1 } (3, 5, 7, 9, 999);
foreach my $case ([ 'rows', 11 ], [ 'fold', 13 ])
{
	my ($mode, $id) = @$case;
	$si->ctl('capture_options', "empty_scans=$mode");
	$injected{$id} = 1;
	$node->safe_psql('postgres', qq{UPDATE public.src_dbo_v_mirror SET name = 'idle' WHERE id = $id});
	$out = $node->safe_psql('postgres',
		q{CALL mssql_cdc.verify('src', 'dbo.v', chunk_rows => 50, recheck_timeout => '20 s')});
	@f = split /\|/, $out;
	is($f[7], '0', "idle source ($mode): nothing unconfirmed")
	  or diag $out . "\n" . $node->safe_psql('postgres', "SELECT * FROM mssql_cdc.verify_runs WHERE run_id = $f[0]");
	is($node->safe_psql('postgres',
			qq{SELECT kind || ' ' || array_to_string(columns, ',') FROM mssql_cdc.verify_mismatches WHERE run_id = $f[0] AND key->>'id' = '$id'}),
		'different name', "idle source ($mode): the divergence is confirmed");
	my @false = grep { !$injected{$_} } split /,/, $node->safe_psql('postgres',
		qq{SELECT string_agg(key->>'id', ',') FROM mssql_cdc.verify_mismatches WHERE run_id = $f[0]});
	is("@false", '', "idle source ($mode): no false mismatch");
}
$si->ctl('capture_options', 'dummy_rows=every', 'empty_scans=rows');

# ---------------------------------------------------------------------------
# A run that fails half way (the connection to SQL Server lost in a chunk
# after the run's row was committed) ends 'failed', with the error
# ---------------------------------------------------------------------------
$si->ctl('drop_after_rows', 'rows=2', 'match=ORDER BY [id]');
($ret, $o, $err) = $node->psql('postgres',
	q{CALL mssql_cdc.verify('src', 'dbo.v', chunk_rows => 20, recheck_timeout => '5 s')});
$si->ctl('clear');
isnt($ret, 0, 'verify() fails when the connection is lost in a chunk');
is($node->safe_psql('postgres', q{
SELECT format('%s %s %s', state, finished_at IS NOT NULL, message IS NOT NULL AND message <> '')
  FROM mssql_cdc.verify_runs WHERE run_id = (SELECT max(run_id) FROM mssql_cdc.verify_runs)}),
	'failed t t', 'its run is recorded as failed, finished, with the error')
  or diag $err . "\n" . $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.verify_runs');
my $message = $node->safe_psql('postgres',
	q{SELECT message FROM mssql_cdc.verify_runs WHERE run_id = (SELECT max(run_id) FROM mssql_cdc.verify_runs)});
ok($message ne '' && index($err, (split /\n/, $message)[0]) >= 0,
	'the recorded message is the error the caller got') or diag "message: $message\nerror: $err";

$node->stop;
done_testing();
