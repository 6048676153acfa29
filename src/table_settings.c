/*-------------------------------------------------------------------------
 *
 * table_settings.c
 *		Whether a table's settings are still those a unit was planned with
 *		(see include/table_settings.h).
 *
 * IDENTIFICATION
 *		src/table_settings.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"

#include "apply.h"
#include "catalog.h"
#include "table_settings.h"

bool
table_settings_current(const MssqlCdcTable *table)
{
	CatalogOwnerScope scope;
	Oid			types[2] = {INT4OID, INT8OID};
	Datum		values[2];
	bool		current;

	values[0] = Int32GetDatum(table->table_id);
	values[1] = Int64GetDatum(table->settings_version);
	catalog_become_owner(&scope);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args("SELECT 1 FROM mssql_cdc.tables"
							  " WHERE table_id OPERATOR(pg_catalog.=) $1"
							  " AND settings_version OPERATOR(pg_catalog.=) $2"
							  " AND NOT paused",
							  2, types, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read mssql_cdc.tables");
	current = SPI_processed == 1;
	SPI_finish();
	catalog_restore_user(&scope);
	if (!current)
		ereport(DEBUG1,
				(errmsg_internal("mssql_cdc table %d: settings changed since the iteration began, unit skipped",
								 table->table_id)));
	return current;
}

void
table_settings_current_many(MssqlCdcTable *const *tables, int n, bool *current)
{
	Oid			types[2] = {INT4ARRAYOID, INT8ARRAYOID};
	Datum		values[2];
	int32	   *ids = palloc(sizeof(int32) * Max(n, 1));
	Datum	   *id_datums = palloc(sizeof(Datum) * Max(n, 1));
	Datum	   *versions = palloc(sizeof(Datum) * Max(n, 1));
	int			i;

	for (i = 0; i < n; i++)
	{
		ids[i] = tables[i]->table_id;
		id_datums[i] = Int32GetDatum(ids[i]);
		versions[i] = Int64GetDatum(tables[i]->settings_version);
	}
	values[0] = PointerGetDatum(construct_array(id_datums, n, INT4OID, sizeof(int32), true,
												TYPALIGN_INT));
	values[1] = PointerGetDatum(construct_array(versions, n, INT8OID, sizeof(int64),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	apply_mark_table_ids("SELECT t.table_id FROM mssql_cdc.tables t"
						 " JOIN ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2))"
						 " AS u(table_id, settings_version)"
						 " ON t.table_id OPERATOR(pg_catalog.=) u.table_id"
						 " AND t.settings_version OPERATOR(pg_catalog.=) u.settings_version"
						 " WHERE NOT t.paused",
						 2, types, values, ids, n, current);
}
