# bench/run --smoke: every contender of the benchmark (stand-in raw serve,
# freebcp→COPY, tds_fdw, mssql_cdc snapshot and streaming, the mirror
# contenders (snapshot into a mirror, streaming into a mirror), the latency
# poller, mssql_cdc in plain text and over TLS, snapshot and streaming at a
# simulated round trip of 0 and 10 ms) runs on tiny tables and
# copies the same rows.  Not a timed test:
# it checks row counts and that each figure is a number, so the benchmark
# cannot rot between the runs that produce bench/results.
use strict;
use utf8;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;

plan skip_all => 'the benchmark needs the stand-in (MSSQL_CDC_TEST_SERVER is set)'
  if $ENV{MSSQL_CDC_TEST_SERVER};
plan skip_all => 'tds_fdw is not installed (scripts/install-deps installs postgresql-15-tds-fdw)'
  unless -e `pg_config --pkglibdir` =~ s/\s+$//r . '/tds_fdw.so'
  || -e '/usr/lib/postgresql/15/lib/tds_fdw.so';

my $root = "$FindBin::RealBin/..";
my $out = PostgreSQL::Test::Utils::tempdir() . '/smoke.md';
my ($stdout, $stderr) = ('', '');
my $ok = IPC::Run::run([ "$root/bench/run", '--smoke', '--out', $out ],
	'>', \$stdout, '2>', \$stderr, IPC::Run::timeout(300));
ok($ok, 'bench/run --smoke succeeded') or diag "stdout:\n$stdout\nstderr:\n$stderr";

my $report = eval {
	open(my $fh, '<', $out =~ s/\.md$/.json/r) or die "no report: $!";
	local $/;
	decode_json(<$fh>);
};
ok($report, 'the run wrote its JSON report') or BAIL_OUT("no report: $@");
my $rows = $report->{config}{rows};
cmp_ok($rows, '>', 0, "smoke size: $rows rows");

my $number = qr/^\d+(\.\d+)?([eE][-+]?\d+)?$/;
sub check_contenders
{
	my ($phase, $results, $expected) = @_;
	for my $name (sort keys %$results)
	{
		my $r = $results->{$name};
		is($r->{rows}, $expected, "$phase: $name copied all $expected rows");
		like($r->{seconds}, $number, "$phase: $name has a time");
		cmp_ok($r->{seconds}, '>', 0, "$phase: $name took a positive time");
	}
}

for my $table (qw(narrow wide))
{
	my $res = $report->{snapshot}{$table};
	ok($res, "snapshot of the $table table measured") or next;
	is_deeply([ sort keys %$res ],
		[ sort('stand-in raw serve (cold)', 'stand-in raw serve', 'stand-in keyset chunks',
			'freebcp→COPY', 'tds_fdw INSERT…SELECT', 'mssql_cdc snapshot',
			# the mirror contenders (doc/mirror.md) copy the narrow table only
			$table eq 'narrow'
			? ('mssql_cdc mirror snapshot (mirror only)', 'mssql_cdc mirror snapshot (mirror + changelog)')
			: ()) ],
		"snapshot $table: every contender ran");
	check_contenders("snapshot $table", $res, $rows);
	like($res->{'mssql_cdc snapshot'}{peak_rss_anon_mb}, $number, "snapshot $table: worker memory sampled");
}

my @streams = sort keys %{ $report->{streaming} // {} };
is(scalar(@streams), 2, 'streaming with small and with large source transactions');
for my $label (@streams)
{
	my $res = $report->{streaming}{$label};
	my ($changes) = $label =~ /^(\d+) changes/;
	is_deeply([ sort keys %$res ],
		[ sort('stand-in change query', 'stand-in change query (direct)', 'freebcp→COPY', 'mssql_cdc streaming',
			'mssql_cdc streaming (function)',
			# the mirror contender applies the small-transaction backlog only
			$label =~ / 10 rows per transaction/ ? ('mssql_cdc mirror streaming (mirror only)') : ()) ],
		"streaming $label: every contender ran (both change query paths)");
	check_contenders("streaming $label", $res, $changes);
	like($res->{$_}{cpu_s}, $number, "streaming $label: worker CPU sampled ($_)")
	  for ('mssql_cdc streaming', 'mssql_cdc streaming (function)');
}

# the cost of TLS: snapshot and streaming, in plain text and over TLS
my $tls = $report->{tls} // {};
is(scalar(keys %$tls), 4, 'TLS phase: snapshot and streaming, each plain and over TLS');
for my $name (sort keys %$tls)
{
	my $expected = $name =~ /^snapshot/ ? $rows
	  : $rows - $rows % $report->{config}{small_txn_rows};
	is($tls->{$name}{rows}, $expected, "TLS phase, $name: all $expected rows");
	cmp_ok($tls->{$name}{seconds}, '>', 0, "TLS phase, $name: a positive time");
	is($tls->{$name}{encrypted}, $name =~ /plain text/ ? 'f' : 't',
		"TLS phase, $name: status shows the connection " . ($name =~ /plain text/ ? 'unencrypted' : 'encrypted'));
}

# the simulated network round trip: snapshot and streaming at 0 and 10 ms,
# next to freebcp→COPY at the same delay, with the worker's requests counted
my $rtt = $report->{rtt} // {};
is_deeply([ sort keys %$rtt ], [ '0', '10' ], 'RTT phase at 0 and 10 ms');
for my $ms (sort keys %$rtt)
{
	my $small = $report->{config}{small_txn_rows};
	for my $phase (qw(snapshot streaming))
	{
		my $res = $rtt->{$ms}{$phase};
		my $expected = $phase eq 'snapshot' ? $rows : $rows - $rows % $small;
		check_contenders("RTT $ms ms, $phase", $res, $expected);
		my ($key, $per) = $phase eq 'snapshot'
		  ? ('chunks', 'requests_per_chunk') : ('windows', 'requests_per_window');
		cmp_ok($res->{'mssql_cdc'}{$key}, '>', 0, "RTT $ms ms, $phase: the worker's $key were counted");
		cmp_ok($res->{'mssql_cdc'}{requests}, '>=', $res->{'mssql_cdc'}{$key},
			"RTT $ms ms, $phase: requests counted");
		like($res->{'mssql_cdc'}{$per}, $number, "RTT $ms ms, $phase: $per is a number");
		# the worker's own counters (worker_state()) and the stand-in's agree
		# (one request may be in flight while they are read); in the snapshot
		# the stand-in also counts add_table's checks, made by the backend
		# with the server's application_name
		my $diff = $res->{'mssql_cdc'}{standin_requests} - $res->{'mssql_cdc'}{requests};
		if ($phase eq 'snapshot')
		{
			cmp_ok($diff, '>=', 0, "RTT $ms ms, snapshot: the stand-in saw every request the worker counted");
		}
		else
		{
			# the two counters are read one after the other while the worker
			# polls on: they may be a window's requests apart, not more
			cmp_ok(abs($diff), '<=', 2 + 2 * $res->{'mssql_cdc'}{requests_per_window},
				"RTT $ms ms, streaming: worker_state().requests_sent matches the stand-in's count");
		}
		cmp_ok($res->{'mssql_cdc'}{"standin_$key"}, '>', 0, "RTT $ms ms, $phase: the stand-in saw the $key");
	}
}
# streaming flat in the number of tables: the same backlog in 5 busy tables,
# alone and among quiet ones (issue 16 point 5)
for my $ms (sort keys %$rtt)
{
	my $tabs = $rtt->{$ms}{tables} // {};
	my @n = sort { $a <=> $b } keys %$tabs;
	is(scalar(@n), 2, "RTT $ms ms: streaming with few and with many tables");
	for my $n (@n)
	{
		my $r = $tabs->{$n};
		cmp_ok($r->{rows}, '>', 0, "RTT $ms ms, $n tables: rows applied");
		cmp_ok($r->{windows}, '>', 0, "RTT $ms ms, $n tables: windows counted");
		like($r->{requests_per_window}, $number, "RTT $ms ms, $n tables: requests per window is a number");
	}
	is($tabs->{ $n[0] }{rows}, $tabs->{ $n[-1] }{rows}, "RTT $ms ms: the same busy rows with few and many tables")
	  if @n == 2;
}
# a streaming window at 10 ms cannot be faster than its round trips
cmp_ok($rtt->{10}{streaming}{'mssql_cdc'}{seconds}, '>=',
	0.010 * $rtt->{10}{streaming}{'mssql_cdc'}{requests} * 0.9,
	'RTT 10 ms: the worker waited for each of its requests')
  if $rtt->{10};

my $lat = $report->{latency};
ok($lat, 'latency measured');
cmp_ok($lat->{rows}, '>', 0, 'the poller saw every row the driver wrote');
like($lat->{$_}, $number, "latency $_ is a number") for qw(p50_ms p99_ms max_ms rate);
like(slurp_file($out), qr/## Targets/, 'the Markdown report has its targets table');

done_testing();
