"""The side-by-side benchmark of mssql_cdc (see bench/README.md)."""
