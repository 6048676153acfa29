"""SQL engine of the SQL Server stand-in (T-SQL subset with CDC semantics).

See test/standin/ENGINE.md for the supported surface and known differences."""

from .engine import Engine

__all__ = ["Engine"]
