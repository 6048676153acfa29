# The fault matrix: every fault a source can run into is explained in
# mssql_cdc.status (state, condition, last_error, hint), nothing is copied
# past it, and once the cause is fixed the worker recovers by itself (or,
# for a retention overrun with policy 'error', after mssql_cdc.resnapshot())
# with every change in the staging table exactly once, in order.
#
# Source side: connection dropped mid-result, stall past query_timeout,
# SQL Server restart, connection refused (wrong port), login failed (18456,
# wrong password), permission denied (229), capture job stalled, retention
# overrun with policy 'error' and with policy 'resnapshot'.  Postgres side:
# a CHECK constraint and a column type change on the staging table, INSERT
# revoked from the run_as role, the staging table renamed away.
#
# Faults are made persistent (times=-1, options, grants) so that the status
# can be read while the fault lasts, then fixed.  SIGTERM during a hang and
# lag counting stay in t/032_source_faults.pl.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Launcher qw(wait_worker_pid);
use StandIn;
use Test::More;
use Time::HiRes qw(usleep);

my $reader_password = 'R3ader-Matrix!';
my $si = StandIn->start(capture_interval => 0.1);
$si->tsql_ok(
	qq{CREATE LOGIN cdc_reader WITH PASSWORD = '$reader_password'},
	q{CREATE USER cdc_reader FOR LOGIN cdc_reader},
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.m (id int NOT NULL PRIMARY KEY, val int NOT NULL)},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'm', @role_name = NULL},
	q{GRANT SELECT ON dbo.m TO cdc_reader},
	q{GRANT SELECT ON SCHEMA::cdc TO cdc_reader},
	q{GRANT VIEW DATABASE STATE TO cdc_reader},
	q{INSERT INTO dbo.m VALUES (1, 10), (2, 20)});

my $node = PostgreSQL::Test::Cluster->new('fault_matrix');
$node->init;
$si->setup_node($node,
	conf => "mssql_cdc.capture_stall_timeout = 2\nmssql_cdc.retry_max_backoff = 1\n"
	  . "mssql_cdc.snapshot_chunk_rows = 5");
$node->start;

my $port = $si->port;
my $db = $si->database;
my $tls = $si->tls_options;
$node->safe_psql('postgres', qq{
CREATE EXTENSION mssql_cdc;
CREATE SERVER src FOREIGN DATA WRAPPER mssql_cdc
  OPTIONS (host '127.0.0.1', port '$port', database '$db', query_timeout '2', login_timeout '3'$tls);
CREATE ROLE loader;
GRANT USAGE ON FOREIGN SERVER src TO loader;
CREATE USER MAPPING FOR loader SERVER src
  OPTIONS (username 'cdc_reader', password '$reader_password');
GRANT EXECUTE ON FUNCTION mssql_cdc.add_table,
  mssql_cdc.resnapshot(name, text), mssql_cdc.set_table_option(name, text, text, text) TO loader;
GRANT CREATE ON SCHEMA public TO loader;
});
$si->add_table_when_started($node,
	q{SET ROLE loader; SELECT mssql_cdc.add_table('src', 'dbo.m', snapshot_mode => 'initial')});

# The source as the test wrote it, and what the staging table must hold:
# "op|id|val" in commit order (snapshot rows in key order at their L0).
my %source = (1 => 10, 2 => 20);
my @expected = map { "snapshot|$_|$source{$_}" } sort { $a <=> $b } keys %source;
my $next_id = 3;

sub staging_rows
{
	return split /\n/, $node->safe_psql('postgres',
		"SELECT _cdc_op || '|' || id || '|' || val FROM public.src_dbo_m ORDER BY _cdc_lsn, _cdc_seqval, _cdc_op");
}

sub staging_count
{
	return $node->safe_psql('postgres', 'SELECT count(*) FROM public.src_dbo_m');
}

# one source transaction of n inserts (val = id * 10 unless given)
sub insert_tx
{
	my ($n, $val) = @_;
	my @stmts;
	for (1 .. $n)
	{
		my $id = $next_id++;
		my $v = $val // $id * 10;
		push @stmts, "INSERT INTO dbo.m VALUES ($id, $v)";
		push @expected, "insert|$id|$v";
		$source{$id} = $v;
	}
	$si->tsql_ok('BEGIN TRANSACTION; ' . join('; ', @stmts) . '; COMMIT');
}

# the rows a new snapshot copies: the whole source, in key order
sub expect_snapshot
{
	push @expected, map { "snapshot|$_|$source{$_}" } sort { $a <=> $b } keys %source;
}

sub diag_state
{
	diag $node->safe_psql('postgres',
		'SELECT * FROM mssql_cdc.status; SELECT error_id, sqlstate, condition, message FROM mssql_cdc.errors ORDER BY error_id DESC LIMIT 5');
}

# The status shows the fault: state, condition, last_error (undef: a
# warning that has no error text), hint.
sub fault_shown
{
	my ($what, $state, $condition, $error_re, $hint_re) = @_;
	my $states = join(', ', map { "'$_'" } ref $state ? @$state : ($state));
	my $conditions = join(', ', map { "'$_'" } ref $condition ? @$condition : ($condition));
	ok( $node->poll_query_until('postgres',
			"SELECT state IN ($states) AND condition IN ($conditions) FROM mssql_cdc.status"),
		"$what: status shows state $states, condition $conditions")
	  or diag_state();
	like($node->safe_psql('postgres', 'SELECT last_error FROM mssql_cdc.status'),
		$error_re, "$what: last_error says what happened")
	  if defined $error_re;
	like($node->safe_psql('postgres', 'SELECT hint FROM mssql_cdc.status'),
		$hint_re, "$what: the hint says what to do");
}

# After the fix: every change exactly once, in order, and the condition gone.
sub recovered
{
	my ($what) = @_;
	my $n = scalar @expected;
	ok($node->poll_query_until('postgres', "SELECT count(*) >= $n FROM public.src_dbo_m"),
		"$what: all $n rows arrived")
	  or diag_state();
	is_deeply([ staging_rows() ], \@expected,
		"$what: staging equals the source history exactly (no loss, no duplicate)");
	ok( $node->poll_query_until('postgres',
			q{SELECT state = 'streaming' AND condition IS NULL AND hint IS NULL FROM mssql_cdc.status}),
		"$what: streaming again, no condition left")
	  or diag_state();
}

sub worker_pid { return wait_worker_pid($node, 30) }

# The worker reconnects with changed server options / user mappings by
# itself before its next poll (t/034); a new process just starts the next
# login at once instead of after the current poll.
sub restart_worker
{
	my $pid = worker_pid();
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)") if defined $pid;
}

# wait until the worker applied everything up to the source's max LSN
sub caught_up
{
	ok( $node->poll_query_until('postgres',
			q{SELECT checkpoint_lsn OPERATOR(mssql_cdc.=) source_max_lsn FROM mssql_cdc.status}),
		'the worker reached the source max LSN')
	  or diag_state();
}

ok( $node->poll_query_until('postgres',
		q{SELECT state = 'streaming' FROM mssql_cdc.status}),
	'initial snapshot done, streaming')
  or diag_state();
insert_tx(3);
recovered('baseline');

# ---------------------------------------------------------------------------
# Source side
# ---------------------------------------------------------------------------

# The connection drops in the middle of every change result.
my $rows_before = staging_count();
$si->ctl('drop_after_rows', 'rows=2', 'match=__$update_mask', 'times=-1');
insert_tx(5);
fault_shown('connection dropped mid-result', 'error', 'connection_lost',
	qr/lost the connection to SQL Server/, qr/reconnects/);
is(staging_count(), $rows_before, 'connection dropped: no row of the broken window was kept');
$si->ctl('clear');
recovered('connection dropped mid-result');

# Every change query stalls longer than query_timeout (2 s).
$rows_before = staging_count();
$si->ctl('stall', 'seconds=4', 'match=__$update_mask', 'times=-1');
insert_tx(4);
fault_shown('stall past query_timeout', 'error', 'timeout',
	qr/timed out waiting for SQL Server/, qr/query_timeout.*blocking|blocking.*query_timeout/s);
is(staging_count(), $rows_before, 'stall: nothing applied while it lasted');
$si->ctl('clear');
recovered('stall past query_timeout');

# SQL Server restarts: connections closed, down for 4 s.
$si->ctl('restart', 'down_seconds=4');
fault_shown('SQL Server restart', 'error', [ 'connection_lost', 'connection_refused' ],
	qr/SQL Server/, qr/retries|reconnects/);
# the test's own inserts need the server back too
for (1 .. 100)
{
	# tsql may find its pipe closed while connections are refused
	my $out = eval { $si->tsql('SELECT 4242 AS up') } // '';
	last if $out =~ /\b4242\b/;
	usleep(100_000);
}
insert_tx(3);
recovered('SQL Server restart');

# Connection refused: the server's port is wrong.
$node->safe_psql('postgres', q{ALTER SERVER src OPTIONS (SET port '1')});
restart_worker();
fault_shown('connection refused', 'error', 'connection_refused',
	qr/could not connect to SQL Server/, qr/host and port options of server "src".*firewall/s);
insert_tx(2);
$node->safe_psql('postgres', qq{ALTER SERVER src OPTIONS (SET port '$port')});
recovered('connection refused, then the port fixed');

# Login failed (18456): wrong password in the user mapping.
$node->safe_psql('postgres',
	q{ALTER USER MAPPING FOR loader SERVER src OPTIONS (SET password 'not-the-password')});
restart_worker();
fault_shown('login failed', 'error', 'login_failed',
	qr/could not connect to SQL Server/, qr/user mapping for server "src".*default database/s);
is( $node->safe_psql('postgres',
		q{SELECT remote_error_number FROM mssql_cdc.errors WHERE condition = 'login_failed' ORDER BY error_id DESC LIMIT 1}),
	'18456', 'login failed: SQL Server\'s error number is in mssql_cdc.errors');
insert_tx(2);
$node->safe_psql('postgres',
	qq{ALTER USER MAPPING FOR loader SERVER src OPTIONS (SET password '$reader_password')});
recovered('login failed, then the password fixed');

# Permission denied (229): the login loses SELECT.  The capture job is
# frozen while it happens so the next window is surely read without it.
$si->ctl('capture_freeze');
caught_up();
my $errors_before_deny = $node->safe_psql('postgres', 'SELECT coalesce(max(error_id), 0) FROM mssql_cdc.errors');
$si->ctl('deny_select', 'login=cdc_reader');
insert_tx(2);
$si->ctl('capture_resume');
fault_shown('permission denied', 'error', 'permission_denied',
	qr/SELECT permission was denied/, qr/GRANT SELECT.*cdc/s);
is( $node->safe_psql('postgres',
		q{SELECT remote_error_number FROM mssql_cdc.errors WHERE condition = 'permission_denied' ORDER BY error_id DESC LIMIT 1}),
	'229', 'permission denied: SQL Server\'s error number is in mssql_cdc.errors');
$si->ctl('deny_select', 'login=cdc_reader', 'on=false');
recovered('permission denied, then granted again');
# sys.fn_cdc_get_min_lsn answers 0x00 to a login that may not read the
# instance: whichever statement of a window met the DENY first, the table
# was never parked as a dropped capture instance (which needs a resnapshot)
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM mssql_cdc.errors WHERE error_id > $errors_before_deny AND condition NOT IN ('permission_denied', 'capture_job_stalled')"),
	'0', 'permission denied: only permission_denied was recorded, the table never parked');

# The capture job stops: max LSN frozen past capture_stall_timeout (2 s).
# Not an error: the worker keeps polling, and the condition clears itself.
$si->ctl('capture_freeze');
insert_tx(2);
fault_shown('capture job stalled', 'streaming', 'capture_job_stalled',
	qr/capture job of SQL Server \(server "src"\) is not advancing/, qr/sp_cdc_start_job/);
is( $node->safe_psql('postgres',
		q{SELECT count(*) > 0 FROM mssql_cdc.errors WHERE condition = 'capture_job_stalled'}),
	't', 'capture job stalled: recorded in mssql_cdc.errors');
$si->ctl('capture_resume');
recovered('capture job running again');

# ---------------------------------------------------------------------------
# Postgres side: the staging table stops taking the rows
# ---------------------------------------------------------------------------

# A CHECK constraint rejects a source row.
$node->safe_psql('postgres',
	q{ALTER TABLE public.src_dbo_m ADD CONSTRAINT val_limit CHECK (val < 1000000)});
$rows_before = staging_count();
insert_tx(2, 5000000);
fault_shown('CHECK constraint on staging', 'error', 'staging_constraint_violation',
	qr/violates check constraint "val_limit"/, qr/constraint.*staging table/s);
is(staging_count(), $rows_before, 'CHECK constraint: no row of the window was kept');
$node->safe_psql('postgres', q{ALTER TABLE public.src_dbo_m DROP CONSTRAINT val_limit});
recovered('CHECK constraint dropped');

# A column's type changed: the shape check before the window refuses it
# (before any value could overflow it).
$node->safe_psql('postgres', q{ALTER TABLE public.src_dbo_m ALTER COLUMN val TYPE numeric(7,0)});
$rows_before = staging_count();
insert_tx(1, 50000000);
fault_shown('staging column type changed', 'error', 'staging_table_changed',
	qr/column "val" of staging table public\.src_dbo_m has type numeric\(7,0\), but mssql_cdc expects integer/,
	qr/restore its columns/);
is(staging_count(), $rows_before, 'column type changed: nothing applied');
$node->safe_psql('postgres', q{ALTER TABLE public.src_dbo_m ALTER COLUMN val TYPE integer});
recovered('column type restored');

# The run_as role loses INSERT on its staging table.
$node->safe_psql('postgres', q{REVOKE INSERT ON public.src_dbo_m FROM loader});
$rows_before = staging_count();
insert_tx(2);
fault_shown('INSERT revoked from run_as', 'error', 'staging_permission_denied',
	qr/permission denied for table src_dbo_m/, qr/GRANT INSERT/);
is(staging_count(), $rows_before, 'INSERT revoked: nothing applied');
$node->safe_psql('postgres', q{GRANT INSERT ON public.src_dbo_m TO loader});
recovered('INSERT granted again');

# The staging table disappears (renamed away), then comes back.
$rows_before = staging_count();
$node->safe_psql('postgres', q{ALTER TABLE public.src_dbo_m RENAME TO src_dbo_m_moved});
insert_tx(2);
fault_shown('staging table missing', 'error', 'staging_table_missing',
	qr/src_dbo_m/, qr/staging table is gone/);
is($node->safe_psql('postgres', 'SELECT count(*) FROM public.src_dbo_m_moved'),
	$rows_before, 'staging table missing: nothing written to the renamed table either');
$node->safe_psql('postgres', q{ALTER TABLE public.src_dbo_m_moved RENAME TO src_dbo_m});
recovered('staging table back');

# ---------------------------------------------------------------------------
# Retention overrun: CDC cleanup removed changes before they were copied
# ---------------------------------------------------------------------------

# changes captured on SQL Server, then removed by cleanup while paused
sub overrun
{
	my ($n) = @_;
	$node->safe_psql('postgres', q{SELECT mssql_cdc.pause('src')});
	$node->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'mssql_cdc worker'});
	my $first = $next_id;
	insert_tx($n);
	@expected = @expected[ 0 .. $#expected - $n ];	# never copied as changes
	for (1 .. 100)
	{
		last if $si->tsql("SELECT COUNT(*) FROM cdc.dbo_m_CT WHERE id >= $first") =~ /^\s*$n\s*$/m;
		usleep(100_000);
	}
	$si->ctl('cleanup', 'capture_instance=dbo_m');
}

# Policy 'error' (the default): parked until resnapshot() by hand.
$rows_before = staging_count();
overrun(3);
$node->safe_psql('postgres', q{SELECT mssql_cdc.resume('src')});
fault_shown('retention overrun, policy error', 'error', 'retention_overrun',
	qr/removed by CDC cleanup before they were copied/, qr/mssql_cdc\.resnapshot\(\).*retention/s);
is(staging_count(), $rows_before, 'retention overrun: nothing applied past the gap');
# The stand-in's database does not allow SNAPSHOT isolation: while the new
# snapshot is copied (chunks of 5 rows, slowed down below query_timeout),
# status shows that as a warning.
$si->ctl('stall', 'seconds=1', 'match=BEGIN TRANSACTION; SELECT TOP', 'times=3');
$node->safe_psql('postgres', q{SET ROLE loader; SELECT mssql_cdc.resnapshot('src', 'dbo.m')});
fault_shown('snapshot without SNAPSHOT isolation', 'snapshotting', 'snapshot_isolation_off',
	undef, qr/ALLOW_SNAPSHOT_ISOLATION ON/);
expect_snapshot();
ok( $node->poll_query_until('postgres', q{SELECT state = 'streaming' FROM mssql_cdc.status}),
	'retention overrun: the resnapshot finished');
insert_tx(2);
recovered('retention overrun, resnapshot by hand');

# Policy 'resnapshot': recorded, shown while the table is copied again,
# and copied again without the user.  Snapshot chunks are slowed down
# (below query_timeout) so that the status can be read meanwhile.
$node->safe_psql('postgres',
	q{SET ROLE loader; SELECT mssql_cdc.set_table_option('src', 'dbo.m', 'on_retention_overrun', 'resnapshot')});
my $errors_before = $node->safe_psql('postgres',
	q{SELECT count(*) FROM mssql_cdc.errors WHERE condition = 'retention_overrun'});
overrun(2);
$si->ctl('stall', 'seconds=1.5', 'match=BEGIN TRANSACTION; SELECT TOP', 'times=3');
$node->safe_psql('postgres', q{SELECT mssql_cdc.resume('src')});
fault_shown('retention overrun, policy resnapshot', [ 'pending', 'snapshotting' ],
	'retention_overrun', qr/removed by CDC cleanup before they were copied/,
	qr/copied again by a new snapshot/);
expect_snapshot();
ok( $node->poll_query_until('postgres', q{SELECT state = 'streaming' FROM mssql_cdc.status}),
	'retention overrun, policy resnapshot: the new snapshot finished by itself')
  or diag_state();
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM mssql_cdc.errors WHERE condition = 'retention_overrun'}),
	$errors_before + 1, 'the automatic resnapshot is recorded in mssql_cdc.errors');
ok($node->log_contains(qr/table dbo\.m of source "src" is copied again: Changes of capture instance "dbo_m" were removed/),
	'and in the server log');
$si->ctl('clear');
insert_tx(2);
recovered('retention overrun, resnapshot by policy');

is($node->safe_psql('postgres', q{SELECT count(*) FROM mssql_cdc.errors WHERE sqlstate = '23505'}),
	'0', 'never a unique violation (nothing applied twice)');
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM mssql_cdc.errors WHERE condition IS NULL OR condition = 'internal_error'}),
	'0', 'every recorded fault got a condition')
  or diag $node->safe_psql('postgres', q{SELECT * FROM mssql_cdc.errors WHERE condition IS NULL OR condition = 'internal_error'});

$node->stop;
$si->stop;
# doc/troubleshooting.md explains exactly the conditions the code can set
my $root = "$FindBin::RealBin/..";
my @in_code = sort map { /^#define COND_\w+\s+"(\w+)"/ ? $1 : () }
  split /\n/, slurp_file("$root/include/error_condition.h");
my @in_doc = sort map { /^\| `(\w+)`/ ? $1 : () }
  split /\n/, slurp_file("$root/doc/troubleshooting.md");
cmp_ok(scalar @in_code, '>=', 20, 'include/error_condition.h defines the conditions');
is_deeply(\@in_doc, \@in_code, 'doc/troubleshooting.md lists every condition, and only those');

done_testing();
