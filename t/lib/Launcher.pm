# Helpers for tests of mssql_cdc's background processes: the launcher's
# loop barrier, the source worker's pid, and a SIGKILL of a worker followed
# by the crash restart.
package Launcher;

use strict;
use warnings;

use Exporter 'import';
use Time::HiRes qw(time usleep);
our @EXPORT_OK = qw(launcher_barrier kill_worker_and_wait wait_worker_pid);

# Returns once the launcher has completed a full loop iteration that started
# after this call: the first reload's log line proves the loop is at its top,
# the second one can only be logged after the iteration in between finished.
sub launcher_barrier
{
	my ($node) = @_;
	foreach my $round (1 .. 2)
	{
		my $from = -s $node->logfile;
		$node->reload;
		$node->wait_for_log(qr/mssql_cdc launcher reloaded its configuration/,
			$from);
	}
	return;
}

# SIGKILL a worker (a real crash) and return once the postmaster's crash
# restart is over and the node answers again.  Querying right after the
# kill races with the restart ("the database system is in recovery mode").
# Returns false when there was no such process.
sub kill_worker_and_wait
{
	my ($node, $pid) = @_;
	my $log_offset = -s $node->logfile;
	return 0 unless kill('KILL', $pid);
	$node->wait_for_log(qr/all server processes terminated; reinitializing/, $log_offset);
	# a psql refused during the restart exits before reading its query, and
	# IPC::Run dies of the broken pipe ("ack Broken pipe"): first wait for
	# the end of the recovery
	$node->wait_for_log(qr/database system is ready to accept connections/, $log_offset);
	$node->poll_query_until('postgres', 'SELECT true')
	  or die 'the node did not come back after the crash restart';
	return 1;
}

# The pid of the node's one source worker, waiting up to $seconds for it to
# (re)appear; undef if it does not.  Connection failures during a crash
# restart count as "not yet".
sub wait_worker_pid
{
	my ($node, $seconds) = @_;
	my $deadline = time + $seconds;
	while (time < $deadline)
	{
		my ($ret, $stdout) = $node->psql('postgres',
			q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'mssql_cdc worker'});
		return $stdout if $ret == 0 && $stdout =~ /^\d+$/;
		usleep(50_000);
	}
	return undef;
}

1;
