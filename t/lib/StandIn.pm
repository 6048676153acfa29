# StandIn.pm — the SQL Server stand-in for TAP tests: start it on free
# loopback ports, run T-SQL through FreeTDS's tsql, send control commands,
# and stop it whatever way the test ends.
#
#   my $si = StandIn->start(capture_interval => 0.2, databases => ['other']);
#   my $si = StandIn->start(args => ['--split-update-seqval', 'inverted']);   # run-standin flags
#   $si->tsql_ok('CREATE TABLE dbo.t (id int PRIMARY KEY)', ...);
#   $si->ctl('drop_after_rows', 'rows=5');
#
# With tls => 'off' | 'on' | 'required' | 'not-supported' the stand-in gets
# a server certificate of a private test CA (test/standin/make-test-certs;
# $si->cert_file('ca') is the CA to trust) and that encryption setting;
# $si->use_certificate('expired'), $si->tls_offer('on') and
# $si->tls_protocols('1.3') change them for the logins that follow.
#
# A real SQL Server instead of the stand-in: set
#   MSSQL_CDC_TEST_SERVER='host=sql1;port=1433;user=sa;password=…;database=cdctest'
# (a scratch database the tests may fill; the login needs sysadmin to enable
# CDC), plus ca_file=…, trust_server_certificate=true, encryption=… or
# check_host_name=false when its certificate needs them (tls_options).  Tests that use the stand-in's control port (fault injection, the
# capture job's controls) are skipped there: their whole point is a fault a
# real server cannot be told to produce.
package StandIn;

use strict;
use warnings;

use Cwd qw(abs_path);
use File::Basename qw(dirname);
use IPC::Run;
use PostgreSQL::Test::Utils ();
use Test::More;
use Time::HiRes ();

my $root = abs_path(dirname(__FILE__) . '/../..');
my $python = '/usr/bin/python3';
my @running;

# MSSQL_CDC_TEST_SERVER parsed, or undef when the stand-in is to be used
sub real_server
{
	my $spec = $ENV{MSSQL_CDC_TEST_SERVER};
	return undef unless defined $spec && $spec ne '';
	my %conf = map { split(/=/, $_, 2) } split(/;/, $spec);
	for my $key (qw(host port user password database))
	{
		die "MSSQL_CDC_TEST_SERVER lacks $key=" unless defined $conf{$key};
	}
	return \%conf;
}

# Does the running test script talk to the stand-in's control port?
sub script_uses_control_port
{
	open(my $fh, '<', $0) or return 1;
	local $/;
	my $text = <$fh>;
	close $fh;
	return $text =~ /->ctl\(|standin_ctl\(/;
}

sub start
{
	my ($class, %opts) = @_;
	my $real = real_server();
	if ($real)
	{
		plan skip_all => 'needs the stand-in\'s control port (fault injection); MSSQL_CDC_TEST_SERVER is set'
		  if script_uses_control_port();
		my $self = bless { real => 1, %$real }, $class;
		$self->tsql_ok("IF DB_ID(N'$_') IS NULL CREATE DATABASE [$_]")
		  for @{ $opts{databases} // [] };
		return $self;
	}
	my $self = bless { out => '', err => '', host => '127.0.0.1', user => 'sa',
		password => 'Passw0rd!', database => 'cdcdb' }, $class;
	my $interval = $opts{capture_interval} // 0.2;
	my @tls;
	if (defined $opts{tls})
	{
		$self->{certs} = PostgreSQL::Test::Utils::tempdir('certs');
		system("$root/test/standin/make-test-certs", $self->{certs}) == 0
		  or die 'make-test-certs failed';
		@tls = ('--tls-cert', "$self->{certs}/server.pem", '--tls-key',
			"$self->{certs}/server.key", '--tls-offer', $opts{tls});
	}
	my $timer = IPC::Run::timer(60);
	$self->{proc} = IPC::Run::start(
		[ $python, "$root/test/standin/run-standin", '--port', '0',
		  '--control-port', '0', '--capture-interval', $interval, @tls,
		  # a test killed before its END block runs must not leave it listening
		  '--exit-with-parent',
		  map({ ('--database', $_) } 'cdcdb', @{ $opts{databases} // [] }),
		  @{ $opts{args} // [] } ],
		'<', \undef, '>', \$self->{out}, '2>', \$self->{err}, $timer);
	$timer->start;
	$self->{proc}->pump
	  until $self->{out} =~ /standin ready port=(\d+) control=(\d+)/
	  || $timer->is_expired
	  || !$self->{proc}->pumpable;
	($self->{port}, $self->{control}) =
	  $self->{out} =~ /standin ready port=(\d+) control=(\d+)/;
	die "stand-in did not start: $self->{out} $self->{err}"
	  unless defined $self->{control};
	push @running, $self;
	return $self;
}

sub port { return $_[0]->{port} }
sub control_port { return $_[0]->{control} }
sub host { return $_[0]->{host} }
sub user { return $_[0]->{user} }
sub password { return $_[0]->{password} }
sub database { return $_[0]->{database} }
sub is_real { return $_[0]->{real} }

# The TLS options of a foreign server for this SQL Server, as a fragment
# of an OPTIONS list (empty or starting with ", "): the stand-in without a
# certificate cannot encrypt, so it is asked for plain text explicitly;
# with one (start tls => ...) its certificate is validated against the
# test CA; a real server takes what MSSQL_CDC_TEST_SERVER says.
sub tls_options
{
	my ($self) = @_;
	if ($self->{real})
	{
		return join('', map { defined $self->{$_} ? ", $_ '$self->{$_}'" : '' }
			  qw(encryption ca_file crl_file trust_server_certificate check_host_name));
	}
	return ", ca_file '" . $self->cert_file('ca') . "'" if $self->{certs};
	return ", encryption 'off'";
}

# A file of make-test-certs (start with tls => ...): cert_file('ca') is the
# test CA, cert_file('expired', 'key') the key of the expired certificate.
sub cert_file
{
	my ($self, $name, $ext) = @_;
	die 'the stand-in was started without tls' unless $self->{certs};
	return "$self->{certs}/$name." . ($ext // 'pem');
}

# Serve another certificate of make-test-certs to the logins that follow.
sub use_certificate
{
	my ($self, $name) = @_;
	$self->ctl('tls', 'cert=' . $self->cert_file($name), 'key=' . $self->cert_file($name, 'key'));
	return;
}

# What PRELOGIN offers from now on: off, on, required, not-supported.
sub tls_offer
{
	my ($self, $offer) = @_;
	$self->ctl('tls', "offer=$offer");
	return;
}

# The TLS versions enabled on the server's machine from now on: '1.2',
# '1.3' (no TDS 7.x handshake succeeds), '1.0' ... (ENGINE.md, TLS).
sub tls_protocols
{
	my ($self, $protocols) = @_;
	$self->ctl('tls', "protocols=$protocols");
	return;
}

# Run T-SQL batches (one "go" each); returns tsql's output.
sub tsql
{
	my ($self, @batches) = @_;
	my $script = join('', map { "$_\ngo\n" } @batches) . "exit\n";
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[ 'tsql', '-H', $self->{host}, '-p', $self->{port}, '-U', $self->{user},
		  '-P', $self->{password}, '-D', $self->{database} ],
		'<', \$script, '>', \$out, '2>', \$err, IPC::Run::timeout(300));
	# tsql's output ends in a prompt without a newline, and it writes a
	# carriage return before each message: keep "Msg …" of stderr at the
	# start of a line so that tsql_ok sees it
	my $all = $out . "\n" . $err;
	$all =~ s/\r//g;
	return $all;
}

# Like tsql, but dies when SQL Server reported an error.
sub tsql_ok
{
	my ($self, @batches) = @_;
	my $out = $self->tsql(@batches);
	die "T-SQL failed:\n$out\n" if $out =~ /^Msg \d+/m;
	return $out;
}

# Once the capture job has recorded $count change rows of capture instance
# $ci (waiting up to $seconds, default 60): the commit LSN of its newest
# change, as 0x + 20 hex digits.
sub captured_lsn
{
	my ($self, $ci, $count, $seconds) = @_;
	my $deadline = time() + ($seconds // 60);
	while (time() < $deadline)
	{
		my $out = $self->tsql("SELECT 'n=' + CAST(COUNT(*) AS varchar(20)) FROM cdc.${ci}_CT");
		if ($out =~ /n=(\d+)/ && $1 >= $count)
		{
			my $lsn = $self->tsql(
				"SELECT 'lsn=' + CONVERT(varchar(30), MAX(__\$start_lsn), 1) FROM cdc.${ci}_CT");
			return uc($1) =~ s/^0X/0x/r if $lsn =~ /lsn=(0x[0-9A-F]{20})/i;
		}
		select(undef, undef, undef, 0.1);
	}
	die "capture of $ci never reached $count rows";
}

# Run an add_table statement once SQL Server's capture job has run and
# started the capture instance (add_table refuses before that: there is no
# max or start LSN yet); returns its output, dies on any other error.
sub add_table_when_started
{
	my ($self, $node, $sql) = @_;
	for (1 .. 300)
	{
		my ($ret, $out, $err) = $node->psql('postgres', $sql);
		return $out if $ret == 0;
		die "add_table failed: $err"
		  unless $err =~ /has not been started by the capture job|capture job of server "[^"]*" has not run yet/;
		Time::HiRes::usleep(100_000);
	}
	die 'the capture job never started the capture instance';
}

# A control command (standin-ctl CMD key=value ...); dies on failure.
sub ctl
{
	my ($self, @args) = @_;
	die "standin-ctl @args: a real SQL Server has no control port" if $self->{real};
	my ($out, $err) = ('', '');
	IPC::Run::run([ $python, "$root/test/standin/standin-ctl", '--port',
					$self->{control}, @args ], '>', \$out, '2>', \$err)
	  or die "standin-ctl @args failed: $out $err";
	return $out;
}

sub stop
{
	my ($self) = @_;
	$self->{proc}->kill_kill if $self->{proc} && $self->{proc}->pumpable;
	@running = grep { $_ != $self } @running;
}

END
{
	$_->{proc}->kill_kill for grep { $_->{proc} && $_->{proc}->pumpable } @running;
}

# A Postgres node configured for the worker (tests share this setup).
sub setup_node
{
	my ($self, $node, %opts) = @_;
	my $extra = $opts{conf} // '';
	$node->append_conf(
		'postgresql.conf', qq{
shared_preload_libraries = 'mssql_cdc'
mssql_cdc.database = 'postgres'
mssql_cdc.poll_interval = 200
mssql_cdc.retry_max_backoff = 2
log_min_messages = info
$extra
});
	return;
}

# CREATE EXTENSION, the foreign server and the user mapping.  The server's
# data_query_mode is the option given, else MSSQL_CDC_TEST_DATA_QUERY_MODE
# (to run a test through the function path), else the default.
sub create_source
{
	my ($self, $node, $server, %opts) = @_;
	my $qt = $opts{query_timeout} // 10;
	my $db = $opts{database} // $self->{database};
	my $tls = $self->tls_options;
	my $mode = $opts{data_query_mode} // $ENV{MSSQL_CDC_TEST_DATA_QUERY_MODE};
	my $mode_option = $mode ? ", data_query_mode '$mode'" : '';
	$node->safe_psql('postgres', qq{
CREATE EXTENSION IF NOT EXISTS mssql_cdc;
CREATE SERVER $server FOREIGN DATA WRAPPER mssql_cdc
  OPTIONS (host '$self->{host}', port '$self->{port}', database '$db',
           query_timeout '$qt', login_timeout '5'$tls$mode_option);
CREATE USER MAPPING FOR CURRENT_USER SERVER $server
  OPTIONS (username '$self->{user}', password '$self->{password}');
});
	return;
}

# Capture a source table (add_table creates its staging table).
sub add_table
{
	my ($self, $node, $server, $table, %opts) = @_;
	my $mode = $opts{snapshot_mode} // 'never';
	return $node->safe_psql('postgres',
		"SELECT mssql_cdc.add_table('$server', '$table', snapshot_mode => '$mode')");
}

1;
