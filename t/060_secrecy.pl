# Secrecy: the SQL Server password of a user mapping never shows up where
# other people look.  The whole lifecycle (check_server, describe_source,
# add_table, streaming, a failed login with a wrong password, pause/resume,
# remove_table) runs over TLS with the certificate validated (a stand-in
# with a test CA's certificate), with log_min_messages = debug5, and
# includes a login refused on the certificate (the failure that makes
# mssql_cdc check the server a second time); then the server log,
# mssql_cdc.status, mssql_cdc.errors, pg_stat_activity and the catalog
# views readable by ordinary roles are searched for the passwords.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;

# distinctive, so that any occurrence is a leak and not a coincidence
my $password = 'Tr0mb0ne-S3cret!';
my $wrong_password = 'Kaz00-Wr0ng!';

my $si = StandIn->start(capture_interval => 0.2, tls => 'off');
$si->tsql_ok(
	qq{CREATE LOGIN cdc_reader WITH PASSWORD = '$password'},
	q{CREATE USER cdc_reader FOR LOGIN cdc_reader},
	q{ALTER ROLE db_owner ADD MEMBER cdc_reader},
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.accounts (id int NOT NULL PRIMARY KEY, owner nvarchar(40))},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'accounts', @role_name = NULL});

my $node = PostgreSQL::Test::Cluster->new('secrecy');
$node->init;
$si->setup_node($node, conf => "log_min_messages = debug5\nlog_statement = 'all'");
$node->start;

my ($host, $port, $db, $tls) = ($si->host, $si->port, $si->database, $si->tls_options);
$node->safe_psql('postgres', qq{
CREATE EXTENSION mssql_cdc;
CREATE SERVER src FOREIGN DATA WRAPPER mssql_cdc
  OPTIONS (host '$host', port '$port', database '$db', query_timeout '10', login_timeout '5'$tls);
CREATE SERVER wrong FOREIGN DATA WRAPPER mssql_cdc
  OPTIONS (host '$host', port '$port', database '$db', query_timeout '10', login_timeout '5'$tls);
CREATE ROLE observer LOGIN;
GRANT pg_monitor TO observer;
});
# The CREATE USER MAPPING statements themselves carry the password, and
# log_statement = 'all' logs whatever is sent: write them with logging off
# for this session (what an administrator does), so that everything the log
# holds afterwards was written by us.
$node->safe_psql('postgres', qq{
SET log_statement = 'none';
SET log_min_messages = 'warning';
CREATE USER MAPPING FOR CURRENT_USER SERVER src OPTIONS (username 'cdc_reader', password '$password');
CREATE USER MAPPING FOR CURRENT_USER SERVER wrong OPTIONS (username 'cdc_reader', password '$wrong_password');
});
my $log_start = -s $node->logfile;

# --- the lifecycle -----------------------------------------------------------
my $checks = $node->safe_psql('postgres',
	q{SELECT string_agg(check_name || '=' || ok, ',' ORDER BY check_name) FROM mssql_cdc.check_server('src')});
like($checks, qr/connect=true/, 'check_server logs in with the mapping');
like($checks, qr/encryption=true/, 'over TLS with a validated certificate');
$node->safe_psql('postgres', q{SELECT * FROM mssql_cdc.describe_source('src', 'dbo.accounts')});

my ($ret, $out, $err) = $node->psql('postgres', q{SELECT * FROM mssql_cdc.check_server('wrong')});
isnt($ret, 0, 'a wrong password fails');
like($err, qr/18456/, 'with SQL Server\'s login failure');
unlike($err, qr/\Q$wrong_password\E/, 'and the error does not echo the password');

$si->add_table($node, 'src', 'dbo.accounts');
$si->tsql_ok(q{INSERT INTO dbo.accounts VALUES (1, N'ada'), (2, N'grace')},
	q{UPDATE dbo.accounts SET owner = N'edsger' WHERE id = 2});
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 4 FROM src_dbo_accounts}),
	'changes stream with the mapping\'s credentials');
is($node->safe_psql('postgres', q{SELECT encrypted AND certificate_validated FROM mssql_cdc.status}),
	't', 'the worker\'s connection is encrypted and validated');

# a login refused on the certificate: FreeTDS gives up, mssql_cdc checks
# the server once more (without logging in) to say why
unless ($si->is_real)
{
	$si->use_certificate('untrusted');
	($ret, $out, $err) = $node->psql('postgres', q{SELECT * FROM mssql_cdc.check_server('src')});
	like($err, qr/the server's TLS certificate is not trusted/, 'an untrusted certificate is refused');
	unlike($err, qr/\Q$password\E/, 'and the error does not show the password');
	$si->use_certificate('server');
}

# the worker also fails once with a wrong password: point the server at the
# wrong mapping's credentials by swapping the mapping (logging off again)
$node->safe_psql('postgres', qq{
SET log_statement = 'none';
SET log_min_messages = 'warning';
ALTER USER MAPPING FOR CURRENT_USER SERVER src OPTIONS (SET password '$wrong_password');
});
$node->safe_psql('postgres', q{SELECT mssql_cdc.pause('src'); SELECT mssql_cdc.resume('src');});
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) > 0 FROM mssql_cdc.errors
		   WHERE remote_error_number = 18456 AND detail LIKE '%Msg 18456%'}),
	'the worker records the failed login with SQL Server\'s error number');
$node->safe_psql('postgres', qq{
SET log_statement = 'none';
SET log_min_messages = 'warning';
ALTER USER MAPPING FOR CURRENT_USER SERVER src OPTIONS (SET password '$password');
});
$si->tsql_ok(q{DELETE FROM dbo.accounts WHERE id = 1});
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 5 FROM src_dbo_accounts}),
	'streaming resumes once the password is right again');

# --- where people look ----------------------------------------------------------
my %places = (
	'mssql_cdc.status' => q{SELECT s::text FROM mssql_cdc.status s},
	'mssql_cdc.errors' => q{SELECT e::text FROM mssql_cdc.errors e},
	'mssql_cdc.servers' => q{SELECT s::text FROM mssql_cdc.servers s},
	'mssql_cdc.worker_state()' => q{SELECT w::text FROM mssql_cdc.worker_state() w},
	'pg_stat_activity' =>
	  q{SELECT concat_ws(' ', application_name, backend_type, query, client_addr) FROM pg_stat_activity},
	'pg_foreign_server' => q{SELECT s::text FROM pg_foreign_server s},
);
for my $place (sort keys %places)
{
	my $text = $node->safe_psql('postgres', $places{$place});
	unlike($text, qr/\Q$password\E|\Q$wrong_password\E/, "no password in $place");
}

# an ordinary monitoring role sees the status and no options of the mappings
my $seen = $node->safe_psql('postgres',
	q{SELECT coalesce(string_agg(umoptions::text, ','), '') FROM pg_user_mappings},
	extra_params => [ '-U', 'observer' ]);
unlike($seen, qr/\Q$password\E|\Q$wrong_password\E/, 'pg_user_mappings hides the options from other roles');
like($node->safe_psql('postgres', q{SELECT count(*) FROM mssql_cdc.status}, extra_params => [ '-U', 'observer' ]),
	qr/^1$/, 'a pg_monitor member reads the status view');

$node->safe_psql('postgres', q{SELECT mssql_cdc.remove_table('src', 'dbo.accounts')});
$node->stop;

my $log = slurp_file($node->logfile, $log_start);
ok(length($log) > 10_000, 'the debug5 log has content (' . length($log) . ' bytes)');
like($log, qr/mssql_cdc/, 'and it is about our workers');
unlike($log, qr/\Q$password\E/, 'no password in the server log at debug5');
unlike($log, qr/\Q$wrong_password\E/, 'no wrong password in the server log at debug5');

$si->stop;
done_testing();
