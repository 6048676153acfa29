# Snapshot keyset bounds that do not depend on the session (issue 12,
# point 7).  The worker's SQL Server session is British -- the way a real
# deployment gets one: a `language` line in the [global] section of
# freetds.conf, which db-lib sends in the login record -- so SQL Server
# reads 'yyyy-mm-dd hh:mi:ss' datetime/smalldatetime literals as y-d-m.
# Tables keyed by datetime, smalldatetime, datetime2 and date, and by a
# varchar in a Cyrillic collation (code page 1251, not the database's 1252,
# so a non-Unicode literal of a key would arrive as '?'), are copied in
# chunks of 3 rows, with a pause/resume of the source in between: every
# source row lands exactly once, with its exact value.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;
use Time::HiRes qw(time usleep);

my $si = StandIn->start(capture_interval => 0.2);

# keys whose day is above and below 12, at the edges of datetime's 1/300 s
my @datetimes = map { sprintf('2020-%02d-%02dT%02d:%02d:%02d.%s', @$_) } (
	[ 1, 13, 10, 0, 0, '997' ], [ 1, 2, 0, 0, 0, '000' ], [ 2, 1, 23, 59, 59, '997' ],
	[ 3, 12, 12, 0, 0, '003' ], [ 3, 13, 12, 0, 0, '007' ], [ 4, 30, 8, 30, 0, '000' ],
	[ 5, 5, 5, 5, 5, '500' ], [ 6, 13, 0, 0, 1, '000' ], [ 7, 7, 7, 7, 7, '007' ],
	[ 8, 31, 18, 0, 0, '000' ], [ 11, 11, 11, 11, 11, '110' ], [ 12, 31, 23, 59, 59, '997' ],
	[ 12, 12, 0, 0, 0, '000' ], [ 10, 25, 1, 2, 3, '457' ]);
my @smalldatetimes = map { sprintf('2021-%02d-%02dT%02d:%02d:00', @$_) }
  ([ 1, 13, 10, 0 ], [ 2, 1, 0, 1 ], [ 3, 12, 12, 0 ], [ 3, 13, 12, 59 ], [ 6, 30, 23, 59 ],
	[ 7, 4, 4, 4 ], [ 9, 9, 9, 9 ], [ 12, 25, 6, 30 ]);
my @datetime2s = map { sprintf('2022-%02d-%02dT10:00:00.%07d', @$_) }
  ([ 1, 13, 10 ], [ 1, 13, 20 ], [ 2, 1, 9999990 ], [ 3, 14, 0 ], [ 12, 31, 5000000 ], [ 4, 4, 1234560 ]);
my @dates = map { sprintf('2023-%02d-%02d', @$_) } ([ 1, 13 ], [ 2, 1 ], [ 3, 12 ], [ 3, 13 ], [ 12, 31 ], [ 5, 20 ]);
# mixed case, accented Cyrillic, and a quote
my @cyrillic = ('Аня', 'борис', 'Вера', 'ГАЛЯ', 'Дарья', 'ёлка', 'Ёжик', 'Женя', 'зоя', "О'Нил", 'Юрий', 'яков',
	'Иван', 'Шура');

$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{ALTER DATABASE cdcdb SET ALLOW_SNAPSHOT_ISOLATION ON},
	q{CREATE TABLE dbo.k_dt (k datetime NOT NULL PRIMARY KEY, v int)},
	q{CREATE TABLE dbo.k_sdt (k smalldatetime NOT NULL PRIMARY KEY, v int)},
	q{CREATE TABLE dbo.k_dt2 (k datetime2(7) NOT NULL PRIMARY KEY, v int)},
	q{CREATE TABLE dbo.k_comp (d date NOT NULL, t datetime NOT NULL, v int, PRIMARY KEY (d, t))},
	q{CREATE TABLE dbo.k_cyr (k varchar(20) COLLATE Cyrillic_General_CI_AS NOT NULL PRIMARY KEY, v int)});

# values as language-independent ISO 8601 / N'' literals
my $i = 0;
$si->tsql_ok(
	join(' ', map { $i++; "INSERT INTO dbo.k_dt VALUES ('$_', $i);" } @datetimes),
	join(' ', map { $i++; "INSERT INTO dbo.k_sdt VALUES ('$_', $i);" } @smalldatetimes),
	join(' ', map { $i++; "INSERT INTO dbo.k_dt2 VALUES ('$_', $i);" } @datetime2s),
	join(' ', map { my $d = $_; map { $i++; "INSERT INTO dbo.k_comp VALUES ('$d', '$datetimes[$_]', $i);" } 0 .. 2 } @dates),
	join(' ', map { $i++; (my $q = $_) =~ s/'/''/g; "INSERT INTO dbo.k_cyr VALUES (N'$q', $i);" } @cyrillic),
	map({ "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
		qw(k_dt k_sdt k_dt2 k_comp k_cyr)));

# The deployment's freetds.conf: a British session for every db-lib login
my $conf = PostgreSQL::Test::Utils::tempdir() . '/freetds.conf';
open(my $fh, '>', $conf) or die "cannot write $conf: $!";
print $fh "[global]\n\ttds version = 7.4\n\tlanguage = british\n";
close $fh;
$ENV{FREETDSCONF} = $conf;

my $node = PostgreSQL::Test::Cluster->new('snapshot_literals');
$node->init;
$si->setup_node($node, conf => 'mssql_cdc.snapshot_chunk_rows = 3');
$node->start;
$si->create_source($node, 'src');
for my $t (qw(k_dt k_sdt k_dt2 k_comp k_cyr))
{
	$si->add_table_when_started($node, "SELECT mssql_cdc.add_table('src', 'dbo.$t')");
}
# stop and start the source while it copies: the next chunks resume from
# the recorded keys in a new session
$node->safe_psql('postgres', q{SELECT mssql_cdc.pause('src')});
usleep(300_000);
$node->safe_psql('postgres', q{SELECT mssql_cdc.resume('src')});

my $deadline = time + 90;
my $done;
while (time < $deadline)
{
	$done = $node->safe_psql('postgres', q{SELECT count(*) FROM mssql_cdc.status WHERE state = 'streaming'});
	last if $done == 5;
	usleep(200_000);
}
is($done, 5, 'every snapshot finished and the tables stream')
  or diag $node->safe_psql('postgres',
	'SELECT source_table, state, snapshot_rows, condition, last_error FROM mssql_cdc.status ORDER BY 1;'
	  . ' SELECT table_id, snapshot_last_key FROM mssql_cdc.table_state ORDER BY 1');

sub staged
{
	my ($table, $expr) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg($expr, E'\\n' ORDER BY v) FROM public.src_dbo_$table WHERE _cdc_op = 'snapshot'");
}

# the expected text of a staged timestamp: ISO without the T, the fraction
# of the staging column's precision (trailing zeros dropped, as PostgreSQL
# prints them)
sub pg_ts
{
	my ($iso, $digits) = @_;
	my ($d, $t) = split /T/, $iso;
	my ($hms, $frac) = split /\./, $t;
	$frac = substr(($frac // '') . '000000', 0, $digits);
	$frac =~ s/0+$//;
	return "$d $hms" . ($frac ne '' ? ".$frac" : '');
}

$i = 0;
is(staged('k_dt', q{k::text || '|' || v}),
	join("\n", map { $i++; pg_ts($_, 3) . "|$i" } @datetimes),
	'datetime keys: every row once, exact to the millisecond');
is(staged('k_sdt', q{k::text || '|' || v}),
	join("\n", map { $i++; pg_ts($_, 0) . "|$i" } @smalldatetimes),
	'smalldatetime keys: every row once');
is(staged('k_dt2', q{k::text || '|' || v}),
	join("\n", map { $i++; pg_ts($_, 6) . "|$i" } @datetime2s),
	'datetime2 keys: every row once');
is(staged('k_comp', q{d::text || '|' || t::text || '|' || v}),
	join("\n", map { my $d = $_; map { $i++; "$d|" . pg_ts($datetimes[$_], 3) . "|$i" } 0 .. 2 } @dates),
	'composite (date, datetime) keys: every row once');
is(staged('k_cyr', q{k || '|' || v}),
	join("\n", map { $i++; "$_|$i" } @cyrillic),
	'varchar keys in a Cyrillic collation: every row once, the text exact');
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM mssql_cdc.errors WHERE server_name = 'src'}),
	'0', 'no chunk failed on the way');

$node->stop;
done_testing();
