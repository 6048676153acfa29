/*-------------------------------------------------------------------------
 *
 * launcher.h
 *		The launcher background worker and how other code wakes it.
 *
 * IDENTIFICATION
 *		include/launcher.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_LAUNCHER_H
#define MSSQL_CDC_LAUNCHER_H

#include "postgres.h"

/* Registers the static launcher worker; called from _PG_init. */
extern void mssql_cdc_register_launcher(void);

/* Entry point of the launcher (bgw_function_name). */
extern PGDLLEXPORT void mssql_cdc_launcher_main(Datum main_arg);

/*
 * Ask the launcher to re-read the catalog.  Safe to call inside a
 * transaction: the wake-up is queued and delivered only if the transaction
 * commits (an aborted API call must not disturb running workers).
 */
extern void mssql_cdc_wake_launcher_at_commit(void);

#endif							/* MSSQL_CDC_LAUNCHER_H */
