# A broken or hostile SQL Server never crashes Postgres.  For every kind of
# the stand-in's `corrupt` fault (test/standin/README.md), sent in place of
# the change query's result (streaming), of a snapshot chunk, or of the
# login response: the worker records a clean error (SQLSTATE, a message that
# names the problem, the status condition doc/troubleshooting.md gives for
# it, no control bytes, no password), the postmaster never
# crash-restarts, the worker's memory stays bounded, a worker receiving
# rows without end obeys SIGTERM within a second, and once the fault is
# cleared the staging data equals the source exactly.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;
use Time::HiRes qw(time usleep);

# Peak memory (VmHWM, includes the shared memory the worker touched) a
# worker may reach while a hostile server streams at it.
my $max_hwm_kb = 256 * 1024;
my $max_anon_kb = 64 * 1024;

# What each kind must produce.  sqlstate/pattern describe the recorded
# error and `condition` the status condition (doc/troubleshooting.md): a
# name, or one per SQLSTATE where the stream may end either way; `none`
# kinds are harmless (the worker must not trust them, and the data stays
# right without any error); `forever` kinds stream without end.
# The $unexpected kinds are caught by the callers' checks of the result's
# shape (apply.c, snapshot.c: column count, column types against the source,
# change-row order, no more rows than TOP (n)) through tds_expect_num_cols /
# tds_expect_col_kind / tds_expect_col_source_type; without those checks
# fewer_columns loses data, wrong_column_types stores wrong values in a
# snapshot, and rows_forever never ends a snapshot chunk.  A result of the
# wrong shape is a malformed response like bad TDS: not SQL Server
# rejecting a query (source_error).
my $malformed = { sqlstate => '08P01', message => qr/sent a malformed response/,
	condition => 'malformed_response' };
# cut off in the middle: db-lib may see the end of the stream first
my $eof_or_malformed = { sqlstate => qr/^(08006|08P01)$/,
	message => qr/lost the connection to SQL Server|sent a malformed response/,
	condition => { '08006' => 'connection_lost', '08P01' => 'malformed_response' } };
my $unexpected = { sqlstate => qr/^(08P01|HV004|HV000)$/,
	message => qr/SQL Server \(server "src"\) (sent|returned) (a malformed|an unexpected|a change row without|a change outside|more rows|change rows out of order)/,
	condition => 'malformed_response' };
my %kinds = (
	bad_token => $malformed,
	bad_type => $malformed,
	truncated_token => $eof_or_malformed,
	wrong_length => $eof_or_malformed,
	huge_length => $malformed,
	# streaming: an image column where __$start_lsn (binary(10)) is expected,
	# refused before the value is read; snapshot: ntext where an nvarchar
	# is (a type a string column can arrive as), the value is cut off
	huge_text_length => { sqlstate => '08P01', message => qr/sent an unexpected result/,
		condition => 'malformed_response',
		snapshot => { sqlstate => '08006', message => qr/lost the connection to SQL Server/,
			condition => 'connection_lost' } },
	value_too_long => $unexpected,
	wrong_column_types => $unexpected,
	fewer_columns => $unexpected,
	more_columns => $unexpected,
	row_before_metadata => $malformed,
	# well-formed TDS: an error SQL Server could send
	huge_message => { sqlstate => 'HV000', message => qr/^SQL Server error on server "src" while [a-z ]+: \?\[31mBOOM/,
		condition => 'source_error' },
	truncated_message => $eof_or_malformed,
	bad_utf16 => $malformed,
	lying_done => { none => 1 },
	packet_len_zero => $malformed,
	packet_len_short => $malformed,
	packet_len_oversize => { none => 1 },
	rows_forever => { %$unexpected, forever => 1 },
	huge_values_forever => { %$unexpected, forever => 1 },
);
my %login_kinds = (
	garbage_login => { sqlstate => 'HV00N',
		message => qr/could not connect to SQL Server for server "src": the server sent a malformed login response/,
		condition => 'malformed_response' },
	login_truncated => { sqlstate => 'HV00N',
		message => qr/could not connect to SQL Server for server "src"/,
		condition => 'connection_refused' },
);

my $si = StandIn->start(capture_interval => 0.1);
my $password = $si->password;
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.s (id int NOT NULL PRIMARY KEY, val int NOT NULL, txt nvarchar(40))},
	q{CREATE TABLE dbo.p (id int NOT NULL PRIMARY KEY, val int NOT NULL, txt nvarchar(40))},
	join(' ', map { "INSERT INTO dbo.p VALUES ($_, " . ($_ * 7) . ", N'p-$_');" } 1 .. 12),
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N's', @role_name = NULL},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'p', @role_name = NULL});
my @p_rows = map { "$_|" . ($_ * 7) . "|p-$_" } 1 .. 12;

my $node = PostgreSQL::Test::Cluster->new('malformed');
$node->init;
$si->setup_node($node, conf => "mssql_cdc.retry_max_backoff = 1\nmssql_cdc.snapshot_chunk_rows = 5\n");
$node->start;
$si->create_source($node, 'src', query_timeout => 3);
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('src', 'dbo.s', snapshot_mode => 'never')});
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('src', 'dbo.p', snapshot_mode => 'initial')});

my $pm_start = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');

my @expected;	# dbo.s history: "op|id|val|txt" in commit order
my $next_id = 1;

sub insert_tx
{
	my @stmts;
	for (1 .. 3)
	{
		my $id = $next_id++;
		push @stmts, "INSERT INTO dbo.s VALUES ($id, " . ($id * 10) . ", N'v$id')";
		push @expected, "insert|$id|" . ($id * 10) . "|v$id";
	}
	$si->tsql_ok('BEGIN TRANSACTION; ' . join('; ', @stmts) . '; COMMIT');
}

sub worker_pids
{
	my $pids = $node->safe_psql('postgres',
		q{SELECT string_agg(pid::text, ' ') FROM pg_stat_activity WHERE backend_type = 'mssql_cdc worker'});
	return grep { /^\d+$/ } split / /, $pids;
}

# Peak memory over the workers seen while we poll (a worker exits after
# each error, so its successor is watched too): VmHWM (resident high-water
# mark, shared buffers the worker touched included) and RssAnon (its
# private memory: what a leak or an unbounded buffer would grow).
my (%peak, %peak_anon);

sub sample_memory
{
	for my $pid (worker_pids())
	{
		open(my $fh, '<', "/proc/$pid/status") or next;
		while (<$fh>)
		{
			$peak{$pid} = $1 if /^VmHWM:\s+(\d+) kB/ && $1 > ($peak{$pid} // 0);
			$peak_anon{$pid} = $1 if /^RssAnon:\s+(\d+) kB/ && $1 > ($peak_anon{$pid} // 0);
		}
		close $fh;
	}
}

sub last_error_id
{
	return $node->safe_psql('postgres', 'SELECT coalesce(max(error_id), 0) FROM mssql_cdc.errors');
}

sub fault_taken
{
	return $si->ctl('faults') !~ /"kind"/;
}

# wait until the armed fault was used, sampling memory meanwhile; remember
# which worker took it
my $taker;

sub wait_fault_taken
{
	my $deadline = time + 30;
	while (time < $deadline)
	{
		sample_memory();
		my @pids = worker_pids();
		if (fault_taken())
		{
			$taker = $pids[0];
			return 1;
		}
		usleep(50_000);
	}
	return 0;
}

# The first error recorded after $since that is not a consequence of the
# test's own restart (connection lost/timeout from an earlier fault).
sub wait_error
{
	my ($since, $want) = @_;
	my $deadline = time + 15;
	while (time < $deadline)
	{
		sample_memory();
		my $row = $node->safe_psql('postgres',
			qq{SELECT sqlstate || E'\\x01' || message || E'\\x01' || coalesce(detail, '') || E'\\x01' || coalesce(hint, '') || E'\\x01' || coalesce(condition, '')
			   FROM mssql_cdc.errors WHERE error_id > $since AND message ~ '$want' ORDER BY error_id LIMIT 1});
		return split /\x01/, $row, 5 if $row ne '';
		usleep(100_000);
	}
	return;
}

sub check_error
{
	my ($what, $spec, $since, $want) = @_;
	my ($sqlstate, $message, $detail, $hint, $condition) = wait_error($since, $want // '.');
	ok(defined $message, "$what: an error was recorded")
	  or return diag $node->safe_psql('postgres', "SELECT * FROM mssql_cdc.errors WHERE error_id > $since");
	if (ref $spec->{sqlstate}) { like($sqlstate, $spec->{sqlstate}, "$what: SQLSTATE $sqlstate") }
	else { is($sqlstate, $spec->{sqlstate}, "$what: SQLSTATE $spec->{sqlstate}") }
	like($message, $spec->{message}, "$what: the message names the problem") or diag "detail: $detail";
	my $all = join("\n", $message, $detail, $hint);
	ok($all !~ /[\x00-\x08\x0b-\x1f\x7f]/, "$what: no control bytes in message, detail or hint");
	ok(length($message) < 2000 && length($detail) < 4000, "$what: message and detail are short");
	ok(index($all, $password) < 0, "$what: no password");
	my $want_condition = ref $spec->{condition} ? $spec->{condition}{$sqlstate} : $spec->{condition};
	is($condition, $want_condition, "$what: status condition " . ($want_condition // '?'))
	  or diag "message: $message";
}

sub staging_s_matches
{
	my ($what) = @_;
	my $n = scalar @expected;
	my $deadline = time + 30;
	while (time < $deadline)
	{
		last if $node->safe_psql('postgres', "SELECT count(*) >= $n FROM public.src_dbo_s") eq 't';
		usleep(100_000);
	}
	my @got = split /\n/, $node->safe_psql('postgres',
		q{SELECT _cdc_op || '|' || id || '|' || val || '|' || txt FROM public.src_dbo_s ORDER BY _cdc_lsn, _cdc_seqval, _cdc_op});
	return if is_deeply(\@got, \@expected, "$what: streamed data equals the source exactly");
	diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status');
	# judge the next kinds on their own: start from what is there now
	@expected = @got;
}

sub snapshot_p_matches
{
	my ($what) = @_;
	my $deadline = time + 30;
	my $state = '';
	while (time < $deadline)
	{
		$state = $node->safe_psql('postgres',
			q{SELECT state FROM mssql_cdc.status WHERE source_table = 'dbo.p'});
		last if $state eq 'streaming';
		usleep(100_000);
	}
	is($state, 'streaming', "$what: the snapshot completes after the fault is cleared")
	  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status');
	my @got = split /\n/, $node->safe_psql('postgres', q{
		SELECT id || '|' || val || '|' || txt FROM public.src_dbo_p
		WHERE _cdc_op = 'snapshot' AND _cdc_lsn OPERATOR(mssql_cdc.=) (
			SELECT snapshot_lsn FROM mssql_cdc.table_state JOIN mssql_cdc.tables USING (table_id)
			WHERE source_table = 'p')
		ORDER BY id});
	is_deeply(\@got, \@p_rows, "$what: the snapshot equals the source exactly (no loss, no duplicate)");
}

sub postmaster_intact
{
	my ($what) = @_;
	is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $pm_start,
		"$what: the postmaster never restarted");
}

# A worker that receives rows without end: SIGTERM stops it within a second.
sub sigterm_while_streaming
{
	my ($what) = @_;
	usleep(1_000_000);
	my $pid = $taker;
	return pass("$what: the worker already gave up on the stream")
	  unless defined $pid && kill(0, $pid);
	sample_memory();
	my $t0 = time;
	kill 'TERM', $pid;
	my $gone = 0;
	while (time - $t0 < 5)
	{
		if (!kill(0, $pid)) { $gone = 1; last }
		usleep(10_000);
	}
	my $elapsed = time - $t0;
	ok($gone && $elapsed < 1.0, sprintf('%s: SIGTERM stopped the worker in %.2f s', $what, $elapsed));
}

ok( $node->poll_query_until('postgres',
		q{SELECT bool_and(state = 'streaming') AND count(*) = 2 FROM mssql_cdc.status}),
	'both tables streaming')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status');
snapshot_p_matches('baseline');
insert_tx();
staging_s_matches('baseline');

my $t_start = time;
for my $kind (sort keys %kinds)
{
	my $spec = $kinds{$kind};

	# --- streaming: the change query's result ---------------------------
	my $what = "$kind (streaming)";
	%peak = %peak_anon = ();
	my $since = last_error_id();
	$si->ctl('capture_freeze');
	insert_tx();
	$si->ctl('corrupt', "kind=$kind", 'match=[dbo_s_CT] AS c');
	$si->ctl('capture_resume');
	ok(wait_fault_taken(), "$what: the worker received it");
	sigterm_while_streaming($what) if $spec->{forever};
	if ($spec->{none})
	{
		staging_s_matches($what);
		is(last_error_id(), $since, "$what: harmless, no error");
	}
	else
	{
		check_error($what, $spec, $since);
		$si->ctl('clear');
		staging_s_matches($what);
	}

	# --- snapshot: a chunk of the keyset-paged copy -----------------------
	$what = "$kind (snapshot)";
	$spec = { %$spec, %{ $spec->{snapshot} } } if $spec->{snapshot};
	$since = last_error_id();
	$si->ctl('corrupt', "kind=$kind", 'match=ORDER BY [id]');
	$node->safe_psql('postgres', q{SELECT mssql_cdc.resnapshot('src', 'dbo.p')});
	ok(wait_fault_taken(), "$what: the worker received it");
	sigterm_while_streaming($what) if $spec->{forever};
	if ($spec->{none})
	{
		snapshot_p_matches($what);
		is(last_error_id(), $since, "$what: harmless, no error");
	}
	else
	{
		check_error($what, $spec, $since);
		$si->ctl('clear');
		snapshot_p_matches($what);
	}

	my ($max_kb, $max_anon) = (0, 0);
	for (values %peak) { $max_kb = $_ if $_ > $max_kb }
	for (values %peak_anon) { $max_anon = $_ if $_ > $max_anon }
	cmp_ok($max_kb, '<', $max_hwm_kb, "$kind: worker peak VmHWM ${max_kb} kB stays bounded");
	cmp_ok($max_anon, '<', $max_anon_kb, "$kind: worker peak RssAnon ${max_anon} kB stays bounded");
	postmaster_intact($kind);
}

# --- login: garbage instead of the login acknowledgement ----------------------
for my $kind (sort keys %login_kinds)
{
	my $what = "$kind (login)";
	my $since = last_error_id();
	$si->ctl('corrupt', "kind=$kind");
	# close every connection: the worker's next login meets the fault
	$si->ctl('restart');
	ok(wait_fault_taken(), "$what: the worker's login received it");
	check_error($what, $login_kinds{$kind}, $since, 'could not connect');
	$si->ctl('clear');
	insert_tx();
	staging_s_matches($what);
	postmaster_intact($what);
}
note sprintf('all kinds took %.0f s', time - $t_start);

# --- rows without end where the worker only drains a result ---------------------
# The max-LSN poll reads its first row and drains the rest: a server that
# never ends that result passes every check, and only an interrupt stops the
# worker.  It must stop within a second of SIGTERM, with bounded memory.
{
	my $what = 'rows_forever (max-LSN poll, drained)';
	%peak = %peak_anon = ();
	$si->ctl('corrupt', 'kind=rows_forever', 'match=sys.fn_cdc_get_max_lsn()');
	ok(wait_fault_taken(), "$what: the worker received it");
	my $t_end = time + 2;
	sample_memory(), usleep(100_000) while time < $t_end;
	ok(defined $taker && kill(0, $taker), "$what: the worker is still reading after 2 s");
	my ($max_kb, $max_anon) = (0, 0);
	for (values %peak) { $max_kb = $_ if $_ > $max_kb }
	for (values %peak_anon) { $max_anon = $_ if $_ > $max_anon }
	cmp_ok($max_anon, '<', $max_anon_kb, "$what: worker peak RssAnon ${max_anon} kB stays bounded");
	sigterm_while_streaming($what);
	$si->ctl('clear');
	insert_tx();
	staging_s_matches($what);
	postmaster_intact($what);
}

# The log: no backend died of a signal, none exited abnormally, no PANIC
my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|was terminated by|all server processes terminated; reinitializing/,
	'no process was killed by a signal, no crash-restart');
my @bad_exits = $log =~ /(exited with exit code (?!1\b)\d+)/g;
is_deeply(\@bad_exits, [], 'no server process exited with a code other than 1');
unlike($log, qr/\bPANIC\b/, 'no PANIC');
unlike($log, qr/\x1b/, 'no terminal escapes from the server in the log');
postmaster_intact('at the end');

$node->stop;
$si->stop;
done_testing();
