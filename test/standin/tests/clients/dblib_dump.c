/*
 * dblib_dump: run SQL batches through FreeTDS db-lib and print every value
 * in the canonical text form shared with tedious_dump.js, so the fidelity
 * tests can compare what both client libraries decoded.
 *
 * usage: dblib_dump [options] HOST:PORT USER PASSWORD SQL [SQL...]
 *   (an SQL argument "@FILE" is read from FILE: batches larger than argv allows;
 *    "rpc:PROC|@name:type:value[:out]|..." calls PROC through dbrpcinit/dbrpcparam/
 *    dbrpcsend with types int, bigint, varchar, varbinary (hex value) or null-int)
 *   -d DB          database in LOGIN7
 *   -P SIZE        requested packet size
 *   -c             count mode: no values, print "ROWS n SECONDS s BYTES b"
 *   -x N           cancel (dbcancel) after N rows of the first batch, then go on
 *   -l SECONDS     login timeout (dbsetlogintime)
 *   -t SECONDS     query timeout (dbsettime); on timeout the error handler
 *                  returns INT_TIMEOUT so db-lib sends an ATTENTION
 *
 * Output lines (one per event):
 *   RESULT k / COL i type name / ROW r / V i canonical / COUNT n
 *   MSG number severity state "text" / ERR dberr "text" / CANCELLED / BATCHDONE / FAIL ...
 * Canonical values: NULL, i:<int>, f4:<hex bits>, f8:<hex bits>, n:<decimal>,
 *   d:YYYY-MM-DD, t:HH:MM:SS.fffffff, dt:YYYY-MM-DD HH:MM:SS.fffffff,
 *   dtm:... (datetime, milliseconds), dto:<UTC>|+HH:MM, s:<utf8 hex>,
 *   b:<hex>, g:<uuid lower case>, v:<utf8 hex of text form>.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <sybfront.h>
#include <sybdb.h>

#define T_UNIQUE 36
#define T_VARIANT 98
#define T_XML 241

static int timed_out = 0;
static int connected = 0;

static int
err_handler(DBPROCESS *dbproc, int severity, int dberr, int oserr, char *dberrstr, char *oserrstr)
{
	(void) dbproc; (void) severity; (void) oserr; (void) oserrstr;
	printf("ERR %d \"%s\"\n", dberr, dberrstr ? dberrstr : "");
	fflush(stdout);
	if (dberr == SYBETIME) {
		/* Query: INT_TIMEOUT makes db-lib cancel (send ATTENTION) and keeps
		 * the DBPROCESS usable; INT_CANCEL would mark it dead.  Login: only
		 * INT_CANCEL gives up (INT_TIMEOUT keeps waiting). */
		timed_out = 1;
		return connected ? INT_TIMEOUT : INT_CANCEL;
	}
	return INT_CANCEL;
}

static int
msg_handler(DBPROCESS *dbproc, DBINT msgno, int msgstate, int severity, char *msgtext,
			char *srvname, char *procname, int line)
{
	(void) dbproc; (void) srvname; (void) procname; (void) line;
	printf("MSG %d %d %d \"%s\"\n", (int) msgno, severity, msgstate, msgtext ? msgtext : "");
	return 0;
}

static void
print_hex(const unsigned char *p, int n)
{
	static const char hx[] = "0123456789abcdef";
	for (int i = 0; i < n; i++) {
		putchar(hx[p[i] >> 4]);
		putchar(hx[p[i] & 15]);
	}
}

/* days since 0001-01-01 -> y/m/d (proleptic Gregorian, H. Hinnant's civil_from_days) */
static void
civil_from_days(long days_since_0001, int *y, int *m, int *d)
{
	long z = days_since_0001 - 719162L + 719468L;	/* days since 0000-03-01 */
	long era = (z >= 0 ? z : z - 146096) / 146097;
	unsigned doe = (unsigned) (z - era * 146097);
	unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	long yy = (long) yoe + era * 400;
	unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	unsigned mp = (5 * doy + 2) / 153;
	unsigned dd = doy - (153 * mp + 2) / 5 + 1;
	unsigned mm = mp < 10 ? mp + 3 : mp - 9;
	*y = (int) (yy + (mm <= 2));
	*m = (int) mm;
	*d = (int) dd;
}

#define DAYS_0001_TO_1900 693595L

static void
print_date(long days_since_1900)
{
	int y, m, d;
	civil_from_days(days_since_1900 + DAYS_0001_TO_1900, &y, &m, &d);
	printf("%04d-%02d-%02d", y, m, d);
}

static void
print_time100ns(unsigned long long ticks)
{
	unsigned long long secs = ticks / 10000000ULL, frac = ticks % 10000000ULL;
	printf("%02llu:%02llu:%02llu.%07llu", secs / 3600, (secs / 60) % 60, secs % 60, frac);
}

static void
print_converted(DBPROCESS *dbproc, int type, BYTE *data, DBINT len, const char *prefix, int hex, int lower)
{
	static char buf[1 << 20];
	DBINT n = dbconvert(dbproc, type, data, len, SYBCHAR, (BYTE *) buf, sizeof(buf) - 1);
	if (n < 0) {
		printf("%sCONVERT-FAILED", prefix);
		return;
	}
	buf[n] = 0;
	/* dbconvert pads CHAR destinations with blanks */
	while (n > 0 && buf[n - 1] == ' ' && !hex)
		buf[--n] = 0;
	if (lower)
		for (int i = 0; i < n; i++)
			buf[i] = (char) tolower((unsigned char) buf[i]);
	printf("%s", prefix);
	if (hex)
		print_hex((unsigned char *) buf, n);
	else
		fputs(buf, stdout);
}

static void
print_value(DBPROCESS *dbproc, int col)
{
	int type = dbcoltype(dbproc, col);
	BYTE *data = dbdata(dbproc, col);
	DBINT len = dbdatlen(dbproc, col);

	if (data == NULL) {
		fputs("NULL", stdout);
		return;
	}
	switch (type) {
	case SYBINT1: printf("i:%u", (unsigned) *(DBTINYINT *) data); break;
	case SYBINT2: printf("i:%d", (int) *(DBSMALLINT *) data); break;
	case SYBINT4: printf("i:%d", (int) *(DBINT *) data); break;
	case SYBINT8: printf("i:%lld", (long long) *(DBBIGINT *) data); break;
	case SYBBIT: case SYBBITN: printf("i:%d", *(DBBIT *) data ? 1 : 0); break;
	case SYBREAL: {
		uint32_t u; memcpy(&u, data, 4); printf("f4:%08x", u); break;
	}
	case SYBFLT8: {
		uint64_t u; memcpy(&u, data, 8); printf("f8:%016llx", (unsigned long long) u); break;
	}
	case SYBMONEY: {
		DBMONEY *mny = (DBMONEY *) data;
		long long v = ((long long) mny->mnyhigh << 32) | (unsigned long long) mny->mnylow;
		unsigned long long a = v < 0 ? (unsigned long long) (-(v + 1)) + 1 : (unsigned long long) v;
		printf("n:%s%llu.%04llu", v < 0 ? "-" : "", a / 10000, a % 10000);
		break;
	}
	case SYBMONEY4: {
		long long v = ((DBMONEY4 *) data)->mny4;
		long long a = v < 0 ? -v : v;
		printf("n:%s%lld.%04lld", v < 0 ? "-" : "", a / 10000, a % 10000);
		break;
	}
	case SYBDECIMAL: case SYBNUMERIC:
		print_converted(dbproc, type, data, len, "n:", 0, 0);
		break;
	case SYBDATETIME: {
		DBDATETIME *dt = (DBDATETIME *) data;
		/* milliseconds as SQL Server displays them: round(ticks * 10 / 3) */
		long long ms = ((long long) dt->dttime * 10 + 1) / 3;
		fputs("dtm:", stdout);
		print_date(dt->dtdays);
		printf(" %02lld:%02lld:%02lld.%03lld", ms / 3600000, (ms / 60000) % 60, (ms / 1000) % 60, ms % 1000);
		break;
	}
	case SYBDATETIME4: {
		DBDATETIME4 *dt = (DBDATETIME4 *) data;
		fputs("dt:", stdout);
		print_date(dt->days);
		printf(" %02d:%02d:00.0000000", dt->minutes / 60, dt->minutes % 60);
		break;
	}
	case SYBMSDATE: case SYBMSTIME: case SYBMSDATETIME2: case SYBMSDATETIMEOFFSET: {
		DBDATETIMEALL *dta = (DBDATETIMEALL *) data;
		if (type == SYBMSDATE) {
			fputs("d:", stdout);
			print_date(dta->date);
		} else if (type == SYBMSTIME) {
			fputs("t:", stdout);
			print_time100ns(dta->time);
		} else {
			fputs(type == SYBMSDATETIME2 ? "dt:" : "dto:", stdout);
			print_date(dta->date);
			putchar(' ');
			print_time100ns(dta->time);
			if (type == SYBMSDATETIMEOFFSET) {
				int off = dta->offset;
				printf("|%c%02d:%02d", off < 0 ? '-' : '+', abs(off) / 60, abs(off) % 60);
			}
		}
		break;
	}
	case SYBBINARY: case SYBVARBINARY: case SYBIMAGE:
		fputs("b:", stdout);
		print_hex(data, len);
		break;
	case SYBCHAR: case SYBVARCHAR: case SYBTEXT: case SYBNTEXT: case SYBNVARCHAR: case T_XML:
		fputs("s:", stdout);
		print_hex(data, len);
		break;
	case T_UNIQUE:
		print_converted(dbproc, type, data, len, "g:", 0, 1);
		break;
	case T_VARIANT:
		/* db-lib has no conversion for sql_variant; dbdata() points at the
		 * base value's bytes as FreeTDS stored them (print them raw). */
		fputs("vraw:", stdout);
		print_hex(data, len);
		break;
	default:
		printf("?type%d:", type);
		print_hex(data, len);
	}
}

static char *
sql_text(const char *arg)
{
	if (arg[0] != '@')
		return strdup(arg);
	FILE *f = fopen(arg + 1, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc(n + 1);
	if (fread(buf, 1, n, f) != (size_t) n) {
		fclose(f);
		free(buf);
		return NULL;
	}
	fclose(f);
	buf[n] = 0;
	return buf;
}

static int
hexval(char c)
{
	return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* "rpc:PROC|@a:int:5|@b:varbinary:0a0b:out" -> dbrpcinit/dbrpcparam/dbrpcsend */
static RETCODE
send_rpc(DBPROCESS *dbproc, char *spec)
{
	static DBINT ints[32];
	static DBBIGINT bigs[32];
	static BYTE bins[32][256];
	char *save = NULL;
	char *proc = strtok_r(spec, "|", &save);
	int n = 0;
	if (dbrpcinit(dbproc, proc, 0) == FAIL)
		return FAIL;
	for (char *p = strtok_r(NULL, "|", &save); p && n < 32; p = strtok_r(NULL, "|", &save), n++) {
		char *name = p, *type = strchr(name, ':'), *value, *out;
		if (!type)
			return FAIL;
		*type++ = 0;
		value = strchr(type, ':');
		if (!value)
			return FAIL;
		*value++ = 0;
		out = strchr(value, ':');
		if (out)
			*out++ = 0;
		BYTE status = (out && strcmp(out, "out") == 0) ? DBRPCRETURN : 0;
		RETCODE rc;
		if (strcmp(type, "int") == 0) {
			ints[n] = atoi(value);
			rc = dbrpcparam(dbproc, name, status, SYBINT4, -1, -1, (BYTE *) &ints[n]);
		} else if (strcmp(type, "null-int") == 0) {
			rc = dbrpcparam(dbproc, name, status, SYBINT4, -1, 0, NULL);
		} else if (strcmp(type, "bigint") == 0) {
			bigs[n] = atoll(value);
			rc = dbrpcparam(dbproc, name, status, SYBINT8, -1, -1, (BYTE *) &bigs[n]);
		} else if (strcmp(type, "varbinary") == 0) {
			int len = (int) strlen(value) / 2;
			for (int i = 0; i < len && i < 256; i++)
				bins[n][i] = (BYTE) (hexval(value[2 * i]) * 16 + hexval(value[2 * i + 1]));
			rc = dbrpcparam(dbproc, name, status, SYBVARBINARY, -1, len, bins[n]);
		} else {
			rc = dbrpcparam(dbproc, name, status, SYBVARCHAR, -1, (DBINT) strlen(value), (BYTE *) value);
		}
		if (rc == FAIL)
			return FAIL;
	}
	if (dbrpcsend(dbproc) == FAIL)
		return FAIL;
	return dbsqlok(dbproc);
}

static void
print_returns(DBPROCESS *dbproc)
{
	if (dbhasretstat(dbproc))
		printf("RETURNSTATUS %d\n", (int) dbretstatus(dbproc));
	for (int i = 1; i <= dbnumrets(dbproc); i++) {
		BYTE *data = dbretdata(dbproc, i);
		int type = dbrettype(dbproc, i);
		printf("RETURNVALUE %s ", dbretname(dbproc, i));
		if (data == NULL)
			fputs("NULL", stdout);
		else if (type == SYBINT4)
			printf("i:%d", (int) *(DBINT *) data);
		else if (type == SYBINT8)
			printf("i:%lld", (long long) *(DBBIGINT *) data);
		else {
			fputs("b:", stdout);
			print_hex(data, dbretlen(dbproc, i));
		}
		putchar('\n');
	}
}

static double
now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int
main(int argc, char **argv)
{
	const char *db = NULL;
	int packet = 0, count_mode = 0, cancel_after = -1, timeout = 0, login_timeout = 0, opt;
	while ((opt = getopt(argc, argv, "d:P:cx:t:l:")) != -1) {
		switch (opt) {
		case 'd': db = optarg; break;
		case 'P': packet = atoi(optarg); break;
		case 'c': count_mode = 1; break;
		case 'x': cancel_after = atoi(optarg); break;
		case 't': timeout = atoi(optarg); break;
		case 'l': login_timeout = atoi(optarg); break;
		default: fprintf(stderr, "bad option\n"); return 2;
		}
	}
	if (argc - optind < 4) {
		fprintf(stderr, "usage: dblib_dump [-d db] [-P size] [-c] [-x n] [-t s] HOST:PORT USER PASSWORD SQL...\n");
		return 2;
	}
	const char *server = argv[optind], *user = argv[optind + 1], *pass = argv[optind + 2];

	if (dbinit() == FAIL)
		return 3;
	dberrhandle(err_handler);
	dbmsghandle(msg_handler);
	LOGINREC *login = dblogin();
	DBSETLUSER(login, user);
	DBSETLPWD(login, pass);
	DBSETLAPP(login, "dblib_dump");
	DBSETLVERSION(login, DBVERSION_74);
	if (packet)
		DBSETLPACKET(login, packet);
	if (db)
		DBSETLDBNAME(login, db);
	if (timeout)
		dbsettime(timeout);
	if (login_timeout)
		dbsetlogintime(login_timeout);
	DBPROCESS *dbproc = dbopen(login, server);
	if (dbproc == NULL) {
		printf("FAIL login\n");
		return 1;
	}
	connected = 1;
	printf("CONNECTED spid=%d\n", dbspid(dbproc));

	int status = 0;
	for (int q = optind + 3; q < argc; q++) {
		long long rows = 0, bytes = 0;
		double t0 = now();
		int cancelled = 0;
		timed_out = 0;
		char *sql = sql_text(argv[q]);
		if (sql == NULL) {
			printf("FAIL cannot read %s\n", argv[q]);
			return 2;
		}
		int is_rpc = strncmp(sql, "rpc:", 4) == 0;
		RETCODE sent = is_rpc ? send_rpc(dbproc, sql + 4) : dbcmd(dbproc, sql);
		free(sql);
		if (sent == FAIL || (!is_rpc && dbsqlexec(dbproc) == FAIL)) {
			printf("FAIL exec\n");
			status = 1;
			if (timed_out)
				printf("TIMEOUT\n");
			if (DBDEAD(dbproc))
				break;
			dbcancel(dbproc);
			continue;
		}
		RETCODE rc;
		int result = 0;
		while ((rc = dbresults(dbproc)) != NO_MORE_RESULTS) {
			if (rc == FAIL) {
				printf("FAIL results\n");
				status = 1;
				break;
			}
			int ncols = dbnumcols(dbproc);
			if (!count_mode && ncols > 0) {
				printf("RESULT %d\n", result);
				for (int c = 1; c <= ncols; c++)
					printf("COL %d %d %s\n", c, dbcoltype(dbproc, c), dbcolname(dbproc, c));
			}
			result++;
			STATUS rs;
			while ((rs = dbnextrow(dbproc)) != NO_MORE_ROWS) {
				if (rs == FAIL) {
					printf("FAIL nextrow\n");
					status = 1;
					break;
				}
				if (count_mode) {
					for (int c = 1; c <= ncols; c++)
						bytes += dbdatlen(dbproc, c);
				} else {
					printf("ROW %lld\n", rows);
					for (int c = 1; c <= ncols; c++) {
						printf("V %d ", c);
						print_value(dbproc, c);
						putchar('\n');
					}
				}
				rows++;
				if (cancel_after >= 0 && rows >= cancel_after && q == optind + 3) {
					dbcancel(dbproc);
					cancelled = 1;
					printf("CANCELLED after %lld\n", rows);
					break;
				}
			}
			if (cancelled || rs == FAIL)
				break;
			if (!count_mode && DBCOUNT(dbproc) >= 0)
				printf("COUNT %d\n", (int) DBCOUNT(dbproc));
		}
		if (is_rpc)
			print_returns(dbproc);
		if (timed_out)
			printf("TIMEOUT\n");
		if (count_mode)
			printf("ROWS %lld SECONDS %.6f BYTES %lld\n", rows, now() - t0, bytes);
		printf("BATCHDONE\n");
		fflush(stdout);
		if (DBDEAD(dbproc)) {
			printf("DEAD\n");
			status = 1;
			break;
		}
	}
	dbclose(dbproc);
	dbexit();
	fflush(stdout);
	return status;
}
