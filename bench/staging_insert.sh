#!/usr/bin/env bash
# bench/staging_insert.sh: what the staging table's primary key costs
# (issue 16 point 3), away from the worker and the stand-in.
#
# Inserts: COPY FROM a binary file (the heap multi-insert plus one
# ExecInsertIndexTuples per row that src/staging_writer.c does too) of ROWS
# snapshot-shaped rows (one LSN, command id 0, increasing seqval) and ROWS
# change-shaped rows (10 rows per LSN, command id 1..10, increasing seqval)
# into tables of the narrow benchmark table's staging shape that differ only
# in their index (variants below).  Sorts: the staging key's ORDER BY and
# its CREATE INDEX (what an upgrade that rebuilds the key pays) over the same
# rows.
#
#   bench/staging_insert.sh [-n ROWS] [-r REPEAT] [-v VARIANT[:LSNTYPE] ...]
#                           [-t LSNTYPE ...] [-s] [-- psql options]
#
# VARIANT:LSNTYPE gives _cdc_lsn and _cdc_seqval another type than
# mssql_cdc.lsn, e.g. the same type built from an older src/lsn.c under
# another name, for an A/B comparison in one run (bench/README.md); -t
# names the types the sorts run with (default mssql_cdc.lsn).  -s: the
# sorts only.  Runs against any database with the extension (psql
# options: -h -p -d -U) as a superuser (server-side COPY), with a directory
# that both psql's user and the server can write (-D; default a fresh
# mktemp -d, removed at the end).  Rounds interleave the variants, so that
# a neighbour's load on a shared machine hits all of them alike; the table
# shows the median of REPEAT rounds.  Timing, not a test: bench/README.md.
set -euo pipefail
rows=1000000
repeat=3
dir=
sorts_only=0
variants=()
sort_types=()
while [ $# -gt 0 ]; do
	case "$1" in
		-n) rows=$2; shift 2 ;;
		-r) repeat=$2; shift 2 ;;
		-v) variants+=("$2"); shift 2 ;;
		-D) dir=$2; shift 2 ;;
		-t) sort_types+=("$2"); shift 2 ;;
		-s) sorts_only=1; shift ;;
		--) shift; break ;;
		*) echo "unknown option $1" >&2; exit 2 ;;
	esac
done
own_dir=0
if [ -z "$dir" ]; then
	dir=$(mktemp -d)
	own_dir=1
	chmod 777 "$dir"
fi
trap '[ $own_dir = 1 ] && rm -rf "$dir"' EXIT
PSQL_ARGS=("$@")
psql_() { psql -X -q -v ON_ERROR_STOP=1 "${PSQL_ARGS[@]}" "$@"; }

# The narrow benchmark table's staging columns (bench/bench.py dbo.narrow
# through describe_source), then the metadata columns as src/staging.c
# creates them.
columns_with() {
	echo "id integer, v bigint, s text, t timestamp, n numeric(18,4),
	_cdc_lsn $1 NOT NULL, _cdc_seqval $1 NOT NULL,
	_cdc_op mssql_cdc.operation NOT NULL, _cdc_commit_time timestamptz,
	_cdc_update_mask bytea, _cdc_command_id integer NOT NULL"
}
key="_cdc_lsn, _cdc_command_id, _cdc_seqval, _cdc_op"

# variant -> the DDL after CREATE TABLE bench_t (columns)
declare -A index_ddl=(
	[heap]=""
	[int4_key]="ALTER TABLE bench_t ADD PRIMARY KEY (id)"
	[staging_key]="ALTER TABLE bench_t ADD PRIMARY KEY ($key)"
	[staging_key_ff100]="ALTER TABLE bench_t ADD PRIMARY KEY ($key) WITH (fillfactor = 100)"
	[staging_key_not_unique]="CREATE INDEX ON bench_t ($key)"
	[key_without_op]="ALTER TABLE bench_t ADD PRIMARY KEY (_cdc_lsn, _cdc_command_id, _cdc_seqval)"
	[lsn_seqval_key]="ALTER TABLE bench_t ADD PRIMARY KEY (_cdc_lsn, _cdc_seqval)"
)
[ ${#variants[@]} -eq 0 ] && variants=(heap int4_key staging_key)
[ ${#sort_types[@]} -eq 0 ] && sort_types=(mssql_cdc.lsn)
for v in "${variants[@]}"; do
	[ -n "${index_ddl[${v%%:*}]+x}" ] || { echo "unknown variant $v (${!index_ddl[*]})" >&2; exit 2; }
done

lsn_of() { echo "mssql_cdc.lsn_from_bytea(decode(lpad(to_hex($1), 20, '0'), 'hex'))"; }
row_values="i, i::bigint * 7, 'row ' || i, timestamp '2020-01-01' + i * interval '1 second',
	((i % 100000) / 7.0)::numeric(18,4)"
psql_ <<SQL
COPY (SELECT $row_values, '0x0000002A000001F00003'::mssql_cdc.lsn, $(lsn_of i),
	  'snapshot'::mssql_cdc.operation, now(), NULL::bytea, 0
	  FROM generate_series(1, $rows) i) TO '$dir/snapshot.bin' (FORMAT binary);
COPY (SELECT $row_values, $(lsn_of "(1000 + i / 10)"), $(lsn_of i),
	  'insert'::mssql_cdc.operation, now(), '\x1f'::bytea, 1 + i % 10
	  FROM generate_series(1, $rows) i) TO '$dir/change.bin' (FORMAT binary);
SQL

# ms of each timed statement in psql's output, one a line
times_of() { sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p'; }
# the backend's CPU time in ns (/proc/self/schedstat): what a statement costs
# the backend, whatever else shares the cores
cpu_ns="SELECT 'cpu_ns ' || split_part(pg_catalog.pg_read_file('/proc/self/schedstat'), ' ', 1)"
cpu_ms_of() { sed -n 's/^ *cpu_ns \([0-9]*\).*/\1/p' | awk 'NR % 2 == 1 {a = $1} NR % 2 == 0 {printf "%.1f\n", ($1 - a) / 1e6}'; }
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
declare -A samples=() cpu=() index_bytes=()

insert_round() {
	local v=$1 shape=$2 out type=mssql_cdc.lsn
	[[ $v == *:* ]] && type=${v#*:}
	out=$(psql_ <<SQL
DROP TABLE IF EXISTS bench_t;
CREATE TABLE bench_t ($(columns_with "$type"));
${index_ddl[${v%%:*}]};
CHECKPOINT;
\\t on
$cpu_ns;
\\timing on
COPY bench_t FROM '$dir/$shape.bin' (FORMAT binary);
\\timing off
$cpu_ns;
SELECT 'index_bytes ' || coalesce(sum(pg_relation_size(indexrelid)), 0)
  FROM pg_index WHERE indrelid = 'bench_t'::regclass;
SQL
)
	samples[$v/$shape]+="$(echo "$out" | times_of) "
	cpu[$v/$shape]+="$(echo "$out" | cpu_ms_of) "
	index_bytes[$v/$shape]=$(echo "$out" | sed -n 's/^ *index_bytes \([0-9]*\).*/\1/p')
}

# ORDER BY the key (in memory) and CREATE INDEX of the key
sort_round() {
	local type=$1 shape=$2 out
	out=$(psql_ <<SQL
DROP TABLE IF EXISTS bench_t;
CREATE TABLE bench_t ($(columns_with "$type"));
COPY bench_t FROM '$dir/$shape.bin' (FORMAT binary);
VACUUM ANALYZE bench_t;
SET work_mem = '1GB';
SET maintenance_work_mem = '1GB';
SET max_parallel_workers_per_gather = 0;
SET max_parallel_maintenance_workers = 0;
\\t on
$cpu_ns;
SELECT count(*) FROM (SELECT $key FROM bench_t ORDER BY $key OFFSET 0) s;
$cpu_ns;
$cpu_ns;
CREATE UNIQUE INDEX bench_t_key ON bench_t ($key);
$cpu_ns;
SQL
)
	local t=($(echo "$out" | cpu_ms_of))
	samples[order_by:$type/$shape]+="${t[0]} "
	samples[create_index:$type/$shape]+="${t[1]} "
}

for ((r = 0; r < repeat; r++)); do
	for shape in snapshot change; do
		if [ $sorts_only = 0 ]; then
			for v in "${variants[@]}"; do
				insert_round "$v" "$shape"
			done
		fi
		for type in "${sort_types[@]}"; do
			sort_round "$type" "$shape"
		done
	done
done
psql_ -c "DROP TABLE IF EXISTS bench_t" 2>/dev/null

ms_of() { printf '%s\n' ${samples[$1]} | median; }
cpu_of() { printf '%s\n' ${cpu[$1]} | median; }
if [ $sorts_only = 0 ]; then
	printf '| insert into | shape | rows | ms (median of %s) | rows/s | backend CPU ms | index MB |\n|---|---|---:|---:|---:|---:|---:|\n' "$repeat"
	for v in "${variants[@]}"; do
		for shape in snapshot change; do
			ms=$(ms_of "$v/$shape")
			printf '| %s | %s | %s | %.0f | %.0f | %.0f | %.1f |\n' "$v" "$shape" "$rows" "$ms" \
				"$(echo "$rows * 1000 / $ms" | bc -l)" "$(cpu_of "$v/$shape")" "$(echo "${index_bytes[$v/$shape]} / 1048576" | bc -l)"
		done
	done
	echo
fi
printf '| statement over the staging key | shape | rows | backend CPU ms (median of %s) |\n|---|---|---:|---:|\n' "$repeat"
for what in order_by create_index; do
	for type in "${sort_types[@]}"; do
		for shape in snapshot change; do
			printf '| %s (%s) | %s | %s | %.0f |\n' "$what" "$type" "$shape" "$rows" \
				"$(ms_of "$what:$type/$shape")"
		done
	done
done
