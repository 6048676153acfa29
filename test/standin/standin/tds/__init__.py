"""TDS 7.4 protocol layer of the stand-in (server side only)."""
