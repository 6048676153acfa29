# Execution order inside a source transaction (issue 12, point 1).  SQL
# Server records an update of a primary-key column or of a UNIQUE column as
# delete + insert, a multi-row statement as all deletes then all inserts in
# __$command_id order, and __$seqval does not follow execution order (a
# row's delete and insert can share it; KB3030352: the insert can sort
# first).  Whatever the shape, replaying a staging table in its primary-key
# order into a PostgreSQL table with the source's PRIMARY KEY and UNIQUE
# constraints must succeed row by row and end equal to the source table.
#
# One stand-in per recorded shape (test/standin/ENGINE.md "CDC model"):
#   shared    split updates, a row's delete and insert share __$seqval
#   inverted  split updates, each insert's __$seqval before its delete's
#   inplace   unique-key updates stay 3/4, __$seqval in execution order
# plus a server with data_query_mode 'function' (the documented caveat:
# __$seqval order, command id 0).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;

my @shapes = StandIn::real_server()
  ? ([ 'real', [] ])
  : ([ 'shared', [ '--split-update-seqval', 'shared' ] ],
	[ 'inverted', [ '--split-update-seqval', 'inverted' ] ],
	[ 'inplace', [ '--split-update-seqval', 'ascending', '--unique-update', 'in-place' ] ]);

my $node = PostgreSQL::Test::Cluster->new('order');
$node->init;
my %si;
foreach my $shape (@shapes)
{
	my ($name, $args) = @$shape;
	$si{$name} = StandIn->start(capture_interval => 0.1, args => $args);
}
$si{ $shapes[0][0] }->setup_node($node);
$node->start;

# psql that returns the error instead of dying, so every check reports
sub query
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', $sql);
	return $ret == 0 ? $out : "ERROR: $err";
}

# Replay a staging table in its primary-key order into target: every row
# must apply (inserts, deletes and updates by the key, before images equal
# to the current row), with the target's constraints checked per row, or
# at each source transaction's end for deferrable ones.
$node->safe_psql('postgres', q{
CREATE FUNCTION replay(staging regclass, target regclass, keycol text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	pk text;
	cols text;
	r jsonb;
	lsn text;
	n bigint;
	applied bigint := 0;
BEGIN
	SELECT string_agg(format('s.%I', a.attname), ', ' ORDER BY k.ord) INTO pk
	  FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
	  JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
	 WHERE i.indrelid = staging AND i.indisprimary;
	SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO cols
	  FROM pg_attribute WHERE attrelid = target AND attnum > 0 AND NOT attisdropped;
	SET CONSTRAINTS ALL DEFERRED;
	FOR r IN EXECUTE format('SELECT to_jsonb(s) FROM %s s ORDER BY %s', staging, pk) LOOP
		IF lsn IS DISTINCT FROM r->>'_cdc_lsn' THEN
			-- a source transaction ended: its deferred checks run now
			SET CONSTRAINTS ALL IMMEDIATE;
			SET CONSTRAINTS ALL DEFERRED;
			lsn := r->>'_cdc_lsn';
		END IF;
		CASE r->>'_cdc_op'
		WHEN 'insert', 'snapshot' THEN
			EXECUTE format('INSERT INTO %s SELECT * FROM jsonb_populate_record(NULL::%s, $1)', target, target)
			  USING r;
			n := 1;
		WHEN 'delete' THEN
			EXECUTE format('DELETE FROM %s t WHERE t.%I = (jsonb_populate_record(NULL::%s, $1)).%I',
				target, keycol, target, keycol) USING r;
			GET DIAGNOSTICS n = ROW_COUNT;
		WHEN 'update_before' THEN
			EXECUTE format('SELECT count(*) FROM %s t WHERE t = jsonb_populate_record(NULL::%s, $1)',
				target, target) INTO n USING r;
		WHEN 'update_after' THEN
			EXECUTE format('UPDATE %s t SET (%s) = (SELECT %s FROM jsonb_populate_record(NULL::%s, $1))'
				' WHERE t.%I = (jsonb_populate_record(NULL::%s, $1)).%I',
				target, cols, cols, target, keycol, target, keycol) USING r;
			GET DIAGNOSTICS n = ROW_COUNT;
		END CASE;
		IF n <> 1 THEN
			RAISE EXCEPTION '% of %=% found % rows', r->>'_cdc_op', keycol, r->>keycol, n;
		END IF;
		applied := applied + 1;
	END LOOP;
	SET CONSTRAINTS ALL IMMEDIATE;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN format('failed after %s rows at %s: %s', applied, r, SQLERRM);
END
$$;
});

# The DML of the test, one transaction per batch (comments: what SQL Server
# records in split mode).
my @workload = (
	q{INSERT INTO dbo.acct VALUES (1, 'R1', 0), (2, 'R2', 0), (3, 'R3', 0), (4, 'R4', 0), (5, 'R5', 0)},
	# a UNIQUE column of one row: delete + insert (KB3030352: insert first by seqval)
	q{UPDATE dbo.acct SET ref = 'X1' WHERE id = 1},
	# a value swap on the UNIQUE column: D2 D3 I2 I3 by command id, D2 I2 D3 I3 by seqval
	q{UPDATE dbo.acct SET ref = CASE id WHEN 2 THEN 'R3' ELSE 'R2' END WHERE id IN (2, 3)},
	# a key shift of every row: inserting 2 before deleting 2 fails
	q{UPDATE dbo.acct SET id = id + 1},
	# a key swap
	q{UPDATE dbo.acct SET id = CASE id WHEN 2 THEN 3 ELSE 2 END WHERE id IN (2, 3)},
	# several statements: a freed key is taken again in the same transaction
	q{BEGIN TRANSACTION;
	  DELETE FROM dbo.acct WHERE id = 4;
	  UPDATE dbo.acct SET ref = 'R2' WHERE id = 6;
	  INSERT INTO dbo.acct VALUES (4, 'R5', 9);
	  UPDATE dbo.acct SET v = v + 1;
	  COMMIT},
	# a UNIQUE NONCLUSTERED INDEX: shift and swap
	q{UPDATE dbo.code SET code = code + 10},
	q{UPDATE dbo.code SET code = CASE id WHEN 1 THEN 40 ELSE 20 END WHERE id IN (1, 3)},
	q{INSERT INTO dbo.done VALUES (1)});

foreach my $shape (@shapes)
{
	my $name = $shape->[0];
	my $si = $si{$name};
	$si->tsql_ok(
		q{EXEC sys.sp_cdc_enable_db},
		q{CREATE TABLE dbo.acct (id int NOT NULL PRIMARY KEY, ref varchar(10) NOT NULL, v int NOT NULL,
		                         CONSTRAINT uq_acct_ref UNIQUE (ref))},
		q{CREATE TABLE dbo.code (id int NOT NULL PRIMARY KEY, code int NOT NULL, note nvarchar(20))},
		q{CREATE UNIQUE NONCLUSTERED INDEX ux_code_code ON dbo.code (code)},
		q{INSERT INTO dbo.code VALUES (1, 10, N'a'), (2, 20, N'b'), (3, 30, N'c')},
		q{CREATE TABLE dbo.done (id int NOT NULL PRIMARY KEY)},
		map { "EXEC sys.sp_cdc_enable_table \@source_schema = N'dbo', \@source_name = N'$_', \@role_name = NULL" }
		  qw(acct code done));
	$si->create_source($node, $name, data_query_mode => 'direct');
	$si->add_table_when_started($node,
		"SELECT mssql_cdc.add_table('$name', 'dbo.acct', snapshot_mode => 'never')");
	$si->add_table($node, $name, 'dbo.code', snapshot_mode => 'initial');
	$si->add_table($node, $name, 'dbo.done');
}
# the function path reads the first stand-in's tables too
my $fn_si = $si{ $shapes[0][0] };
$fn_si->create_source($node, 'fn', data_query_mode => 'direct');
my $fn_ok = query(q{ALTER SERVER fn OPTIONS (SET data_query_mode 'function')}) !~ /^ERROR/;
ok($fn_ok, "data_query_mode 'function' is a valid server option");
if ($fn_ok)
{
	$fn_si->add_table($node, 'fn', "dbo.$_") for qw(acct done);
}

ok( $node->poll_query_until(
		'postgres',
		q{SELECT count(*) = 0 FROM mssql_cdc.status WHERE state <> 'streaming' OR checkpoint_lsn IS NULL}),
	'every table streams (the snapshot of dbo.code is done)')
  or diag query('SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors');

foreach my $name (map { $_->[0] } @shapes)
{
	$si{$name}->tsql_ok($_) for @workload;
}
my @done = ((map { "${_}_dbo_done" } map { $_->[0] } @shapes), $fn_ok ? ('fn_dbo_done') : ());
ok( $node->poll_query_until('postgres',
		'SELECT ' . join(' AND ', map { "(SELECT count(*) = 1 FROM public.$_)" } @done)),
	'every source\'s last transaction arrived')
  or diag query('SELECT * FROM mssql_cdc.status; SELECT * FROM mssql_cdc.errors');

# the source tables as SQL Server has them now
sub source_rows
{
	my ($si, $sql) = @_;
	my $out = $si->tsql_ok($sql);
	return join(',', $out =~ /^row=(\S+)/mg);
}

foreach my $name (map { $_->[0] } @shapes)
{
	my $si = $si{$name};
	# the constraints of the source; where unique keys are updated in place
	# a swap passes through a duplicate, so they are checked per source
	# transaction (deferred), the primary key always per row
	my $deferrable = $name eq 'inplace' || $name eq 'real' ? 'DEFERRABLE INITIALLY DEFERRED' : '';
	$node->safe_psql('postgres', qq{
CREATE TABLE replay_${name}_acct (id int PRIMARY KEY, ref text NOT NULL UNIQUE $deferrable, v int NOT NULL);
CREATE TABLE replay_${name}_code (id int PRIMARY KEY, code int NOT NULL UNIQUE $deferrable, note text);
});
	is(query("SELECT replay('public.${name}_dbo_acct', 'replay_${name}_acct', 'id')"), 'ok',
		"$name: dbo.acct replays in staging key order (PRIMARY KEY and UNIQUE (ref) hold)");
	is(query("SELECT replay('public.${name}_dbo_code', 'replay_${name}_code', 'id')"), 'ok',
		"$name: dbo.code replays in staging key order (PRIMARY KEY and UNIQUE INDEX (code) hold)");
	is( query("SELECT string_agg(format('%s|%s|%s', id, ref, v), ',' ORDER BY id) FROM replay_${name}_acct"),
		source_rows($si, q{SELECT 'row=' + CAST(id AS varchar(10)) + '|' + ref + '|' + CAST(v AS varchar(10))
		                   FROM dbo.acct ORDER BY id}),
		"$name: the replay of dbo.acct equals the source table");
	is( query("SELECT string_agg(format('%s|%s|%s', id, code, note), ',' ORDER BY id) FROM replay_${name}_code"),
		source_rows($si, q{SELECT 'row=' + CAST(id AS varchar(10)) + '|' + CAST(code AS varchar(10)) + '|' + note
		                   FROM dbo.code ORDER BY id}),
		"$name: the replay of dbo.code equals the source table");
	is(query("SELECT count(*) FROM public.${name}_dbo_code WHERE _cdc_op = 'snapshot' AND _cdc_command_id <> 0"),
		'0', "$name: snapshot rows have command id 0");

	next if $name eq 'real';
	# the swap (third transaction) exactly, in staging key order
	my $swap = query(qq{
SELECT string_agg(format('%s:%s:%s', _cdc_op, id, ref), ' ' ORDER BY _cdc_lsn, _cdc_command_id, _cdc_seqval, _cdc_op)
       || ' / ' || string_agg(_cdc_command_id::text, ' ' ORDER BY _cdc_lsn, _cdc_command_id, _cdc_seqval, _cdc_op)
  FROM public.${name}_dbo_acct
 WHERE _cdc_lsn::text = (SELECT DISTINCT _cdc_lsn::text FROM public.${name}_dbo_acct ORDER BY 1 OFFSET 2 LIMIT 1)});
	my $cmd = query(qq{SELECT min(_cdc_command_id) FROM public.${name}_dbo_acct
		WHERE _cdc_lsn::text = (SELECT DISTINCT _cdc_lsn::text FROM public.${name}_dbo_acct ORDER BY 1 OFFSET 2 LIMIT 1)});
	$cmd = 0 unless $cmd =~ /^\d+$/;
	my @c = map { $cmd + $_ } 0 .. 3;
	is( $swap,
		$name eq 'inplace'
		  ? "update_before:2:R2 update_after:2:R3 update_before:3:R3 update_after:3:R2 / $c[0] $c[0] $c[1] $c[1]"
		  : "delete:2:R2 delete:3:R3 insert:2:R3 insert:3:R2 / $c[0] $c[1] $c[2] $c[3]",
		"$name: the value swap is staged in execution order with SQL Server's command ids");
}

if ($fn_ok)
{
	# the function path: seqval order, no command id (doc/streaming.md)
	is( query(q{SELECT string_agg(format('%s:%s:%s', _cdc_op, id, ref), ' ' ORDER BY _cdc_lsn, _cdc_command_id, _cdc_seqval, _cdc_op)
		  FROM public.fn_dbo_acct
		 WHERE _cdc_lsn::text = (SELECT DISTINCT _cdc_lsn::text FROM public.fn_dbo_acct ORDER BY 1 OFFSET 2 LIMIT 1)}),
		'delete:2:R2 insert:2:R3 delete:3:R3 insert:3:R2',
		'function path: the swap is staged in __$seqval order (the documented caveat)')
	  unless StandIn::real_server();
	is(query(q{SELECT count(*) FROM public.fn_dbo_acct WHERE _cdc_command_id <> 0}),
		'0', 'function path: command id 0 on every row');
	is( query(q{SELECT count(*) FROM public.fn_dbo_acct}),
		query("SELECT count(*) FROM public.$shapes[0][0]_dbo_acct"),
		'function path: the same rows as the direct path');
}

is(query('SELECT count(*) FROM mssql_cdc.errors'), '0', 'no errors were recorded')
  or diag query('SELECT * FROM mssql_cdc.errors');

done_testing();
