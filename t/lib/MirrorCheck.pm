# Compare a mirror table with its source table in the stand-in (or a real
# SQL Server): both sides are read as one text line per row, in key order.
package MirrorCheck;

use strict;
use warnings;
use Exporter 'import';
use Time::HiRes qw(usleep);

our @EXPORT = qw(source_rows mirror_rows wait_mirror_equal);

# $select: a T-SQL SELECT of one text expression per row, ORDER BY key;
# each row is printed with the prefix 'R=' by the caller's expression.
sub source_rows
{
	my ($si, $select) = @_;
	my $out = $si->tsql_ok($select);
	my @rows = map { s/\s+$//r } ($out =~ /^R=(.*)$/mg);
	return join("\n", @rows);
}

# $select: a PostgreSQL SELECT returning one text column per row, in key order
sub mirror_rows
{
	my ($node, $select) = @_;
	return $node->safe_psql('postgres', "SELECT string_agg(r, E'\\n') FROM ($select) x(r)");
}

# Poll until the mirror equals the source (the source read once per poll:
# it must be quiet); returns (equal, source text, mirror text).
sub wait_mirror_equal
{
	my ($node, $si, $ms_select, $pg_select, $seconds) = @_;
	my ($src, $mir) = ('', '');
	for (1 .. ($seconds // 60) * 4)
	{
		$src = source_rows($si, $ms_select);
		$mir = mirror_rows($node, $pg_select);
		return (1, $src, $mir) if $src eq $mir;
		usleep(250_000);
	}
	return (0, $src, $mir);
}

1;
