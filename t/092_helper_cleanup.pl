# The test helpers stop the servers they start, also when the test using
# them does not end well: t/lib/StandIn.pm's stand-in when the test script
# dies, is terminated (SIGTERM) or killed (SIGKILL), and the benchmark's
# stand-in and PostgreSQL (bench/run, also behind t/090) when it is
# terminated.  A test script here is a small Perl program that starts the
# stand-in, prints its ports and then ends the way under test.
use strict;
use warnings;

use FindBin;
use IO::Socket::INET;
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

plan skip_all => 'needs the stand-in (MSSQL_CDC_TEST_SERVER is set)' if $ENV{MSSQL_CDC_TEST_SERVER};

my $root = "$FindBin::RealBin/..";
my $tmp = PostgreSQL::Test::Utils::tempdir();

sub port_open
{
	my ($port) = @_;
	my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp', Timeout => 2);
	return 0 unless $s;
	close $s;
	return 1;
}

# pids of processes whose command line contains $text
sub processes_with
{
	my ($text) = @_;
	my @found;
	opendir(my $dh, '/proc') or die "no /proc: $!";
	for my $pid (grep { /^\d+$/ } readdir $dh)
	{
		next if $pid == $$;
		open(my $fh, '<', "/proc/$pid/cmdline") or next;
		local $/;
		my $cmd = <$fh> // '';
		close $fh;
		$cmd =~ s/\0/ /g;
		my $cwd = readlink("/proc/$pid/cwd") // '';
		push @found, "$pid: $cmd" if index($cmd, $text) >= 0 || index($cwd, $text) >= 0;
	}
	closedir $dh;
	return @found;
}

sub gone_within
{
	my ($seconds, $check) = @_;
	my $deadline = time + $seconds;
	while (time < $deadline)
	{
		return 1 if $check->();
		usleep(100_000);
	}
	return $check->();
}

# --- t/lib/StandIn.pm ------------------------------------------------------------
my $script = "$tmp/uses_standin.pl";
open(my $fh, '>', $script) or die;
print $fh <<"EOF";
use strict;
use warnings;
use lib '$root/t/lib';
use StandIn;
use Test::More;
my \$si = StandIn->start;
my (\$how, \$report) = \@ARGV;
# the ports go to a file: STDOUT is PostgreSQL::Test::Utils' tee, whose copy
# to the real stdout is buffered until the script exits
open(my \$r, '>', "\$report.part") or die;
print \$r "ports \$si->{port} \$si->{control} pid \$si->{proc}{KIDS}[0]{PID}\\n";
close \$r;
rename("\$report.part", \$report) or die;
# wait for the go-ahead, so the stand-in is seen running before the end
my \$go = <STDIN>;
die "the test died\\n" if \$how eq 'die';
sleep 600;
EOF
close $fh;

for my $how (qw(die TERM KILL))
{
	my ($in, $out) = ('', '');
	my $report = "$tmp/ports.$how";
	my $h = IPC::Run::start([ $^X, $script, $how, $report ], '<', \$in, '>&', \$out, IPC::Run::timeout(120));
	gone_within(60, sub { $h->pump_nb; -e $report || !$h->pumpable });
	my ($port, $control, $pid) = (-e $report ? slurp_file($report) : '') =~ /ports (\d+) (\d+) pid (\d+)/;
	ok(defined $pid && port_open($port), "StandIn.pm, test ends by $how: the stand-in ran")
	  or diag $out;
	next unless defined $pid;
	$in .= "go\n";
	$h->pump_nb;
	kill($how, $h->{KIDS}[0]{PID}) unless $how eq 'die';
	eval { $h->finish };
	ok(gone_within(10, sub { !kill(0, $pid) }), "StandIn.pm, test ends by $how: run-standin (pid $pid) is gone");
	ok(!port_open($port) && !port_open($control), "StandIn.pm, test ends by $how: its ports are closed");
	kill('KILL', $pid);
}

# --- bench/run (as this user: bench/bench.py) --------------------------------
SKIP:
{
	skip 'tds_fdw is not installed (the benchmark needs it)', 3
	  unless -e `pg_config --pkglibdir` =~ s/\s+$//r . '/tds_fdw.so';
	my $dir = "$tmp/bench";
	mkdir $dir or die;
	local $ENV{TMPDIR} = $dir;
	my $out = '';
	my $h = IPC::Run::start([ "$root/bench/run", '--smoke', '--out', "$dir/report.md" ],
		'<', \undef, '>&', \$out, IPC::Run::timeout(300));
	$h->pump until $out =~ /^== snapshot/m || !$h->pumpable;
	my @running = processes_with($dir);
	ok(scalar(grep { /run-standin/ } @running) && scalar(grep { /postgres/ } @running),
		'bench: the stand-in and PostgreSQL run')
	  or diag "output:\n$out\nprocesses:\n@running";
	kill('TERM', $h->{KIDS}[0]{PID});
	eval { $h->finish };
	my @left;
	ok(gone_within(30, sub { @left = processes_with($dir); !@left }),
		'bench, terminated: no process of the run is left')
	  or diag join("\n", @left);
	isnt($h->full_result(0), 0, 'bench, terminated: fails');
	for (@left) { kill('KILL', $1) if /^(\d+):/ }
}

done_testing();
