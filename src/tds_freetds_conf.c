/*-------------------------------------------------------------------------
 *
 * tds_freetds_conf.c
 *		The private freetds.conf a login needs for settings db-lib's
 *		LOGINREC cannot carry (encryption level and certificate checks).
 *
 * IDENTIFICATION
 *		src/tds_freetds_conf.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "miscadmin.h"
#include "storage/fd.h"

#include "tds_session_internal.h"

/*
 * FreeTDS 1.3 db-lib cannot set the encryption level on a LOGINREC
 * (dbsetlbool(DBSETENCRYPT) is unimplemented), nor the CA file, the CRL
 * or the host name check; they only come from freetds.conf.  Every login
 * therefore writes a private configuration file: a copy of the file
 * FreeTDS would read anyway (so the administrator's other [global]
 * settings still apply) plus one section for this server, whose values
 * override [global], and FREETDSCONF names it for the duration of dbopen.
 * The section is named "host:port", the name dbopen is given, so db-lib's
 * messages still show where we connected (FreeTDS looks up a section by
 * that name before it parses host and port out of it).  The file lives
 * under base/pgsql_tmp, whose temporary files the postmaster removes at
 * startup, and is deleted right after dbopen.  It holds no password:
 * credentials travel in the LOGINREC only.
 *
 * FreeTDS validates the server's certificate only when "ca file" is set
 * (src/tds/tls.c), so validation writes it always ("system" is FreeTDS's
 * word for the operating system's trust store), and trust_server_certificate
 * writes it empty: an administrator's [global] "ca file" must not turn a
 * choice made per server into something else.
 */

static char *
base_freetds_conf(void)
{
	const char *env = getenv("FREETDSCONF");
	const char *freetds = getenv("FREETDS");
	const char *home = getenv("HOME");
	char	   *candidates[4];
	int			n = 0;
	int			i;

	if (env != NULL && env[0] != '\0')
		candidates[n++] = pstrdup(env);
	if (freetds != NULL && freetds[0] != '\0')
		candidates[n++] = psprintf("%s/etc/freetds.conf", freetds);
	if (home != NULL && home[0] != '\0')
		candidates[n++] = psprintf("%s/.freetds.conf", home);
	candidates[n++] = pstrdup("/etc/freetds/freetds.conf");

	for (i = 0; i < n; i++)
		if (access(candidates[i], R_OK) == 0)
			return candidates[i];
	return NULL;
}

static bool
write_section(FILE *out, const MssqlServerOptions *opts, MssqlEncryption level, const char *section)
{
	bool		validate = !opts->trust_server_certificate;

	return fprintf(out, "\n[%s]\n\thost = %s\n\tport = %d\n\ttds version = %s\n\tencryption = %s\n"
				   "\tca file = %s\n\tcrl file = %s\n\tcheck certificate hostname = %s\n",
				   section, opts->host, opts->port,
				   opts->tds_version ? opts->tds_version : "7.4",
				   level == MSSQL_ENCRYPTION_OFF ? "off" : "require",
				   validate && opts->ca_file ? opts->ca_file : "",
				   validate && opts->crl_file ? opts->crl_file : "",
				   validate && opts->check_host_name ? "yes" : "no") >= 0;
}

char *
tds_write_freetds_conf(const MssqlServerOptions *opts, MssqlEncryption level, const char *section)
{
	char	   *base = base_freetds_conf();
	char	   *path;
	FILE	   *out;
	bool		ok = true;

	MakePGDirectory("base/" PG_TEMP_FILES_DIR);
	path = psprintf("%s/base/%s/%s_mssql_cdc_freetds.%d.conf",
					DataDir, PG_TEMP_FILES_DIR, PG_TEMP_FILE_PREFIX, (int) MyProcPid);
	out = AllocateFile(path, PG_BINARY_W);
	if (out == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create FreeTDS configuration file \"%s\": %m", path)));
	if (base != NULL)
	{
		FILE	   *in = AllocateFile(base, PG_BINARY_R);
		char		buf[8192];
		size_t		nread;

		if (in != NULL)
		{
			while ((nread = fread(buf, 1, sizeof(buf), in)) > 0)
				if (fwrite(buf, 1, nread, out) != nread)
					ok = false;
			FreeFile(in);
		}
	}
	if (!write_section(out, opts, level, section))
		ok = false;
	if (FreeFile(out) != 0 || !ok)
	{
		unlink(path);
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write FreeTDS configuration file \"%s\": %m", path)));
	}
	return path;
}

bool
tds_valid_conf_value(const char *value)
{
	/* a newline, '#' or ';' would let a value inject configuration */
	return value != NULL && strpbrk(value, "\r\n#;[]") == NULL;
}

