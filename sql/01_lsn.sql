-- The mssql_cdc.lsn type: input forms, output, ordering, casts, increment.
\set SHOW_CONTEXT never

-- Accepted input: 0x + 20 hex digits (any case) and the colon form.
SELECT '0x0000002A000001F00003'::mssql_cdc.lsn AS hex_upper,
       '0x0000002a000001f00003'::mssql_cdc.lsn AS hex_lower,
       '0X0000002A000001F00003'::mssql_cdc.lsn AS prefix_upper,
       '0000002A:000001F0:0003'::mssql_cdc.lsn AS colon_upper,
       '0000002a:000001f0:0003'::mssql_cdc.lsn AS colon_lower;

-- Rejected input.
SELECT ''::mssql_cdc.lsn;
\echo :LAST_ERROR_SQLSTATE
SELECT '0x'::mssql_cdc.lsn;
\echo :LAST_ERROR_SQLSTATE
SELECT '0x0000002A000001F0003'::mssql_cdc.lsn;   -- 19 digits
\echo :LAST_ERROR_SQLSTATE
SELECT '0x0000002A000001F000030'::mssql_cdc.lsn; -- 21 digits
\echo :LAST_ERROR_SQLSTATE
SELECT '0x0000002G000001F00003'::mssql_cdc.lsn;  -- not hex
\echo :LAST_ERROR_SQLSTATE
SELECT '0000002A000001F00003'::mssql_cdc.lsn;    -- no prefix
\echo :LAST_ERROR_SQLSTATE
SELECT ' 0x0000002A000001F00003'::mssql_cdc.lsn; -- blank
\echo :LAST_ERROR_SQLSTATE
SELECT '0000002A:000001F0:003'::mssql_cdc.lsn;   -- short slot
\echo :LAST_ERROR_SQLSTATE
SELECT '0000002A-000001F0-0003'::mssql_cdc.lsn;  -- wrong separator
\echo :LAST_ERROR_SQLSTATE
SELECT '0x0000002A000001F0000-'::mssql_cdc.lsn;
\echo :LAST_ERROR_SQLSTATE

-- Operators and aggregates live in schema mssql_cdc: put it on the search_path
-- (or write OPERATOR(mssql_cdc.<)).  ORDER BY needs neither (default opclass).
SELECT '0x01000000000000000000'::mssql_cdc.lsn OPERATOR(mssql_cdc.>) '0x00FFFFFFFFFFFFFFFFFF' AS qualified_operator;
SET search_path = public, mssql_cdc;

-- Ordering is unsigned big-endian (0x80... sorts after 0x7F...), in every part.
CREATE TABLE lsn_sample (l mssql_cdc.lsn);
INSERT INTO lsn_sample VALUES
  ('0x80000000000000000000'), ('0x7FFFFFFFFFFFFFFFFFFF'), ('0x00000000000000000000'),
  ('0x0000002A000001F00003'), ('0x0000002A000001F00002'), ('0x0000002A000001F10000'),
  ('0x0000002B000000000000'), ('0xFFFFFFFFFFFFFFFFFFFF'), ('0x0000002A000001F00003');
SELECT l FROM lsn_sample ORDER BY l;
SELECT l FROM lsn_sample ORDER BY l DESC LIMIT 2;
SELECT min(l), max(l), count(DISTINCT l) FROM lsn_sample;
SELECT min(l) FROM lsn_sample WHERE false;

-- All six operators against the same pairs.
SELECT a, b, a = b AS eq, a <> b AS ne, a < b AS lt, a <= b AS le, a > b AS gt, a >= b AS ge
  FROM (VALUES ('0x0000002A000001F00003'::mssql_cdc.lsn, '0x0000002A000001F00003'::mssql_cdc.lsn),
               ('0x0000002A000001F00003', '0x0000002A000001F00004'),
               ('0x0000002A000001F00003', '0x0000002A000001F00002'),
               ('0x80000000000000000000', '0x7FFFFFFFFFFFFFFFFFFF')) AS v(a, b);

-- btree (default) and hash operator classes are usable by indexes.
CREATE INDEX lsn_sample_btree ON lsn_sample (l);
CREATE INDEX lsn_sample_hash ON lsn_sample USING hash (l);
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT l FROM lsn_sample WHERE l > '0x0000002A000001F00002' ORDER BY l;
SELECT l FROM lsn_sample WHERE l > '0x0000002A000001F00002' ORDER BY l;
SET enable_indexscan = off;
SET enable_bitmapscan = on;
DROP INDEX lsn_sample_btree;
EXPLAIN (COSTS OFF) SELECT count(*) FROM lsn_sample WHERE l = '0x0000002A000001F00003';
SELECT count(*) FROM lsn_sample WHERE l = '0x0000002A000001F00003';
RESET enable_seqscan;
RESET enable_bitmapscan;
RESET enable_indexscan;
-- hash aggregation and hash joins use the hash opclass
SET enable_sort = off;
SELECT l, count(*) FROM lsn_sample GROUP BY l HAVING count(*) > 1;
RESET enable_sort;
SELECT pg_catalog.count(*) FROM lsn_sample a JOIN lsn_sample b USING (l);
-- a primary key works (unique btree)
CREATE TABLE lsn_pk (l mssql_cdc.lsn PRIMARY KEY);
INSERT INTO lsn_pk VALUES ('0x0000002A000001F00003');
INSERT INTO lsn_pk VALUES ('0000002A:000001F0:0003');
DROP TABLE lsn_pk, lsn_sample;

-- Casts to and from bytea; only exactly 10 bytes make an LSN.
SELECT '0x0000002A000001F00003'::mssql_cdc.lsn::bytea AS to_bytea,
       '\x0000002a000001f00003'::bytea::mssql_cdc.lsn AS from_bytea,
       '\xffffffffffffffffffff'::bytea::mssql_cdc.lsn AS from_bytea_max;
SELECT '\x0000002a000001f000'::bytea::mssql_cdc.lsn;
\echo :LAST_ERROR_SQLSTATE
SELECT '\x0000002a000001f0000300'::bytea::mssql_cdc.lsn;
\echo :LAST_ERROR_SQLSTATE
SELECT ''::bytea::mssql_cdc.lsn;
\echo :LAST_ERROR_SQLSTATE

-- Binary send form is the 10 raw bytes.
SELECT mssql_cdc.lsn_send('0x0000002A000001F00003');

-- Increment: +1 with carry through slot, block and VLF; the maximum has no successor.
SELECT mssql_cdc.lsn_increment('0x0000002A000001F00003') AS plain,
       mssql_cdc.lsn_increment('0x0000002A000001F0FFFF') AS slot_carry,
       mssql_cdc.lsn_increment('0x0000002AFFFFFFFFFFFF') AS block_carry,
       mssql_cdc.lsn_increment('0x00000000000000000000') AS from_zero;
SELECT mssql_cdc.lsn_increment('0xFFFFFFFFFFFFFFFFFFFF');
\echo :LAST_ERROR_SQLSTATE
SELECT mssql_cdc.lsn_increment(NULL) IS NULL AS null_in_null_out;
RESET search_path;
