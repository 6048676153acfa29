# TLS to SQL Server: by default the connection is encrypted and the
# certificate validated, and nothing falls back to plain text silently.
# Against a stand-in with a certificate of a private test CA
# (test/standin/make-test-certs): a server without TLS, an untrusted
# certificate, and the worker, which parks with a condition instead of
# streaming in the clear.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;

my $si = StandIn->start(tls => 'off', capture_interval => 0.1);
plan skip_all => 'needs the test CA\'s certificates on the server' if $si->is_real;
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, val nvarchar(20) NOT NULL)},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL},
	q{INSERT INTO dbo.t VALUES (1, N'one'), (2, N'two')});

my $node = PostgreSQL::Test::Cluster->new('tls');
$node->init;
$si->setup_node($node);
$node->start;

my $port = $si->port;
$node->safe_psql('postgres', qq{
CREATE EXTENSION mssql_cdc;
CREATE SERVER dflt FOREIGN DATA WRAPPER mssql_cdc
  OPTIONS (host '127.0.0.1', port '$port', database 'cdcdb', login_timeout '5');
CREATE USER MAPPING FOR CURRENT_USER SERVER dflt OPTIONS (username 'sa', password 'Passw0rd!');
CREATE SERVER req FOREIGN DATA WRAPPER mssql_cdc
  OPTIONS (host '127.0.0.1', port '$port', database 'cdcdb', login_timeout '5', encryption 'require');
CREATE USER MAPPING FOR CURRENT_USER SERVER req OPTIONS (username 'sa', password 'Passw0rd!');
});

# The stand-in's record of the logins of mssql_cdc (application name)
sub logins
{
	my $entries = decode_json($si->ctl('log', 'limit=100000'))->{entries};
	return grep { $_->{event} eq 'login' && ($_->{app} // '') eq 'mssql_cdc' } @$entries;
}

sub check_fails
{
	my ($server, $message, $what) = @_;
	my $before = scalar(logins());
	my ($ret, $out, $err) = $node->psql('postgres', "SELECT * FROM mssql_cdc.check_server('$server')");
	isnt($ret, 0, "$what: check_server fails");
	like($err, $message, "$what: the error says why");
	is(scalar(logins()), $before, "$what: no login reached the server");
	return $err;
}

# --- the default validates the certificate: the test CA is in no system
# trust store, so the stand-in's certificate is refused
check_fails('dflt',
	qr/could not connect to SQL Server for server "dflt": the server's TLS certificate is not trusted/,
	'default encryption, certificate of an unknown CA');

# --- 'require' validates too (FreeTDS alone checks nothing without "ca file")
$si->use_certificate('untrusted');
check_fails('req',
	qr/could not connect to SQL Server for server "req": the server's TLS certificate is not trusted/,
	"encryption 'require', certificate of an unknown CA");
$si->use_certificate('server');

# --- the default against a server that offers no TLS: refused, not plain
$si->tls_offer('not-supported');
check_fails('dflt',
	qr/could not connect to SQL Server for server "dflt": the server does not offer TLS encryption/,
	'default encryption, server without TLS');

# --- add_table opens a connection too: refused the same way
my ($ret, $out, $err) = $node->psql('postgres',
	q{SELECT mssql_cdc.add_table('dflt', 'dbo.t', snapshot_mode => 'initial')});
isnt($ret, 0, 'add_table over a server without TLS is refused');
like($err, qr/the server does not offer TLS encryption/, 'add_table says why');

# --- the worker parks with a condition instead of streaming in the clear:
# a source captured with encryption 'off' (asked for explicitly) streams;
# once the option is dropped (the default again) it stops and says why
$node->safe_psql('postgres', qq{
CREATE SERVER src FOREIGN DATA WRAPPER mssql_cdc
  OPTIONS (host '127.0.0.1', port '$port', database 'cdcdb', login_timeout '5', encryption 'off');
CREATE USER MAPPING FOR CURRENT_USER SERVER src OPTIONS (username 'sa', password 'Passw0rd!');
});
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('src', 'dbo.t', snapshot_mode => 'initial')});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 2 FROM public.src_dbo_t}),
	"encryption 'off': the snapshot arrives");
$node->safe_psql('postgres', q{ALTER SERVER src OPTIONS (DROP encryption)});
ok( $node->poll_query_until('postgres',
		q{SELECT condition = 'encryption_unavailable' FROM mssql_cdc.status WHERE server = 'src'}),
	'default encryption against a server without TLS: the worker parks with encryption_unavailable')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status');
$si->tsql_ok(q{INSERT INTO dbo.t VALUES (3, N'three')});
sleep 2;
is($node->safe_psql('postgres', q{SELECT count(*) FROM public.src_dbo_t}), '2',
	'nothing is applied over a connection in the clear');

done_testing();
