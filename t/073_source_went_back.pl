# A source that went back in time (issue 12, point 3): a restore from backup
# (new recovery fork), a failover that lost the log's tail (same identity),
# a server repointed at another copy, and the same seen through a login that
# may not read sys.database_recovery_status.  Each time the new source's
# history differs at or below the checkpoint; streaming on would skip or
# mix changes.  The worker must park the source's tables with condition
# source_went_back and copy nothing of the new history, and
# mssql_cdc.resnapshot() accepts the new timeline.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;
use Time::HiRes qw(time usleep);

my $si = StandIn->start(capture_interval => 0.1, databases => ['other']);
for my $db (qw(cdcdb other))
{
	$si->tsql_ok(
		"USE $db",
		q{EXEC sys.sp_cdc_enable_db},
		q{CREATE TABLE dbo.h (id int NOT NULL PRIMARY KEY, v int NOT NULL)},
		q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'h', @role_name = NULL},
		($db eq 'cdcdb' ? (q{CREATE LOGIN lim WITH PASSWORD = 'L1mited!'}) : ()),
		q{CREATE USER lim FOR LOGIN lim},
		q{ALTER ROLE db_owner ADD MEMBER lim});
}
# the other copy has a longer history of its own
$si->tsql_ok('USE other', map { "INSERT INTO dbo.h VALUES ($_, -$_)" } 1 .. 30);
# a login that may not see sys.database_recovery_status (VIEW ANY DATABASE)
$si->tsql_ok(q{DENY VIEW ANY DATABASE TO lim});

my $node = PostgreSQL::Test::Cluster->new('went_back');
$node->init;
$si->setup_node($node);
$node->start;
$si->create_source($node, 'src');
$node->safe_psql('postgres', sprintf(q{
CREATE SERVER lim FOREIGN DATA WRAPPER mssql_cdc
  OPTIONS (host '%s', port '%s', database 'cdcdb', query_timeout '10', login_timeout '5');
CREATE USER MAPPING FOR CURRENT_USER SERVER lim OPTIONS (username 'lim', password 'L1mited!');
}, $si->host, $si->port));
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('src', 'dbo.h')});
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('lim', 'dbo.h')});

my $next = 1;
my @history;	# "op|id|v" of the current source history, in commit order

sub insert_rows
{
	my ($n) = @_;
	for (1 .. $n)
	{
		my $id = $next++;
		$si->tsql_ok("INSERT INTO dbo.h VALUES ($id, $id)");
		push @history, "insert|$id|$id";
	}
}

sub staging
{
	my ($server) = @_;
	return [ split /\n/, $node->safe_psql('postgres',
		"SELECT _cdc_op || '|' || id || '|' || v FROM public.${server}_dbo_h ORDER BY _cdc_lsn, _cdc_seqval, _cdc_op") ];
}

sub status_of
{
	my ($server) = @_;
	return $node->safe_psql('postgres',
		"SELECT state || '|' || coalesce(condition, '') FROM mssql_cdc.status WHERE server = '$server'");
}

sub max_lsn
{
	my ($db) = @_;
	my $out = $si->tsql_ok("USE $db", 'SELECT sys.fn_cdc_get_max_lsn()');
	my ($lsn) = $out =~ /^\s*([0-9a-fA-F]{20})\s*$/m;
	return lc $lsn;
}

sub checkpoint_of
{
	my ($server) = @_;
	my $t = $node->safe_psql('postgres', "SELECT checkpoint_lsn FROM mssql_cdc.status WHERE server = '$server'");
	$t =~ s/^0x//;
	return lc $t;
}

# wait until the source's max LSN is past $lsn, writing rows of the new history
sub write_past
{
	my ($db, $lsn) = @_;
	my $deadline = time + 120;
	while (max_lsn($db) le $lsn && time < $deadline)
	{
		insert_rows(1) if $db eq 'cdcdb';
		usleep(100_000);
	}
	insert_rows(3) if $db eq 'cdcdb';
	# a few polls of the worker with the new history in reach
	usleep(1_500_000);
}

sub streams_exactly
{
	my ($server, $what) = @_;
	my $n = scalar @history;
	ok( $node->poll_query_until('postgres',
			"SELECT count(*) = $n FROM public.${server}_dbo_h WHERE _cdc_op <> 'snapshot'"),
		"$server: $what: all changes arrived")
	  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status');
}

sub went_back
{
	my ($server, $what, $before, $evidence) = @_;
	ok( $node->poll_query_until('postgres',
			"SELECT state = 'error' FROM mssql_cdc.status WHERE server = '$server'"),
		"$server: $what: the table stops")
	  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status');
	is(status_of($server), 'error|source_went_back', "$server: $what: condition source_went_back");
	is_deeply(staging($server), $before, "$server: $what: nothing of the new history was copied");
	my $err = $node->safe_psql('postgres',
		"SELECT last_error || E'\\n' || coalesce(hint, '') FROM mssql_cdc.status WHERE server = '$server'");
	like($err, $evidence, "$server: $what: the message names the evidence");
	like($err, qr/mssql_cdc\.resnapshot\(\)/, "$server: $what: the hint says how to accept the new timeline");
}

# accept the new timeline as doc/troubleshooting.md says: the staging rows of
# the lost history go (their LSNs are reused by the new one), then a new
# snapshot equal to the source, then streaming
sub accept_new_timeline
{
	my ($server, $db, $what) = @_;
	$node->safe_psql('postgres',
		"TRUNCATE public.${server}_dbo_h; SELECT mssql_cdc.resnapshot('$server', 'dbo.h')");
	ok( $node->poll_query_until('postgres',
			"SELECT state = 'streaming' FROM mssql_cdc.status WHERE server = '$server'"),
		"$server: $what: after resnapshot the table streams again")
	  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status');
	my ($src) = $si->tsql_ok("USE $db",
		q{SELECT CONCAT(COUNT(*), '|', SUM(id), '|', SUM(v)) FROM dbo.h}) =~ /^\s*(\d+\|-?\d+\|-?\d+)\s*$/m;
	is( $node->safe_psql('postgres',
			"SELECT count(*) || '|' || sum(id) || '|' || sum(v) FROM public.${server}_dbo_h WHERE _cdc_op = 'snapshot'"),
		$src, "$server: $what: the new snapshot is exactly the source");
}

ok($node->poll_query_until('postgres', q{SELECT count(*) = 2 FROM mssql_cdc.status WHERE state = 'streaming'}),
	'both servers stream');
insert_rows(5);
streams_exactly('src', 'before any restore');
streams_exactly('lim', 'before any restore');

# ---------------------------------------------------------------------------
# (a) restore from backup: the database as of an earlier LSN, a new recovery
# fork, new transactions reuse the lost LSNs and go past the checkpoint
# ---------------------------------------------------------------------------
my $restore_point = max_lsn('cdcdb');
insert_rows(5);
streams_exactly('src', 'before the restore');
streams_exactly('lim', 'before the restore');
my $src_before = staging('src');
my $lim_before = staging('lim');
my $checkpoint = checkpoint_of('src');
like($si->ctl('restore', "lsn=0x$restore_point"), qr/"transactions_undone": 5/, '(a) restored five transactions back');
@history = @history[0 .. 4];
write_past('cdcdb', $checkpoint);
went_back('src', '(a) restore', $src_before, qr/restored|recovery fork|below/);
went_back('lim', '(a) restore', $lim_before, qr/below|different history/);
accept_new_timeline('src', 'cdcdb', '(a)');
insert_rows(2);
ok($node->poll_query_until('postgres', "SELECT count(*) = 2 FROM public.src_dbo_h WHERE _cdc_op = 'insert'"),
	'(a) the new timeline streams');
accept_new_timeline('lim', 'cdcdb', '(a) lim');
# lim waits for (d), paused
$node->safe_psql('postgres', q{SELECT mssql_cdc.pause('lim')});
ok($node->poll_query_until('postgres',
	q{SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = 'mssql_cdc worker lim'}),
	'lim is paused');

# ---------------------------------------------------------------------------
# (b) a failover that lost the tail: same database_guid and recovery fork,
# the worker was away while the new primary went past the checkpoint
# ---------------------------------------------------------------------------
insert_rows(3);
ok($node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM mssql_cdc.status WHERE checkpoint_lsn OPERATOR(mssql_cdc.<) source_max_lsn AND server = 'src'}), '(b) src caught up');
$restore_point = max_lsn('cdcdb');
insert_rows(4);
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 4 FROM public.src_dbo_h WHERE id >= " . ($next - 4)),
	'(b) the tail reached the staging table');
$src_before = staging('src');
$checkpoint = checkpoint_of('src');
$node->safe_psql('postgres', q{SELECT mssql_cdc.pause('src')});
$si->ctl('restore', "lsn=0x$restore_point", 'new_fork=false');
write_past('cdcdb', $checkpoint);
$node->safe_psql('postgres', q{SELECT mssql_cdc.resume('src')});
went_back('src', '(b) failover', $src_before, qr/transaction .* no longer|different history/);

# ---------------------------------------------------------------------------
# (b2) the same, seen while connected: the max LSN is below the checkpoint at
# the next poll (the stand-in keeps the connection; identity unchanged)
# ---------------------------------------------------------------------------
accept_new_timeline('src', 'cdcdb', '(b)');
$restore_point = max_lsn('cdcdb');
insert_rows(3);
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 3 FROM public.src_dbo_h WHERE _cdc_op = 'insert' AND id >= " . ($next - 3)),
	'(b2) three more rows arrived');
$src_before = staging('src');
$si->ctl('capture_freeze');
$si->ctl('restore', "lsn=0x$restore_point", 'new_fork=false', 'keep_connections=true');
went_back('src', '(b2) max LSN below the checkpoint', $src_before, qr/below the position/);
$si->ctl('capture_resume');

# ---------------------------------------------------------------------------
# (c) the server repointed at another copy (its own database_guid)
# ---------------------------------------------------------------------------
accept_new_timeline('src', 'cdcdb', '(b2)');
$src_before = staging('src');
$node->safe_psql('postgres', q{SELECT mssql_cdc.pause('src')});
$node->safe_psql('postgres', q{ALTER SERVER src OPTIONS (SET database 'other')});
$node->safe_psql('postgres', q{SELECT mssql_cdc.resume('src')});
went_back('src', '(c) another copy', $src_before, qr/database_guid|another database|different history|below/);

# ---------------------------------------------------------------------------
# (d) the same through a login that may not read the identity: detected by
# the transaction fingerprint alone (the log says identity is unknown)
# ---------------------------------------------------------------------------
$lim_before = staging('lim');
my $from = -s $node->logfile;
$node->safe_psql('postgres', q{ALTER SERVER lim OPTIONS (SET database 'other')});
write_past('other', checkpoint_of('lim'));
$node->safe_psql('postgres', q{SELECT mssql_cdc.resume('lim')});
went_back('lim', '(d) another copy, identity not readable', $lim_before,
	qr/transaction .* no longer|different history|below/);
ok($node->wait_for_log(qr/sys\.database_recovery_status.*not visible to the login/, $from),
	'(d) the log says the identity could not be read');

$node->stop;
$si->stop;
done_testing();
