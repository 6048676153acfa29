/*-------------------------------------------------------------------------
 *
 * table_settings.h
 *		The worker's side of the per-table operator controls: a window or a
 *		snapshot chunk applies only with the settings it was planned with.
 *
 * The API functions that change a table's settings (alter_table, pause
 * and resume of one table, set_table_option) lock the table's progress row
 * and count tables.settings_version up (api_lock_table_for_change).  The
 * worker reads the settings with the catalog at the start of an iteration,
 * locks the progress row at the start of each unit and then calls
 * table_settings_current(): with the row locked, no change can commit in
 * between, so a unit either runs wholly with the settings it read, or is
 * skipped and planned again with the new ones at the next iteration.  That
 * is what "effective at a window boundary" means.
 *
 * IDENTIFICATION
 *		include/table_settings.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_TABLE_SETTINGS_H
#define MSSQL_CDC_TABLE_SETTINGS_H

#include "postgres.h"

#include "catalog.h"

/*
 * In the unit's transaction, after its progress row was locked: true when
 * the table is not paused and its settings are still those of `table`.
 */
extern bool table_settings_current(const MssqlCdcTable *table);

/* table_settings_current() of n tables in one statement, into current[i] */
extern void table_settings_current_many(MssqlCdcTable *const *tables, int n, bool *current);

#endif							/* MSSQL_CDC_TABLE_SETTINGS_H */
