# A capture instance without gating role (@role_name = NULL): Microsoft's
# CDC security model lets any login with SELECT on the source read its
# query function, Debezium's documentation says only sysadmin/db_owner may.
# UNCONFIRMED, so the stand-in plays both (security_options
# null_role_access 'select' | 'dbo_only') and the worker and check_server()
# must be right under each: readable -> the changes stream; not readable ->
# check_server names GRANT SELECT on the function, the worker stops the
# table with a message that says how to grant it, and after the GRANT and a
# resnapshot everything arrives once.  That is the function path
# (data_query_mode 'function'): the default direct path reads
# cdc.[<ci>_CT], which needs SELECT on the change table whatever the gating
# role, so a login without it gets permission_denied with the GRANT named,
# and nothing is lost once it is granted.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use StandIn;
use Test::More;

my $si = StandIn->start(capture_interval => 0.2);
$si->tsql_ok(
	q{CREATE LOGIN plainr WITH PASSWORD = 'Pl4inR-pass!'},
	q{CREATE USER plainr FOR LOGIN plainr},
	q{EXEC sys.sp_cdc_enable_db},
	q{CREATE TABLE dbo.open_t (id int NOT NULL PRIMARY KEY, v int)},
	q{EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'open_t', @role_name = NULL},
	q{GRANT SELECT ON dbo.open_t TO plainr},
	q{GRANT SELECT ON cdc.lsn_time_mapping TO plainr},
	q{GRANT SELECT ON cdc.captured_columns TO plainr},
	q{GRANT SELECT ON cdc.index_columns TO plainr});

my $node = PostgreSQL::Test::Cluster->new('null_role');
$node->init;
$si->setup_node($node);
$node->start;
my ($host, $port, $tls) = ($si->host, $si->port, $si->tls_options);
$node->safe_psql('postgres', qq{
CREATE EXTENSION mssql_cdc;
CREATE SERVER src FOREIGN DATA WRAPPER mssql_cdc
  OPTIONS (host '$host', port '$port', database 'cdcdb', query_timeout '10', login_timeout '5'$tls);
CREATE USER MAPPING FOR CURRENT_USER SERVER src OPTIONS (username 'plainr', password 'Pl4inR-pass!');
});

# ---------------------------------------------------------------------------
# the direct path: SELECT on the change table is needed, whatever the role
# ---------------------------------------------------------------------------
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('src', 'dbo.open_t', snapshot_mode => 'never')});
$si->tsql_ok(q{INSERT INTO dbo.open_t VALUES (-1, -10)});
ok( $node->poll_query_until('postgres',
		q{SELECT condition = 'permission_denied' FROM mssql_cdc.status}),
	"direct path without SELECT on the change table: permission_denied")
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status');
like($node->safe_psql('postgres', q{SELECT last_error || ' / ' || hint FROM mssql_cdc.status}),
	qr/The SELECT permission was denied on the object 'dbo_open_t_CT'.* \/ .*GRANT SELECT ON SCHEMA::cdc.*data_query_mode 'function'/,
	'the message names the change table, the hint the GRANT and the other path');
$si->tsql_ok(q{GRANT SELECT ON cdc.dbo_open_t_CT TO plainr});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM public.src_dbo_open_t WHERE id = -1}),
	'after the GRANT the change arrives');
$node->safe_psql('postgres', q{
SELECT mssql_cdc.remove_table('src', 'dbo.open_t');
DROP TABLE public.src_dbo_open_t;
ALTER SERVER src OPTIONS (ADD data_query_mode 'function');
});

sub table_check
{
	return $node->safe_psql('postgres',
		q{SELECT ok || '|' || detail FROM mssql_cdc.check_server('src') WHERE check_name = 'table dbo.open_t'});
}

# ---------------------------------------------------------------------------
# 'select': SELECT on the source suffices
# ---------------------------------------------------------------------------
like(table_check(), qr/; query function readable \(data_query_mode 'function'\)$/,
	"null_role_access 'select': check_server finds the function readable");
$si->add_table_when_started($node, q{SELECT mssql_cdc.add_table('src', 'dbo.open_t', snapshot_mode => 'never')});
$si->tsql_ok(q{INSERT INTO dbo.open_t VALUES (1, 10)});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM public.src_dbo_open_t}),
	"null_role_access 'select': the change streams");

# ---------------------------------------------------------------------------
# 'dbo_only': only an explicit grant on the function lets the login read it
# ---------------------------------------------------------------------------
$si->ctl('security_options', 'null_role_access=dbo_only');
like(table_check(),
	qr/; query function not readable \(Msg 229: The SELECT permission was denied on the object 'fn_cdc_get_all_changes_dbo_open_t', database 'cdcdb', schema 'cdc'\.\): for data_query_mode 'function' .*GRANT SELECT ON \[cdc\]\.\[fn_cdc_get_all_changes_dbo_open_t\] TO \[plainr\];/,
	"null_role_access 'dbo_only': check_server names the GRANT on the function");
$si->tsql_ok(q{INSERT INTO dbo.open_t VALUES (2, 20)});
ok( $node->poll_query_until('postgres',
		q{SELECT state = 'error' AND condition = 'capture_instance_missing' FROM mssql_cdc.status}),
	"null_role_access 'dbo_only': the table stops, it is not retried blindly")
  or diag $node->safe_psql('postgres', 'SELECT * FROM mssql_cdc.status');
like($node->safe_psql('postgres', q{SELECT last_error || ' / ' || hint FROM mssql_cdc.status}),
	qr/^Table dbo\.open_t of server "src" is still enabled for change data capture, but the login may not read its capture instance "dbo_open_t" any more\..* \/ .*or for an instance without a gating role GRANT SELECT ON \[cdc\]\.\[fn_cdc_get_all_changes_dbo_open_t\]/,
	"null_role_access 'dbo_only': the message says so and the hint names the grant");

$si->tsql_ok(q{GRANT SELECT ON cdc.fn_cdc_get_all_changes_dbo_open_t TO plainr});
like(table_check(), qr/; query function readable/, 'after the GRANT check_server finds it readable');
$node->safe_psql('postgres', q{SELECT mssql_cdc.resnapshot('src', 'dbo.open_t')});
ok($node->poll_query_until('postgres', q{SELECT state = 'streaming' FROM mssql_cdc.status}),
	'after the GRANT and a resnapshot the table streams again');
$si->tsql_ok(q{INSERT INTO dbo.open_t VALUES (3, 30)});
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM public.src_dbo_open_t WHERE id = 3 AND _cdc_op = 'insert'}),
	'changes flow again, once');

$si->ctl('security_options', 'null_role_access=select');
$node->stop;
done_testing();
