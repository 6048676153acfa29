# scripts/demo stops everything it started: the SQL Server stand-in
# (run-standin, not only the shell that started it) and its private
# PostgreSQL, when it ends, when a step fails, and when it is interrupted
# (Ctrl-C: SIGINT to its process group; SIGTERM to the script alone); with
# --keep it leaves both running and prints their real pids.
#
# The demo runs as this (unprivileged) user, so it installs nothing and uses
# the extension installed for the PostgreSQL on PATH (scripts/demo's header).
# Each run gets its own TMPDIR: whatever process still refers to that
# directory (command line or working directory) was left behind by the run.
use strict;
use warnings;

use FindBin;
use IO::Socket::INET;
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

plan skip_all => 'as root scripts/demo installs packages; this check runs it as an unprivileged user'
  if $> == 0;

my $root = "$FindBin::RealBin/..";
my $tmp = PostgreSQL::Test::Utils::tempdir();

# Processes that refer to $dir: "pid: command line"
sub processes_in
{
	my ($dir) = @_;
	my @found;
	opendir(my $dh, '/proc') or die "no /proc: $!";
	for my $pid (grep { /^\d+$/ } readdir $dh)
	{
		next if $pid == $$;
		my $cmd = '';
		if (open(my $fh, '<', "/proc/$pid/cmdline"))
		{
			local $/;
			$cmd = <$fh> // '';
			close $fh;
		}
		$cmd =~ s/\0/ /g;
		my $cwd = readlink("/proc/$pid/cwd") // '';
		push @found, "$pid: $cmd" if index($cmd, $dir) >= 0 || index($cwd, $dir) >= 0;
	}
	closedir $dh;
	return @found;
}

sub port_open
{
	my ($port) = @_;
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp', Timeout => 2);
	return 0 unless $s;
	close $s;
	return 1;
}

# Run the demo in its own session (a terminal's Ctrl-C reaches the whole
# foreground process group).  $o{interrupt}: a signal sent once both servers
# run, to the group ('INT') or to the script alone ('TERM').
sub run_demo
{
	my (%o) = @_;
	my $dir = "$tmp/$o{name}";
	mkdir $dir or die "mkdir $dir: $!";
	local $ENV{TMPDIR} = $dir;
	local $ENV{PATH} = $o{path} ? "$o{path}:$ENV{PATH}" : $ENV{PATH};
	my $out = '';
	my $timer = IPC::Run::timeout(300);
	my $h = IPC::Run::start([ 'setsid', "$root/scripts/demo", @{ $o{args} // [] } ],
		'<', \undef, '>&', \$out, $timer);
	if ($o{interrupt})
	{
		$h->pump until $out =~ /^== mssql_cdc in PostgreSQL/m || !$h->pumpable;
		my $pid = $h->{KIDS}[0]{PID};
		kill($o{interrupt}, $o{interrupt} eq 'INT' ? -$pid : $pid);
	}
	$h->finish;
	my %run = (dir => $dir, out => $out, status => $h->full_result(0));
	($run{sqlport}) = $out =~ /stand-in listening on 127\.0\.0\.1:(\d+)/;
	($run{pgport}) = $out =~ /PostgreSQL listening on 127\.0\.0\.1:(\d+)/;
	return \%run;
}

# Nothing of the run is left: no process, no listening port, no directory.
sub all_stopped
{
	my ($what, $run) = @_;
	my @left;
	my $deadline = time + 15;
	while (time < $deadline)
	{
		@left = processes_in($run->{dir});
		last unless @left;
		usleep(100_000);
	}
	is_deeply(\@left, [], "$what: no process of the run is left")
	  or diag "output:\n$run->{out}";
	ok(defined $run->{sqlport} && defined $run->{pgport}, "$what: both servers had started");
	ok(!port_open($run->{sqlport}), "$what: the stand-in's port $run->{sqlport} is closed")
	  if defined $run->{sqlport};
	ok(!port_open($run->{pgport}), "$what: PostgreSQL's port $run->{pgport} is closed")
	  if defined $run->{pgport};
	is_deeply([ glob("$run->{dir}/mssql_cdc-run.*") ], [], "$what: its directory is removed");
	# what a broken demo left behind goes now (by pid: processes of this test)
	for (@left) { kill('KILL', $1) if /^(\d+):/ }
}

# --- a run to its end ---------------------------------------------------------
my $run = run_demo(name => 'normal');
is($run->{status} >> 8, 0, 'demo: exit status 0') or diag $run->{out};
like($run->{out}, qr/== mssql_cdc\.status.*state\s+\| streaming/s, 'demo: the table streams');
all_stopped('demo', $run);

# --- a step fails (tsql, the first use of SQL Server after both started) -------
my $bin = "$tmp/failing-bin";
mkdir $bin or die;
open(my $fh, '>', "$bin/tsql") or die;
print $fh "#!/bin/sh\necho 'tsql: failure injected by t/091' >&2\nexit 1\n";
close $fh;
chmod 0755, "$bin/tsql";
$run = run_demo(name => 'failing', path => $bin);
isnt($run->{status} >> 8, 0, 'failing step: the demo fails');
like($run->{out}, qr/failure injected by t\/091/, 'failing step: at the injected failure');
all_stopped('failing step', $run);

# --- interrupted --------------------------------------------------------------
$run = run_demo(name => 'sigint', interrupt => 'INT');
isnt($run->{status}, 0, 'Ctrl-C: the demo stops with a failure status');
all_stopped('Ctrl-C', $run);

$run = run_demo(name => 'sigterm', interrupt => 'TERM');
isnt($run->{status}, 0, 'SIGTERM: the demo stops with a failure status');
all_stopped('SIGTERM', $run);

# --- --keep: both left running, with the pids that stop them -----------------
$run = run_demo(name => 'keep', args => ['--keep']);
is($run->{status} >> 8, 0, '--keep: exit status 0') or diag $run->{out};
my ($pgpid, $pgdata, $pgport, $sipid, $siport) =
  $run->{out} =~ /left running: PostgreSQL \((?:pid (\d+), )?(\S+), port (\d+)\), stand-in \(pid (\d+), port (\d+)\)/;
ok(defined $sipid, '--keep: says what it left running') or diag $run->{out};
SKIP:
{
	skip 'no --keep line', 6 unless defined $sipid;
	my $postmaster = (split /\n/, slurp_file("$pgdata/postmaster.pid"))[0];
	is($pgpid, $postmaster, "--keep: PostgreSQL's pid is the postmaster's ($postmaster)");
	my $cmd = -r "/proc/$sipid/cmdline" ? slurp_file("/proc/$sipid/cmdline") =~ s/\0/ /gr : '';
	like($cmd, qr/run-standin/, "--keep: the stand-in's pid $sipid is run-standin itself");
	ok(port_open($siport), "--keep: the stand-in listens on $siport");
	ok(port_open($pgport), "--keep: PostgreSQL listens on $pgport");
	# stop them the way the message says: by those pids
	kill('TERM', $sipid) if $cmd =~ /run-standin/;
	kill('TERM', $pgpid) if defined $pgpid && $pgpid == $postmaster;
	my @left;
	my $deadline = time + 15;
	while (time < $deadline)
	{
		@left = processes_in($run->{dir});
		last unless @left;
		usleep(100_000);
	}
	is_deeply(\@left, [], '--keep: the printed pids stop everything');
	ok(!port_open($siport) && !port_open($pgport), '--keep: both ports closed after that');
	for (@left) { kill('KILL', $1) if /^(\d+):/ }
}

done_testing();
