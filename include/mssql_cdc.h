/*-------------------------------------------------------------------------
 *
 * mssql_cdc.h
 *		Names and settings shared by every part of the extension.
 *
 * The GUC variables are defined in src/mssql_cdc.c; every file that needs a
 * setting includes this header instead of declaring its own extern.
 *
 * IDENTIFICATION
 *		include/mssql_cdc.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_H
#define MSSQL_CDC_H

#define MSSQL_CDC_EXTENSION_NAME	"mssql_cdc"
#define MSSQL_CDC_SCHEMA_NAME		"mssql_cdc"
#define MSSQL_CDC_FDW_NAME			"mssql_cdc"

/* GUCs (src/mssql_cdc.c) */
extern char *mssql_cdc_database;	/* database the launcher serves */
extern int	mssql_cdc_max_workers;	/* source workers at most */
extern int	mssql_cdc_poll_interval;	/* ms between polls of an idle source */
extern int	mssql_cdc_batch_max_transactions;	/* window bound, transactions */
extern int	mssql_cdc_batch_max_rows;	/* window bound, rows (soft) */
extern int	mssql_cdc_table_failures_before_park;	/* failed windows before a staging table is parked */
extern int	mssql_cdc_retry_max_backoff;	/* s, cap of the retry backoff */
extern int	mssql_cdc_snapshot_chunk_rows;	/* rows per snapshot chunk */

#endif							/* MSSQL_CDC_H */
