"""mssql_cdc SQL Server stand-in: a TDS 7.4 server (standin.tds) in front of an
in-memory T-SQL/CDC engine (standin.engine).  Contract between the two halves:
standin.sqltypes and standin.results."""
