# One broken staging table does not stop the source (issue 14 point 4).
# A CHECK constraint, a changed column type, a dropped column, a dropped
# primary key or a revoked INSERT on one staging table parks that table (phase 'error' with a
# staging_* condition) after mssql_cdc.table_failures_before_park failed
# windows, while every other table of the source keeps streaming, also the
# other half of a cross-table source transaction.  The parked table's
# checkpoint stays before the first change it could not take; after the
# fix, resume(server, table) lets it catch up from there: every change
# exactly once.  The staging shape check (doc/type-mapping.md) runs before
# each window, so a dropped staging column or primary key is noticed
# instead of silently not captured.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;
use Time::HiRes qw(usleep);

my $si = StandIn->start(capture_interval => 0.2);
my @tables = qw(ok chk typ col pk);
$si->tsql_ok(
	q{EXEC sys.sp_cdc_enable_db},
	(map { "CREATE TABLE dbo.$_ (id int NOT NULL PRIMARY KEY, v int)" } @tables, qw(p1 p2)),
	map({ "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
		@tables, qw(p1 p2)));

my $node = PostgreSQL::Test::Cluster->new('broken');
$node->init;
$si->setup_node($node, conf => "mssql_cdc.table_failures_before_park = 2");
$node->start;
$si->create_source($node, 'src');
$si->add_table($node, 'src', "dbo.$_") for @tables;

sub q1 { return $node->safe_psql('postgres', $_[0]); }

# poll_query_until with 30 s instead of 180 s: a stalled source fails soon
sub poll
{
	my ($sql) = @_;
	for (1 .. 300)
	{
		return 1 if q1($sql) eq 't';
		usleep(100_000);
	}
	return 0;
}

sub diag_state
{
	diag q1(q{SELECT source_table, state, condition, checkpoint_lsn, last_error FROM mssql_cdc.status ORDER BY 1});
	diag q1(q{SELECT table_id, condition, message FROM mssql_cdc.errors ORDER BY error_id});
}

sub contents
{
	my ($table) = @_;
	return q1(qq{SELECT coalesce(string_agg(id || ':' || coalesce(v::text, '-'), ' ' ORDER BY _cdc_lsn, _cdc_seqval), '')
	             FROM public.src_dbo_$table});
}

my $next = 1;

# one source transaction writing all of @t (and dbo.ok)
sub insert_tx
{
	my ($v, @t) = @_;
	my $id = $next++;
	$si->tsql_ok('BEGIN TRANSACTION; '
		  . join('; ', map { "INSERT INTO dbo.$_ VALUES ($id, $v)" } 'ok', @t)
		  . '; COMMIT');
	return $id;
}

ok(poll(q{SELECT count(*) = 5 FROM mssql_cdc.status WHERE state = 'streaming'}),
	'all five tables stream')
  or diag_state();
my $id0 = insert_tx(1, qw(chk typ col pk));
ok(poll(qq{SELECT count(*) = 1 FROM public.src_dbo_pk WHERE id = $id0}),
	'a first cross-table transaction arrives')
  or diag_state();

# each table broken its own way; one cross-table transaction each
sub parked
{
	my ($table, $condition, $what) = @_;
	ok( poll(qq{
			SELECT s.state = 'error' AND s.condition = '$condition' AND ts.phase = 'error'
			FROM mssql_cdc.status s JOIN mssql_cdc.tables t ON t.source_table = '$table'
			JOIN mssql_cdc.table_state ts USING (table_id)
			WHERE s.source_table = 'dbo.$table'}),
		"$what: the table is parked with condition $condition")
	  or diag_state();
}

sub others_stream
{
	my ($what) = @_;
	my $id = insert_tx(7);
	ok(poll(qq{SELECT count(*) = 1 FROM public.src_dbo_ok WHERE id = $id}),
		"$what: the other tables keep streaming")
	  or diag_state();
}

# CHECK constraint
q1(q{ALTER TABLE src_dbo_chk ADD CONSTRAINT v_small CHECK (v < 100)});
my $id_chk = insert_tx(500, 'chk');
parked('chk', 'staging_constraint_violation', 'CHECK constraint');
ok(poll(qq{SELECT count(*) = 1 FROM public.src_dbo_ok WHERE id = $id_chk}),
	'the other half of the cross-table transaction was applied')
  or diag_state();
others_stream('CHECK constraint');
is(q1(qq{SELECT count(*) FROM src_dbo_chk WHERE id = $id_chk}), '0', 'nothing of the refused window kept');
is( q1(q{SELECT consecutive_failures FROM mssql_cdc.table_state JOIN mssql_cdc.tables USING (table_id)
		WHERE source_table = 'chk'}),
	'2', 'parked after table_failures_before_park failed windows');

# a column type that no longer takes the values
q1(q{ALTER TABLE src_dbo_typ ALTER COLUMN v TYPE smallint});
my $id_typ = insert_tx(100000, 'typ');
parked('typ', 'staging_table_changed', 'column type changed');
others_stream('column type changed');

# a dropped staging column: the shape check, not a silent loss of the column
q1(q{ALTER TABLE src_dbo_col DROP COLUMN v});
my $id_col = insert_tx(3, 'col');
parked('col', 'staging_table_changed', 'staging column dropped');
like(q1(q{SELECT last_error FROM mssql_cdc.status WHERE source_table = 'dbo.col'}),
	qr/"v"/, 'the message names the missing column');
others_stream('staging column dropped');

# a dropped primary key
my $pk = q1(q{SELECT conname FROM pg_constraint WHERE conrelid = 'src_dbo_pk'::regclass AND contype = 'p'});
q1(qq{ALTER TABLE src_dbo_pk DROP CONSTRAINT "$pk"});
my $id_pk = insert_tx(4, 'pk');
parked('pk', 'staging_table_changed', 'primary key dropped');
like(q1(q{SELECT last_error FROM mssql_cdc.status WHERE source_table = 'dbo.pk'}),
	qr/primary key/, 'the message says the primary key is missing');
others_stream('primary key dropped');

# the parked tables' checkpoints stayed; more changes while parked
my $id_late = insert_tx(5, qw(chk typ col pk));
ok(poll(qq{SELECT count(*) = 1 FROM public.src_dbo_ok WHERE id = $id_late}),
	'a transaction while parked reaches the healthy table')
  or diag_state();

# fix each one, resume it: it catches up from its checkpoint
q1(q{ALTER TABLE src_dbo_chk DROP CONSTRAINT v_small});
q1(q{ALTER TABLE src_dbo_typ ALTER COLUMN v TYPE integer});
q1(q{ALTER TABLE src_dbo_col ADD COLUMN v integer});
q1(qq{ALTER TABLE src_dbo_pk ADD CONSTRAINT "$pk" PRIMARY KEY (_cdc_lsn, _cdc_command_id, _cdc_seqval, _cdc_op)});
q1(qq{SELECT mssql_cdc.resume('src', 'dbo.$_')}) for qw(chk typ col pk);
ok(poll(q{SELECT count(*) = 5 FROM mssql_cdc.status WHERE state = 'streaming'}),
	'after the fixes and resume every table streams')
  or diag_state();
my $id_end = insert_tx(6, qw(chk typ col pk));
ok(poll(qq{SELECT count(*) = 1 FROM public.src_dbo_pk WHERE id = $id_end}),
	'the resumed tables caught up')
  or diag_state();
is(contents('chk'), "$id0:1 $id_chk:500 $id_late:5 $id_end:6", 'CHECK table: every change once, in order');
is(contents('typ'), "$id0:1 $id_typ:100000 $id_late:5 $id_end:6", 'type table: every change once');
is(contents('col'), "$id0:- $id_col:3 $id_late:5 $id_end:6",
	'dropped-column table: the rows of the parked windows are staged with the column');
is(contents('pk'), "$id0:1 $id_pk:4 $id_late:5 $id_end:6", 'primary-key table: every change once');
is(q1(q{SELECT count(*) FROM public.src_dbo_ok}), $next - 1, 'the healthy table has every transaction once');

# ---------------------------------------------------------------------------
# a revoked privilege: a source whose run_as role is not a superuser
# ---------------------------------------------------------------------------
$si->create_source($node, 'priv');
q1(qq{
CREATE ROLE alice;
GRANT USAGE ON FOREIGN SERVER priv TO alice;
CREATE USER MAPPING FOR alice SERVER priv OPTIONS (username '@{[ $si->user ]}', password '@{[ $si->password ]}');
GRANT EXECUTE ON FUNCTION mssql_cdc.add_table TO alice;
GRANT CREATE ON SCHEMA public TO alice;
});
q1(qq{SET ROLE alice; SELECT mssql_cdc.add_table('priv', 'dbo.$_', snapshot_mode => 'never')}) for qw(p1 p2);
ok(poll(q{SELECT count(*) = 2 FROM mssql_cdc.status WHERE server = 'priv' AND state = 'streaming'}),
	'the second source streams')
  or diag_state();
q1(q{REVOKE INSERT ON public.priv_dbo_p1 FROM alice});
$si->tsql_ok(q{BEGIN TRANSACTION; INSERT INTO dbo.p1 VALUES (1, 1); INSERT INTO dbo.p2 VALUES (1, 1); COMMIT});
ok( poll(q{SELECT s.state = 'error' AND s.condition = 'staging_permission_denied' AND ts.phase = 'error'
		FROM mssql_cdc.status s JOIN mssql_cdc.tables t ON t.server_name = 'priv' AND t.source_table = 'p1'
		JOIN mssql_cdc.table_state ts USING (table_id) WHERE s.source_table = 'dbo.p1'}),
	'INSERT revoked: the table is parked with condition staging_permission_denied')
  or diag_state();
ok(poll(q{SELECT count(*) = 1 FROM public.priv_dbo_p2}), 'INSERT revoked: the other table streams on')
  or diag_state();
q1(q{GRANT INSERT ON public.priv_dbo_p1 TO alice});
q1(q{SELECT mssql_cdc.resume('priv', 'dbo.p1')});
ok(poll(q{SELECT count(*) = 1 FROM public.priv_dbo_p1}), 'granted and resumed: the change arrives')
  or diag_state();
$si->tsql_ok(q{INSERT INTO dbo.p1 VALUES (2, 2)});
ok(poll(q{SELECT count(*) = 2 FROM public.priv_dbo_p1}), 'and streams on, every change once')
  or diag_state();

$node->stop;
$si->stop;
done_testing();
