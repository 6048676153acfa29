/*-------------------------------------------------------------------------
 *
 * catalog_version.h
 *		Does the installed extension (its catalog) match this library?
 *
 * After new binaries are installed and the server restarted, the catalog
 * of a database stays at the old version until ALTER EXTENSION mssql_cdc
 * UPDATE runs there.  The background processes must not work on a catalog
 * (and staging tables) of another layout: the launcher and the workers
 * wait, with a LOG line that names the command to run.
 *
 * IDENTIFICATION
 *		include/catalog_version.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef MSSQL_CDC_CATALOG_VERSION_H
#define MSSQL_CDC_CATALOG_VERSION_H

#include "postgres.h"

/* The extension version this library was built for (the control file's) */
#ifndef MSSQL_CDC_LIBRARY_VERSION
#error "MSSQL_CDC_LIBRARY_VERSION must come from the Makefile (mssql_cdc.control)"
#endif

/*
 * pg_extension.extversion of mssql_cdc in the current database (palloc'd),
 * or NULL when it is not installed.  In a transaction.
 */
extern char *mssql_cdc_installed_version(void);

#endif							/* MSSQL_CDC_CATALOG_VERSION_H */
