# bench/run --smoke: every contender of the benchmark (stand-in raw serve,
# freebcp→COPY, tds_fdw, mssql_cdc snapshot and streaming, the latency
# poller, mssql_cdc in plain text and over TLS) runs on tiny tables and
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
	'>', \$stdout, '2>', \$stderr, IPC::Run::timeout(180));
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
			'freebcp→COPY', 'tds_fdw INSERT…SELECT', 'mssql_cdc snapshot') ],
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
			'mssql_cdc streaming (function)') ],
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

my $lat = $report->{latency};
ok($lat, 'latency measured');
cmp_ok($lat->{rows}, '>', 0, 'the poller saw every row the driver wrote');
like($lat->{$_}, $number, "latency $_ is a number") for qw(p50_ms p99_ms max_ms rate);
like(slurp_file($out), qr/## Targets/, 'the Markdown report has its targets table');

done_testing();
