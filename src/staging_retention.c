/*-------------------------------------------------------------------------
 *
 * staging_retention.c
 *		Retention of a partitioned staging table: drop whole closed
 *		partitions whose newest change is older than the table's retention
 *		(see include/staging_partitions.h).
 *
 * A DROP of a partition is DDL: it removes the rows with their files, in
 * constant time whatever their number, leaves no dead tuples to vacuum,
 * and logical replication does not publish it (subscribers keep the rows:
 * doc/streaming.md).  The open partition is never dropped, so the newest
 * changes and the table's current position always stay.
 *
 * IDENTIFICATION
 *		src/staging_retention.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "portability/instr_time.h"
#include "utils/builtins.h"

#include "staging_partitions.h"
#include "staging_partitions_internal.h"

int
staging_retention_drop_expired(const MssqlCdcTable *table, Oid run_as)
{
	Oid			types[2] = {INT4OID, NAMEOID};
	Datum		args[2];
	List	   *rows;
	ListCell   *lc;
	int			dropped = 0;

	args[0] = Int32GetDatum(table->table_id);
	staging_partitions_catalog("SELECT p.partition_name, p.newest_commit_time"
							   " FROM mssql_cdc.staging_partitions p"
							   " JOIN mssql_cdc.tables t USING (table_id)"
							   " WHERE p.table_id = $1 AND t.retention IS NOT NULL"
							   " AND p.to_lsn IS NOT NULL"
							   " AND p.newest_commit_time OPERATOR(pg_catalog.<)"
							   "     (pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) t.retention)"
							   " ORDER BY p.partition_number",
							   1, types, args, SPI_OK_SELECT, &rows, 2);
	foreach(lc, rows)
	{
		char	  **part = lfirst(lc);
		instr_time	start;
		instr_time	duration;

		/* oldest first: a partition in use now stops the drops until later */
		if (!staging_partitions_lock(table->staging_schema, table->staging_table) ||
			!staging_partitions_lock(table->staging_schema, part[0]))
		{
			ereport(DEBUG1,
					(errmsg_internal("mssql_cdc: partition %s is in use, dropped later", part[0])));
			break;
		}
		INSTR_TIME_SET_CURRENT(start);
		staging_partitions_run_as(psprintf("DROP TABLE %s",
										   quote_qualified_identifier(table->staging_schema, part[0])),
								  run_as);
		INSTR_TIME_SET_CURRENT(duration);
		INSTR_TIME_SUBTRACT(duration, start);
		args[1] = DirectFunctionCall1(namein, CStringGetDatum(part[0]));
		staging_partitions_catalog("DELETE FROM mssql_cdc.staging_partitions"
								   " WHERE table_id = $1 AND partition_name = $2",
								   2, types, args, SPI_OK_DELETE, NULL, 0);
		ereport(LOG,
				(errmsg("mssql_cdc: staging table %s: partition %s dropped by retention in %.1f ms",
						quote_qualified_identifier(table->staging_schema, table->staging_table),
						part[0], INSTR_TIME_GET_MILLISEC(duration)),
				 errdetail("Its newest change was committed at %s.", part[1] ? part[1] : "?")));
		dropped++;
	}
	return dropped;
}
