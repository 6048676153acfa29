-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION mssql_cdc" to load this file. \quit

-- Everyone may see the schema (the lsn type, the status view, the function
-- signatures); what each object allows is granted per object below.
GRANT USAGE ON SCHEMA mssql_cdc TO PUBLIC;

-- ---------------------------------------------------------------------------
-- mssql_cdc.lsn: SQL Server's binary(10) log sequence number.
-- Ordered as unsigned big-endian bytes (memcmp), shown as 0x + 20 hex digits.
-- ---------------------------------------------------------------------------

CREATE TYPE mssql_cdc.lsn;

CREATE FUNCTION mssql_cdc.lsn_in(pg_catalog.cstring) RETURNS mssql_cdc.lsn
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_in' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION mssql_cdc.lsn_out(mssql_cdc.lsn) RETURNS pg_catalog.cstring
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_out' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION mssql_cdc.lsn_recv(pg_catalog.internal) RETURNS mssql_cdc.lsn
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_recv' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION mssql_cdc.lsn_send(mssql_cdc.lsn) RETURNS pg_catalog.bytea
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_send' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE TYPE mssql_cdc.lsn (
	INPUT = mssql_cdc.lsn_in,
	OUTPUT = mssql_cdc.lsn_out,
	RECEIVE = mssql_cdc.lsn_recv,
	SEND = mssql_cdc.lsn_send,
	INTERNALLENGTH = 10,
	ALIGNMENT = char,
	STORAGE = plain
);
COMMENT ON TYPE mssql_cdc.lsn IS 'SQL Server log sequence number (binary(10)), e.g. 0x0000002A000001F00003';

CREATE FUNCTION mssql_cdc.lsn_eq(mssql_cdc.lsn, mssql_cdc.lsn) RETURNS boolean
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_eq' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION mssql_cdc.lsn_ne(mssql_cdc.lsn, mssql_cdc.lsn) RETURNS boolean
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_ne' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION mssql_cdc.lsn_lt(mssql_cdc.lsn, mssql_cdc.lsn) RETURNS boolean
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_lt' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION mssql_cdc.lsn_le(mssql_cdc.lsn, mssql_cdc.lsn) RETURNS boolean
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_le' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION mssql_cdc.lsn_gt(mssql_cdc.lsn, mssql_cdc.lsn) RETURNS boolean
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_gt' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION mssql_cdc.lsn_ge(mssql_cdc.lsn, mssql_cdc.lsn) RETURNS boolean
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_ge' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION mssql_cdc.lsn_cmp(mssql_cdc.lsn, mssql_cdc.lsn) RETURNS integer
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_btree_cmp' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION mssql_cdc.lsn_hash(mssql_cdc.lsn) RETURNS integer
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_hash' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION mssql_cdc.lsn_hash_extended(mssql_cdc.lsn, bigint) RETURNS bigint
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_hash_extended' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

CREATE OPERATOR mssql_cdc.= (
	LEFTARG = mssql_cdc.lsn, RIGHTARG = mssql_cdc.lsn, PROCEDURE = mssql_cdc.lsn_eq,
	COMMUTATOR = OPERATOR(mssql_cdc.=), NEGATOR = OPERATOR(mssql_cdc.<>),
	RESTRICT = pg_catalog.eqsel, JOIN = pg_catalog.eqjoinsel, HASHES, MERGES);
CREATE OPERATOR mssql_cdc.<> (
	LEFTARG = mssql_cdc.lsn, RIGHTARG = mssql_cdc.lsn, PROCEDURE = mssql_cdc.lsn_ne,
	COMMUTATOR = OPERATOR(mssql_cdc.<>), NEGATOR = OPERATOR(mssql_cdc.=),
	RESTRICT = pg_catalog.neqsel, JOIN = pg_catalog.neqjoinsel);
CREATE OPERATOR mssql_cdc.< (
	LEFTARG = mssql_cdc.lsn, RIGHTARG = mssql_cdc.lsn, PROCEDURE = mssql_cdc.lsn_lt,
	COMMUTATOR = OPERATOR(mssql_cdc.>), NEGATOR = OPERATOR(mssql_cdc.>=),
	RESTRICT = pg_catalog.scalarltsel, JOIN = pg_catalog.scalarltjoinsel);
CREATE OPERATOR mssql_cdc.<= (
	LEFTARG = mssql_cdc.lsn, RIGHTARG = mssql_cdc.lsn, PROCEDURE = mssql_cdc.lsn_le,
	COMMUTATOR = OPERATOR(mssql_cdc.>=), NEGATOR = OPERATOR(mssql_cdc.>),
	RESTRICT = pg_catalog.scalarlesel, JOIN = pg_catalog.scalarlejoinsel);
CREATE OPERATOR mssql_cdc.> (
	LEFTARG = mssql_cdc.lsn, RIGHTARG = mssql_cdc.lsn, PROCEDURE = mssql_cdc.lsn_gt,
	COMMUTATOR = OPERATOR(mssql_cdc.<), NEGATOR = OPERATOR(mssql_cdc.<=),
	RESTRICT = pg_catalog.scalargtsel, JOIN = pg_catalog.scalargtjoinsel);
CREATE OPERATOR mssql_cdc.>= (
	LEFTARG = mssql_cdc.lsn, RIGHTARG = mssql_cdc.lsn, PROCEDURE = mssql_cdc.lsn_ge,
	COMMUTATOR = OPERATOR(mssql_cdc.<=), NEGATOR = OPERATOR(mssql_cdc.<),
	RESTRICT = pg_catalog.scalargesel, JOIN = pg_catalog.scalargejoinsel);

CREATE OPERATOR CLASS mssql_cdc.lsn_ops
	DEFAULT FOR TYPE mssql_cdc.lsn USING btree AS
		OPERATOR 1 mssql_cdc.<,
		OPERATOR 2 mssql_cdc.<=,
		OPERATOR 3 mssql_cdc.=,
		OPERATOR 4 mssql_cdc.>=,
		OPERATOR 5 mssql_cdc.>,
		FUNCTION 1 mssql_cdc.lsn_cmp(mssql_cdc.lsn, mssql_cdc.lsn);

CREATE OPERATOR CLASS mssql_cdc.lsn_hash_ops
	DEFAULT FOR TYPE mssql_cdc.lsn USING hash AS
		OPERATOR 1 mssql_cdc.=,
		FUNCTION 1 mssql_cdc.lsn_hash(mssql_cdc.lsn),
		FUNCTION 2 mssql_cdc.lsn_hash_extended(mssql_cdc.lsn, bigint);

-- min()/max(), e.g. the newest checkpoint of a server
CREATE FUNCTION mssql_cdc.lsn_larger(mssql_cdc.lsn, mssql_cdc.lsn) RETURNS mssql_cdc.lsn
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_larger' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION mssql_cdc.lsn_smaller(mssql_cdc.lsn, mssql_cdc.lsn) RETURNS mssql_cdc.lsn
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_smaller' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE AGGREGATE mssql_cdc.max(mssql_cdc.lsn) (
	SFUNC = mssql_cdc.lsn_larger, STYPE = mssql_cdc.lsn,
	COMBINEFUNC = mssql_cdc.lsn_larger, SORTOP = OPERATOR(mssql_cdc.>), PARALLEL = SAFE);
CREATE AGGREGATE mssql_cdc.min(mssql_cdc.lsn) (
	SFUNC = mssql_cdc.lsn_smaller, STYPE = mssql_cdc.lsn,
	COMBINEFUNC = mssql_cdc.lsn_smaller, SORTOP = OPERATOR(mssql_cdc.<), PARALLEL = SAFE);

CREATE FUNCTION mssql_cdc.lsn_to_bytea(mssql_cdc.lsn) RETURNS pg_catalog.bytea
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_to_bytea' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION mssql_cdc.lsn_from_bytea(pg_catalog.bytea) RETURNS mssql_cdc.lsn
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_from_bytea' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE CAST (mssql_cdc.lsn AS pg_catalog.bytea)
	WITH FUNCTION mssql_cdc.lsn_to_bytea(mssql_cdc.lsn);
CREATE CAST (pg_catalog.bytea AS mssql_cdc.lsn)
	WITH FUNCTION mssql_cdc.lsn_from_bytea(pg_catalog.bytea);

CREATE FUNCTION mssql_cdc.lsn_increment(mssql_cdc.lsn) RETURNS mssql_cdc.lsn
	AS 'MODULE_PATHNAME', 'mssql_cdc_lsn_increment' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION mssql_cdc.lsn_increment(mssql_cdc.lsn) IS
	'The next LSN (like sys.fn_cdc_increment_lsn): 80-bit +1 with carry';
