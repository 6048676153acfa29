# ALTER SERVER / ALTER USER MAPPING reach a running worker without a
# pause/resume: the worker notices the catalog change, reconnects with the
# new settings (a broken password fails with 18456 and is recorded), and
# once the mapping is fixed streams on with every change exactly once.
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

my $si = StandIn->start(capture_interval => 0.1);
plan skip_all => 'changes the login password of the test server' if $si->is_real;
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.a (id int NOT NULL PRIMARY KEY, val int NOT NULL)},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'a', @role_name = NULL});

my $node = PostgreSQL::Test::Cluster->new('alter_server');
$node->init;
$si->setup_node($node);
$node->start;
$si->create_source($node, 'src');
$si->add_table_when_started($node,
	q{SELECT mssql_cdc.add_table('src', 'dbo.a', snapshot_mode => 'never')});

my @expected;
my $next_id = 1;

sub insert_row
{
	my $id = $next_id++;
	$si->tsql_ok("INSERT INTO dbo.a VALUES ($id, " . ($id * 7) . ')');
	push @expected, "insert|$id|" . ($id * 7);
}

sub staging_matches
{
	my ($what) = @_;
	my $n = scalar @expected;
	ok($node->poll_query_until('postgres', "SELECT count(*) >= $n FROM public.src_dbo_a"),
		"$what: all $n rows arrived")
	  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status');
	my @got = split /\n/, $node->safe_psql('postgres',
		"SELECT _cdc_op || '|' || id || '|' || val FROM public.src_dbo_a ORDER BY _cdc_lsn, _cdc_seqval, _cdc_op");
	is_deeply(\@got, \@expected, "$what: staging equals the source history");
}

sub worker_pid { return wait_worker_pid($node, 180) }

$node->poll_query_until('postgres',
	q{SELECT state = 'streaming' FROM mssql_cdc.status}) or die 'never streamed';
insert_row() for 1 .. 3;
staging_matches('before any change');

# --- a harmless option change: the same process reconnects and goes on
my $pid = worker_pid();
my $from = -s $node->logfile;
$node->safe_psql('postgres', q{ALTER SERVER src OPTIONS (SET query_timeout '9')});
$node->wait_for_log(qr/source "src": server options or user mapping changed, reconnecting/, $from);
insert_row() for 1 .. 3;
staging_matches('after ALTER SERVER');
is(worker_pid(), $pid, 'ALTER SERVER: the same worker process applied it (no restart)');

# --- a wrong password: the worker reconnects at once, fails with 18456, and
# says so; nothing is applied meanwhile
$from = -s $node->logfile;
$node->safe_psql('postgres',
	q{ALTER USER MAPPING FOR CURRENT_USER SERVER src OPTIONS (SET password 'not-the-password')});
$node->wait_for_log(qr/source "src": server options or user mapping changed, reconnecting/, $from);
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) > 0 FROM mssql_cdc.errors WHERE remote_error_number = 18456}),
	'wrong password: the failed login is recorded with 18456');
insert_row() for 1 .. 2;
usleep(500_000);
is($node->safe_psql('postgres', 'SELECT count(*) FROM public.src_dbo_a'),
	scalar(@expected) - 2, 'wrong password: nothing applied');
# (the TAP cluster logs every statement itself; the worker's lines must not)
unlike(join('', grep { !/statement: / } split /^/, slurp_file($node->logfile)),
	qr/not-the-password/, 'the worker does not log the wrong password');

# --- encryption 'require' against a server without TLS (the stand-in has
# none): a clear condition, nothing applied; 'request' recovers, in plain
# text and with a WARNING (t/065_tls.pl has the rest of TLS)
$node->safe_psql('postgres',
	"ALTER USER MAPPING FOR CURRENT_USER SERVER src OPTIONS (SET password '" . $si->password . "')");
$node->safe_psql('postgres', q{ALTER SERVER src OPTIONS (SET encryption 'require')});
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) > 0 FROM mssql_cdc.errors WHERE condition = 'encryption_unavailable'}),
	"encryption 'require' without TLS on the server: condition encryption_unavailable")
  or diag $node->safe_psql('postgres', 'SELECT condition, message, hint FROM mssql_cdc.errors ORDER BY error_id DESC LIMIT 3');
like($node->safe_psql('postgres',
		q{SELECT hint FROM mssql_cdc.errors WHERE condition = 'encryption_unavailable' ORDER BY error_id DESC LIMIT 1}),
	qr/not offer TLS/, "the hint says SQL Server may not offer TLS");
insert_row();
usleep(500_000);
is($node->safe_psql('postgres', 'SELECT count(*) FROM public.src_dbo_a'),
	scalar(@expected) - 3, 'encryption required: nothing applied');
my $warned_from = -s $node->logfile;
$node->safe_psql('postgres', q{ALTER SERVER src OPTIONS (SET encryption 'request')});
$node->wait_for_log(qr/WARNING:  SQL Server for server "src" offers no TLS encryption: connecting without it/,
	$warned_from);

# --- fixed: streaming resumes, exactly once
$node->safe_psql('postgres',
	"ALTER USER MAPPING FOR CURRENT_USER SERVER src OPTIONS (SET password '" . $si->password . "')");
insert_row() for 1 .. 2;
staging_matches('after the mapping was fixed');
is($node->safe_psql('postgres', q{SELECT state FROM mssql_cdc.status}), 'streaming',
	'state is streaming again');

$node->stop;
$si->stop;
done_testing();
