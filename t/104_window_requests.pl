# Requests per window flat in the number of tables (issue 16, points 2
# and 5).  A source with many captured tables of which a few are busy: the
# worker's requests (mssql_cdc.worker_state(): requests_sent, windows = its
# polls) are one per poll and at most 3 per window while it applies a backlog,
# whatever the number of quiet tables; every row of every table arrives
# exactly once; and a window cut by batch_max_rows in the middle of the
# batch of change queries stages nothing beyond its end (the next window
# would stage it again: a duplicate) and loses nothing.  Plain T-SQL only.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;
use Time::HiRes qw(usleep);

my $ntables = 40;
my @busy = (1, 7, 20, 33, 40);
my @names = map { sprintf('t%02d', $_) } 1 .. $ntables;

my $log = PostgreSQL::Test::Utils::tempdir('winreq') . '/tds.log';
my $si = StandIn->start(capture_interval => 0.1, args => [ '--tds-log', $log ]);
$si->tsql_ok(q{EXEC sys.sp_cdc_enable_db},
	map({ "CREATE TABLE dbo.$_ (id int NOT NULL PRIMARY KEY, v int)" } @names),
	map({ "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
		@names));

my $node = PostgreSQL::Test::Cluster->new('winreq');
$node->init;
$si->setup_node($node, conf => "mssql_cdc.poll_interval = 100\nmssql_cdc.batch_max_rows = 25");
$node->start;
$si->create_source($node, 'src');
$si->add_table($node, 'src', "dbo.$_") for @names;

sub q1 { return $node->safe_psql('postgres', $_[0]); }

sub wait_for
{
	my ($sql, $what) = @_;
	for (1 .. 1200)
	{
		return 1 if q1($sql) eq 't';
		usleep(100_000);
	}
	diag q1(q{SELECT source_table, state, last_error FROM mssql_cdc.status WHERE state <> 'streaming'});
	diag q1(q{SELECT * FROM mssql_cdc.errors});
	return 0;
}

ok(wait_for(qq{SELECT count(*) = $ntables FROM mssql_cdc.status WHERE state = 'streaming'}),
	"all $ntables tables stream");
# Tables added one after the other start at different checkpoints and
# catch up in windows of their own (worker_catch_up.c); measured here is the
# window all the tables share once they met.
my $together = q{SELECT count(DISTINCT checkpoint_lsn::text) = 1 FROM mssql_cdc.status};
ok(wait_for($together), 'the tables read their windows together');

sub counters
{
	my ($r, $w) = split /\|/,
	  q1(q{SELECT requests_sent, windows FROM mssql_cdc.worker_state() WHERE server_name = 'src'});
	return ($r, $w);
}

# The backlog: 60 source transactions of 2-3 rows, each in two or three of
# the busy tables (a window cut by 25 rows falls in the middle of the
# tables' batch), published at once.
$si->ctl('capture_freeze');
my @batches;
my %expect;
for my $i (1 .. 60)
{
	my @in = map { $busy[($i + $_) % @busy] } 0 .. ($i % 2 ? 2 : 1);
	push @batches, 'BEGIN TRANSACTION; '
	  . join(' ', map { sprintf('INSERT INTO dbo.t%02d VALUES (%d, %d);', $_, $i, $i) } @in)
	  . ' COMMIT';
	$expect{ sprintf('t%02d', $_) }++ for @in;
}
$si->tsql_ok(@batches);
my ($r0, $w0) = counters();
my $log_mark = -s $log;
$si->ctl('capture_now');
my $total = 0;
$total += $_ for values %expect;
my $sum = join(' + ', map { "(SELECT count(*) FROM public.src_dbo_$_)" } @names);
ok(wait_for("SELECT $sum = $total"), "the backlog of $total rows arrived");
my ($r1, $w1) = counters();
# the windows that applied the backlog: the PostgreSQL transactions its rows
# landed in (a poll may apply several windows, so the worker's poll counter
# is not the count of windows)
my $rows_union = join(' UNION ALL ',
	map { sprintf('SELECT xmin::text AS x FROM public.src_dbo_t%02d', $_) } @busy);
my $windows = q1("SELECT count(DISTINCT x) FROM ($rows_union) u");
my $per_window = ($r1 - $r0) / ($windows || 1);
note sprintf('%d requests in %d polls and %d windows: %.2f per window with %d tables',
	$r1 - $r0, $w1 - $w0, $windows, $per_window, $ntables);
# the statements of the last window, for the record
if (open(my $fh, '<', $log))
{
	my @lines = grep { /"sql"/ } <$fh>;
	note 'last statements: ', join('', @lines[ -12 .. -1 ]) if @lines >= 12;
	close $fh;
}
# The budget is spent by the table whose rows reach it, and the window ends
# at that transaction for every table (the others' rows up to it are in the
# window: transactions stay whole), so a window holds up to about 25 rows
# per busy table: the 150 rows take two windows or more.
cmp_ok($windows, '>=', 2, 'the row budget (25) split the backlog into several windows');

# A table without rows in a window has no change query in its batch (issue
# 16 point 5): the window end's batch told which change tables have rows.
my %is_busy = map { $_ => 1 } @busy;
my @quiet = map { sprintf('t%02d', $_) } grep { !$is_busy{$_} } 1 .. $ntables;
my ($change_batches, $quiet_queries) = (0, 0);
if (open(my $fh, '<', $log))
{
	for my $line (grep { /"sql"/ && /AS c WITH \(NOLOCK\)/ } <$fh>)
	{
		$change_batches++;
		$quiet_queries += grep { $line =~ /\[dbo_${_}_CT\] AS c/ } @quiet;
	}
	close $fh;
}
cmp_ok($change_batches, '>=', 2, 'the backlog was read in change batches');
is($quiet_queries, 0,
	scalar(@quiet) . ' quiet tables: no change query of theirs in any change batch');

# The backlog's own statements (from the log's size before it was published):
# a quiet table's low watermark is not read again after a change batch (its
# probe and the mark after it proved the window), and once its probe found
# no row up to the max LSN, the windows up to there leave it out of their
# end's batch too (src/window_quiet.c)
my ($ends, $quiet_probes, $quiet_rechecks) = (0, 0, 0);
if (open(my $fh, '<', $log))
{
	seek($fh, $log_mark, 0);
	for my $line (grep { /"sql"/ } <$fh>)
	{
		if ($line =~ /SELECT TOP \(\d+\) start_lsn, .* FROM cdc\.lsn_time_mapping WHERE start_lsn > /)
		{
			$ends++;
			$quiet_probes += grep { $line =~ /\[dbo_${_}_CT\] WHERE \[__\$start_lsn\]/ } @quiet;
		}
		$quiet_rechecks += grep { $line =~ /fn_cdc_get_min_lsn\(N'dbo_$_'\)/ } @quiet
		  if $line =~ /AS c WITH \(NOLOCK\)/;
	}
	close $fh;
}
note "$ends window ends, $quiet_probes probes of quiet tables in them";
is($quiet_rechecks, 0, 'no quiet table\'s low watermark in a change batch');
cmp_ok($ends, '>=', 2, 'the backlog took several window ends');
cmp_ok($quiet_probes, '<', scalar(@quiet) * $ends,
	'a quiet table known to have no row up to the max LSN is not probed again in every window');
# at most two requests per poll (the poll and, idle, the window end that
# finds no transaction), and per window its end and its change batch (plus
# the fingerprint again at a cut window's new end): none per table (before:
# 5 + 2 per table and window)
cmp_ok($r1 - $r0, '<=', 2 * ($w1 - $w0) + 3 * $windows,
	"requests: at most 2 per poll and 3 per window with $ntables captured tables, "
	  . scalar(@busy) . ' busy');

# exactly once, and every cross-table transaction in one commit
for my $t (@names)
{
	my $want = $expect{$t} // 0;
	is(q1("SELECT count(*) || '/' || count(DISTINCT id) FROM public.src_dbo_$t"),
		"$want/$want", "$t: $want rows, each once");
}
my $union = join(' UNION ALL ',
	map { sprintf('SELECT id, xmin::text AS x FROM public.src_dbo_t%02d', $_) } @busy);
is(q1("SELECT count(*) FROM (SELECT id FROM ($union) u GROUP BY id HAVING count(DISTINCT x) > 1) d"),
	'0',
	'each source transaction landed in one PostgreSQL transaction in every table');

# idle polls (the stand-in's capture job adds a dummy mapping row each cycle):
# no request per quiet table either
$si->ctl('capture_resume');
ok(wait_for($together), 'the tables still read together');
($r0, $w0) = counters();
sleep 3;
($r1, $w1) = counters();
$per_window = ($r1 - $r0) / (($w1 - $w0) || 1);
note sprintf('idle: %d requests in %d polls: %.2f per poll', $r1 - $r0, $w1 - $w0, $per_window);
cmp_ok($w1 - $w0, '>=', 5, 'the worker polled while idle');
cmp_ok($per_window, '<=', 3, "idle: at most 3 requests per poll with $ntables tables");

# a quiet table that changes after its probe proved a range is read again
$si->tsql_ok('INSERT INTO dbo.t02 VALUES (1, 1)', 'INSERT INTO dbo.t03 VALUES (1, 1)');
ok(wait_for(q{SELECT (SELECT count(*) FROM public.src_dbo_t02) = 1 AND (SELECT count(*) FROM public.src_dbo_t03) = 1}),
	'rows of two quiet tables arrive once they change');

done_testing();
