
-- ---------------------------------------------------------------------------
-- mssql_cdc.status: one row per captured table.  Catalog columns are
-- durable; source_max_lsn, lag_seconds, worker_pid, encrypted and
-- certificate_validated come from the live mssql_cdc.worker_state() (NULL
-- while no worker has reported, or has no connection open).
-- Granted to pg_monitor, not PUBLIC: errors can name hosts and databases.
-- ---------------------------------------------------------------------------

CREATE VIEW mssql_cdc.status AS
SELECT
	t.server_name AS server,
	CASE WHEN t.source_schema OPERATOR(pg_catalog.~) '^[A-Za-z_][A-Za-z0-9_@#$]*$'
		THEN t.source_schema
		ELSE '[' OPERATOR(pg_catalog.||) pg_catalog.replace(t.source_schema, ']', ']]') OPERATOR(pg_catalog.||) ']'
	END OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||)
	CASE WHEN t.source_table OPERATOR(pg_catalog.~) '^[A-Za-z_][A-Za-z0-9_@#$]*$'
		THEN t.source_table
		ELSE '[' OPERATOR(pg_catalog.||) pg_catalog.replace(t.source_table, ']', ']]') OPERATOR(pg_catalog.||) ']'
	END AS source_table,
	pg_catalog.quote_ident(t.staging_schema) OPERATOR(pg_catalog.||) '.'
		OPERATOR(pg_catalog.||) pg_catalog.quote_ident(t.staging_table) AS staging_table,
	CASE
		WHEN sv.paused OR t.paused THEN 'paused'
		WHEN ts.phase OPERATOR(pg_catalog.=) 'error'
			OR ts.consecutive_failures OPERATOR(pg_catalog.>) 0
			OR sv.consecutive_failures OPERATOR(pg_catalog.>) 0
			OR w.consecutive_failures OPERATOR(pg_catalog.>) 0 THEN 'error'
		ELSE coalesce(ts.phase, 'pending')
	END AS state,
	ts.checkpoint_lsn,
	w.source_max_lsn,
	CASE
		WHEN ts.checkpoint_lsn IS NULL OR w.source_max_lsn IS NULL THEN NULL
		WHEN ts.checkpoint_lsn OPERATOR(mssql_cdc.>=) w.source_max_lsn THEN 0::double precision
		ELSE pg_catalog.date_part('epoch', w.source_max_lsn_time OPERATOR(pg_catalog.-) ts.last_commit_time)
	END AS lag_seconds,
	CASE
		WHEN ts.checkpoint_lsn IS NULL OR w.source_max_lsn IS NULL THEN NULL
		WHEN ts.checkpoint_lsn OPERATOR(mssql_cdc.>=) w.source_max_lsn THEN 0::bigint
		-- counted by the worker for the checkpoint the tables share
		WHEN ts.checkpoint_lsn OPERATOR(mssql_cdc.=) w.lag_base_lsn THEN w.lag_transactions
		ELSE NULL
	END AS lag_transactions,
	coalesce(ts.rows_applied, 0) AS rows_applied,
	coalesce(ts.transactions_applied, 0) AS transactions_applied,
	coalesce(ts.snapshot_rows, 0) AS snapshot_rows,
	ts.snapshot_total_estimate,
	CASE
		WHEN ts.phase OPERATOR(pg_catalog.=) 'streaming' AND ts.snapshot_started_at IS NOT NULL
			THEN 100::numeric(4,1)
		WHEN ts.phase OPERATOR(pg_catalog.=) 'snapshotting'
			AND ts.snapshot_total_estimate OPERATOR(pg_catalog.>) 0
			-- the estimate comes from SQL Server statistics and can be exceeded
			THEN least(100::numeric,
				100::numeric OPERATOR(pg_catalog.*) ts.snapshot_rows
				OPERATOR(pg_catalog./) ts.snapshot_total_estimate)::numeric(4,1)
		ELSE NULL
	END AS snapshot_percent,
	-- average since the snapshot (or its resumption's original start) began
	CASE
		WHEN ts.phase OPERATOR(pg_catalog.=) 'snapshotting' AND ts.snapshot_started_at IS NOT NULL
			THEN round((ts.snapshot_rows::numeric OPERATOR(pg_catalog./)
				greatest(pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-) ts.snapshot_started_at)::numeric,
						 0.001))::numeric, 1)
		ELSE NULL
	END AS snapshot_rows_per_second,
	-- the failure that condition and hint describe while one is current
	-- (active.problem below), else the newer of the two
	CASE
		WHEN active.problem OPERATOR(pg_catalog.=) 'table' THEN ts.last_error
		WHEN active.problem OPERATOR(pg_catalog.=) 'server' THEN sv.last_error
		WHEN sv.last_error_at IS NOT NULL
			AND (ts.last_error_at IS NULL OR sv.last_error_at OPERATOR(pg_catalog.>) ts.last_error_at)
		THEN sv.last_error ELSE ts.last_error
	END AS last_error,
	CASE active.problem
		WHEN 'table' THEN ts.last_error_at
		WHEN 'server' THEN sv.last_error_at
		ELSE greatest(ts.last_error_at, sv.last_error_at)
	END AS last_error_at,
	-- The problem that is active now (doc/troubleshooting.md), chosen once
	-- below in active.problem: condition and hint come from the same place.
	CASE active.problem
		WHEN 'table' THEN ts.condition
		WHEN 'server' THEN sv.condition
		WHEN 'server_warning' THEN sv.warning
		WHEN 'table_warning' THEN ts.warning
	END AS condition,
	CASE active.problem
		WHEN 'table' THEN ts.hint
		WHEN 'server' THEN sv.hint
		WHEN 'server_warning' THEN sv.warning_hint
		WHEN 'table_warning' THEN ts.warning_hint
	END AS hint,
	w.pid AS worker_pid,
	w.encrypted,
	w.certificate_validated,
	-- behind the most advanced checkpoint of the source's streaming tables:
	-- it reads windows of its own until it meets them, and until then a
	-- source transaction that also changed a table ahead is applied there
	-- first (doc/streaming.md, "Tables that catch up")
	coalesce(behind.lsn IS NOT NULL, false) AS catching_up,
	behind.lsn AS catching_up_to
FROM mssql_cdc.tables t
JOIN mssql_cdc.servers sv ON sv.server_name OPERATOR(pg_catalog.=) t.server_name
LEFT JOIN mssql_cdc.table_state ts ON ts.table_id OPERATOR(pg_catalog.=) t.table_id
LEFT JOIN mssql_cdc.worker_state() w ON w.server_name OPERATOR(pg_catalog.=) t.server_name
-- the lead checkpoint of each source: of its streaming tables not paused
LEFT JOIN (SELECT lt.server_name, mssql_cdc.max(ls.checkpoint_lsn) AS lsn
	FROM mssql_cdc.tables lt
	JOIN mssql_cdc.table_state ls ON ls.table_id OPERATOR(pg_catalog.=) lt.table_id
	WHERE NOT lt.paused AND ls.phase OPERATOR(pg_catalog.=) 'streaming'
	GROUP BY lt.server_name) src_lead ON src_lead.server_name OPERATOR(pg_catalog.=) t.server_name
CROSS JOIN LATERAL (SELECT
	CASE WHEN NOT t.paused AND ts.phase OPERATOR(pg_catalog.=) 'streaming'
			AND ts.checkpoint_lsn OPERATOR(mssql_cdc.<) src_lead.lsn
		THEN src_lead.lsn
	END AS lsn) behind
-- the failure being retried or that parked the table (the newer one, as for
-- last_error), else a warning; none while paused or once the next unit
-- succeeded
CROSS JOIN LATERAL (SELECT
	CASE
		WHEN sv.paused OR t.paused THEN NULL
		WHEN ts.phase OPERATOR(pg_catalog.=) 'error' THEN 'table'
		WHEN sv.consecutive_failures OPERATOR(pg_catalog.>) 0
			AND (ts.consecutive_failures IS NULL OR ts.consecutive_failures OPERATOR(pg_catalog.=) 0
				OR ts.last_error_at IS NULL OR sv.last_error_at OPERATOR(pg_catalog.>) ts.last_error_at)
			THEN 'server'
		WHEN ts.consecutive_failures OPERATOR(pg_catalog.>) 0 THEN 'table'
		WHEN sv.warning IS NOT NULL THEN 'server_warning'
		WHEN ts.phase OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'snapshotting']::pg_catalog.text[])
			THEN 'table_warning'
		-- changes lost for good (worker_retention_gap.c): shown while it streams
		WHEN ts.warning OPERATOR(pg_catalog.=) 'retention_gap' THEN 'table_warning'
	END AS problem) active;

COMMENT ON VIEW mssql_cdc.status IS
	'One row per captured table: state, checkpoint, lag, counters, last error, active condition with a hint, worker pid, '
	'whether the worker''s connection to SQL Server is encrypted with a validated certificate, '
	'and whether the table is catching up to the checkpoint of the source''s other tables';

REVOKE ALL ON mssql_cdc.status FROM PUBLIC;
GRANT SELECT ON mssql_cdc.status TO pg_monitor;
