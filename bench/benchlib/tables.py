"""The source tables the benchmark copies.  Every contender reads the same
rows: they are created once in the stand-in by fill_table (seeded, so a
rerun produces the same values)."""

# ~5 columns: the shape of test/standin/bench_serve.py
NARROW = ("narrow", [
    ("id", "int NOT NULL PRIMARY KEY"), ("big", "bigint"), ("name", "nvarchar(20)"),
    ("ts", "datetime2"), ("amount", "decimal(18,4)"),
])

# 30 columns of mixed types (integers, exact and approximate numerics,
# strings in both encodings, every temporal family, guid, binary)
WIDE = ("wide", [
    ("id", "int NOT NULL PRIMARY KEY"), ("big1", "bigint"), ("big2", "bigint"), ("i1", "int"), ("i2", "int"),
    ("i3", "int"), ("si", "smallint"), ("ti", "tinyint"), ("flag", "bit"), ("amount1", "decimal(18,4)"),
    ("amount2", "decimal(18,4)"), ("price", "decimal(9,2)"), ("cost", "money"), ("ratio", "float"),
    ("score", "real"), ("name1", "nvarchar(50)"), ("name2", "nvarchar(50)"), ("name3", "nvarchar(50)"),
    ("code1", "varchar(40)"), ("code2", "varchar(40)"), ("tag", "nchar(10)"), ("kind", "char(10)"),
    ("day", "date"), ("ts", "datetime2"), ("legacy_ts", "datetime"), ("minute_ts", "smalldatetime"),
    ("clock", "time(3)"), ("zoned", "datetimeoffset"), ("guid", "uniqueidentifier"), ("blob", "varbinary(16)"),
])

# the changes of the streaming phase: the narrow rows inserted again
STREAM_SMALL = ("stream_small", NARROW[1])
STREAM_LARGE = ("stream_large", NARROW[1])

# the mirror streaming contender: the same backlog applied into a mirror
STREAM_MIRROR = ("stream_mirror", NARROW[1])

# the TLS phase: the same small-transaction backlog, once in plain text and
# once over TLS (one table per foreign server)
STREAM_PLAIN = ("stream_plain", NARROW[1])
STREAM_TLS = ("stream_tls", NARROW[1])

# latency: the driver writes its own send time (UTC, 100 ns) into each row
LATENCY = ("latency", [("id", "int NOT NULL PRIMARY KEY"), ("sent_at", "datetime2(7) NOT NULL")])


def create_sql(table):
    name, cols = table
    return "CREATE TABLE dbo.%s (%s)" % (name, ", ".join("%s %s" % c for c in cols))


def enable_cdc_sql(table):
    return ("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'%s', @role_name = NULL"
            % table[0])


def column_list(table):
    return ", ".join(c for c, _ in table[1])
