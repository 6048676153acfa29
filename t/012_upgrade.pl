# ALTER EXTENSION mssql_cdc UPDATE: every released version upgrades to the
# current one, and the result is the same extension a fresh CREATE EXTENSION
# makes (same member objects, same definitions, same column order, same
# privileges and comments).  The data side of an upgrade (staging tables and
# checkpoints in place, the worker streaming on) is tested where the layout
# changes (t/013_upgrade_data.pl).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('upgrade');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'mssql_cdc'");
$node->start;

my $current = $node->safe_psql('postgres',
	"SELECT default_version FROM pg_available_extensions WHERE name = 'mssql_cdc'");
my @released = split /\n/, $node->safe_psql('postgres',
	"SELECT version FROM pg_available_extension_versions WHERE name = 'mssql_cdc'"
	  . " AND version <> '$current' ORDER BY string_to_array(version, '.')::int[]");
ok(@released > 0, "released versions before $current: @released");

# The extension's member objects as pg_dump --binary-upgrade prints them
# (plain pg_dump prints only CREATE EXTENSION), without the lines that name
# OIDs, which differ between any two installations.
sub members
{
	my ($db) = @_;
	my ($stdout, $stderr);
	$node->run_log([ 'pg_dump', '--schema-only', '--binary-upgrade', '--no-owner',
		'-d', $node->connstr($db), '-f', "$PostgreSQL::Test::Utils::tmp_check/$db.sql" ]);
	open(my $fh, '<', "$PostgreSQL::Test::Utils::tmp_check/$db.sql") or die $!;
	my @lines;
	while (my $line = <$fh>)
	{
		next if $line =~ /binary_upgrade_set_next|pg_type_array_oid|^SET |^SELECT pg_catalog.set_config|^--|^\\(un)?restrict /;
		$line =~ s/WHERE oid = '\d+'/WHERE oid = '?'/;
		$line =~ s/'\{[\d,]+\}'/'{?}'/g if $line =~ /binary_upgrade_create_empty_extension/;
		push @lines, $line;
	}
	close $fh;
	return join('', @lines);
}

$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION mssql_cdc');
my $fresh = members('fresh');
like($fresh, qr/CREATE TABLE mssql_cdc\.table_state/, 'the dump shows member objects');

foreach my $from (@released)
{
	my $db = 'from_' . ($from =~ s/\./_/gr);
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, "CREATE EXTENSION mssql_cdc VERSION '$from'");
	$node->safe_psql($db, 'ALTER EXTENSION mssql_cdc UPDATE');
	is($node->safe_psql($db, "SELECT extversion FROM pg_extension WHERE extname = 'mssql_cdc'"),
		$current, "$from updates to $current");
	my $upgraded = members($db);
	if ($upgraded eq $fresh)
	{
		pass("$from -> $current: same objects as a fresh install");
	}
	else
	{
		fail("$from -> $current: same objects as a fresh install");
		my ($a, $b) = ("$PostgreSQL::Test::Utils::tmp_check/fresh.cmp",
			"$PostgreSQL::Test::Utils::tmp_check/$db.cmp");
		PostgreSQL::Test::Utils::append_to_file($a, $fresh);
		PostgreSQL::Test::Utils::append_to_file($b, $upgraded);
		diag(scalar `diff -u $a $b | head -80`);
	}
}

done_testing();
