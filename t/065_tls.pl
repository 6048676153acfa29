# TLS to SQL Server: by default the connection is encrypted and the
# certificate validated, and nothing falls back to plain text silently.
# Against a stand-in with certificates of a private test CA
# (test/standin/make-test-certs):
#   - the default (system trust store) refuses the test CA; 'require' too
#   - every refusal says which check failed (wrong CA, expired, not yet
#     valid, host name, revoked, no TLS offered, TLS forced against 'off',
#     an unusable CA file) and no login reaches the server
#   - a worker parks with the matching condition instead of connecting in
#     the clear, and resumes exactly once the certificate is right
#   - a snapshot and streaming run over TLS with validation on
#   - 'request' falls back to plain text only with a WARNING, and shows it;
#     trust_server_certificate and check_host_name 'false' do what they say
#   - an administrator's freetds.conf cannot weaken a server's settings
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use File::Copy qw(copy);
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;

my $si = StandIn->start(tls => 'off', capture_interval => 0.1);
plan skip_all => 'needs the test CA\'s certificates on the server' if $si->is_real;
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{ALTER DATABASE cdcdb SET ALLOW_SNAPSHOT_ISOLATION ON},
	q{CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, val nvarchar(20) NOT NULL)},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL},
	q{INSERT INTO dbo.t VALUES (1, N'one'), (2, N'two')},
	q{CREATE TABLE dbo.big (id int NOT NULL PRIMARY KEY, v int, note nvarchar(40))});
# a snapshot of several chunks (snapshot_chunk_rows below), each over TLS
$si->ctl('fill_table', 'database=cdcdb', 'table=dbo.big', 'rows=3000');
$si->tsql_ok(q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'big', @role_name = NULL});

# An administrator's freetds.conf that would weaken everything if it
# applied: no encryption, no host name check, a CA file that trusts all.
my $admin_conf = PostgreSQL::Test::Utils::tempdir('admin') . '/freetds.conf';
open(my $fh, '>', $admin_conf) or die $!;
print $fh "[global]\n\tencryption = off\n\tcheck certificate hostname = no\n\tca file = /nonexistent.pem\n";
close $fh;

my $node = PostgreSQL::Test::Cluster->new('tls');
$node->init;
$si->setup_node($node, conf => 'mssql_cdc.snapshot_chunk_rows = 500');
{
	local $ENV{FREETDSCONF} = $admin_conf;
	$node->start;
}

my $port = $si->port;
my $ca = $si->cert_file('ca');
my $crl = $si->cert_file('crl');

# servers: name => extra options
my %servers = (
	dflt => '',
	req => ", encryption 'require'",
	good => ", ca_file '$ca'",
	src => ", ca_file '$ca'",
	crl => ", ca_file '$ca', crl_file '$crl'",
	anyname => ", ca_file '$ca', check_host_name 'false'",
	trusting => ", trust_server_certificate 'true'",
	plain => ", encryption 'off'",
	maybe => ", encryption 'request', ca_file '$ca'");
$node->safe_psql('postgres', 'CREATE EXTENSION mssql_cdc');
for my $name (sort keys %servers)
{
	$node->safe_psql('postgres', qq{
CREATE SERVER $name FOREIGN DATA WRAPPER mssql_cdc
  OPTIONS (host '127.0.0.1', port '$port', database 'cdcdb', login_timeout '5'$servers{$name});
CREATE USER MAPPING FOR CURRENT_USER SERVER $name OPTIONS (username 'sa', password 'Passw0rd!');
});
}

# The stand-in's record of the logins of mssql_cdc (application name)
sub logins
{
	my $entries = decode_json($si->ctl('log', 'limit=100000'))->{entries};
	return grep { $_->{event} eq 'login' && ($_->{app} // '') eq 'mssql_cdc' } @$entries;
}

sub check_ok
{
	my ($server, $what) = @_;
	my $rows = $node->safe_psql('postgres',
		"SELECT check_name || '|' || ok || '|' || detail FROM mssql_cdc.check_server('$server')");
	like($rows, qr/^connect\|true\|/m, "$what: check_server logs in");
	my ($row) = $rows =~ /^encryption\|(.*)$/m;
	return $row;
}

sub check_fails
{
	my ($server, $message, $detail, $what) = @_;
	my $before = scalar(logins());
	my ($ret, $out, $err) = $node->psql('postgres', "SELECT * FROM mssql_cdc.check_server('$server')");
	isnt($ret, 0, "$what: check_server fails");
	like($err, $message, "$what: the error says which check failed");
	like($err, $detail, "$what: the detail says what the server showed") if $detail;
	is(scalar(logins()), $before, "$what: no login reached the server");
	return $err;
}

my $untrusted = qr/could not connect to SQL Server for server "\w+": the server's TLS certificate is not trusted/;

# --- the default validates the certificate: the test CA is in no system
# trust store, so the stand-in's certificate is refused
check_fails('dflt', $untrusted, qr/DETAIL:.*does not chain to a CA of ca_file "system"/s,
	'default encryption, certificate of an unknown CA');

# --- 'require' validates too (FreeTDS alone checks nothing without "ca file")
$si->use_certificate('untrusted');
check_fails('req', $untrusted, undef, "encryption 'require', certificate of an unknown CA");

# --- every refusal, with the test CA trusted
check_fails('good', $untrusted,
	qr/DETAIL:.*SQL Server's certificate \(subject "CN=localhost", issued by "CN=some other CA"\) does not chain to a CA of ca_file "\Q$ca\E"/s,
	'certificate of another CA');
$si->use_certificate('expired');
check_fails('good',
	qr/for server "good": the server's TLS certificate has expired/,
	qr/DETAIL:.*is valid from 2020-01-01 00:00:00 UTC until 2020-02-01 00:00:00 UTC/s,
	'expired certificate');
$si->use_certificate('notyet');
check_fails('good', qr/for server "good": the server's TLS certificate is not valid yet/,
	qr/DETAIL:.*is valid from 2090-01-01/s, 'certificate not valid yet');
$si->use_certificate('wronghost');
check_fails('good', qr/for server "good": the server's TLS certificate does not name the host option/,
	qr/DETAIL:.*DNS:other\.example\.com\) does not name host "127\.0\.0\.1"/s, 'host name mismatch');
like(check_ok('anyname', "check_host_name 'false'"),
	qr/^true\|TLS for the whole session; SQL Server's certificate validated against ca_file '\Q$ca\E', host name not checked/,
	"check_host_name 'false' accepts any name, and says so");
$si->use_certificate('revoked');
check_fails('crl', qr/for server "crl": the server's TLS certificate has been revoked/,
	qr/DETAIL:.*is revoked by crl_file "\Q$crl\E"/s, 'revoked certificate');
check_ok('good', 'a revoked certificate without crl_file');
$si->use_certificate('server');
like(check_ok('crl', 'crl_file, certificate not revoked'),
	qr/^true\|.*ca_file '\Q$ca\E' and crl_file, host name checked/, 'the encryption row names the CRL');
like(check_ok('good', 'the test CA trusted'),
	qr/^true\|TLS for the whole session; SQL Server's certificate validated against ca_file '\Q$ca\E', host name checked$/,
	'check_server: encrypted and validated');

# the sessions that logged in were encrypted end to end
my @encryption = map { $_->{encryption} } logins();
ok(scalar(@encryption) >= 3, 'mssql_cdc logged in several times');
is_deeply([ grep { $_ ne 'full' } @encryption ], [], 'every login of mssql_cdc was fully encrypted')
  or diag explain \@encryption;

# --- a server that offers no TLS: refused, not plain
$si->tls_offer('not-supported');
check_fails('good', qr/for server "good": the server does not offer TLS encryption/,
	qr/DETAIL:.*ENCRYPT_NOT_SUP \(0x02\)/s, 'server without TLS');
check_fails('dflt', qr/for server "dflt": the server does not offer TLS encryption/, undef,
	'server without TLS, default options');
my ($ret, $out, $err) = $node->psql('postgres',
	q{SELECT mssql_cdc.add_table('dflt', 'dbo.t', snapshot_mode => 'initial')});
isnt($ret, 0, 'add_table over a server without TLS is refused');
like($err, qr/the server does not offer TLS encryption/, 'add_table says why');

# --- 'request' falls back to plain text only when no TLS is offered, loudly
my $from = -s $node->logfile;
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT check_name || '|' || ok || '|' || detail FROM mssql_cdc.check_server('maybe')});
is($ret, 0, "encryption 'request', server without TLS: logs in");
like($err, qr/WARNING:  SQL Server for server "maybe" offers no TLS encryption: connecting without it/,
	"encryption 'request': the fallback is a WARNING");
like($out,
	qr/^encryption\|false\|not encrypted \(encryption 'request' and SQL Server offers no TLS\): the login and all data cross the network in plain text$/m,
	"encryption 'request': check_server shows the connection is not encrypted");
my @after_fallback = logins();
is($after_fallback[-1]{encryption}, 'none', "encryption 'request': and it was not");
$si->tls_offer('off');
$si->use_certificate('untrusted');
check_fails('maybe', $untrusted, undef, "encryption 'request': a bad certificate is no reason for plain text");
$si->use_certificate('server');
like(check_ok('maybe', "encryption 'request', server with TLS"), qr/^true\|TLS for the whole session/,
	"encryption 'request': TLS when the server offers it");

# --- encryption 'off' against a server that forces encryption
$si->tls_offer('on');
check_fails('plain', qr/for server "plain": SQL Server requires encryption, but the encryption option is 'off'/,
	qr/DETAIL:.*ENCRYPT_REQ \(0x03\)/s, "encryption 'off', Force Encryption");
# db-lib reports the refused login as "connection failed" (20002), but now
# and then "unexpected EOF" (20017) comes first (1 in 60 logins here): the
# diagnosis must not depend on which error FreeTDS raises first
my @undiagnosed;
for my $i (1 .. 150)
{
	my (undef, undef, $e) = $node->psql('postgres', "SELECT * FROM mssql_cdc.check_server('plain')");
	push @undiagnosed, $e unless $e =~ /SQL Server requires encryption, but the encryption option is 'off'/;
}
is(scalar(@undiagnosed), 0, "encryption 'off', Force Encryption: diagnosed in 150 of 150 logins")
  or diag $undiagnosed[0];
like(check_ok('good', 'Force Encryption, TLS required'), qr/^true\|/, 'Force Encryption: the default connects');
$si->tls_offer('required');
like(check_ok('good', 'ENCRYPT_REQ answered'), qr/^true\|/, 'a server answering ENCRYPT_REQ: the same');
$si->tls_offer('off');
like(check_ok('plain', "encryption 'off'"),
	qr/^false\|not encrypted \(encryption 'off'\): the login and all data cross the network in plain text$/,
	"encryption 'off': logs in without TLS, and check_server says so");

# --- trust_server_certificate: TLS without validation, never reported as fine
$si->use_certificate('untrusted');
like(check_ok('trusting', 'trust_server_certificate'),
	qr/^false\|TLS for the whole session, but SQL Server's certificate was not validated \(trust_server_certificate 'true'\)/,
	'trust_server_certificate: encrypted, not validated, ok = false');
$si->use_certificate('server');

# --- the CA file: read by the database server's OS user, replaceable by nobody else
my $dir = PostgreSQL::Test::Utils::tempdir('ca');
copy($ca, "$dir/open.pem") or die $!;
chmod 0666, "$dir/open.pem";
copy($ca, "$dir/group.pem") or die $!;
chmod 0664, "$dir/group.pem";
copy($si->cert_file('server', 'key'), "$dir/not-a-cert.pem") or die $!;
chmod 0600, "$dir/not-a-cert.pem";
my %bad_files = (
	"$dir/open.pem" => qr/is writable by other operating-system users \(mode 0666\)/,
	"$dir/group.pem" => qr/is writable by other operating-system users \(mode 0664\)/,
	"$dir/missing.pem" => qr/No such file or directory/,
	$dir => qr/is not a regular file/,
	"$dir/not-a-cert.pem" => qr/holds no PEM certificate GnuTLS can load/);
for my $file (sort keys %bad_files)
{
	$node->safe_psql('postgres', "ALTER SERVER good OPTIONS (SET ca_file '$file')");
	check_fails('good', qr/for server "good": a file of trusted certificates cannot be used/,
		qr/DETAIL:.*ca_file "\Q$file\E".*$bad_files{$file}/s, "ca_file $file");
}
$node->safe_psql('postgres', "ALTER SERVER good OPTIONS (SET ca_file '$ca')");

my $worker_logins_from = scalar(logins());

# --- a worker: a snapshot and streaming over TLS with validation on, parked
# with a condition (never in plain text) while the certificate is wrong
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('src', 'dbo.t', snapshot_mode => 'initial')});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 2 FROM public.src_dbo_t}),
	'the snapshot arrives over TLS');
my @expected = ('snapshot|1|one', 'snapshot|2|two');
my $next = 3;
sub change_rows
{
	my ($n) = @_;
	for (1 .. $n)
	{
		my $id = $next++;
		$si->tsql_ok("BEGIN TRANSACTION; INSERT INTO dbo.t VALUES ($id, N'v$id'); "
			  . "UPDATE dbo.t SET val = N'w$id' WHERE id = $id; COMMIT");
		push @expected, "insert|$id|v$id", "update_before|$id|v$id", "update_after|$id|w$id";
	}
}
sub staging_is
{
	my ($what) = @_;
	my $n = scalar @expected;
	ok($node->poll_query_until('postgres', "SELECT count(*) >= $n FROM public.src_dbo_t"),
		"$what: all $n rows arrived")
	  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status');
	my @got = split /\n/, $node->safe_psql('postgres',
		"SELECT _cdc_op || '|' || id || '|' || val FROM public.src_dbo_t ORDER BY _cdc_lsn, _cdc_seqval, _cdc_op");
	is_deeply(\@got, \@expected, "$what: the staging table equals the source history, each change once");
}
change_rows(5);
staging_is('streaming over TLS');

# the big table: 3000 rows in six chunks, then a transaction of 100 updates
sub source_sums
{
	my $out = $si->tsql_ok(q{SELECT CONCAT('sums:', COUNT(*), ':', SUM(CAST(id AS bigint)), ':',
	  SUM(CAST(v AS bigint) % 1000003)) FROM dbo.big});
	my ($sums) = $out =~ /(sums:\d+:\d+:\d+)/ or die "no sums in: $out";
	return $sums;
}
my $big_sums = source_sums();
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('src', 'dbo.big', snapshot_mode => 'initial')});
ok( $node->poll_query_until('postgres',
		q{SELECT state = 'streaming' FROM mssql_cdc.status WHERE source_table = 'dbo.big'}),
	'the big table\'s snapshot finished over TLS');
is($node->safe_psql('postgres', q{SELECT 'sums:' || count(*) || ':' || sum(id) || ':' || sum(v::bigint % 1000003)
	FROM public.src_dbo_big WHERE _cdc_op = 'snapshot'}), $big_sums,
	'snapshot over TLS: every row of the source, with its values');
$si->tsql_ok(q{BEGIN TRANSACTION; UPDATE dbo.big SET v = v + 1 WHERE id <= 100; COMMIT});
my $updated_sums = source_sums();
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 100 FROM public.src_dbo_big WHERE _cdc_op = 'update_after'}),
	'the transaction of 100 updates streams over TLS');
is($node->safe_psql('postgres', q{SELECT 'sums:' || count(*) || ':' || sum(id) || ':' || sum(v::bigint % 1000003)
	FROM (SELECT DISTINCT ON (id) id, v FROM public.src_dbo_big WHERE _cdc_op <> 'update_before'
	      ORDER BY id, _cdc_lsn DESC, _cdc_seqval DESC) latest}), $updated_sums,
	'staging replayed to the latest row per key equals the source');
my @worker_logins = (logins())[ $worker_logins_from .. scalar(logins()) - 1 ];
ok(scalar(@worker_logins) >= 1, 'the worker logged in');
is_deeply([ grep { ($_->{encryption} // '') ne 'full' } @worker_logins ], [],
	'every login of the worker was fully encrypted');
is($node->safe_psql('postgres', q{SELECT encrypted || '|' || certificate_validated FROM mssql_cdc.status WHERE server = 'src' AND source_table = 'dbo.t'}),
	'true|true', 'status: the worker\'s connection is encrypted and validated');

my %parked = (
	untrusted => 'certificate_untrusted',
	expired => 'certificate_expired',
	wronghost => 'certificate_name_mismatch');
for my $cert (sort keys %parked)
{
	my $before = scalar(logins());
	$si->use_certificate($cert);
	$si->ctl('restart');	# the worker's session breaks, it logs in again
	ok( $node->poll_query_until('postgres',
			"SELECT condition = '$parked{$cert}' AND state = 'error' FROM mssql_cdc.status WHERE server = 'src' AND source_table = 'dbo.t'"),
		"certificate $cert: the worker parks with condition $parked{$cert}")
	  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status');
	is($node->safe_psql('postgres', q{SELECT encrypted IS NULL FROM mssql_cdc.status WHERE server = 'src' AND source_table = 'dbo.t'}),
		't', "certificate $cert: status shows no connection");
	like($node->safe_psql('postgres', q{SELECT hint FROM mssql_cdc.status WHERE server = 'src' AND source_table = 'dbo.t'}),
		qr/\w/, "certificate $cert: with a hint");
	change_rows(1);
	is(scalar(logins()), $before, "certificate $cert: the worker never logged in");
	$si->use_certificate('server');
	staging_is("certificate $cert fixed");
}
$si->tls_offer('not-supported');
$si->ctl('restart');
ok( $node->poll_query_until('postgres',
		q{SELECT condition = 'encryption_unavailable' FROM mssql_cdc.status WHERE server = 'src' AND source_table = 'dbo.t'}),
	'server without TLS: the worker parks with encryption_unavailable');
change_rows(1);
$si->tls_offer('off');
staging_is('TLS offered again');

# --- the worker with 'request' against a server without TLS: WARNING, status
$node->safe_psql('postgres', q{ALTER SERVER src OPTIONS (ADD encryption 'request')});
$si->tls_offer('not-supported');
$from = -s $node->logfile;
$si->ctl('restart');
$node->wait_for_log(qr/WARNING:  SQL Server for server "src" offers no TLS encryption: connecting without it/, $from);
change_rows(1);
staging_is("encryption 'request' without TLS");
is($node->safe_psql('postgres', q{SELECT encrypted || '|' || certificate_validated FROM mssql_cdc.status WHERE server = 'src' AND source_table = 'dbo.t'}),
	'false|false', "status shows the unencrypted connection");
$si->tls_offer('off');
$node->safe_psql('postgres', q{ALTER SERVER src OPTIONS (DROP encryption)});
change_rows(1);
staging_is('back to TLS');

my @leftover = glob($node->data_dir . '/base/pgsql_tmp/*freetds*');
is(scalar @leftover, 0, 'no private freetds.conf is left behind');

done_testing();
