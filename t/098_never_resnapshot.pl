# resnapshot of a table that cannot be copied (issue 14, point 5).  A table
# without a key streams with snapshot_mode 'never'; after a retention
# overrun a new copy is impossible, so resnapshot() must continue from the
# oldest change CDC still keeps instead of jumping to the current max LSN:
# every retained change after the gap arrives exactly once, and the gap is
# recorded (an mssql_cdc.errors row and a status condition that name the
# exact lost LSN range).  The hint of the overrun must not promise a copy.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;
use Time::HiRes qw(usleep);

my $si = StandIn->start(capture_interval => 0.1);
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.k (v int)},
	q{CREATE TABLE dbo.o (id int NOT NULL PRIMARY KEY)},
	map({ "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
		qw(k o)));

my $node = PostgreSQL::Test::Cluster->new('never');
$node->init;
$si->setup_node($node);
$node->start;
$si->create_source($node, 'src');

sub q1 { return $node->safe_psql('postgres', "SET search_path = public, mssql_cdc; $_[0]"); }

sub diagnose
{
	diag q1(q{SELECT * FROM mssql_cdc.status ORDER BY source_table});
	diag q1(q{SELECT * FROM mssql_cdc.errors});
}

# the commit LSN of the change of dbo.k with value $v, once captured
sub lsn_of
{
	my ($v) = @_;
	for (1 .. 300)
	{
		my $out = $si->tsql("SELECT 'lsn=' + CONVERT(varchar(30), __\$start_lsn, 1) FROM cdc.dbo_k_CT WHERE v = $v");
		return uc($1) =~ s/^0X/0x/r if $out =~ /lsn=(0x[0-9A-F]{20})/i;
		usleep(100_000);
	}
	die "the change with v = $v was never captured";
}

sub contents
{
	return q1(q{SELECT coalesce(string_agg(v || ':' || _cdc_op, ' ' ORDER BY _cdc_lsn, _cdc_seqval), '') FROM src_dbo_k});
}

$si->add_table($node, 'src', 'dbo.k', snapshot_mode => 'never');
$si->add_table($node, 'src', 'dbo.o', snapshot_mode => 'never');
$si->tsql_ok(q{INSERT INTO dbo.k VALUES (1)});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM src_dbo_k}), 'the keyless table streams');

# ---------------------------------------------------------------------------
# paused while 4 changes are captured; cleanup removes the first two
# ---------------------------------------------------------------------------
q1(q{SELECT mssql_cdc.pause('src', 'dbo.k')});
# a second apart: the cleanup procedure moves its low watermark back to the
# first commit of the same commit time (ENGINE.md), which would keep them all
for my $v (2 .. 5)
{
	$si->tsql_ok("INSERT INTO dbo.k VALUES ($v)");
	usleep(1_100_000);
}
my %lsn = map { $_ => lsn_of($_) } 2 .. 5;
my $checkpoint = q1(q{SELECT checkpoint_lsn FROM mssql_cdc.status WHERE source_table = 'dbo.k'});
ok(q1(qq{SELECT '$checkpoint'::lsn < '$lsn{2}'::lsn}) eq 't', "the paused table's checkpoint $checkpoint is before the changes");
$si->tsql_ok("EXEC sys.sp_cdc_cleanup_change_table \@capture_instance = N'dbo_k', \@low_water_mark = $lsn{4}");
my $min = $si->tsql(q{SELECT 'min=' + CONVERT(varchar(30), sys.fn_cdc_get_min_lsn(N'dbo_k'), 1)});
my ($oldest) = $min =~ /min=(0x[0-9A-F]{20})/i;
$oldest = uc($oldest // '') =~ s/^0X/0x/r;
# the changes CDC still keeps: those at or after its low watermark
my @kept = grep { $lsn{$_} ge $oldest } 2 .. 5;
ok(@kept >= 1 && @kept < 4 && $oldest gt $lsn{2}, "cleanup removed some paused changes, CDC keeps them from $oldest on (v = @kept)");
my $expected = join(' ', map { "$_:insert" } 1, @kept, 6);

q1(q{SELECT mssql_cdc.resume('src', 'dbo.k')});
ok($node->poll_query_until('postgres',
		q{SELECT state = 'error' AND condition = 'retention_overrun' FROM mssql_cdc.status WHERE source_table = 'dbo.k'}),
	'after resume the overrun parks the table')
  or diagnose();
my $hint = q1(q{SELECT hint FROM mssql_cdc.status WHERE source_table = 'dbo.k'});
unlike($hint, qr/cop(y|ied)|snapshot again/i, 'the hint does not promise a copy of a table that cannot be copied')
  or diag $hint;
like($hint, qr/oldest change/i, 'it offers continuing from the oldest change CDC keeps') or diag $hint;

# changes after the overrun, while parked
$si->tsql_ok(q{INSERT INTO dbo.k VALUES (6)});
my $lsn6 = lsn_of(6);
$si->tsql_ok(q{INSERT INTO dbo.o VALUES (1)});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM src_dbo_o}), 'the other table streams on');

# ---------------------------------------------------------------------------
# resnapshot(): continue from the oldest change kept, the gap recorded
# ---------------------------------------------------------------------------
my ($ret, $out, $err) = $node->psql('postgres', q{SELECT mssql_cdc.resnapshot('src', 'dbo.k')});
is($ret, 0, 'resnapshot() of the keyless table is accepted') or diag $err;
ok($node->poll_query_until('postgres', 'SELECT count(*) = ' . (2 + @kept) . ' FROM src_dbo_k'), 'the retained changes arrive')
  or diagnose();
is(contents(), $expected,
	'every retained change after the gap exactly once (none skipped to the max LSN), nothing of the gap');

my $gap = qr/after (?:LSN )?\Q$checkpoint\E and before (?:LSN )?\Q$oldest\E/;
my $errors = q1(q{SELECT string_agg(condition || ': ' || message, E'\n' ORDER BY error_id) FROM mssql_cdc.errors
                   WHERE table_id = (SELECT table_id FROM mssql_cdc.tables WHERE source_table = 'k')});
like($errors, qr/^retention_gap: .*$gap/m, 'an error row records the exact lost LSN range') or diag $errors;
my $status = q1(q{SELECT state || '|' || coalesce(condition, '-') || '|' || coalesce(hint, '-')
                   FROM mssql_cdc.status WHERE source_table = 'dbo.k'});
like($status, qr/^streaming\|retention_gap\|.*$gap/, 'status: the table streams, its condition names the lost range')
  or diag $status;

$si->tsql_ok(q{INSERT INTO dbo.k VALUES (7)});
ok($node->poll_query_until('postgres', 'SELECT count(*) = ' . (3 + @kept) . ' FROM src_dbo_k'), 'and it streams on');
is(contents(), "$expected 7:insert", 'exactly once');

done_testing();
