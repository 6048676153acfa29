# mssql_cdc — PGXS build.
#
# Install script: mssql_cdc--$(EXTVERSION).sql is generated from the numbered
# fragments in extension/ (one concern per file), so several people can work
# on the SQL surface without editing one big file.  Once a version is
# released its generated script is frozen and upgrades go in
# mssql_cdc--A--B.sql files at the top level.

EXTENSION  = mssql_cdc
EXTVERSION = $(shell sed -n "s/^default_version *= *'\(.*\)'/\1/p" mssql_cdc.control)
MODULE_big = mssql_cdc
PGFILEDESC = "mssql_cdc - SQL Server CDC ingestion"

OBJS = $(patsubst %.c,%.o,$(sort $(wildcard src/*.c)))

SQL_FRAGMENTS = $(sort $(wildcard extension/*.sql))
DATA_built = $(EXTENSION)--$(EXTVERSION).sql
# released versions' frozen install scripts and the upgrade scripts
DATA = $(filter-out $(DATA_built),$(wildcard $(EXTENSION)--*.sql))
DOCS = $(wildcard doc/*.md)

# No -fvisibility=hidden: PostgreSQL 15's PGDLLEXPORT is empty on ELF, so
# hiding symbols would hide the magic block and every SQL-callable function.
PG_CPPFLAGS = -I$(srcdir)/include -Wall -Wmissing-prototypes \
	-Werror=implicit-function-declaration \
	-DMSSQL_CDC_LIBRARY_VERSION='"$(EXTVERSION)"'
# GnuTLS: the library FreeTDS uses; tds_tls_probe.c checks certificates with it
SHLIB_LINK = -lsybdb -lgnutls

# pg_regress: every topic file under sql/, on a throwaway instance that has
# the library preloaded (PGXS "make check" is unsupported for extensions).
REGRESS = $(patsubst sql/%.sql,%,$(sort $(wildcard sql/*.sql)))
REGRESS_OPTS = --temp-config=$(srcdir)/test/mssql_cdc.conf --temp-instance=./tmp_check \
	--create-role=mssql_cdc_regress_user
TAP_TESTS = 1

EXTRA_CLEAN = tmp_check results regression.diffs regression.out log output_iso

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

$(EXTENSION)--$(EXTVERSION).sql: $(SQL_FRAGMENTS) mssql_cdc.control
	cat $(SQL_FRAGMENTS) > $@
