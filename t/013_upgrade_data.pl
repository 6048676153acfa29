# ALTER EXTENSION mssql_cdc UPDATE with data in place (0.1 -> 0.2): a 0.1
# installation that has streamed and snapshotted rows and checkpoints is
# updated, and the worker streams on from its checkpoint.  Old rows stay as
# they were (with command id 0), nothing is duplicated or lost, new rows get
# SQL Server's command ids.  Before the update, the 0.2 library must leave
# the 0.1 catalog alone: the launcher waits and says what to run.
#
# The 0.1 state is made here with SQL, as the 0.1 library leaves it (its
# staging DDL, catalog rows and staging rows were taken from a run of commit
# 3d115ad): the test runs from the current tree only.
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
	q{CREATE TABLE dbo.acct (id int NOT NULL PRIMARY KEY, ref varchar(10) NOT NULL, v int NOT NULL,
	                         CONSTRAINT uq_acct_ref UNIQUE (ref))},
	q{CREATE TABLE dbo.snap (id int NOT NULL PRIMARY KEY, txt nvarchar(20))},
	q{INSERT INTO dbo.snap VALUES (1, N'one'), (2, N'two'), (3, N'three')},
	map { "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
	  qw(acct snap));

# one value of a T-SQL query (tsql prints it after "v=")
sub source_value
{
	my ($sql) = @_;
	my ($v) = $si->tsql_ok("SELECT 'v=' + ISNULL(($sql), 'NULL')") =~ /^v=(\S+)/m;
	return $v;
}

sub lsn_literal { return "CONVERT(varchar(30), $_[0], 1)" }

# wait until the capture job has started both capture instances
for (1 .. 300)
{
	last if source_value(q{SELECT CAST(COUNT(*) AS varchar(10)) FROM cdc.change_tables WHERE start_lsn IS NOT NULL})
	  eq '2' && source_value(lsn_literal('sys.fn_cdc_get_max_lsn()')) ne 'NULL';
	usleep(100_000);
}

# L0 of the snapshot: nothing changes between it and the copy below
my $l0 = source_value(lsn_literal('sys.fn_cdc_get_max_lsn()'));
like($l0, qr/^0x[0-9A-F]{20}$/, "the source's max LSN before the snapshot: $l0");
my @snap_rows = $si->tsql_ok(q{SELECT 'row=' + CAST(id AS varchar(10)) + '|' + txt FROM dbo.snap ORDER BY id})
  =~ /^row=(\S+)/mg;

# what 0.1 streamed: four transactions
my @batch1 = (
	q{INSERT INTO dbo.acct VALUES (1, 'a', 0), (2, 'b', 0)},
	q{UPDATE dbo.acct SET v = 1 WHERE id = 1},
	q{UPDATE dbo.snap SET txt = N'TWO' WHERE id = 2},
	q{DELETE FROM dbo.acct WHERE id = 2});
$si->tsql_ok($_) for @batch1;
for (1 .. 300)
{
	last if source_value(q{SELECT CAST(COUNT(*) AS varchar(10)) FROM cdc.dbo_acct_CT}) eq '5'
	  && source_value(q{SELECT CAST(COUNT(*) AS varchar(10)) FROM cdc.dbo_snap_CT}) eq '2';
	usleep(100_000);
}
# any LSN from the last commit to max is a window end 0.1 could have reached
my $c1 = source_value(lsn_literal('sys.fn_cdc_get_max_lsn()'));
note "checkpoint of the 0.1 installation: $c1";

# The change rows 0.1 staged for (L0, C1], as its function path read them:
# "lsn|seqval|op|mask|commit time|columns…" in __$seqval order
sub changes_01
{
	my ($ci, $cols) = @_;
	my $out = $si->tsql_ok(qq{
SELECT 'row=' + CONVERT(varchar(30), __\$start_lsn, 1) + '|' + CONVERT(varchar(30), __\$seqval, 1) + '|'
       + CAST(__\$operation AS varchar(1)) + '|' + CONVERT(varchar(30), __\$update_mask, 1) + '|'
       + CONVERT(varchar(30), sys.fn_cdc_map_lsn_to_time(__\$start_lsn), 126) + '|' + $cols
  FROM cdc.fn_cdc_get_all_changes_$ci(sys.fn_cdc_increment_lsn($l0), $c1, N'all update old')
 ORDER BY __\$start_lsn, __\$seqval, __\$operation});
	return $out =~ /^row=(\S+)/mg;
}
my %op = (1 => 'delete', 2 => 'insert', 3 => 'update_before', 4 => 'update_after');
my @acct_01 = changes_01('dbo_acct',
	q{CAST(id AS varchar(10)) + '|' + ref + '|' + CAST(v AS varchar(10))});
my @snap_01 = changes_01('dbo_snap', q{CAST(id AS varchar(10)) + '|' + txt});
is(scalar @acct_01, 5, 'dbo.acct: five change rows up to the checkpoint');
is(scalar @snap_01, 2, 'dbo.snap: two change rows up to the checkpoint');

# ---------------------------------------------------------------------------
# The 0.1 installation, as the 0.1 library leaves it
# ---------------------------------------------------------------------------
my $node = PostgreSQL::Test::Cluster->new('upgrade_data');
$node->init;
$si->setup_node($node);
$node->start;
$node->safe_psql('postgres', q{CREATE EXTENSION mssql_cdc VERSION '0.1'});
$si->create_source($node, 'src', data_query_mode => 'direct');

my @inserts;
foreach my $r (@acct_01)
{
	my ($lsn, $seq, $op, $mask, $time, $id, $ref, $v) = split /\|/, $r;
	push @inserts, "INSERT INTO public.src_dbo_acct VALUES ($id, '$ref', $v, '$lsn', '$seq', '$op{$op}',"
	  . " '$time'::timestamp AT TIME ZONE 'UTC', '\\x" . substr($mask, 2) . "')";
}
foreach my $r (@snap_01)
{
	my ($lsn, $seq, $op, $mask, $time, $id, $txt) = split /\|/, $r;
	push @inserts, "INSERT INTO public.src_dbo_snap VALUES ($id, '$txt', '$lsn', '$seq', '$op{$op}',"
	  . " '$time'::timestamp AT TIME ZONE 'UTC', '\\x" . substr($mask, 2) . "')";
}
my $n = 0;
foreach my $r (@snap_rows)
{
	my ($id, $txt) = split /\|/, $r;
	$n++;
	push @inserts, "INSERT INTO public.src_dbo_snap VALUES ($id, '$txt', '$l0', '"
	  . sprintf('0x%020X', $n) . "', 'snapshot', NULL, NULL)";
}
my $last_time = (split /\|/, $acct_01[-1])[4];

# a staging table exactly as 0.1's add_table creates it
sub staging_ddl_01
{
	my ($table, $source_columns) = @_;
	return qq{CREATE TABLE public.src_dbo_$table (
$source_columns,
    _cdc_lsn mssql_cdc.lsn NOT NULL,
    _cdc_seqval mssql_cdc.lsn NOT NULL,
    _cdc_op mssql_cdc.operation NOT NULL,
    _cdc_commit_time timestamp with time zone,
    _cdc_update_mask bytea,
    PRIMARY KEY (_cdc_lsn, _cdc_seqval, _cdc_op)
);
COMMENT ON TABLE public.src_dbo_$table IS 'mssql_cdc changelog of SQL Server table dbo.$table of server "src"'};
}
$node->safe_psql('postgres', join(";\n",
	staging_ddl_01('acct', "    id integer NOT NULL,\n    ref character varying(10),\n    v integer"),
	staging_ddl_01('snap', "    id integer NOT NULL,\n    txt character varying(20)"),
	# the catalog rows of add_table, the snapshot's last chunk and the windows
	q{INSERT INTO mssql_cdc.servers (server_name, run_as) VALUES ('src', current_user)},
	q{INSERT INTO mssql_cdc.tables (server_name, source_schema, source_table, capture_instance,
	                                staging_schema, staging_table, snapshot_mode)
	  VALUES ('src', 'dbo', 'acct', 'dbo_acct', 'public', 'src_dbo_acct', 'never'),
	         ('src', 'dbo', 'snap', 'dbo_snap', 'public', 'src_dbo_snap', 'initial')},
	qq{INSERT INTO mssql_cdc.table_state (table_id, phase, checkpoint_lsn, rows_applied,
	                                      transactions_applied, last_commit_time)
	   VALUES (1, 'streaming', '$c1', 5, 3, '$last_time'::timestamp AT TIME ZONE 'UTC')},
	qq{INSERT INTO mssql_cdc.table_state (table_id, phase, checkpoint_lsn, snapshot_lsn, snapshot_last_key,
	                                      snapshot_rows, snapshot_total_estimate, snapshot_started_at,
	                                      rows_applied, transactions_applied, last_commit_time)
	   VALUES (2, 'streaming', '$c1', '$l0', '{"CAST(N''3'' AS int)"}', 3, 3, now(), 2, 1,
	           '$last_time'::timestamp AT TIME ZONE 'UTC')},
	@inserts));

# the staging rows up to the 0.1 checkpoint as text, whole, in 0.1's key order
sub staging_text
{
	my ($table) = @_;
	return $node->safe_psql('postgres', qq{
SELECT string_agg(format('%s', row(s.*)), E'\\n' ORDER BY s._cdc_lsn, s._cdc_seqval, s._cdc_op)
  FROM public.$table s WHERE s._cdc_lsn::text <= '$c1'});
}
my %before = map { $_ => staging_text("src_dbo_$_") } qw(acct snap);
is(scalar(() = $before{acct} =~ /\n/g) + 1, 5, 'the 0.1 installation holds dbo.acct\'s five rows');
is(scalar(() = $before{snap} =~ /\n/g) + 1, 5, 'and dbo.snap\'s three snapshot and two change rows');

# ---------------------------------------------------------------------------
# The 0.2 library on the 0.1 catalog: waits, touches nothing
# ---------------------------------------------------------------------------
my @batch2 = (
	q{INSERT INTO dbo.acct VALUES (2, 'b', 0), (3, 'c', 0)},
	# a swap on the UNIQUE column: all deletes, then all inserts (command id order)
	q{UPDATE dbo.acct SET ref = CASE id WHEN 2 THEN 'c' ELSE 'b' END WHERE id IN (2, 3)},
	# a key shift
	q{UPDATE dbo.acct SET id = id + 1},
	q{UPDATE dbo.snap SET txt = N'THREE' WHERE id = 3});
$si->tsql_ok($_) for @batch2;
$node->wait_for_log(qr/mssql_cdc launcher is waiting: extension "mssql_cdc" in database "postgres" is version 0\.1, the library is version 0\.2/);
my $log = slurp_file($node->logfile);
like($log, qr/HINT:  Run ALTER EXTENSION mssql_cdc UPDATE in database "postgres"/,
	'the launcher names the command to run');
sleep 2;    # ten poll intervals
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'mssql_cdc worker'}),
	'0', 'no worker runs on the 0.1 catalog');
is(staging_text('src_dbo_acct') . staging_text('src_dbo_snap'), $before{acct} . $before{snap},
	'the staging tables are untouched');
is($node->safe_psql('postgres', q{SELECT string_agg(checkpoint_lsn::text, ',' ORDER BY table_id) FROM mssql_cdc.table_state}),
	"$c1,$c1", 'the checkpoints are untouched');

# ---------------------------------------------------------------------------
# ALTER EXTENSION UPDATE
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', 'ALTER EXTENSION mssql_cdc UPDATE');
is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'mssql_cdc'}),
	'0.2', 'updated to 0.2');
foreach my $t (qw(acct snap))
{
	is( $node->safe_psql('postgres', qq{
SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod) || CASE WHEN attnotnull THEN ' NOT NULL' ELSE '' END
                  || CASE WHEN atthasdef THEN ' DEFAULT' ELSE '' END, ', ' ORDER BY attnum)
  FROM pg_attribute WHERE attrelid = 'public.src_dbo_$t'::regclass AND attnum > 0 AND attname LIKE '\\_cdc\\_%'}),
		'_cdc_lsn mssql_cdc.lsn NOT NULL, _cdc_seqval mssql_cdc.lsn NOT NULL, _cdc_op mssql_cdc.operation NOT NULL, '
		  . '_cdc_commit_time timestamp with time zone, _cdc_update_mask bytea, _cdc_command_id integer NOT NULL',
		"$t: _cdc_command_id added last, NOT NULL without a default (as 0.2 creates it)");
	is( $node->safe_psql('postgres', qq{
SELECT conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
 WHERE conrelid = 'public.src_dbo_$t'::regclass AND contype = 'p'}),
		"src_dbo_${t}_pkey PRIMARY KEY (_cdc_lsn, _cdc_command_id, _cdc_seqval, _cdc_op)",
		"$t: the primary key follows execution order, under its old name");
	is( $node->safe_psql('postgres',
			"SELECT count(*) FROM public.src_dbo_$t WHERE _cdc_command_id <> 0 AND _cdc_lsn::text <= '$c1'"),
		'0', "$t: rows staged by 0.1 have command id 0");
	is(staging_text("src_dbo_$t"), $before{$t} =~ s/\)$/,0)/mgr,
		"$t: rows staged by 0.1 are unchanged");
}
is($node->safe_psql('postgres', 'SELECT count(*) FROM mssql_cdc.tables'), '2', 'catalog rows kept');

# ---------------------------------------------------------------------------
# The worker streams on from the checkpoint
# ---------------------------------------------------------------------------
# the change rows after C1 as the change table has them, in execution order
sub changes_after
{
	my ($ci, $cols) = @_;
	my $out = $si->tsql_ok(qq{
SELECT 'row=' + CONVERT(varchar(30), __\$start_lsn, 1) + '|' + CAST(__\$command_id AS varchar(10)) + '|'
       + CONVERT(varchar(30), __\$seqval, 1) + '|'
       + CASE __\$operation WHEN 1 THEN 'delete' WHEN 2 THEN 'insert' WHEN 3 THEN 'update_before'
                            ELSE 'update_after' END + '|' + $cols
  FROM cdc.[${ci}_CT] WHERE __\$start_lsn > $c1
 ORDER BY __\$start_lsn, __\$command_id, __\$seqval, __\$operation});
	return join("\n", $out =~ /^row=(\S+)/mg);
}
my %expected = (
	acct => changes_after('dbo_acct', q{CAST(id AS varchar(10)) + '|' + ref + '|' + CAST(v AS varchar(10))}),
	snap => changes_after('dbo_snap', q{CAST(id AS varchar(10)) + '|' + txt}));
my %cols = (acct => q{id, ref, v}, snap => q{id, txt});
my %count = map { $_ => scalar(split /\n/, $expected{$_}) } qw(acct snap);
ok($count{acct} == 2 + 4 + 6 && $count{snap} == 2, "the source holds the changes made meanwhile ($count{acct}, $count{snap})");
ok( $node->poll_query_until('postgres', qq{
SELECT (SELECT count(*) FROM public.src_dbo_acct) = 5 + $count{acct}
   AND (SELECT count(*) FROM public.src_dbo_snap) = 5 + $count{snap}}),
	'after the update the worker streams the changes made meanwhile')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors');
foreach my $t (qw(acct snap))
{
	is( $node->safe_psql('postgres', qq{
SELECT string_agg(concat_ws('|', _cdc_lsn, _cdc_command_id, _cdc_seqval, _cdc_op, $cols{$t}), E'\\n'
                  ORDER BY _cdc_lsn, _cdc_command_id, _cdc_seqval, _cdc_op)
  FROM public.src_dbo_$t WHERE _cdc_lsn::text > '$c1'}),
		$expected{$t},
		"$t: exactly the change rows after the checkpoint, once each, with SQL Server's command ids");
	is(staging_text("src_dbo_$t"), $before{$t} =~ s/\)$/,0)/mgr,
		"$t: and the rows staged by 0.1 are still there, unchanged");
}
is($node->safe_psql('postgres', q{SELECT count(*) FROM public.src_dbo_acct WHERE _cdc_lsn::text > '} . $c1
		  . q{' AND _cdc_command_id = 0}), '0', 'new rows carry real command ids');

# the whole changelog (0.1 rows in seqval order, 0.2 rows in execution
# order) replays into the source's current rows under its constraints
$node->safe_psql('postgres', q{CREATE TABLE replica (id int PRIMARY KEY, ref text NOT NULL UNIQUE, v int NOT NULL)});
my $replay = $node->psql('postgres', q{
DO $$
DECLARE r record;
BEGIN
	FOR r IN SELECT * FROM public.src_dbo_acct ORDER BY _cdc_lsn, _cdc_command_id, _cdc_seqval, _cdc_op LOOP
		CASE r._cdc_op
		WHEN 'insert' THEN INSERT INTO replica VALUES (r.id, r.ref, r.v);
		WHEN 'delete' THEN DELETE FROM replica WHERE id = r.id;
		WHEN 'update_after' THEN UPDATE replica SET ref = r.ref, v = r.v WHERE id = r.id;
		ELSE NULL;
		END CASE;
	END LOOP;
END $$});
is($replay, 0, 'the changelog replays in key order under PRIMARY KEY and UNIQUE (ref)');
is( $node->safe_psql('postgres', q{SELECT string_agg(format('%s|%s|%s', id, ref, v), ',' ORDER BY id) FROM replica}),
	join(',', $si->tsql_ok(q{SELECT 'row=' + CAST(id AS varchar(10)) + '|' + ref + '|' + CAST(v AS varchar(10))
	                         FROM dbo.acct ORDER BY id}) =~ /^row=(\S+)/mg),
	'and equals the source table');
ok( $node->poll_query_until('postgres', qq{
SELECT bool_and(checkpoint_lsn::text > '$c1' AND state = 'streaming') FROM mssql_cdc.status}),
	'both checkpoints moved on');
is($node->safe_psql('postgres', 'SELECT count(*) FROM mssql_cdc.errors'), '0', 'no errors were recorded')
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.errors');

done_testing();
