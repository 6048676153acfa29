/*-------------------------------------------------------------------------
 *
 * tds_tls_probe.c
 *		Find out why a login failed on TLS: a PRELOGIN exchange and a TLS
 *		handshake of our own, with GnuTLS, the library FreeTDS uses.
 *
 * FreeTDS 1.3 reports a refused certificate, an expired one, a wrong host
 * name and a server without TLS all as db-lib error 20002 "Adaptive Server
 * connection failed".  After such a failure (tds_tls.c) this module
 * connects once more and does what libtds does up to the point where it
 * would send LOGIN7 ([MS-TDS] 2.2.6.5: PRELOGIN with the ENCRYPTION
 * option; the TLS handshake as the payload of PRELOGIN packets, type 0x12
 * both ways), then checks the server's certificate with the same GnuTLS
 * calls and the same settings as libtds's tds_verify_certificate (trust
 * file or the system store, CRL file, gnutls_x509_crt_check_hostname on the
 * host option), and says which check failed.  It never logs in: no
 * password is involved.
 *
 * Runs in a backend outside any db-lib call, but must not raise: it holds
 * a socket and GnuTLS objects that an ereport would leak.  Memory comes
 * from malloc (freed before returning), texts go into the caller's buffer,
 * every wait is bounded by login_timeout and polls for Postgres interrupts
 * once a second (tds_check_interrupt).
 *
 * IDENTIFICATION
 *		src/tds_tls_probe.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "utils/timestamp.h"

#include "tds_session_internal.h"

#define PT_REPLY			0x04
#define PT_PRELOGIN			0x12
#define ST_EOM				0x01
#define HEADER_SIZE			8
#define MAX_PACKET			32768	/* larger than any packet size SQL Server grants */
#define OUT_PACKET			4096	/* what FreeTDS uses for the handshake */

#define ENCRYPT_OFF			0x00
#define ENCRYPT_ON			0x01
#define ENCRYPT_NOT_SUP		0x02
#define ENCRYPT_REQ			0x03

/* libtds's GnuTLS priorities with its default "enable tls v1 = yes" */
#define PROBE_PRIORITY		"NORMAL:%COMPAT:-VERS-SSL3.0"

typedef struct Probe
{
	int			fd;
	TimestampTz deadline;
	bool		interrupted;
	char		io_error[160];	/* why reading or writing stopped */
	gnutls_session_t tls;		/* while the handshake runs */
	/* the client flight GnuTLS wrote, sent when it wants to read */
	uint8	   *out;
	size_t		out_len;
	size_t		out_cap;
	/* the server packet being consumed */
	uint8		in[MAX_PACKET];
	size_t		in_len;
	size_t		in_pos;
} Probe;

/* ---- the socket ---------------------------------------------------------- */

/* Wait for events on the socket: 1 ready, 0 timed out or interrupted, -1 error */
static int
wait_socket(Probe *p, short events)
{
	for (;;)
	{
		struct pollfd pfd;
		long		secs;
		int			usecs;
		int			ms;
		int			rc;

		TimestampDifference(GetCurrentTimestamp(), p->deadline, &secs, &usecs);
		if (secs <= 0 && usecs <= 0)
		{
			snprintf(p->io_error, sizeof(p->io_error), "no answer within login_timeout");
			return 0;
		}
		if (tds_check_interrupt(NULL))
		{
			p->interrupted = true;
			snprintf(p->io_error, sizeof(p->io_error), "interrupted");
			return 0;
		}
		ms = secs >= 1 ? 1000 : usecs / 1000 + 1;
		pfd.fd = p->fd;
		pfd.events = events;
		pfd.revents = 0;
		rc = poll(&pfd, 1, ms);
		if (rc > 0)
			return 1;
		if (rc < 0 && errno != EINTR)
		{
			snprintf(p->io_error, sizeof(p->io_error), "poll: %s", strerror(errno));
			return -1;
		}
	}
}

static bool
send_all(Probe *p, const uint8 *data, size_t len)
{
	while (len > 0)
	{
		ssize_t		n = send(p->fd, data, len, MSG_NOSIGNAL);

		if (n > 0)
		{
			data += n;
			len -= n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		{
			if (wait_socket(p, POLLOUT) <= 0)
				return false;
			continue;
		}
		snprintf(p->io_error, sizeof(p->io_error), "send: %s", strerror(errno));
		return false;
	}
	return true;
}

static bool
recv_exact(Probe *p, uint8 *buf, size_t len)
{
	while (len > 0)
	{
		ssize_t		n = recv(p->fd, buf, len, 0);

		if (n > 0)
		{
			buf += n;
			len -= n;
			continue;
		}
		if (n == 0)
		{
			snprintf(p->io_error, sizeof(p->io_error), "the server closed the connection");
			return false;
		}
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
		{
			if (wait_socket(p, POLLIN) <= 0)
				return false;
			continue;
		}
		snprintf(p->io_error, sizeof(p->io_error), "recv: %s", strerror(errno));
		return false;
	}
	return true;
}

/* One message of the given type, in packets of at most OUT_PACKET bytes */
static bool
send_message(Probe *p, uint8 type, const uint8 *data, size_t len)
{
	uint8		packet[OUT_PACKET];
	uint8		id = 1;

	do
	{
		size_t		chunk = Min(len, (size_t) (OUT_PACKET - HEADER_SIZE));
		size_t		total = chunk + HEADER_SIZE;

		packet[0] = type;
		packet[1] = chunk == len ? ST_EOM : 0;
		packet[2] = (uint8) (total >> 8);
		packet[3] = (uint8) total;
		packet[4] = packet[5] = 0;	/* SPID */
		packet[6] = id++;
		packet[7] = 0;
		memcpy(packet + HEADER_SIZE, data, chunk);
		if (!send_all(p, packet, total))
			return false;
		data += chunk;
		len -= chunk;
	} while (len > 0);
	return true;
}

/* The next server packet into p->in; its type and status */
static bool
read_packet(Probe *p, uint8 *type, uint8 *status)
{
	uint8		header[HEADER_SIZE];
	size_t		total;

	if (!recv_exact(p, header, HEADER_SIZE))
		return false;
	total = ((size_t) header[2] << 8) | header[3];
	if (total < HEADER_SIZE || total - HEADER_SIZE > sizeof(p->in))
	{
		snprintf(p->io_error, sizeof(p->io_error), "a TDS packet of impossible length %zu", total);
		return false;
	}
	if (!recv_exact(p, p->in, total - HEADER_SIZE))
		return false;
	*type = header[0];
	*status = header[1];
	p->in_len = total - HEADER_SIZE;
	p->in_pos = 0;
	return true;
}

static bool
connect_to(Probe *p, const MssqlServerOptions *opts)
{
	struct addrinfo hints;
	struct addrinfo *addrs;
	struct addrinfo *ai;
	char		port[16];
	int			rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(port, sizeof(port), "%d", opts->port);
	rc = getaddrinfo(opts->host, port, &hints, &addrs);
	if (rc != 0)
	{
		snprintf(p->io_error, sizeof(p->io_error), "%s", gai_strerror(rc));
		return false;
	}
	for (ai = addrs; ai != NULL; ai = ai->ai_next)
	{
		int			err = 0;
		socklen_t	errlen = sizeof(err);

		p->fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (p->fd < 0)
			continue;
		fcntl(p->fd, F_SETFL, fcntl(p->fd, F_GETFL) | O_NONBLOCK);
		if (connect(p->fd, ai->ai_addr, ai->ai_addrlen) == 0 ||
			(errno == EINPROGRESS && wait_socket(p, POLLOUT) > 0 &&
			 getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &errlen) == 0 && err == 0))
		{
			freeaddrinfo(addrs);
			return true;
		}
		if (err != 0)
			snprintf(p->io_error, sizeof(p->io_error), "connect: %s", strerror(err));
		close(p->fd);
		p->fd = -1;
		if (p->interrupted)
			break;
	}
	freeaddrinfo(addrs);
	return false;
}

/* ---- PRELOGIN ------------------------------------------------------------ */

/*
 * Send PRELOGIN with the given ENCRYPTION byte; return the server's byte,
 * or -1 if no valid reply came.
 */
static int
prelogin(Probe *p, uint8 encryption)
{
	/* VERSION, ENCRYPTION, INSTOPT (default instance), THREADID, MARS */
	static const uint8 lengths[5] = {6, 1, 1, 4, 1};
	uint8		msg[64];
	size_t		table = 5 * 5 + 1;
	size_t		pos = table;
	uint8		type;
	uint8		status;
	size_t		i;
	int			answer = -1;

	for (i = 0; i < 5; i++)
	{
		msg[i * 5] = (uint8) i;
		msg[i * 5 + 1] = (uint8) (pos >> 8);
		msg[i * 5 + 2] = (uint8) pos;
		msg[i * 5 + 3] = 0;
		msg[i * 5 + 4] = lengths[i];
		pos += lengths[i];
	}
	msg[table - 1] = 0xFF;
	memset(msg + table, 0, pos - table);
	msg[table + 6] = encryption;
	if (!send_message(p, PT_PRELOGIN, msg, pos))
		return -1;
	if (!read_packet(p, &type, &status))
		return -1;
	if (type != PT_REPLY)
	{
		snprintf(p->io_error, sizeof(p->io_error), "PRELOGIN was answered with packet type 0x%02X", type);
		return -1;
	}
	for (i = 0; i + 5 <= p->in_len && p->in[i] != 0xFF; i += 5)
	{
		size_t		off = ((size_t) p->in[i + 1] << 8) | p->in[i + 2];
		size_t		len = ((size_t) p->in[i + 3] << 8) | p->in[i + 4];

		if (p->in[i] == 0x01 && len >= 1 && off < p->in_len)
			answer = p->in[off];
	}
	if (answer < 0)
		snprintf(p->io_error, sizeof(p->io_error), "the PRELOGIN answer has no ENCRYPTION option");
	p->in_pos = p->in_len;		/* consumed */
	return answer;
}

/* ---- GnuTLS transport: handshake records inside PRELOGIN packets -------- */

static ssize_t
probe_push(gnutls_transport_ptr_t ptr, const void *data, size_t len)
{
	Probe	   *p = (Probe *) ptr;

	if (p->out_len + len > p->out_cap)
	{
		size_t		cap = Max(p->out_cap * 2, p->out_len + len + 4096);
		uint8	   *grown = realloc(p->out, cap);

		if (grown == NULL)
		{
			gnutls_transport_set_errno(p->tls, ENOMEM);
			return -1;
		}
		p->out = grown;
		p->out_cap = cap;
	}
	memcpy(p->out + p->out_len, data, len);
	p->out_len += len;
	return len;
}

static ssize_t
probe_pull(gnutls_transport_ptr_t ptr, void *data, size_t len)
{
	Probe	   *p = (Probe *) ptr;
	size_t		n;

	/* a client flight is complete when GnuTLS waits for the answer */
	if (p->out_len > 0)
	{
		bool		sent = send_message(p, PT_PRELOGIN, p->out, p->out_len);

		p->out_len = 0;
		if (!sent)
		{
			gnutls_transport_set_errno(p->tls, EIO);
			return -1;
		}
	}
	while (p->in_pos >= p->in_len)
	{
		uint8		type;
		uint8		status;

		if (!read_packet(p, &type, &status))
		{
			gnutls_transport_set_errno(p->tls, EIO);
			return -1;
		}
		/* SQL Server answers with 0x12; older servers sent 0x04 */
		if (type != PT_PRELOGIN && type != PT_REPLY)
		{
			snprintf(p->io_error, sizeof(p->io_error),
					 "TLS handshake data came in a packet of type 0x%02X", type);
			gnutls_transport_set_errno(p->tls, EIO);
			return -1;
		}
	}
	n = Min(len, p->in_len - p->in_pos);
	memcpy(data, p->in + p->in_pos, n);
	p->in_pos += n;
	return n;
}

/* ---- the certificate ----------------------------------------------------- */

static void
format_time(time_t t, char *buf, size_t size)
{
	struct tm tm;

	if (t == (time_t) -1 || gmtime_r(&t, &tm) == NULL)
		snprintf(buf, size, "?");
	else
		strftime(buf, size, "%Y-%m-%d %H:%M:%S UTC", &tm);
}

/* "subject "CN=x", issued by "CN=y"" */
static void
describe_certificate(gnutls_x509_crt_t crt, char *buf, size_t size)
{
	gnutls_datum_t subject = {NULL, 0};
	gnutls_datum_t issuer = {NULL, 0};

	gnutls_x509_crt_get_dn3(crt, &subject, 0);
	gnutls_x509_crt_get_issuer_dn3(crt, &issuer, 0);
	snprintf(buf, size, "subject \"%s\", issued by \"%s\"",
			 subject.data ? (char *) subject.data : "?", issuer.data ? (char *) issuer.data : "?");
	gnutls_free(subject.data);
	gnutls_free(issuer.data);
}

/* "DNS:a, IP:127.0.0.1" from the subjectAltName extension */
static void
certificate_names(gnutls_x509_crt_t crt, char *buf, size_t size)
{
	unsigned int i;
	size_t		used = 0;

	buf[0] = '\0';
	for (i = 0; used + 1 < size; i++)
	{
		char		name[256];
		size_t		len = sizeof(name) - 1;
		int			kind = gnutls_x509_crt_get_subject_alt_name(crt, i, name, &len, NULL);
		char		text[300];

		if (kind == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
			break;
		if (kind == GNUTLS_SAN_DNSNAME)
		{
			name[len] = '\0';
			snprintf(text, sizeof(text), "DNS:%s", name);
		}
		else if (kind == GNUTLS_SAN_IPADDRESS && (len == 4 || len == 16))
		{
			char		addr[64];

			inet_ntop(len == 4 ? AF_INET : AF_INET6, name, addr, sizeof(addr));
			snprintf(text, sizeof(text), "IP:%s", addr);
		}
		else
			continue;
		used += snprintf(buf + used, size - used, "%s%s", used > 0 ? ", " : "", text);
	}
	if (buf[0] == '\0')
		snprintf(buf, size, "no subjectAltName");
}

static TdsTlsFailure
check_certificate(Probe *p, const MssqlServerOptions *opts, char *detail, size_t size)
{
	const gnutls_datum_t *chain;
	unsigned int chain_len = 0;
	unsigned int status = 0;
	gnutls_x509_crt_t crt;
	char		who[400];
	char		from[40];
	char		until[40];
	TdsTlsFailure failure = TDS_TLS_NONE;
	int			rc;

	rc = gnutls_certificate_verify_peers3(p->tls, NULL, &status);
	chain = gnutls_certificate_get_peers(p->tls, &chain_len);
	if (rc < 0 || chain == NULL || chain_len == 0)
	{
		snprintf(detail, size, "SQL Server's certificate could not be checked: %s.",
				 rc < 0 ? gnutls_strerror(rc) : "the server sent no certificate");
		return TDS_TLS_UNTRUSTED;
	}
	if (gnutls_x509_crt_init(&crt) < 0)
		return TDS_TLS_NONE;
	if (gnutls_x509_crt_import(crt, &chain[0], GNUTLS_X509_FMT_DER) < 0)
	{
		gnutls_x509_crt_deinit(crt);
		snprintf(detail, size, "SQL Server sent a certificate GnuTLS cannot read.");
		return TDS_TLS_UNTRUSTED;
	}
	describe_certificate(crt, who, sizeof(who));
	format_time(gnutls_x509_crt_get_activation_time(crt), from, sizeof(from));
	format_time(gnutls_x509_crt_get_expiration_time(crt), until, sizeof(until));

	/* an unknown issuer first: the other checks mean nothing without a trusted chain */
	if (status & (GNUTLS_CERT_SIGNER_NOT_FOUND | GNUTLS_CERT_SIGNER_NOT_CA |
				  GNUTLS_CERT_INSECURE_ALGORITHM | GNUTLS_CERT_SIGNATURE_FAILURE))
		failure = TDS_TLS_UNTRUSTED;
	else if (status & GNUTLS_CERT_REVOKED)
		failure = TDS_TLS_REVOKED;
	else if (status & GNUTLS_CERT_EXPIRED)
		failure = TDS_TLS_EXPIRED;
	else if (status & GNUTLS_CERT_NOT_ACTIVATED)
		failure = TDS_TLS_NOT_YET_VALID;
	else if (status != 0)
		failure = TDS_TLS_UNTRUSTED;

	if (failure == TDS_TLS_UNTRUSTED)
	{
		gnutls_datum_t why = {NULL, 0};

		gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &why, 0);
		snprintf(detail, size, "SQL Server's certificate (%s) does not chain to a CA of ca_file \"%s\": %s",
				 who, opts->ca_file ? opts->ca_file : MSSQL_CDC_CA_FILE_SYSTEM,
				 why.data ? (char *) why.data : "not trusted");
		gnutls_free(why.data);
	}
	else if (failure == TDS_TLS_REVOKED)
		snprintf(detail, size, "SQL Server's certificate (%s) is revoked by crl_file \"%s\".",
				 who, opts->crl_file ? opts->crl_file : "?");
	else if (failure == TDS_TLS_EXPIRED || failure == TDS_TLS_NOT_YET_VALID)
		snprintf(detail, size, "SQL Server's certificate (%s) is valid from %s until %s.", who, from, until);
	else if (opts->check_host_name && !gnutls_x509_crt_check_hostname(crt, opts->host))
	{
		char		names[300];

		certificate_names(crt, names, sizeof(names));
		snprintf(detail, size, "SQL Server's certificate (%s; %s) does not name host \"%s\".",
				 who, names, opts->host);
		failure = TDS_TLS_NAME_MISMATCH;
	}
	gnutls_x509_crt_deinit(crt);
	return failure;
}

/* ---- the probe ----------------------------------------------------------- */

static TdsTlsFailure
load_trust(gnutls_certificate_credentials_t cred, const MssqlServerOptions *opts,
		   char *detail, size_t size)
{
	int			rc;

	if (opts->ca_file == NULL || strcmp(opts->ca_file, MSSQL_CDC_CA_FILE_SYSTEM) == 0)
	{
		rc = gnutls_certificate_set_x509_system_trust(cred);
		if (rc <= 0)
		{
			snprintf(detail, size, "ca_file 'system': the operating system's trust store holds no "
					 "certificates GnuTLS can load (%s).", rc < 0 ? gnutls_strerror(rc) : "none found");
			return TDS_TLS_CA_FILE;
		}
	}
	else
	{
		rc = gnutls_certificate_set_x509_trust_file(cred, opts->ca_file, GNUTLS_X509_FMT_PEM);
		if (rc <= 0)
		{
			snprintf(detail, size, "ca_file \"%s\" holds no PEM certificate GnuTLS can load (%s).",
					 opts->ca_file, rc < 0 ? gnutls_strerror(rc) : "none found");
			return TDS_TLS_CA_FILE;
		}
	}
	if (opts->crl_file != NULL)
	{
		rc = gnutls_certificate_set_x509_crl_file(cred, opts->crl_file, GNUTLS_X509_FMT_PEM);
		if (rc <= 0)
		{
			snprintf(detail, size, "crl_file \"%s\" holds no PEM revocation list GnuTLS can load (%s).",
					 opts->crl_file, rc < 0 ? gnutls_strerror(rc) : "none found");
			return TDS_TLS_CRL_FILE;
		}
	}
	return TDS_TLS_NONE;
}

static TdsTlsFailure
handshake(Probe *p, const MssqlServerOptions *opts, char *detail, size_t size)
{
	gnutls_certificate_credentials_t cred = NULL;
	TdsTlsFailure failure = TDS_TLS_NONE;
	int			rc;

	if (gnutls_certificate_allocate_credentials(&cred) < 0)
		return TDS_TLS_NONE;
	if (!opts->trust_server_certificate)
		failure = load_trust(cred, opts, detail, size);
	if (failure == TDS_TLS_NONE &&
		gnutls_init(&p->tls, GNUTLS_CLIENT) >= 0)
	{
		gnutls_priority_set_direct(p->tls, PROBE_PRIORITY, NULL);
		gnutls_credentials_set(p->tls, GNUTLS_CRD_CERTIFICATE, cred);
		gnutls_transport_set_ptr(p->tls, p);
		gnutls_transport_set_push_function(p->tls, probe_push);
		gnutls_transport_set_pull_function(p->tls, probe_pull);
		do
			rc = gnutls_handshake(p->tls);
		while (rc < 0 && !gnutls_error_is_fatal(rc) && !p->interrupted);

		if (p->interrupted)
			failure = TDS_TLS_NONE;
		else if (rc == GNUTLS_E_FATAL_ALERT_RECEIVED)
		{
			snprintf(detail, size, "SQL Server ended the TLS handshake with the alert \"%s\".",
					 gnutls_alert_get_name(gnutls_alert_get(p->tls)));
			failure = TDS_TLS_HANDSHAKE;
		}
		else if (rc < 0)
		{
			snprintf(detail, size, "The TLS handshake with SQL Server failed: %s%s%s.",
					 gnutls_strerror(rc), p->io_error[0] ? ": " : "", p->io_error);
			failure = TDS_TLS_HANDSHAKE;
		}
		else if (!opts->trust_server_certificate)
			failure = check_certificate(p, opts, detail, size);
		gnutls_deinit(p->tls);
		p->tls = NULL;
	}
	gnutls_certificate_free_credentials(cred);
	return failure;
}

TdsTlsFailure
tds_tls_probe(const MssqlServerOptions *opts, bool want_tls, char *detail, size_t detail_size,
			  bool *interrupted)
{
	Probe	   *p = calloc(1, sizeof(Probe));
	TdsTlsFailure failure = TDS_TLS_NONE;
	int			answer = -1;

	*interrupted = false;
	detail[0] = '\0';
	if (p == NULL)
		return TDS_TLS_NONE;
	p->fd = -1;
	p->deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
											  (opts->login_timeout > 0 ? opts->login_timeout :
											   MSSQL_CDC_DEFAULT_LOGIN_TIMEOUT) * 1000);

	if (connect_to(p, opts) && (answer = prelogin(p, want_tls ? ENCRYPT_ON : ENCRYPT_NOT_SUP)) >= 0)
	{
		if (want_tls && answer == ENCRYPT_NOT_SUP)
		{
			snprintf(detail, detail_size, "SQL Server answered PRELOGIN with ENCRYPT_NOT_SUP (0x02): it "
					 "cannot encrypt.");
			failure = TDS_TLS_NOT_OFFERED;
		}
		else if (!want_tls && (answer == ENCRYPT_REQ || answer == ENCRYPT_ON))
		{
			snprintf(detail, detail_size, "SQL Server answered PRELOGIN with %s (0x%02X): it accepts "
					 "encrypted connections only.",
					 answer == ENCRYPT_REQ ? "ENCRYPT_REQ" : "ENCRYPT_ON", answer);
			failure = TDS_TLS_REQUIRED_BY_SERVER;
		}
		else if (want_tls)
			failure = handshake(p, opts, detail, detail_size);
	}

	*interrupted = p->interrupted;
	if (p->fd >= 0)
		close(p->fd);
	free(p->out);
	free(p);
	return failure;
}
