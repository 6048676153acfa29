# Helpers for tests of the mssql_cdc launcher (no SQL Server needed).
package Launcher;

use strict;
use warnings;

use Exporter 'import';
our @EXPORT_OK = qw(launcher_barrier);

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

1;
