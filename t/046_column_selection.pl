# Column selection and optional before-images (issue 18 points 1 and 2),
# with changes flowing:
#  - exclude_columns: the column gets no staging column, is in neither the
#    snapshot rows nor the streamed rows, and its name is in no query the
#    worker sends to SQL Server; describe_source() shows it excluded;
#  - key columns cannot be excluded, unknown columns are refused, nothing
#    changed;
#  - include_columns survives a capture-instance switch that adds a column
#    (the new column stays out), an exclude list lets it in;
#  - update_before: staged by default (as before), not staged (and not
#    read: __$operation <> 3, N'all') when turned off, on both query paths;
#  - alter_table changes both at a window boundary: no transaction is
#    staged half with the old, half with the new setting; an alter_table
#    during a window (held in its change query by the stand-in) waits for
#    it, the window keeps the old setting, the next one has the new.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use IPC::Run;
use JSON::PP qw(decode_json);
use Time::HiRes qw(sleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;

my $si = StandIn->start(capture_interval => 0.2);
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.person (id int NOT NULL PRIMARY KEY, name nvarchar(20), ssn nvarchar(11))},
	q{INSERT INTO dbo.person VALUES (1, N'ann', N'111-11-1111'), (2, N'bob', N'222-22-2222')},
	q{CREATE TABLE dbo.q (id int NOT NULL PRIMARY KEY, a int, b int)},
	q{CREATE TABLE dbo.e (id int NOT NULL PRIMARY KEY, a int, secret int)},
	q{CREATE TABLE dbo.fq (id int NOT NULL PRIMARY KEY, a int)},
	map({ "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
		qw(person q e fq)));

my $node = PostgreSQL::Test::Cluster->new('colsel');
$node->init;
$si->setup_node($node);
$node->start;
$si->create_source($node, 'src', data_query_mode => 'direct');

sub q1 { return $node->safe_psql('postgres', $_[0]); }

sub fails_like
{
	my ($sql, $re, $name) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', $sql);
	isnt($ret, 0, "$name: refused");
	like($err, $re, "$name: with a clear error");
	return;
}

sub staging_columns
{
	my ($table) = @_;
	return q1(qq{SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute
	              WHERE attrelid = 'public.$table'::regclass AND attnum > 0 AND NOT attisdropped
	                AND attname NOT LIKE '\\_cdc\\_%'});
}

# the SQL of every batch the stand-in received
sub batches
{
	my $entries = decode_json($si->ctl('log', 'limit=100000'))->{entries};
	return map { $_->{sql} } grep { $_->{event} eq 'batch' && defined $_->{sql} } @$entries;
}

# ---------------------------------------------------------------------------
# exclude_columns: snapshot and stream without the column
# ---------------------------------------------------------------------------
$si->add_table_when_started($node,
	q{SELECT mssql_cdc.add_table('src', 'dbo.person', snapshot_mode => 'initial', exclude_columns => '{ssn}')});
ok($node->poll_query_until('postgres',
		q{SELECT state = 'streaming' FROM mssql_cdc.status WHERE source_table = 'dbo.person'}),
	'the table with an excluded column is snapshotted and streams');
is(staging_columns('src_dbo_person'), 'id,name', 'the excluded column has no staging column');
is(q1(q{SELECT exclude_columns::text || '|' || (include_columns IS NULL) FROM mssql_cdc.tables WHERE source_table = 'person'}),
	'{ssn}|true', 'the selection is stored');
$si->tsql_ok(q{INSERT INTO dbo.person VALUES (3, N'cid', N'333-33-3333')},
	q{UPDATE dbo.person SET ssn = N'999-99-9999', name = N'ann2' WHERE id = 1});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 5 FROM src_dbo_person}),
	'changes stream (snapshot 2, insert, update before+after: the default stages before-images)');
is(q1(q{SELECT string_agg(id || ':' || name || ':' || _cdc_op, ' ' ORDER BY _cdc_lsn, _cdc_seqval, _cdc_op)
          FROM src_dbo_person}),
	'1:ann:snapshot 2:bob:snapshot 3:cid:insert 1:ann:update_before 1:ann2:update_after',
	'snapshot and streamed rows, without the excluded column');
my @ssn = grep { /\[ssn\]/i } batches();
is(scalar(@ssn), 0, 'no query sent to SQL Server names the excluded column')
  or diag join("\n", @ssn);
is(q1(q{SELECT string_agg(column_name || ':' || excluded || ':' || coalesce(staging_column, '-'), ',' ORDER BY column_name)
          FROM mssql_cdc.describe_source('src', 'dbo.person')}),
	'id:false:id,name:false:name,ssn:true:-', 'describe_source shows the column excluded');

# ---------------------------------------------------------------------------
# refused: key columns, unknown columns (nothing changed)
# ---------------------------------------------------------------------------
fails_like(q{SELECT mssql_cdc.add_table('src', 'dbo.e', exclude_columns => '{id}')},
	qr/key column \[id\] of table dbo\.e cannot be excluded/, 'add_table excluding the key');
fails_like(q{SELECT mssql_cdc.add_table('src', 'dbo.e', include_columns => '{a}')},
	qr/key column \[id\] of table dbo\.e cannot be excluded/, 'add_table with an include list without the key');
fails_like(q{SELECT mssql_cdc.add_table('src', 'dbo.e', exclude_columns => '{nosuch}')},
	qr/exclude_columns names column "nosuch", which table dbo\.e does not have/, 'add_table with an unknown column');
is(q1(q{SELECT count(*) FROM mssql_cdc.tables WHERE source_table = 'e'}) . '|'
	  . q1(q{SELECT count(*) FROM pg_class WHERE relname = 'src_dbo_e'}),
	'0|0', 'nothing was added');
fails_like(q{SELECT mssql_cdc.alter_table('src', 'dbo.person', exclude_columns => '{id,ssn}')},
	qr/key column \[id\] of table dbo\.person cannot be excluded/, 'alter_table excluding the key');
fails_like(q{SELECT mssql_cdc.alter_table('src', 'dbo.person', include_columns => '{id,nosuch}')},
	qr/include_columns names column "nosuch"/, 'alter_table with an unknown column');
is(q1(q{SELECT exclude_columns::text || '|' || settings_version FROM mssql_cdc.tables WHERE source_table = 'person'}),
	'{ssn}|1', 'nothing changed');

# ---------------------------------------------------------------------------
# include_columns, update_before off; a capture-instance switch adds a column
# ---------------------------------------------------------------------------
$si->add_table_when_started($node,
	q{SELECT mssql_cdc.add_table('src', 'dbo.q', snapshot_mode => 'never', include_columns => '{id,a}', update_before => false)});
$si->add_table($node, 'src', 'dbo.e', snapshot_mode => 'never');
q1(q{SELECT mssql_cdc.alter_table('src', 'dbo.e', exclude_columns => '{secret}')});
is(staging_columns('src_dbo_q') . ' ' . staging_columns('src_dbo_e'), 'id,a id,a,secret',
	'include list: only the named columns; exclude set later: the staging column stays');
$si->tsql_ok(q{INSERT INTO dbo.q VALUES (1, 10, 100)}, q{UPDATE dbo.q SET a = 11, b = 101 WHERE id = 1},
	q{INSERT INTO dbo.e VALUES (1, 10, 42)});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 2 FROM src_dbo_q}), 'q streams');
is(q1(q{SELECT string_agg(id || ':' || a || ':' || _cdc_op, ' ' ORDER BY _cdc_lsn, _cdc_seqval, _cdc_op) FROM src_dbo_q}),
	'1:10:insert 1:11:update_after', 'update_before => false: no before-images');
ok((grep { /__\$operation\] <> 3/ } batches()) > 0, 'and they are not read from SQL Server (direct path)');
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM src_dbo_e}), 'e streams');
is(q1(q{SELECT a || ':' || coalesce(secret::text, 'NULL') FROM src_dbo_e}), '10:NULL',
	'a column excluded after the table was added is NULL from then on');

$si->tsql_ok(q{ALTER TABLE dbo.q ADD c int NULL}, q{ALTER TABLE dbo.e ADD d int NULL},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'q', @role_name = NULL, @capture_instance = N'dbo_q_v2'},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'e', @role_name = NULL, @capture_instance = N'dbo_e_v2'});
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 2 FROM mssql_cdc.tables WHERE capture_instance IN ('dbo_q_v2', 'dbo_e_v2')}),
	'both tables switch to their new capture instance');
$si->tsql_ok(q{INSERT INTO dbo.q VALUES (2, 20, 200, 2000)}, q{INSERT INTO dbo.e VALUES (2, 20, 43, 2)});
ok($node->poll_query_until('postgres',
		q{SELECT (SELECT count(*) FROM src_dbo_q) = 3 AND (SELECT count(*) FROM src_dbo_e) = 2}),
	'changes after the switch arrive');
is(staging_columns('src_dbo_q'), 'id,a', 'include list kept across the switch: the new column stays out');
is(staging_columns('src_dbo_e'), 'id,a,secret,d', 'exclude list: the new column is staged, the excluded one stays out');
is(q1(q{SELECT coalesce(secret::text, 'NULL') || ':' || d FROM src_dbo_e WHERE id = 2}), 'NULL:2',
	'the new column has its value, the excluded one none');
is(q1(q{SELECT include_columns::text FROM mssql_cdc.tables WHERE source_table = 'q'}), '{id,a}',
	'the include list is unchanged');

# ---------------------------------------------------------------------------
# alter_table: before-images and columns, effective at a window boundary
# ---------------------------------------------------------------------------
q1(q{SELECT mssql_cdc.alter_table('src', 'dbo.q', update_before => true, include_columns => '{id,a,b}')});
is(staging_columns('src_dbo_q'), 'id,a,b', 'alter_table include_columns adds the staging column at once');
$si->tsql_ok(q{UPDATE dbo.q SET a = 21, b = 201 WHERE id = 2});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 5 FROM src_dbo_q}),
	'after alter_table the update arrives with its before-image');
is(q1(q{SELECT string_agg(id || ':' || a || ':' || coalesce(b::text, 'NULL') || ':' || _cdc_op, ' '
                          ORDER BY _cdc_lsn, _cdc_seqval, _cdc_op) FROM src_dbo_q WHERE id = 2}),
	'2:20:NULL:insert 2:20:200:update_before 2:21:201:update_after',
	'before-images and the added column from the window after the change on');

# a stream of updates while the setting flips: every transaction is staged
# wholly with one setting (its update_after has its update_before, or none has)
$si->tsql_ok(q{INSERT INTO dbo.q VALUES (3, 0, 0, 0)});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM src_dbo_q WHERE id = 3}), 'row 3 streams');
my @flips;
for my $i (1 .. 20)
{
	$si->tsql_ok(qq{BEGIN TRANSACTION; UPDATE dbo.q SET a = $i WHERE id = 3; UPDATE dbo.q SET b = $i WHERE id = 3; COMMIT});
	if ($i % 5 == 0)
	{
		my $on = ($i / 5) % 2 ? 'false' : 'true';
		q1(qq{SELECT mssql_cdc.alter_table('src', 'dbo.q', update_before => $on)});
	}
}
ok($node->poll_query_until('postgres', q{SELECT count(*) = 40 FROM src_dbo_q WHERE id = 3 AND _cdc_op = 'update_after'}),
	'every update arrives');
is(q1(q{SELECT count(*) FROM (SELECT _cdc_lsn FROM src_dbo_q WHERE id = 3 AND _cdc_op IN ('update_before', 'update_after')
                               GROUP BY _cdc_lsn
                               HAVING count(*) FILTER (WHERE _cdc_op = 'update_before') NOT IN (0, 2)) x}),
	'0', 'no transaction is staged half with, half without before-images');
note('transactions staged with before-images: '
	  . q1(q{SELECT count(DISTINCT _cdc_lsn) FROM src_dbo_q WHERE id = 3 AND _cdc_op = 'update_before'}) . ' of 20');

# deterministic: a window held in the middle of its change query; the
# alter_table waits for it, the held window is staged wholly with the old
# setting, the next one with the new
q1(q{SELECT mssql_cdc.alter_table('src', 'dbo.q', update_before => true)});
$si->ctl('capture_freeze');
$si->tsql_ok(q{BEGIN TRANSACTION; UPDATE dbo.q SET a = 100 WHERE id = 3; UPDATE dbo.q SET a = 101 WHERE id = 3;
               UPDATE dbo.q SET a = 102 WHERE id = 3; UPDATE dbo.q SET a = 103 WHERE id = 3; COMMIT});
$si->ctl('stall', 'after_rows=3', 'hold=true', 'match=[dbo_q_v2_CT] AS c');
$si->ctl('capture_now');
my $deadline = time + 60;
sleep(0.05) until $si->ctl('faults') =~ /"held": \[\{/ || time > $deadline;
like($si->ctl('faults'), qr/"held": \[\{/, 'the window of q is held in its change query');
my ($alter_out, $alter_err) = ('', '');
my $alter = IPC::Run::start(
	[ 'psql', '-X', '-d', $node->connstr('postgres'), '-c',
	  q{SELECT mssql_cdc.alter_table('src', 'dbo.q', update_before => false)} ],
	'>', \$alter_out, '2>', \$alter_err);
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE query LIKE '%alter_table%update_before => false%'
		   AND wait_event_type = 'Lock'}),
	'alter_table waits for the window that is running');
like($si->ctl('release'), qr/"released": 1/, 'the window is released');
$alter->finish;
is(q1(q{SELECT update_before FROM mssql_cdc.tables WHERE source_table = 'q'}), 'f', 'alter_table then commits');
ok($node->poll_query_until('postgres', q{SELECT count(*) = 4 FROM src_dbo_q WHERE a BETWEEN 100 AND 103 AND _cdc_op = 'update_after'}),
	'the held window is applied');
is(q1(q{SELECT count(*) FROM src_dbo_q WHERE id = 3 AND _cdc_op = 'update_before' AND a BETWEEN 100 AND 102}), '3',
	'wholly with the setting it was planned with (before-images)');
$si->ctl('capture_resume');
$si->tsql_ok(q{UPDATE dbo.q SET a = 200 WHERE id = 3});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM src_dbo_q WHERE a = 200}), 'the next window');
is(q1(q{SELECT count(*) FROM src_dbo_q WHERE _cdc_lsn::text = (SELECT _cdc_lsn::text FROM src_dbo_q WHERE a = 200)}), '1',
	'is staged with the new setting (no before-image)');

# ---------------------------------------------------------------------------
# the function path: N'all' without before-images
# ---------------------------------------------------------------------------
$si->create_source($node, 'fn', data_query_mode => 'direct');
q1(q{ALTER SERVER fn OPTIONS (SET data_query_mode 'function')});
$si->add_table_when_started($node,
	q{SELECT mssql_cdc.add_table('fn', 'dbo.fq', snapshot_mode => 'never', update_before => false)});
$si->tsql_ok(q{INSERT INTO dbo.fq VALUES (1, 1)}, q{UPDATE dbo.fq SET a = 2 WHERE id = 1});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 2 FROM fn_dbo_fq}), 'the function path streams');
is(q1(q{SELECT string_agg(a || ':' || _cdc_op, ' ' ORDER BY _cdc_lsn, _cdc_seqval, _cdc_op) FROM fn_dbo_fq}),
	'1:insert 2:update_after', 'function path, update_before => false: no before-images');
ok((grep { /fn_cdc_get_all_changes_dbo_fq\].*N'all'\)/ } batches()) > 0, "read with N'all'");
q1(q{SELECT mssql_cdc.alter_table('fn', 'dbo.fq', update_before => true)});
$si->tsql_ok(q{UPDATE dbo.fq SET a = 3 WHERE id = 1});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 4 FROM fn_dbo_fq}), 'after alter_table');
is(q1(q{SELECT string_agg(a || ':' || _cdc_op, ' ' ORDER BY _cdc_lsn, _cdc_seqval, _cdc_op) FROM fn_dbo_fq}),
	'1:insert 2:update_after 2:update_before 3:update_after', "with before-images (N'all update old')");

is(q1(q{SELECT count(*) FROM mssql_cdc.status WHERE state <> 'streaming'}), '0', 'every table streams');

$node->stop;
$si->stop;
done_testing();
