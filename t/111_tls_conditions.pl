# What a user sees when the worker's login fails on TLS: for every
# condition of doc/troubleshooting.md (certificate_untrusted, _expired,
# _name_mismatch, _revoked, encryption_unavailable, encryption_required_by_
# server, tls_handshake_failed, tls_file_unusable) the worker, against the
# stand-in, shows in mssql_cdc.status the condition, its hint and the error,
# writes the same to mssql_cdc.errors, keeps retrying by itself without a
# login reaching the server, and streams again once the cause is fixed
# (the stand-in switched back, ALTER SERVER, chmod).  The CA and CRL files
# are refused for each reason doc/connecting.md names: missing, not a
# regular file, unreadable by the server's OS user, owned by another user,
# writable by group or others, no PEM data.  No password appears in the
# server log, mssql_cdc.status or mssql_cdc.errors.
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
	q{CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, val nvarchar(20) NOT NULL)},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL},
	q{INSERT INTO dbo.t VALUES (1, N'one')});

my $node = PostgreSQL::Test::Cluster->new('tlsconds');
$node->init;
# debug1: the worker's retries and reconnects are logged too, and must not
# carry the password either
$si->setup_node($node, conf => 'log_min_messages = debug1');
$node->start;

# The CA and CRL files in a directory of this test (owned by the server's
# OS user, as they must be), so that they can be broken and repaired
my $dir = PostgreSQL::Test::Utils::tempdir('trust');
my $ca = "$dir/ca.pem";
my $crl = "$dir/crl.pem";
copy($si->cert_file('ca'), $ca) or die $!;
copy($si->cert_file('crl'), $crl) or die $!;
chmod 0644, $ca, $crl;

my $port = $si->port;
my $password = $si->password;
$node->safe_psql('postgres', qq{
CREATE EXTENSION mssql_cdc;
CREATE SERVER src FOREIGN DATA WRAPPER mssql_cdc
  OPTIONS (host '127.0.0.1', port '$port', database 'cdcdb', login_timeout '5', ca_file '$ca');
});
# the test's own statement would put the password into the log (log_statement = all)
$node->safe_psql('postgres', qq{SET log_statement = none;
CREATE USER MAPPING FOR CURRENT_USER SERVER src OPTIONS (username 'sa', password '$password');});
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('src', 'dbo.t', snapshot_mode => 'initial')});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM public.src_dbo_t}),
	'the snapshot arrives over TLS');

sub logins
{
	my $entries = decode_json($si->ctl('log', 'limit=100000'))->{entries};
	return scalar grep { $_->{event} eq 'login' && ($_->{app} // '') eq 'mssql_cdc' } @$entries;
}

sub status_field
{
	my ($field) = @_;
	return $node->safe_psql('postgres', "SELECT $field FROM mssql_cdc.status WHERE server = 'src'");
}

my $next = 2;
my $rows = 1;

# One row more on the source; once the worker streams, it arrives
sub insert_row
{
	my $id = $next++;
	# tsql reports a failed login with no "Msg": look for an answer
	like($si->tsql_ok("INSERT INTO dbo.t VALUES ($id, N'v$id'); SELECT CONCAT('row ', $id, ' in')"),
		qr/row $id in/, "row $id inserted on the source");
	$rows++;
}

# Break the login with $break, check what the user sees and that the worker
# retries, repair it with $fix and check that the worker catches up.
#   condition, message (after 'for server "src": '), detail and hint: regexps
sub scenario
{
	my (%s) = @_;
	my $what = $s{what};
	my $cond = $s{condition};
	my $last_error_id = $node->safe_psql('postgres', 'SELECT coalesce(max(error_id), 0) FROM mssql_cdc.errors');

	# a row to catch up on (inserted now: tsql may fail on TLS like the worker)
	insert_row();
	$s{break}->();
	$si->ctl('restart');	# the worker's session breaks, it logs in again
	my $logins = logins();
	ok( $node->poll_query_until('postgres',
			"SELECT condition = '$cond' AND state = 'error' FROM mssql_cdc.status WHERE server = 'src'"),
		"$what: the worker reports $cond")
	  or diag $node->safe_psql('postgres', 'SELECT condition, hint, last_error FROM mssql_cdc.status');
	my $message = qr/^could not connect to SQL Server for server "src": $s{message}/;
	like(status_field('last_error'), $message, "$what: status.last_error says which check failed");
	like(status_field('hint'), $s{hint}, "$what: status.hint says what to do");
	is(status_field('encrypted IS NULL'), 't', "$what: status shows no connection");

	# the worker retries by itself: more failures, each recorded
	ok( $node->poll_query_until('postgres',
			"SELECT count(*) >= 2 FROM mssql_cdc.errors WHERE error_id > $last_error_id AND server_name = 'src' AND condition = '$cond'"),
		"$what: the worker retries by itself");
	my @errors = split /\n/, $node->safe_psql('postgres', qq{
SELECT condition || '|' || sqlstate || '|' || (hint = (SELECT hint FROM mssql_cdc.status WHERE server = 'src'))
  FROM mssql_cdc.errors WHERE error_id > $last_error_id AND server_name = 'src' ORDER BY error_id});
	# the session that the restart broke comes first
	shift @errors while @errors && $errors[0] =~ /^connection_lost\|/;
	is_deeply([ grep { $_ ne "$cond|HV00N|true" } @errors ], [],
		"$what: every retry is recorded in mssql_cdc.errors with $cond, SQLSTATE HV00N and the hint")
	  or diag explain \@errors;
	my ($message_text, $detail) = split /\x1f/, $node->safe_psql('postgres', qq{
SELECT message || chr(31) || coalesce(detail, '') FROM mssql_cdc.errors
  WHERE error_id > $last_error_id AND server_name = 'src' ORDER BY error_id DESC LIMIT 1});
	like($message_text, $message, "$what: mssql_cdc.errors has the message");
	like($detail, $s{detail}, "$what: mssql_cdc.errors has the detail") if $s{detail};
	ok($node->safe_psql('postgres', 'SELECT consecutive_failures >= 2 FROM mssql_cdc.servers') eq 't',
		"$what: the failures are counted");
	is(logins(), $logins, "$what: no login reached the server");

	# repaired: the worker connects again by itself and catches up
	$s{fix}->();
	ok($node->poll_query_until('postgres', "SELECT count(*) = $rows FROM public.src_dbo_t"),
		"$what fixed: the worker streams again")
	  or diag $node->safe_psql('postgres', 'SELECT condition, hint, last_error FROM mssql_cdc.status');
	ok( $node->poll_query_until('postgres',
			q{SELECT state = 'streaming' AND condition IS NULL AND encrypted FROM mssql_cdc.status WHERE server = 'src'}),
		"$what fixed: status is clear again, the connection encrypted");
}

sub alter
{
	my ($options) = @_;
	return sub { $node->safe_psql('postgres', "ALTER SERVER src OPTIONS ($options)") };
}

# --- the server's certificate
my %certificates = (
	untrusted => [ 'certificate_untrusted', qr/the server's TLS certificate is not trusted/,
		qr/issued by "CN=some other CA"\) does not chain to a CA of ca_file "\Q$ca\E"/,
		qr/Name the CA that issued SQL Server's certificate: ALTER SERVER src OPTIONS \(ADD ca_file/ ],
	expired => [ 'certificate_expired', qr/the server's TLS certificate has expired/,
		qr/is valid from 2020-01-01 00:00:00 UTC until 2020-02-01 00:00:00 UTC/,
		qr/SQL Server needs a renewed certificate/ ],
	notyet => [ 'certificate_expired', qr/the server's TLS certificate is not valid yet/,
		qr/is valid from 2090-01-01/, qr/Check the clocks/ ],
	wronghost => [ 'certificate_name_mismatch', qr/the server's TLS certificate does not name the host option/,
		qr/DNS:other\.example\.com\) does not name host "127\.0\.0\.1"/,
		qr/Set the host option to a name the certificate carries .*ALTER SERVER src OPTIONS \(SET host/ ]);
for my $cert (sort keys %certificates)
{
	my ($cond, $message, $detail, $hint) = @{ $certificates{$cert} };
	scenario(what => "certificate $cert", condition => $cond, message => $message,
		detail => $detail, hint => $hint,
		break => sub { $si->use_certificate($cert) },
		fix => sub { $si->use_certificate('server') });
}

$node->safe_psql('postgres', "ALTER SERVER src OPTIONS (ADD crl_file '$crl')");
scenario(what => 'revoked certificate', condition => 'certificate_revoked',
	message => qr/the server's TLS certificate has been revoked/,
	detail => qr/is revoked by crl_file "\Q$crl\E"/,
	hint => qr/The CA revoked SQL Server's certificate .*needs a new one/,
	break => sub { $si->use_certificate('revoked') },
	fix => sub { $si->use_certificate('server') });

# --- what the server offers
scenario(what => 'a server without TLS', condition => 'encryption_unavailable',
	message => qr/the server does not offer TLS encryption/,
	detail => qr/ENCRYPT_NOT_SUP \(0x02\)/,
	hint => qr/Configure a certificate on SQL Server.*ALTER SERVER src OPTIONS \(ADD encryption 'off'\)/,
	break => sub { $si->tls_offer('not-supported') },
	fix => sub { $si->tls_offer('off') });

# encryption 'off' against Force Encryption, repaired as the hint says
scenario(what => "encryption 'off' against Force Encryption", condition => 'encryption_required_by_server',
	message => qr/SQL Server requires encryption, but the encryption option is 'off'/,
	detail => qr/ENCRYPT_REQ \(0x03\)/,
	hint => qr/ALTER SERVER src OPTIONS \(DROP encryption\)/,
	break => sub { alter(q{ADD encryption 'off'})->(); $si->tls_offer('on') },
	fix => alter('DROP encryption'));
$si->tls_offer('off');

# only TLS 1.3 enabled on SQL Server's machine: no TDS 7.x handshake
scenario(what => 'a server with TLS 1.3 alone', condition => 'tls_handshake_failed',
	message => qr/the TLS handshake failed/,
	detail => qr/SQL Server ended the TLS handshake with the alert "[^"]*protocol version"/i,
	# what to change: the versions enabled on SQL Server's machine
	hint => qr/See DETAIL for what the TLS library reported\..*No common protocol version or cipher: SQL Server's machine must have TLS 1\.2 enabled/,
	break => sub { $si->tls_protocols('1.3') },
	fix => sub { $si->tls_protocols('1.2') });

# --- the CA and CRL files, each way they can be unusable
my $not_pem = "$dir/not-pem.pem";
sub write_file
{
	my ($path, $text) = @_;
	open(my $fh, '>', $path) or die "$path: $!";
	print $fh $text;
	close $fh;
	chmod 0644, $path;
}

sub file_scenarios
{
	my ($option, $file, $what_kind, $message) = @_;
	my $saved = "$file.saved";
	my $file_hint = qr/Fix the file named in DETAIL, or name another: ALTER SERVER src OPTIONS \(SET $option/;
	my %cases = (
		missing => [ qr/$option "\Q$file\E": No such file or directory/,
			sub { rename $file, $saved or die $! }, sub { rename $saved, $file or die $! } ],
		'group-writable' => [ qr/$option "\Q$file\E" is writable by other operating-system users \(mode 0664\)/,
			sub { chmod 0664, $file }, sub { chmod 0644, $file } ],
		'world-writable' => [ qr/$option "\Q$file\E" is writable by other operating-system users \(mode 0646\)/,
			sub { chmod 0646, $file }, sub { chmod 0644, $file } ],
		'unreadable' => [ qr/$option "\Q$file\E" cannot be read by the database server: Permission denied/,
			sub { chmod 0200, $file }, sub { chmod 0644, $file } ],
		'not a regular file' => [ qr/$option "\Q$dir\E" is not a regular file/,
			alter("SET $option '$dir'"), alter("SET $option '$file'") ],
		'without PEM data' => [ qr/$option "\Q$file\E" holds no PEM $what_kind GnuTLS can load/,
			sub { copy($file, $saved) or die $!; write_file($file, "not a certificate\n") },
			sub { rename $saved, $file or die $! } ]);
	for my $case (sort keys %cases)
	{
		my ($detail, $break, $fix) = @{ $cases{$case} };
		scenario(what => "$option $case", condition => 'tls_file_unusable',
			message => $message, detail => $detail, hint => $file_hint, break => $break, fix => $fix);
	}

	# a file of another operating-system user (not root): found on this
	# machine, since a test cannot chown
	my ($foreign) = grep {
		my @st = stat $_;
		-f $_ && -r $_ && @st && $st[4] != $> && $st[4] != 0 && ($st[2] & 022) == 0
	} (glob('/var/cache/man/*'), glob('/var/cache/*/*'), glob('/var/lib/*/*'), glob('/etc/*/*'));
	SKIP:
	{
		skip 'no file of another operating-system user on this machine', 1 unless $foreign;
		scenario(what => "$option owned by another user", condition => 'tls_file_unusable',
			message => $message,
			detail => qr/$option "\Q$foreign\E" belongs to another operating-system user \(uid \d+\)/,
			hint => $file_hint,
			break => alter("SET $option '$foreign'"), fix => alter("SET $option '$file'"));
	}
}
# the hint names the option to change, the message what the file is for
file_scenarios('ca_file', $ca, 'certificate', qr/a file of trusted certificates cannot be used/);
file_scenarios('crl_file', $crl, 'revocation list', qr/the certificate revocation list cannot be used/);

# --- no password anywhere the user or an administrator looks
my $everything = $node->safe_psql('postgres', q{
SELECT (SELECT string_agg(s::text, E'\n') FROM mssql_cdc.status s)
  || (SELECT string_agg(e::text, E'\n') FROM mssql_cdc.errors e)
  || (SELECT string_agg(sv::text, E'\n') FROM mssql_cdc.servers sv)});
ok(length($everything) > 1000, 'status, errors and servers were read');
unlike($everything, qr/\Q$password\E/, 'no password in mssql_cdc.status, errors or servers');
my $log = slurp_file($node->logfile);
like($log, qr/a file of trusted certificates cannot be used/, 'the failures are in the server log');
unlike($log, qr/\Q$password\E/, 'no password in the server log');
my @leftover = glob($node->data_dir . '/base/pgsql_tmp/*freetds*');
is(scalar @leftover, 0, 'no private freetds.conf is left behind');

done_testing();
