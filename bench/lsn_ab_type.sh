#!/usr/bin/env bash
# bench/lsn_ab_type.sh LSN_C [SCHEMA]: build another revision of src/lsn.c
# as a second LSN type, SCHEMA.lsn (default lsn_ab.lsn), with its own btree
# operator class (the comparison function only), so that
# bench/staging_insert.sh can compare two comparators in one run:
#
#   git show <commit>:src/lsn.c > /tmp/lsn_other.c
#   bench/lsn_ab_type.sh /tmp/lsn_other.c > /tmp/lsn_ab.sql   # installs lsn_ab.so
#   psql -f /tmp/lsn_ab.sql
#   bench/staging_insert.sh -v staging_key -v staging_key:lsn_ab.lsn -t mssql_cdc.lsn -t lsn_ab.lsn
#
# The library goes into the pkglibdir of the pg_config on PATH: use it with
# a private build (/work/dev/pg-<name>), never with the system PostgreSQL.
# The C symbols are renamed (mssql_cdc_lsn_* -> ab_lsn_*, mssql_lsn_* ->
# ab_mssql_lsn_*) so that both libraries load into one backend.
set -euo pipefail
src=$1
schema=${2:-lsn_ab}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{
	echo '#include "postgres.h"'
	echo '#include "fmgr.h"'
	echo 'PG_MODULE_MAGIC;'
	sed 's/mssql_cdc_lsn_/ab_lsn_/g; s/mssql_lsn_/ab_mssql_lsn_/g' "$src"
} > "$work/lsn_ab.c"
# the helpers' prototypes come from include/lsn.h, renamed alike
sed 's/mssql_lsn_/ab_mssql_lsn_/g' "$here/include/lsn.h" > "$work/lsn.h"
gcc -O2 -fPIC -shared -I"$work" -I"$(pg_config --includedir-server)" \
	-o "$work/lsn_ab.so" "$work/lsn_ab.c"
cp "$work/lsn_ab.so" "$(pg_config --pkglibdir)/lsn_ab.so"
s=$schema
cat <<SQL
DROP SCHEMA IF EXISTS $s CASCADE;
CREATE SCHEMA $s;
CREATE TYPE $s.lsn;
CREATE FUNCTION $s.lsn_in(cstring) RETURNS $s.lsn AS 'lsn_ab', 'ab_lsn_in' LANGUAGE C IMMUTABLE STRICT;
CREATE FUNCTION $s.lsn_out($s.lsn) RETURNS cstring AS 'lsn_ab', 'ab_lsn_out' LANGUAGE C IMMUTABLE STRICT;
CREATE FUNCTION $s.lsn_recv(internal) RETURNS $s.lsn AS 'lsn_ab', 'ab_lsn_recv' LANGUAGE C IMMUTABLE STRICT;
CREATE FUNCTION $s.lsn_send($s.lsn) RETURNS bytea AS 'lsn_ab', 'ab_lsn_send' LANGUAGE C IMMUTABLE STRICT;
CREATE TYPE $s.lsn (INPUT = $s.lsn_in, OUTPUT = $s.lsn_out, RECEIVE = $s.lsn_recv, SEND = $s.lsn_send,
	INTERNALLENGTH = 10, ALIGNMENT = char, STORAGE = plain);
SQL
for op in eq:= lt:'<' le:'<=' gt:'>' ge:'>='; do
	echo "CREATE FUNCTION $s.lsn_${op%%:*}($s.lsn, $s.lsn) RETURNS boolean AS 'lsn_ab', 'ab_lsn_${op%%:*}' LANGUAGE C IMMUTABLE STRICT;"
	echo "CREATE OPERATOR $s.${op#*:} (LEFTARG = $s.lsn, RIGHTARG = $s.lsn, PROCEDURE = $s.lsn_${op%%:*});"
done
cat <<SQL
CREATE FUNCTION $s.lsn_cmp($s.lsn, $s.lsn) RETURNS integer AS 'lsn_ab', 'ab_lsn_btree_cmp' LANGUAGE C IMMUTABLE STRICT;
CREATE OPERATOR CLASS $s.lsn_ops DEFAULT FOR TYPE $s.lsn USING btree AS
	OPERATOR 1 $s.<, OPERATOR 2 $s.<=, OPERATOR 3 $s.=, OPERATOR 4 $s.>=, OPERATOR 5 $s.>,
	FUNCTION 1 $s.lsn_cmp($s.lsn, $s.lsn);
SQL
