# The FreeTDS session layer against the SQL Server stand-in, through
# mssql_cdc.check_server(): a working login and all six checks (before and
# after enabling CDC with tsql), the error users see for a wrong password
# (without any password ever reaching the log), a refused connection, the
# encryption option, a stalled server (query_timeout), pg_terminate_backend
# and statement_timeout while the server stalls (gone/canceled within a
# second), a connection dropped mid-result (clean error, the next call
# reconnects), and the function's privileges.
use strict;
use warnings;

use IO::Socket::INET;
use FindBin;
use lib "$FindBin::RealBin/lib";
use IPC::Run;
use StandIn;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

# ---------------------------------------------------------------------------
# The stand-in, on free loopback ports (t/lib/StandIn.pm stops it at exit)
# ---------------------------------------------------------------------------
my $si = StandIn->start;
my ($tds_port, $control_port) = ($si->port, $si->control_port);
note "stand-in on port $tds_port, control port $control_port";

sub standin_ctl { return $si->ctl(@_); }

# Run T-SQL batches on the stand-in with FreeTDS's tsql; returns its output.
sub tsql { return $si->tsql(@_); }

# A TCP port on 127.0.0.1 where nothing listens: bind one, close it.
sub closed_port
{
	my $sock = IO::Socket::INET->new(
		LocalAddr => '127.0.0.1',
		LocalPort => 0,
		Proto => 'tcp',
		Listen => 1) or die "cannot bind: $!";
	my $port = $sock->sockport;
	close $sock;
	return $port;
}

# ---------------------------------------------------------------------------
# The Postgres node
# ---------------------------------------------------------------------------
my $node = PostgreSQL::Test::Cluster->new('tds_session');
$node->init;
# log_statement = none: CREATE USER MAPPING carries passwords in its text,
# and this test asserts that no password reaches the log by any other path.
# Verbose logging is switched on only after the setup below, because at
# debug levels PostgreSQL itself logs the text of the DDL statements.
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'mssql_cdc'
mssql_cdc.database = 'postgres'
log_statement = none
});
$node->start;

my $bad_password = 'Wr0ng-Secret-7f3a9';
my $refused_port = closed_port();

# A listener that never answers: the kernel completes the TCP handshake
# from the backlog, but nobody ever reads the PRELOGIN packet.
my $silent = IO::Socket::INET->new(
	LocalAddr => '127.0.0.1',
	LocalPort => 0,
	Proto => 'tcp',
	Listen => 5) or die "cannot bind: $!";
my $silent_port = $silent->sockport;
$node->safe_psql(
	'postgres', qq{
CREATE EXTENSION mssql_cdc;
CREATE SERVER src FOREIGN DATA WRAPPER mssql_cdc
  OPTIONS (host '127.0.0.1', port '$tds_port', database 'cdcdb',
           query_timeout '2', login_timeout '2', encryption 'off');
CREATE USER MAPPING FOR CURRENT_USER SERVER src
  OPTIONS (username 'sa', password 'Passw0rd!');
CREATE SERVER badpw FOREIGN DATA WRAPPER mssql_cdc
  OPTIONS (host '127.0.0.1', port '$tds_port', database 'cdcdb', login_timeout '2',
           encryption 'off');
CREATE USER MAPPING FOR CURRENT_USER SERVER badpw
  OPTIONS (username 'sa', password '$bad_password');
CREATE SERVER nolistener FOREIGN DATA WRAPPER mssql_cdc
  OPTIONS (host '127.0.0.1', port '$refused_port', database 'cdcdb', login_timeout '2');
CREATE USER MAPPING FOR CURRENT_USER SERVER nolistener
  OPTIONS (username 'sa', password 'Passw0rd!');
CREATE SERVER silent FOREIGN DATA WRAPPER mssql_cdc
  OPTIONS (host '127.0.0.1', port '$silent_port', database 'cdcdb', login_timeout '2');
CREATE USER MAPPING FOR CURRENT_USER SERVER silent
  OPTIONS (username 'sa', password 'Passw0rd!');
CREATE SERVER plain_tds FOREIGN DATA WRAPPER mssql_cdc
  OPTIONS (host '127.0.0.1', port '$tds_port', database 'cdcdb', encryption 'off');
CREATE USER MAPPING FOR CURRENT_USER SERVER plain_tds
  OPTIONS (username 'sa', password 'Passw0rd!');
CREATE SERVER tls_only FOREIGN DATA WRAPPER mssql_cdc
  OPTIONS (host '127.0.0.1', port '$tds_port', database 'cdcdb', encryption 'require',
           login_timeout '2');
CREATE USER MAPPING FOR CURRENT_USER SERVER tls_only
  OPTIONS (username 'sa', password 'Passw0rd!');
CREATE SERVER slow FOREIGN DATA WRAPPER mssql_cdc
  OPTIONS (host '127.0.0.1', port '$tds_port', database 'cdcdb',
           query_timeout '60', login_timeout '5', encryption 'off');
CREATE USER MAPPING FOR CURRENT_USER SERVER slow
  OPTIONS (username 'sa', password 'Passw0rd!');
});

$node->append_conf(
	'postgresql.conf', q{
log_min_messages = debug2
log_min_error_statement = debug2
});
$node->reload;

my $check = q{SELECT check_name, ok, detail FROM mssql_cdc.check_server('%s')};

# ---------------------------------------------------------------------------
# 1. A working source: one row per check, in order; login and database OK
# ---------------------------------------------------------------------------
my $rows = $node->safe_psql('postgres', sprintf($check, 'src'));
note "check_server('src'):\n$rows";
my @names = map { (split /\|/)[0] } split /\n/, $rows;
is_deeply(
	\@names,
	[qw(connect encryption database cdc_enabled snapshot_isolation max_lsn capture_instances
		snapshot_sessions lsn_time_mapping captured_columns index_columns scan_sessions read_path)],
	'check_server reports connect, encryption, the five prerequisites, then the objects the worker reads, in order');
like($rows, qr/^lsn_time_mapping\|f\|Msg 208: Invalid object name 'cdc\.lsn_time_mapping'\.; cdc\.lsn_time_mapping exists once a sysadmin runs EXEC sys\.sp_cdc_enable_db$/m,
	'lsn_time_mapping: missing before sp_cdc_enable_db, and why');
like($rows, qr/^read_path\|f\|no capture instance to read/m, 'read_path: nothing to read yet');
like($rows, qr/^connect\|t\|logged in; \S/m, 'connect: login works, server version shown');
like($rows, qr/^encryption\|f\|not encrypted \(encryption 'off'\)/m,
	"encryption: this stand-in has no TLS, the server says encryption 'off', and the row says so");
like($rows, qr/^database\|t\|current database is "cdcdb"/m, 'database: cdcdb');
like($rows, qr/^cdc_enabled\|f\|change data capture is not enabled/m,
	'cdc_enabled: false before sp_cdc_enable_db');
like($rows, qr/^max_lsn\|f\|sys\.fn_cdc_get_max_lsn\(\) is NULL/m,
	'max_lsn: NULL explained before the capture job ran');
like($rows, qr/^capture_instances\|f\|Msg 22901, Level 16, State 1: The database 'cdcdb' is not enabled/m,
	'capture_instances: a SQL Server error after login becomes the row, not an ERROR');

# ---------------------------------------------------------------------------
# 1b. Make the database a CDC source (with FreeTDS's own tsql, as a DBA
# would) and every check turns green: bit, tinyint, binary(10) and the
# procedure's result set all come through the session layer.
# ---------------------------------------------------------------------------
my $tsql_out = tsql(
	q{EXEC sys.sp_cdc_enable_db},
	q{ALTER DATABASE cdcdb SET ALLOW_SNAPSHOT_ISOLATION ON},
	q{CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, amount decimal(18,4))},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL},
	q{INSERT INTO dbo.orders VALUES (1, 12.5)});
unlike($tsql_out, qr/^Msg \d+/m, 'CDC set up on the stand-in') or diag $tsql_out;
# the capture job records the insert after its polling interval
ok( $node->poll_query_until(
		'postgres',
		"SELECT ok FROM mssql_cdc.check_server('src') WHERE check_name = 'max_lsn'"),
	'max_lsn becomes available once the capture job ran');
$rows = $node->safe_psql('postgres', sprintf($check, 'src'));
note "check_server('src') on a CDC source:\n$rows";
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(check_name, ',') FROM mssql_cdc.check_server('src') WHERE NOT ok"),
	'encryption', 'all checks but encryption (plain text here) pass on a CDC source');
like($rows, qr/^cdc_enabled\|t\|change data capture is enabled/m, 'cdc_enabled: bit read as true');
like($rows, qr/^snapshot_isolation\|t\|ALLOW_SNAPSHOT_ISOLATION is ON/m,
	'snapshot_isolation: tinyint 1 read');
like($rows, qr/^max_lsn\|t\|0x[0-9A-F]{20}$/m, 'max_lsn: binary(10) shown as an LSN literal');
like($rows, qr/^capture_instances\|t\|1 capture instance visible$/m,
	'capture_instances: the one enabled table is counted');
like($rows, qr/^snapshot_sessions\|t\|4 more sessions logged in next to this one \(snapshot_connections 4:/m,
	'snapshot_sessions: the parallel copy\'s sessions (default 4) log in next to the first');
# SQL Server admitting 3 sessions in all (sp_configure 'user connections')
standin_ctl('user_connections', 'max=3');
my $limited = $node->safe_psql('postgres',
	"SELECT ok, detail FROM mssql_cdc.check_server('src') WHERE check_name = 'snapshot_sessions'");
standin_ctl('user_connections', 'max=0');
like($limited, qr/^f\|only 2 of 4 more sessions logged in \(snapshot_connections 4\): Msg 17809, .*copies 2 tables at once and the others wait, or lower snapshot_connections to 2/s,
	'snapshot_sessions: a session limit below snapshot_connections is shown, with the error and what follows');
like($rows, qr/^table dbo\.orders\|t\|source table readable; capture instance dbo_orders; /m,
	'before add_table, the tables of the visible capture instances are checked');

# ---------------------------------------------------------------------------
# 2. Wrong password: ERROR with 18456 and the hint; no password in the log
# ---------------------------------------------------------------------------
my ($ret, $stdout, $stderr) = $node->psql('postgres', sprintf($check, 'badpw'));
isnt($ret, 0, 'wrong password: check_server fails');
like($stderr, qr/could not connect to SQL Server for server "badpw"/,
	'wrong password: message names the server');
like($stderr, qr/DETAIL:\s+Msg 18456, Level 14, State \d+, Line \d+: Login failed for user 'sa'/,
	'wrong password: detail carries SQL Server message 18456');
like($stderr, qr/HINT:\s+Check the username and password of the user mapping for server "badpw"/,
	'wrong password: hint points at the user mapping');
my $log = slurp_file($node->logfile);
like($log, qr/Msg 18456/, 'the failed login is in the server log');
unlike($log, qr/\Q$bad_password\E/, 'the wrong password appears nowhere in the server log');
unlike($log, qr/Passw0rd!/, 'the right password appears nowhere in the server log');

# ---------------------------------------------------------------------------
# 3. Connection refused: 20009-class error with the host/port hint
# ---------------------------------------------------------------------------
($ret, $stdout, $stderr) = $node->psql('postgres', sprintf($check, 'nolistener'));
isnt($ret, 0, 'refused connection: check_server fails');
like($stderr, qr/could not connect to SQL Server for server "nolistener"/,
	'refused connection: message names the server');
like($stderr, qr/db-lib error 200(09|02): .*OS error 111/s,
	'refused connection: db-lib connect error with ECONNREFUSED in detail');
like($stderr, qr/HINT:\s+Check the host and port options of server "nolistener"/,
	'refused connection: hint points at host and port');

# ---------------------------------------------------------------------------
# 3a. A server that accepts TCP but never answers: login_timeout (2 s)
# ---------------------------------------------------------------------------
my $t0 = time;
($ret, $stdout, $stderr) = $node->psql('postgres', sprintf($check, 'silent'));
my $login_elapsed = time - $t0;
note sprintf('login to a silent server failed after %.0f ms', $login_elapsed * 1000);
like($stderr, qr/could not connect to SQL Server for server "silent"/,
	'silent server: connect error');
like($stderr, qr/db-lib error 20003/, 'silent server: detail has the db-lib timeout');
like($stderr, qr/HINT:.*login_timeout/s, 'silent server: hint names login_timeout');
cmp_ok($login_elapsed, '<', 2 + 1, 'silent server: error within login_timeout + 1 s');
close $silent;

# ---------------------------------------------------------------------------
# 3b. Encryption: 'off' logs in without TLS; 'require' against a server
# without TLS (this stand-in has no certificate) fails, saying so
# (t/065_tls.pl has the rest of TLS).
# Both go through the private freetds.conf, which must not outlive the login.
# ---------------------------------------------------------------------------
$rows = $node->safe_psql('postgres', sprintf($check, 'plain_tds'));
like($rows, qr/^connect\|t\|/m, "encryption 'off': login works");
($ret, $stdout, $stderr) = $node->psql('postgres', sprintf($check, 'tls_only'));
isnt($ret, 0, "encryption 'require' without server TLS: check_server fails");
like($stderr, qr/could not connect to SQL Server for server "tls_only": the server does not offer TLS encryption/,
	"encryption 'require': connect error names the server and the reason");
like($stderr, qr/DETAIL:.*SQL Server answered PRELOGIN with ENCRYPT_NOT_SUP \(0x02\)/s,
	"encryption 'require': detail has what SQL Server answered");
like($stderr, qr/HINT:.*Server "tls_only" requires TLS \(encryption 'require', the default\), but SQL Server does not offer TLS/s,
	"encryption 'require': hint names the encryption option and says TLS was not offered");
like($stderr, qr/HINT:.*ALTER SERVER tls_only OPTIONS \(ADD encryption 'off'\)/s,
	"encryption 'require': hint says how to allow an unencrypted connection");
unlike($stderr, qr/Check that the port belongs to SQL Server/,
	"encryption 'require': not the generic login hint");
my @leftover = glob($node->data_dir . '/base/pgsql_tmp/*freetds*');
is(scalar @leftover, 0, 'no private freetds.conf is left behind');

# ---------------------------------------------------------------------------
# 4. A stalled server: query_timeout (2 s) ends the wait with a clear error
# ---------------------------------------------------------------------------
standin_ctl('stall', 'seconds=30', 'times=1');
$t0 = time;
($ret, $stdout, $stderr) = $node->psql('postgres', sprintf($check, 'src'));
my $elapsed = time - $t0;
note sprintf('stalled check_server returned after %.0f ms', $elapsed * 1000);
isnt($ret, 0, 'stall: check_server fails');
like($stderr, qr/timed out waiting for SQL Server \(server "src"\)/,
	'stall: the error says the server timed out');
like($stderr, qr/db-lib error 20003/, 'stall: detail has db-lib error 20003');
like($stderr, qr/query_timeout/, 'stall: hint names query_timeout');
cmp_ok($elapsed, '<', 2 + 1, 'stall: error within query_timeout + 1 s');
standin_ctl('clear');

# the same server works right after (the timed-out connection was dropped)
$rows = $node->safe_psql('postgres', sprintf($check, 'src'));
like($rows, qr/^connect\|t\|/m, 'after a timeout the next call connects again');

# ---------------------------------------------------------------------------
# 5. pg_terminate_backend while the server stalls: gone in < 1 s
# ---------------------------------------------------------------------------
standin_ctl('stall', 'seconds=60', 'times=1');
my ($bg_out, $bg_err) = ('', '');
my $bg = IPC::Run::start(
	[
		'psql', '-X', '-A', '-t', '-d', $node->connstr('postgres'),
		'-c', "SET application_name = 'tds_stall_victim'; " . sprintf($check, 'slow')
	],
	'<', \undef, '>', \$bg_out, '2>', \$bg_err);
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity
		  WHERE application_name = 'tds_stall_victim' AND state = 'active'
		    AND query LIKE '%check_server%'"),
	'the victim backend is running check_server');
my $victim = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE application_name = 'tds_stall_victim'");
# let it get into the stalled wait for the server's reply; unstalled,
# check_server takes milliseconds, so still running means waiting
usleep(1_500_000);
is( $node->safe_psql('postgres',
		"SELECT state FROM pg_stat_activity WHERE pid = $victim"),
	'active', 'the victim is still waiting for the stalled server');
$t0 = time;
$node->safe_psql('postgres', "SELECT pg_terminate_backend($victim)");
my $gone = 0;
while (time - $t0 < 30)
{
	if ($node->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE pid = $victim") eq '0')
	{
		$gone = 1;
		last;
	}
	usleep(20_000);
}
my $terminate_ms = (time - $t0) * 1000;
diag sprintf('terminated backend gone after %.0f ms', $terminate_ms);
ok($gone, 'the terminated backend exits');
cmp_ok($terminate_ms, '<', 1000, 'the terminated backend is gone in < 1 s');
$bg->finish;
like($bg_err, qr/terminating connection due to administrator command/,
	'the victim sees the ordinary termination message');
standin_ctl('clear');
$log = slurp_file($node->logfile);
unlike($log, qr/server process .* was terminated by signal/,
	'no backend crashed');

# ---------------------------------------------------------------------------
# 5b. statement_timeout (a query cancel) also ends the wait promptly, with
# PostgreSQL's own message, though the server's query_timeout is 60 s
# ---------------------------------------------------------------------------
standin_ctl('stall', 'seconds=60', 'times=1');
$t0 = time;
($ret, $stdout, $stderr) = $node->psql('postgres',
	"SET statement_timeout = '1s'; " . sprintf($check, 'slow'));
$elapsed = time - $t0;
note sprintf('statement_timeout canceled check_server after %.0f ms', $elapsed * 1000);
like($stderr, qr/canceling statement due to statement timeout/,
	'statement_timeout cancels the wait for a stalled server');
cmp_ok($elapsed, '<', 1 + 1, 'the cancel takes effect within a second');
standin_ctl('clear');

# ---------------------------------------------------------------------------
# 6. The server drops the connection mid-result: clean error, then recovery
# ---------------------------------------------------------------------------
standin_ctl('drop_after_rows', 'rows=0', 'times=1');
($ret, $stdout, $stderr) = $node->psql('postgres', sprintf($check, 'src'));
isnt($ret, 0, 'dropped connection: check_server fails');
like($stderr, qr/lost the connection to SQL Server \(server "src"\)/,
	'dropped connection: the error says the connection was lost');
like($stderr, qr/db-lib error 200(17|04|06|47)/,
	'dropped connection: db-lib EOF/read error in detail');
standin_ctl('clear');
$rows = $node->safe_psql('postgres', sprintf($check, 'src'));
like($rows, qr/^connect\|t\|/m, 'after a dropped connection the next call works');

# ---------------------------------------------------------------------------
# Privileges: not callable by PUBLIC; USAGE + user mapping needed
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', 'CREATE ROLE plain LOGIN');
($ret, $stdout, $stderr) =
  $node->psql('postgres', sprintf($check, 'src'), extra_params => [ '-U', 'plain' ]);
like($stderr, qr/permission denied for function check_server/,
	'check_server is not executable by PUBLIC');
$node->safe_psql('postgres',
	'GRANT USAGE ON SCHEMA mssql_cdc TO plain; GRANT EXECUTE ON FUNCTION mssql_cdc.check_server(text) TO plain');
($ret, $stdout, $stderr) =
  $node->psql('postgres', sprintf($check, 'src'), extra_params => [ '-U', 'plain' ]);
like($stderr, qr/permission denied for foreign server src/,
	'a grantee without USAGE on the server is refused');

$log = slurp_file($node->logfile);
unlike($log, qr/\Q$bad_password\E|Passw0rd!/, 'no password in the server log at the end');

$node->stop;
$si->stop;

done_testing();
