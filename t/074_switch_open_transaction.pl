# A capture-instance switch with a transaction open across
# sys.sp_cdc_enable_table (issue 12, point 5).  The transaction writes the
# table before and after the enable and commits after it.  Whether SQL
# Server makes the enable wait for it is UNCONFIRMED, so the stand-in does
# both (engine option enable_table_waits): when it waits, the whole
# transaction is before the new instance; when it does not, the new instance
# lacks the transaction's first row, and only the old one has it all.  The
# worker must read every transaction that began before the new instance's
# start from the old instance: the staging history is exact in both modes.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;
use Time::HiRes qw(time usleep);

my $si = StandIn->start(capture_interval => 0.1);
$si->tsql_ok(q{EXEC sys.sp_cdc_enable_db});

my $node = PostgreSQL::Test::Cluster->new('switch_open_tx');
$node->init;
$si->setup_node($node);
$node->start;
$si->create_source($node, 'src');

# a tsql session in the background (stdin and output are files)
my $writers = 0;
sub start_writer
{
	my (@batches) = @_;
	my $base = PostgreSQL::Test::Utils::tempdir() . '/writer' . $writers++;
	open(my $fh, '>', "$base.sql") or die;
	print $fh join('', map { "$_\ngo\n" } @batches) . "exit\n";
	close $fh;
	my $h = IPC::Run::start(
		[ 'tsql', '-H', $si->host, '-p', $si->port, '-U', $si->user, '-P', $si->password,
		  '-D', $si->database ],
		'<', "$base.sql", '>', "$base.out", '2>', "$base.err", IPC::Run::timeout(300));
	return { h => $h, base => $base };
}

sub finish_writer
{
	my ($w, $what) = @_;
	$w->{h}->finish;
	my $all = slurp_file("$w->{base}.out") . slurp_file("$w->{base}.err");
	unlike($all, qr/^\s*Msg \d+/m, "$what: the background session saw no SQL Server error");
}

sub staging
{
	my ($t) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(_cdc_op || '|' || id || '|' || v || '|' || coalesce(w::text, ''), ',' ORDER BY _cdc_lsn, _cdc_seqval, _cdc_op::text)"
		  . " FROM public.src_dbo_$t WHERE _cdc_op <> 'snapshot'");
}

sub run_case
{
	my ($t, $waits) = @_;
	my $mode = $waits ? 'enable waits' : 'enable does not wait';
	$si->ctl('set_option', 'name=enable_table_waits', 'value=' . ($waits ? 'true' : 'false'));
	$si->tsql_ok(
		"CREATE TABLE dbo.$t (id int NOT NULL PRIMARY KEY, v int NOT NULL)",
		"EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$t', \@role_name = NULL");
	$si->add_table_when_started($node, "SELECT mssql_cdc.add_table('src', 'dbo.$t')");
	ok( $node->poll_query_until('postgres',
			"SELECT state = 'streaming' FROM mssql_cdc.status WHERE source_table = 'dbo.$t'"),
		"$mode: streaming");
	$si->tsql_ok("INSERT INTO dbo.$t VALUES (1, 1)", "ALTER TABLE dbo.$t ADD w int NULL");

	# the transaction: a row, a pause (the enable comes in here), a row, a
	# long pause (the worker sees the new instance started meanwhile), commit
	my $x = start_writer('BEGIN TRANSACTION', "INSERT INTO dbo.$t (id, v) VALUES (2, 2)",
		q{WAITFOR DELAY '00:00:01.500'}, "INSERT INTO dbo.$t (id, v) VALUES (3, 3)",
		q{WAITFOR DELAY '00:00:03'}, 'COMMIT');
	usleep(500_000);
	my $enable = start_writer(
		"EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$t', \@role_name = NULL,"
		  . " \@capture_instance = N'dbo_${t}_v2'");
	if (!$waits)
	{
		# the new instance is started (and the worker switches) while the
		# transaction is still open
		finish_writer($enable, "$mode: enable");
		ok( $node->poll_query_until('postgres',
				"SELECT count(*) = 1 FROM mssql_cdc.capture_instance_switches s JOIN mssql_cdc.tables t USING (table_id)"
				  . " WHERE t.source_table = '$t'"),
			"$mode: the worker switched while the transaction was open")
		  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status');
	}
	finish_writer($x, "$mode: the open transaction");
	finish_writer($enable, "$mode: enable") if $waits;
	$si->tsql_ok("INSERT INTO dbo.$t (id, v, w) VALUES (4, 4, 40)");
	ok( $node->poll_query_until('postgres',
			"SELECT count(*) = 1 FROM public.src_dbo_$t WHERE id = 4"),
		"$mode: a change after the switch arrived")
	  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status');
	is( $node->safe_psql('postgres',
			"SELECT new_capture_instance FROM mssql_cdc.capture_instance_switches s JOIN mssql_cdc.tables t USING (table_id)"
			  . " WHERE t.source_table = '$t'"),
		"dbo_${t}_v2", "$mode: switched to the new instance");
	is(staging($t), 'insert|1|1|,insert|2|2|,insert|3|3|,insert|4|4|40',
		"$mode: the staging history is exact (both rows of the open transaction, once each)");
	is($node->safe_psql('postgres', "SELECT state FROM mssql_cdc.status WHERE source_table = 'dbo.$t'"),
		'streaming', "$mode: still streaming");
}

run_case('sw', 1);
run_case('nw', 0);

$node->stop;
$si->stop;
done_testing();
