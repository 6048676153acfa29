# Schema evolution through capture instances, against the SQL Server
# stand-in: (a) a second capture instance with a new column under
# concurrent writes: the switch happens exactly at its start LSN, every
# change lands once, old rows keep NULL in the new column; (b) two tables
# of one source switch at different LSNs while cross-table transactions
# keep one commit LSN; (c) SIGKILLs of the worker around a switch (one
# for certain inside the switch transaction, after which the old instance
# is dropped: the restarted worker switches from a recorded instance that
# no longer exists);
# (d) a dropped capture instance, (e) CDC disabled on the database and
# (f) a changed column type each stop with an explained error, and
# recovery (new capture instance + resnapshot) ends with exact data;
# (g) an old instance dropped before the switch: the lost changes are an
# error, never a silent skip.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Launcher qw(kill_worker_and_wait);
use StandIn;
use Test::More;
use Time::HiRes qw(time usleep);

my $si = StandIn->start(capture_interval => 0.1, databases => ['other']);

my @tables = qw(a b1 b2 k d f g);
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.a (id int NOT NULL PRIMARY KEY, v int)},
	q{CREATE TABLE dbo.b1 (id int NOT NULL PRIMARY KEY, v int)},
	q{CREATE TABLE dbo.b2 (id int NOT NULL PRIMARY KEY, v int)},
	q{CREATE TABLE dbo.k (id int NOT NULL PRIMARY KEY, v int)},
	q{CREATE TABLE dbo.d (id int NOT NULL PRIMARY KEY, v int)},
	q{CREATE TABLE dbo.f (id int NOT NULL PRIMARY KEY, amount decimal(10,2))},
	q{CREATE TABLE dbo.g (id int NOT NULL PRIMARY KEY, v int)},
	map({ "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
		@tables));
$si->tsql_ok(
	'USE other',
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.e1 (id int NOT NULL PRIMARY KEY, v int)},
	q{CREATE TABLE dbo.e2 (id int NOT NULL PRIMARY KEY, v int)},
	map({ "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
		qw(e1 e2)));

my $node = PostgreSQL::Test::Cluster->new('ci_switch');
$node->init;
# small windows, so a switch point falls between many windows
$si->setup_node($node, conf => q{
mssql_cdc.batch_max_transactions = 3
restart_after_crash = on
});
$node->start;
$si->create_source($node, 'src');
$si->create_source($node, 'src2', database => 'other');
for my $t (@tables)
{
	$si->add_table_when_started($node, "SELECT mssql_cdc.add_table('src', 'dbo.$t')");
}
$si->add_table_when_started($node, "SELECT mssql_cdc.add_table('src2', 'dbo.$_')") for qw(e1 e2);
ok( $node->poll_query_until(
		'postgres', q{SELECT count(*) = 9 FROM mssql_cdc.status WHERE state = 'streaming'}),
	'all tables stream (their empty snapshots are done)')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status');

# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

# the staging table of a source table (e1, e2 come from the other source)
sub staging_of
{
	my ($table) = @_;
	return $table =~ /^e/ ? "public.src2_dbo_$table" : "public.src_dbo_$table";
}

# staging rows in commit order, as "op|col1|col2..."
sub staging
{
	my ($table, @cols) = @_;
	my $fmt = join('|', ('%s') x (@cols + 1));
	my $args = join(', ', '_cdc_op', map { "coalesce($_" . "::text, '')" } @cols);
	return $node->safe_psql('postgres',
		qq{SELECT string_agg(format('$fmt', $args), E'\\n' ORDER BY _cdc_lsn, _cdc_seqval, _cdc_op)
		     FROM } . staging_of($table));
}

sub count_rows
{
	my ($table) = @_;
	return $node->safe_psql('postgres', 'SELECT count(*) FROM ' . staging_of($table));
}

sub wait_rows
{
	my ($table, $n, $what) = @_;
	ok($node->poll_query_until('postgres', "SELECT count(*) = $n FROM " . staging_of($table)), $what)
	  or diag $node->safe_psql('postgres',
		"SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors ORDER BY error_id DESC LIMIT 5");
}

sub state_of
{
	my ($server, $table) = @_;
	return $node->safe_psql('postgres',
		"SELECT state FROM mssql_cdc.status WHERE server = '$server' AND source_table = 'dbo.$table'");
}

# the status condition of a table (include/error_condition.h)
sub condition_of
{
	my ($server, $table) = @_;
	return $node->safe_psql('postgres',
		"SELECT condition FROM mssql_cdc.status WHERE server = '$server' AND source_table = 'dbo.$table'");
}

# the newest error-log entry of a table: message and hint
sub last_error
{
	my ($server, $table) = @_;
	return $node->safe_psql('postgres', qq{
SELECT e.message || E'\\n' || coalesce(e.hint, '')
  FROM mssql_cdc.errors e JOIN mssql_cdc.tables t USING (table_id)
 WHERE t.server_name = '$server' AND t.source_table = '$table'
 ORDER BY e.error_id DESC LIMIT 1});
}

sub switches
{
	my ($table) = @_;
	return $node->safe_psql('postgres', qq{
SELECT string_agg(format('%s>%s|%s|%s|%s', old_capture_instance, new_capture_instance,
                         switch_lsn IS NOT NULL, columns_added, columns_not_captured), ';' ORDER BY switch_id)
  FROM mssql_cdc.capture_instance_switches s JOIN mssql_cdc.tables t USING (table_id)
 WHERE t.source_table = '$table'});
}

sub recorded_ci
{
	my ($table) = @_;
	return $node->safe_psql('postgres',
		"SELECT capture_instance FROM mssql_cdc.tables WHERE server_name = 'src' AND source_table = '$table'");
}

# a tsql session in the background running @batches (stdin and output are
# files, so it runs on its own without being pumped)
my $writers = 0;
sub start_writer
{
	my (@batches) = @_;
	my $base = PostgreSQL::Test::Utils::tempdir() . '/writer' . $writers++;
	open(my $fh, '>', "$base.sql") or die;
	print $fh join('', map { "$_\ngo\n" } @batches) . "exit\n";
	close $fh;
	my $h = IPC::Run::start(
		[ 'tsql', '-H', $si->host, '-p', $si->port, '-U', $si->user, '-P', $si->password,
		  '-D', $si->database ],
		'<', "$base.sql", '>', "$base.out", '2>', "$base.err", IPC::Run::timeout(300));
	return { h => $h, base => $base };
}

sub finish_writer
{
	my ($w) = @_;
	$w->{h}->finish;
	my $all = slurp_file("$w->{base}.out") . slurp_file("$w->{base}.err");
	unlike($all, qr/^\s*Msg \d+/m, 'the background writer saw no SQL Server error');
}

sub insert_batches
{
	my ($table, $from, $to) = @_;
	return map { ("INSERT INTO dbo.$table (id, v) VALUES ($_, $_)", q{WAITFOR DELAY '00:00:00.010'}) }
	  $from .. $to;
}

# every staging row of $table below the switch LSN has NULL in $col, every
# row from it on has $value: the switch happened exactly at switch_lsn
sub split_at_switch
{
	my ($table, $col, $value) = @_;
	return $node->safe_psql('postgres', qq{
SELECT count(*) FILTER (WHERE r._cdc_lsn OPERATOR(mssql_cdc.<) s.switch_lsn AND r.$col IS NULL) || '|' ||
       count(*) FILTER (WHERE r._cdc_lsn OPERATOR(mssql_cdc.>=) s.switch_lsn AND r.$col = '$value') || '|' ||
       count(*)
  FROM public.src_dbo_$table r,
       (SELECT switch_lsn FROM mssql_cdc.capture_instance_switches
         JOIN mssql_cdc.tables USING (table_id) WHERE source_table = '$table') s
 WHERE r._cdc_op = 'insert'});
}

# ---------------------------------------------------------------------------
# (a) a new column, a second capture instance, concurrent writes across S
# ---------------------------------------------------------------------------
my $w = start_writer(insert_batches('a', 1, 250));
ok($node->poll_query_until('postgres', 'SELECT count(*) >= 40 FROM public.src_dbo_a'),
	'(a) the concurrent writes stream before the schema change');
$si->tsql_ok(q{ALTER TABLE dbo.a ADD c nvarchar(20) NULL DEFAULT N'dflt'},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'a', @role_name = NULL, @capture_instance = N'dbo_a_v2'});
finish_writer($w);
wait_rows('a', 250, '(a) all 250 concurrent inserts arrived');
ok($node->poll_query_until('postgres', q{SELECT capture_instance = 'dbo_a_v2' FROM mssql_cdc.tables WHERE source_table = 'a'}),
	'(a) the table switched to the new capture instance');
$si->tsql_ok(q{UPDATE dbo.a SET c = N'x1' WHERE id = 1},
	q{DELETE FROM dbo.a WHERE id = 2},
	q{INSERT INTO dbo.a (id, v, c) VALUES (1001, 1001, N'new')});
wait_rows('a', 254, '(a) the changes after the switch arrived');

is( staging('a', 'id', 'v'),
	join("\n", (map { "insert|$_|$_" } 1 .. 250),
		'update_before|1|1', 'update_after|1|1', 'delete|2|2', 'insert|1001|1001'),
	'(a) every change exactly once, in commit order');
my ($below, $above, $all) = split(/\|/, split_at_switch('a', 'c', 'dflt'));
cmp_ok($below, '>', 0, "(a) $below inserts were read from the old instance (c NULL)");
cmp_ok($above, '>', 0, "(a) $above inserts were read from the new instance (c = default)");
is($below + $above + 1, $all, '(a) the switch LSN splits the inserts exactly (one more: id 1001)');
is( staging('a', 'id', 'c'),
	join("\n", (map { "insert|$_|" . ($_ <= $below ? '' : 'dflt') } 1 .. 250),
		'update_before|1|', 'update_after|1|x1', 'delete|2|', 'insert|1001|new'),
	'(a) old rows have NULL in the new column, new rows its values');
is(switches('a'), 'dbo_a>dbo_a_v2|t|{c}|{}', '(a) history: one switch, column c added');
is( $node->safe_psql('postgres', q{
SELECT s.switch_lsn::text = s.new_start_lsn::text
  FROM mssql_cdc.capture_instance_switches s JOIN mssql_cdc.tables t USING (table_id)
 WHERE t.source_table = 'a'}),
	't', '(a) the switch LSN is the new instance\'s start LSN (the window before it was cut there)');
is( $node->safe_psql('postgres',
		q{SELECT format_type(atttypid, atttypmod) = mssql_cdc.map_type('nvarchar', 20)
		    FROM pg_attribute WHERE attrelid = 'public.src_dbo_a'::regclass AND attname = 'c'}),
	't', '(a) the new staging column has the policy\'s type');
is(state_of('src', 'a') . '|' . $node->safe_psql('postgres',
		q{SELECT coalesce(last_error, '') FROM mssql_cdc.status WHERE source_table = 'dbo.a'}),
	'streaming|', '(a) status: still streaming, no error');
ok($node->log_contains(qr/table dbo\.a switched from capture instance "dbo_a" to "dbo_a_v2" at LSN 0x/),
	'(a) the server log tells about the switch');

# the old instance can go now; nothing changes for the table
$si->tsql_ok(q{EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'a', @capture_instance = N'dbo_a'},
	q{INSERT INTO dbo.a (id, v, c) VALUES (1002, 1002, N'after drop')});
wait_rows('a', 255, '(a) streaming goes on after the old instance is dropped');
is(state_of('src', 'a'), 'streaming', '(a) dropping the old instance after the switch is harmless');

# ---------------------------------------------------------------------------
# (b) two tables, cross-table transactions, switches at different LSNs
# ---------------------------------------------------------------------------
sub cross_tx
{
	my ($i, $x, $y) = @_;
	my $b1 = defined $x ? "INSERT INTO dbo.b1 (id, v, x) VALUES ($i, $i, $x)" : "INSERT INTO dbo.b1 (id, v) VALUES ($i, $i)";
	my $b2 = defined $y ? "INSERT INTO dbo.b2 (id, v, y) VALUES ($i, $i, $y)" : "INSERT INTO dbo.b2 (id, v) VALUES ($i, $i)";
	return "BEGIN TRANSACTION; $b1; $b2; UPDATE dbo.b1 SET v = v + 100 WHERE id = 1; COMMIT";
}
$si->tsql_ok(cross_tx(1), cross_tx(2), cross_tx(3));
$si->tsql_ok(q{ALTER TABLE dbo.b1 ADD x int NULL},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'b1', @role_name = NULL, @capture_instance = N'dbo_b1_v2'});
$si->tsql_ok(cross_tx(4, 40), cross_tx(5, 50), cross_tx(6, 60));
$si->tsql_ok(q{ALTER TABLE dbo.b2 ADD y int NULL},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'b2', @role_name = NULL, @capture_instance = N'dbo_b2_v2'});
$si->tsql_ok(cross_tx(7, 70, 700), cross_tx(8, 80, 800), cross_tx(9, 90, 900));
wait_rows('b2', 9, '(b) every cross-table transaction reached b2');
wait_rows('b1', 9 * 3, '(b) every cross-table transaction reached b1');
my @b1_rows;
my $v1 = 1;
for my $i (1 .. 9)
{
	# every transaction: its insert, then +100 on row 1 (which never gets an x)
	push @b1_rows, "insert|$i|$i|" . ($i >= 4 ? $i * 10 : '');
	push @b1_rows, "update_before|1|$v1|", 'update_after|1|' . ($v1 + 100) . '|';
	$v1 += 100;
}
is(staging('b1', 'id', 'v', 'x'), join("\n", @b1_rows), '(b) b1: exact contents, x from its switch on');
is( staging('b2', 'id', 'v', 'y'),
	join("\n", map { "insert|$_|$_|" . ($_ >= 7 ? $_ * 100 : '') } 1 .. 9),
	'(b) b2: exact contents, y from its switch on');
is( $node->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE b1._cdc_lsn::text = b2._cdc_lsn::text) || '/' || count(*)
  FROM public.src_dbo_b1 b1 JOIN public.src_dbo_b2 b2 USING (id)
 WHERE b1._cdc_op = 'insert'}),
	'9/9', '(b) each cross-table transaction has one commit LSN in both staging tables, across both switches');
is(switches('b1') . ' ' . switches('b2'), 'dbo_b1>dbo_b1_v2|t|{x}|{} dbo_b2>dbo_b2_v2|t|{y}|{}',
	'(b) history: both tables switched');
is( $node->safe_psql('postgres', q{
SELECT count(DISTINCT switch_lsn::text) FROM mssql_cdc.capture_instance_switches s
  JOIN mssql_cdc.tables t USING (table_id) WHERE t.source_table IN ('b1', 'b2')}),
	'2', '(b) at two different LSNs');
is( $node->safe_psql('postgres', q{
SELECT count(DISTINCT checkpoint_lsn::text) FROM mssql_cdc.status
 WHERE server = 'src' AND source_table IN ('dbo.a', 'dbo.b1', 'dbo.b2', 'dbo.k')}),
	'1', '(b) the tables still share their windows (one checkpoint)');

# ---------------------------------------------------------------------------
# (c) SIGKILLs of the worker around a switch
# ---------------------------------------------------------------------------
sub worker_pid
{
	my ($ret, $out) = $node->psql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mssql_cdc worker'
		   AND application_name = 'mssql_cdc worker src'});
	return ($ret == 0 && $out =~ /^(\d+)$/) ? $1 : undef;
}

sub kill_worker
{
	for (1 .. 200)
	{
		my $pid = worker_pid();
		return 1 if $pid && kill_worker_and_wait($node, $pid);
		usleep(50_000);
	}
	return 0;
}

my $kills = 0;
$w = start_writer(insert_batches('k', 1, 400));
usleep(700_000);
$kills += kill_worker();
ok( $node->poll_query_until('postgres', q{
SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = 'mssql_cdc worker src'}),
	'(c) the worker runs again after the first crash');

# A kill inside the switch transaction, for certain: a session holds a
# SHARE lock on the history table, so the worker waits there after it
# added the staging column and recorded the new instance, but before its
# history row, its rows and its checkpoint.
sub history_locked
{
	my ($ret, $out) = $node->psql('postgres', q{SELECT count(*) FROM pg_locks
	  WHERE relation = 'mssql_cdc.capture_instance_switches'::regclass AND mode = 'ShareLock' AND granted});
	return $ret == 0 && $out eq '1';
}
my ($locker, $locker_out, $locker_err);
my $locked = 0;
for (1 .. 300)
{
	# (again if it could not connect: the cluster may still be restarting)
	if (!$locker || !$locker->pumpable)
	{
		$locker = IPC::Run::start(
			[ 'psql', '-X', '-d', $node->connstr('postgres'), '-c',
			  'BEGIN; LOCK TABLE mssql_cdc.capture_instance_switches IN SHARE MODE; SELECT pg_sleep(120); COMMIT' ],
			'>', \$locker_out, '2>', \$locker_err);
	}
	last if ($locked = history_locked());
	usleep(100_000);
}
ok($locked, '(c) the history table is locked');
$si->tsql_ok(q{ALTER TABLE dbo.k ADD c nvarchar(20) NULL DEFAULT N'dflt'},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'k', @role_name = NULL, @capture_instance = N'dbo_k_v2'});
ok( $node->poll_query_until('postgres', q{
SELECT count(*) = 1 FROM pg_locks l JOIN pg_stat_activity a USING (pid)
 WHERE a.backend_type = 'mssql_cdc worker' AND NOT l.granted
   AND l.relation = 'mssql_cdc.capture_instance_switches'::regclass}),
	'(c) the worker waits inside its switch transaction');
is( $node->safe_psql('postgres', q{
SELECT (SELECT count(*) FROM pg_attribute WHERE attrelid = 'public.src_dbo_k'::regclass AND attname = 'c')
       || '|' || (SELECT capture_instance FROM mssql_cdc.tables WHERE source_table = 'k')}),
	'0|dbo_k', '(c) nothing of the switch is visible before its commit');
# The worker waits in its first window from S on, so everything before S is
# committed: dropping the old instance now loses nothing, and after the
# crash the worker must switch although its recorded instance is gone.
$si->tsql_ok(q{EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'k', @capture_instance = N'dbo_k'});
$kills += kill_worker();
$locker->finish;				# ended by the crash restart

# more kills right after the restarts, while the worker switches again
for my $delay (0, 0, 300_000, 0)
{
	$node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'mssql_cdc worker' AND application_name = 'mssql_cdc worker src'});
	usleep($delay);
	$kills += kill_worker();
}
finish_writer($w);
cmp_ok($kills, '>=', 5, "(c) $kills SIGKILLs of the worker");
wait_rows('k', 400, '(c) all 400 inserts arrived after the crashes');
is(staging('k', 'id', 'v'), join("\n", map { "insert|$_|$_" } 1 .. 400),
	'(c) every change exactly once, in commit order');
my ($kb, $ka, $kall) = split(/\|/, split_at_switch('k', 'c', 'dflt'));
is($kb + $ka, $kall, "(c) the switch LSN splits the inserts exactly ($kb old, $ka new)");
is(switches('k'), 'dbo_k>dbo_k_v2|t|{c}|{}', '(c) history: exactly one switch');
is(recorded_ci('k'), 'dbo_k_v2', '(c) the new capture instance is recorded');

# ---------------------------------------------------------------------------
# (d) the capture instance is dropped with no successor
# ---------------------------------------------------------------------------
$si->tsql_ok(q{INSERT INTO dbo.d VALUES (1, 1)}, q{INSERT INTO dbo.d VALUES (2, 2)});
wait_rows('d', 2, '(d) rows before the drop arrived');
$si->tsql_ok(q{EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'd', @capture_instance = N'dbo_d'});
ok($node->poll_query_until('postgres', q{SELECT state = 'error' FROM mssql_cdc.status WHERE source_table = 'dbo.d'}),
	'(d) a dropped capture instance puts the table into state error');
is( last_error('src', 'd'),
	qq{Capture instance "dbo_d" of table dbo.d was dropped on server "src" (sys.sp_cdc_disable_table), and the table has no other capture instance: its changes can no longer be read.\n}
	  . q{Enable a new capture instance (EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'd', @role_name = NULL) and call mssql_cdc.resnapshot() to copy the table again, or stop capturing it with mssql_cdc.remove_table().},
	'(d) the error names the capture instance, says it was dropped, and how to recover');
like($node->safe_psql('postgres', q{SELECT last_error FROM mssql_cdc.status WHERE source_table = 'dbo.d'}),
	qr/^Capture instance "dbo_d" of table dbo\.d was dropped/, '(d) status shows it');
is(condition_of('src', 'd'), 'capture_instance_missing', '(d) status condition capture_instance_missing');
is(staging('d', 'id', 'v'), "insert|1|1\ninsert|2|2", '(d) the staging data is untouched');
is(state_of('src', 'a'), 'streaming', '(d) the other tables go on');

# recovery: a new capture instance (with a new column), then resnapshot
$si->tsql_ok(q{ALTER TABLE dbo.d ADD note nvarchar(10) NULL},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'd', @role_name = NULL, @capture_instance = N'dbo_d_v2'},
	q{UPDATE dbo.d SET note = N'n1' WHERE id = 1},
	q{INSERT INTO dbo.d VALUES (3, 3, N'three')});
usleep(500_000);
$node->safe_psql('postgres', q{SELECT mssql_cdc.resnapshot('src', 'dbo.d')});
ok( $node->poll_query_until('postgres',
		q{SELECT state = 'streaming' AND snapshot_rows = 3 FROM mssql_cdc.status WHERE source_table = 'dbo.d'}),
	'(d) resnapshot copied the table again')
  or diag $node->safe_psql('postgres', q{SELECT * FROM mssql_cdc.status WHERE source_table = 'dbo.d'});
$si->tsql_ok(q{INSERT INTO dbo.d VALUES (4, 4, N'four')});
wait_rows('d', 6, '(d) streaming goes on after the recovery');
is( staging('d', 'id', 'v', 'note'),
	join("\n", 'insert|1|1|', 'insert|2|2|', 'snapshot|1|1|n1', 'snapshot|2|2|', 'snapshot|3|3|three',
		'insert|4|4|four'),
	'(d) exact data after recovery: history kept, new snapshot, new changes with the new column');
is(switches('d'), 'dbo_d>dbo_d_v2|f|{note}|{}', '(d) history: the snapshot adopted the new instance');

# ---------------------------------------------------------------------------
# (e) CDC disabled on the database: every table of the source
# ---------------------------------------------------------------------------
$si->tsql_ok('USE other', q{INSERT INTO dbo.e1 VALUES (1, 1)}, q{INSERT INTO dbo.e2 VALUES (1, 1)});
wait_rows($_, 1, "(e) $_: the row before disabling arrived") for qw(e1 e2);
$si->tsql_ok('USE other', q{EXEC sys.sp_cdc_disable_db});
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 2 FROM mssql_cdc.status WHERE server = 'src2' AND state = 'error'}),
	'(e) sys.sp_cdc_disable_db puts every table of the source into state error');
my $disabled = qq{Change data capture was disabled on database "other" of server "src2" (sys.sp_cdc_disable_db): its capture instances and their changes are gone.\n}
  . q{Run EXEC sys.sp_cdc_enable_db and sys.sp_cdc_enable_table for the table on SQL Server, then call mssql_cdc.resnapshot() to copy it again.};
is(last_error('src2', $_), $disabled, "(e) $_: the error says CDC was disabled on the database") for qw(e1 e2);
is(condition_of('src2', $_), 'cdc_disabled', "(e) $_: status condition cdc_disabled") for qw(e1 e2);
is(staging($_, 'id', 'v'), 'insert|1|1', "(e) $_: the staging data is untouched") for qw(e1 e2);
is(state_of('src', 'a'), 'streaming', '(e) the other source goes on');

$si->tsql_ok('USE other', q{EXEC sys.sp_cdc_enable_db},
	map({ "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
		qw(e1 e2)),
	q{INSERT INTO dbo.e1 VALUES (2, 2)});
usleep(500_000);
$node->safe_psql('postgres', qq{SELECT mssql_cdc.resnapshot('src2', 'dbo.$_')}) for qw(e1 e2);
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 2 FROM mssql_cdc.status WHERE server = 'src2' AND state = 'streaming'}),
	'(e) after enabling CDC again, resnapshot brings both tables back');
$si->tsql_ok('USE other', q{INSERT INTO dbo.e1 VALUES (3, 3)}, q{DELETE FROM dbo.e2 WHERE id = 1});
wait_rows('e1', 4, '(e) e1 streams again');
wait_rows('e2', 3, '(e) e2 streams again');
is(staging('e1', 'id', 'v'), join("\n", 'insert|1|1', 'snapshot|1|1', 'snapshot|2|2', 'insert|3|3'),
	'(e) e1: exact data after recovery');
is(staging('e2', 'id', 'v'), join("\n", 'insert|1|1', 'snapshot|1|1', 'delete|1|1'),
	'(e) e2: exact data after recovery');

# ---------------------------------------------------------------------------
# (f) a column type changed between the capture instances
# ---------------------------------------------------------------------------
$si->tsql_ok(q{INSERT INTO dbo.f VALUES (1, 1.50)});
wait_rows('f', 1, '(f) the row before the type change arrived');
$si->tsql_ok(q{ALTER TABLE dbo.f ALTER COLUMN amount decimal(12,2) NULL},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'f', @role_name = NULL, @capture_instance = N'dbo_f_v2'},
	q{INSERT INTO dbo.f VALUES (2, 1234567890.12)});
ok($node->poll_query_until('postgres', q{SELECT state = 'error' FROM mssql_cdc.status WHERE source_table = 'dbo.f'}),
	'(f) a changed type puts the table into state error');
is( last_error('src', 'f'),
	qq{Column "amount" of table dbo.f changed type: staging table public.src_dbo_f has numeric(10,2), but capture instance "dbo_f_v2" has decimal(12,2), which maps to numeric(12,2). mssql_cdc does not change staging column types by itself.\n}
	  . q{Either change the staging column yourself (ALTER TABLE public.src_dbo_f ALTER COLUMN amount TYPE numeric(12,2)) and call mssql_cdc.resnapshot(), or remove the table with mssql_cdc.remove_table() and add it again.},
	'(f) the error names the column and both types, with a hint');
is(condition_of('src', 'f'), 'source_schema_changed', '(f) status condition source_schema_changed');
is(staging('f', 'id', 'amount'), 'insert|1|1.50', '(f) the staging data is untouched');
is(recorded_ci('f'), 'dbo_f', '(f) no switch was recorded');

$node->safe_psql('postgres', q{ALTER TABLE public.src_dbo_f ALTER COLUMN amount TYPE numeric(12,2)});
$node->safe_psql('postgres', q{SELECT mssql_cdc.resnapshot('src', 'dbo.f')});
ok($node->poll_query_until('postgres', q{SELECT capture_instance = 'dbo_f_v2' FROM mssql_cdc.tables WHERE source_table = 'f'}),
	'(f) after the manual ALTER and resnapshot the table switches');
$si->tsql_ok(q{INSERT INTO dbo.f VALUES (3, 3)});
wait_rows('f', 4, '(f) streaming goes on');
is( staging('f', 'id', 'amount'),
	join("\n", 'insert|1|1.50', 'snapshot|1|1.50', 'snapshot|2|1234567890.12', 'insert|3|3.00'),
	'(f) exact data after recovery');
is(state_of('src', 'f'), 'streaming', '(f) status: streaming again');

# ---------------------------------------------------------------------------
# (g) the old instance dropped before the worker reached the switch point
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', q{SELECT mssql_cdc.pause('src')});
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = 'mssql_cdc worker src'}),
	'(g) the source is paused');
$si->tsql_ok(q{INSERT INTO dbo.g VALUES (1, 1)},
	q{ALTER TABLE dbo.g ADD z int NULL},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'g', @role_name = NULL, @capture_instance = N'dbo_g_v2'},
	q{INSERT INTO dbo.g VALUES (2, 2, 2)});
usleep(500_000);
$si->tsql_ok(q{EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'g', @capture_instance = N'dbo_g'});
$node->safe_psql('postgres', q{SELECT mssql_cdc.resume('src')});
ok($node->poll_query_until('postgres', q{SELECT state = 'error' FROM mssql_cdc.status WHERE source_table = 'dbo.g'}),
	'(g) the gap is an error');
like( last_error('src', 'g'),
	qr/^Capture instance "dbo_g" of table dbo\.g was dropped before its changes were copied up to the start of capture instance "dbo_g_v2": the changes from 0x[0-9A-F]{20} to just before 0x[0-9A-F]{20} exist in neither and are lost\.\nCall mssql_cdc\.resnapshot\(\)/,
	'(g) the error says which changes are lost and how to recover');
is(condition_of('src', 'g'), 'changes_lost', '(g) status condition changes_lost');
is(count_rows('g'), '0', '(g) nothing was skipped silently');
is(state_of('src', 'a'), 'streaming', '(g) the other tables go on');

done_testing();
