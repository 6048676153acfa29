# Describing a source table and starting its snapshot take few round trips
# (issue 16 point 2): the table's columns, computed columns, primary key,
# the database's CDC state and the capture instances go to SQL Server as ONE
# batch, the captured columns as a second; a snapshot's L0 and row estimate
# as one.  A worker pays the describe for every table after each reconnect,
# and against a server 10 ms away five round trips per table were 50 ms.
# The description must stay exactly what it was: key order, computed
# columns, errors judged in the statements' order.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use JSON::PP qw(decode_json);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;
use Time::HiRes qw(usleep);

my $si = StandIn->start(capture_interval => 0.1);
plan skip_all => "counts requests in the stand-in's statement log" if $si->is_real;

$si->tsql_ok(q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.keyed (a int NOT NULL, b nvarchar(10) NOT NULL, c AS (a * 2), v int,
	  CONSTRAINT pk_keyed PRIMARY KEY (b, a))},
	q{CREATE TABLE dbo.plain (id int NOT NULL PRIMARY KEY, v int)},
	q{CREATE TABLE dbo.uncaptured (id int NOT NULL PRIMARY KEY)},
	q{INSERT INTO dbo.keyed (a, b, v) VALUES (1, N'x', 10), (2, N'x', 20), (1, N'y', 30)},
	q{INSERT INTO dbo.plain (id, v) VALUES (1, 1), (2, 2), (3, 3)},
	map({ "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
		qw(keyed plain)));

my $node = PostgreSQL::Test::Cluster->new('describe_requests');
$node->init;
$si->setup_node($node, conf => "mssql_cdc.poll_interval = 100");
$node->start;
$si->create_source($node, 'src');

sub q1 { return $node->safe_psql('postgres', $_[0]); }

# The batches the stand-in received since log entry $since, for sessions
# of application $app (undef: any), as [spid, sql]
sub batches_since
{
	my ($since, $app) = @_;
	my $entries = decode_json($si->ctl('log', "since=$since", 'limit=100000'))->{entries};
	my %app_of;
	my @batches;
	for my $e (@$entries)
	{
		$app_of{ $e->{spid} } = $e->{app} if $e->{event} eq 'login';
		push @batches, [ $e->{spid}, $e->{sql} ]
		  if $e->{event} eq 'batch' && (!defined $app || ($app_of{ $e->{spid} } // '') eq $app);
	}
	return @batches;
}

sub last_seq
{
	my $entries = decode_json($si->ctl('log', 'limit=100000'))->{entries};
	return @$entries ? $entries->[-1]{seq} : 0;
}

# the five statements of the first describe request
my @describe_parts = (qr/INFORMATION_SCHEMA\.COLUMNS/, qr/is_computed = 1/, qr/sp_pkeys/,
	qr/FROM sys\.databases WHERE database_id = DB_ID\(\)(?!;\s*IF)/,
	qr/EXEC sys\.sp_cdc_help_change_data_capture \@source_schema = N'dbo', \@source_name = N'\w+'/);

# Every batch that has one of the five statements has all five; returns
# how many such batches there were, per table
sub describe_batches
{
	my (@batches) = @_;
	my (%per_table, @split);
	for my $b (@batches)
	{
		my $sql = $b->[1];
		next unless $sql =~ /INFORMATION_SCHEMA\.COLUMNS|sp_pkeys|is_computed = 1/;
		my @missing = grep { $sql !~ $_ } @describe_parts;
		push @split, $sql if @missing;
		$per_table{$1}++ if $sql =~ /TABLE_NAME = N'(\w+)'/;
	}
	return (\%per_table, \@split);
}

# --- describe_source: one batch, and the description it always gave

my $since = last_seq();
is( q1(q{SELECT string_agg(column_name || ':' || coalesce(key_ordinal::text, '-') || ':' || captured
          || ':' || coalesce(staging_column, '-'), ' ' ORDER BY column_name)
        FROM mssql_cdc.describe_source('src', 'dbo.keyed')}),
	'a:2:true:a b:1:true:b c:-:true:- v:-:true:v',
	'describe_source: key ordinals as SQL Server declares them, the computed column not staged');
my ($per_table, $split) = describe_batches(batches_since($since));
is_deeply($per_table, { keyed => 1 }, 'describe_source sent the table\'s metadata in one batch')
  or diag explain [ batches_since($since) ];
is_deeply($split, [], 'no metadata statement went in a request of its own');
my @captured = grep { $_->[1] =~ /FROM cdc\.captured_columns/ } batches_since($since);
is(scalar(@captured), 1, 'the captured columns: a second request');

# Errors are judged in the statements' order, as when each was a request
my ($ret, $out, $err) = $node->psql('postgres',
	q{SELECT count(*) FROM mssql_cdc.describe_source('src', 'dbo.uncaptured')});
like($err, qr/table dbo\.uncaptured of server "src" is not enabled for change data capture/,
	'a table without a capture instance (Msg 22985 at the end of the batch): not enabled');
($ret, $out, $err) = $node->psql('postgres',
	q{SELECT count(*) FROM mssql_cdc.describe_source('src', 'dbo.nosuch')});
like($err, qr/table dbo\.nosuch does not exist on server "src"/,
	'a missing table: does not exist');
like($err, qr/INFORMATION_SCHEMA\.COLUMNS of the server's database lists no columns for it/,
	'a missing table: judged by its columns first, as before (not by the 22981 that follows)');
is(q1(q{SELECT count(*) FROM mssql_cdc.describe_source('src', 'dbo.plain')}), '2',
	'the next describe on a new connection works');

# --- the worker: one describe batch per table, one start request per snapshot

$since = last_seq();
$si->add_table($node, 'src', "dbo.$_", snapshot_mode => 'initial') for qw(keyed plain);
my $streaming = q{SELECT count(*) = 2 FROM mssql_cdc.status WHERE state = 'streaming'};
my $ok = 0;
for (1 .. 600)
{
	last if ($ok = q1($streaming) eq 't');
	usleep(100_000);
}
ok($ok, 'both tables copied and streaming')
  or diag q1(q{SELECT source_table, state, last_error FROM mssql_cdc.status});
is(q1(q{SELECT string_agg(b || a || '=' || v, ',' ORDER BY b, a) FROM src_dbo_keyed WHERE _cdc_op = 'snapshot'}),
	'x1=10,x2=20,y1=30', 'the copy of the table with a two-column key');
is(q1(q{SELECT count(*) FROM src_dbo_plain WHERE _cdc_op = 'snapshot'}), '3',
	'the copy of the other table');

my @worker = batches_since($since, 'mssql_cdc');
($per_table, $split) = describe_batches(@worker);
is_deeply($split, [], 'the worker: no metadata statement in a request of its own');
ok(($per_table->{keyed} // 0) >= 1 && ($per_table->{plain} // 0) >= 1,
	'the worker described each table in one batch')
  or diag explain $per_table;
my @starts = grep { $_->[1] =~ /FROM sys\.partitions/ } @worker;
ok(@starts >= 2, 'a start request per snapshot');
is(scalar(grep { $_->[1] !~ /^SELECT sys\.fn_cdc_get_max_lsn\(\);/ } @starts), 0,
	'each with L0 (sys.fn_cdc_get_max_lsn) in the same request as the row estimate');
is(q1(q{SELECT string_agg(source_table || ':' || coalesce(snapshot_total_estimate::text, '?'), ' ' ORDER BY source_table)
        FROM mssql_cdc.status}),
	'dbo.keyed:3 dbo.plain:3', 'the row estimates read with L0');

# a change after the copy arrives once
$si->tsql_ok(q{UPDATE dbo.keyed SET v = 11 WHERE a = 1 AND b = N'x'});
$ok = 0;
for (1 .. 300)
{
	last if ($ok = q1(q{SELECT count(*) = 1 FROM src_dbo_keyed WHERE _cdc_op = 'update_after' AND v = 11}) eq 't');
	usleep(100_000);
}
ok($ok, 'a change after the copy arrives');

done_testing();
