/*
 * ctlib_params: a language command with parameters through FreeTDS ct-lib.
 * ct-lib turns it into sp_executesql (ProcID 10) with @stmt/@params as NTEXT
 * and unnamed values, the request shape the stand-in must decode.
 *
 * usage: ctlib_params HOST PORT USER PASSWORD SQL INT_VALUE STRING_VALUE
 * The SQL uses two '?' placeholders (an int, then a varchar).  Prints
 * "ROW v1|v2|..." per row (values converted to text by ct-lib), "DONE" at
 * the end, "FAIL where" on errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctpublic.h>

#define CHECK(call, what) do { if ((call) != CS_SUCCEED) { printf("FAIL %s\n", what); return 1; } } while (0)

static CS_RETCODE
servermsg_cb(CS_CONTEXT *ctx, CS_CONNECTION *conn, CS_SERVERMSG *msg)
{
	(void) ctx; (void) conn;
	printf("MSG %d %d \"%s\"\n", (int) msg->msgnumber, (int) msg->severity, msg->text);
	return CS_SUCCEED;
}

static CS_RETCODE
clientmsg_cb(CS_CONTEXT *ctx, CS_CONNECTION *conn, CS_CLIENTMSG *msg)
{
	(void) ctx; (void) conn;
	printf("CLIENTMSG %d \"%s\"\n", (int) msg->msgnumber, msg->msgstring);
	return CS_SUCCEED;
}

int
main(int argc, char **argv)
{
	CS_CONTEXT *ctx;
	CS_CONNECTION *conn;
	CS_COMMAND *cmd;
	CS_RETCODE rc;
	CS_INT result_type;

	if (argc != 8) {
		fprintf(stderr, "usage: ctlib_params HOST PORT USER PASSWORD SQL INT STRING\n");
		return 2;
	}
	CHECK(cs_ctx_alloc(CS_VERSION_100, &ctx), "cs_ctx_alloc");
	CHECK(ct_init(ctx, CS_VERSION_100), "ct_init");
	ct_callback(ctx, NULL, CS_SET, CS_SERVERMSG_CB, (CS_VOID *) servermsg_cb);
	ct_callback(ctx, NULL, CS_SET, CS_CLIENTMSG_CB, (CS_VOID *) clientmsg_cb);
	CHECK(ct_con_alloc(ctx, &conn), "ct_con_alloc");
	CHECK(ct_con_props(conn, CS_SET, CS_USERNAME, argv[3], CS_NULLTERM, NULL), "username");
	CHECK(ct_con_props(conn, CS_SET, CS_PASSWORD, argv[4], CS_NULLTERM, NULL), "password");
	char addr[300];
	snprintf(addr, sizeof(addr), "%s %s", argv[1], argv[2]);	/* FreeTDS: "host port" */
	CHECK(ct_con_props(conn, CS_SET, CS_SERVERADDR, addr, CS_NULLTERM, NULL), "serveraddr");
	CHECK(ct_connect(conn, NULL, 0), "connect");
	CHECK(ct_cmd_alloc(conn, &cmd), "ct_cmd_alloc");
	CHECK(ct_command(cmd, CS_LANG_CMD, argv[5], CS_NULLTERM, CS_UNUSED), "ct_command");

	CS_DATAFMT fmt;
	memset(&fmt, 0, sizeof(fmt));
	fmt.datatype = CS_INT_TYPE;
	fmt.maxlength = sizeof(CS_INT);
	fmt.status = CS_INPUTVALUE;
	CS_INT ival = atoi(argv[6]);
	CHECK(ct_param(cmd, &fmt, &ival, sizeof(ival), 0), "ct_param int");
	memset(&fmt, 0, sizeof(fmt));
	fmt.datatype = CS_CHAR_TYPE;
	fmt.maxlength = (CS_INT) strlen(argv[7]);
	fmt.status = CS_INPUTVALUE;
	CHECK(ct_param(cmd, &fmt, argv[7], (CS_INT) strlen(argv[7]), 0), "ct_param char");
	CHECK(ct_send(cmd), "ct_send");

	while ((rc = ct_results(cmd, &result_type)) == CS_SUCCEED) {
		if (result_type != CS_ROW_RESULT)
			continue;
		CS_INT ncols, rows_read;
		ct_res_info(cmd, CS_NUMDATA, &ncols, CS_UNUSED, NULL);
		char buf[16][256];
		CS_INT lens[16];
		CS_SMALLINT inds[16];
		for (int i = 0; i < ncols && i < 16; i++) {
			CS_DATAFMT out;
			memset(&out, 0, sizeof(out));
			out.datatype = CS_CHAR_TYPE;
			out.maxlength = sizeof(buf[i]) - 1;
			out.format = CS_FMT_NULLTERM;
			out.count = 1;
			CHECK(ct_bind(cmd, i + 1, &out, buf[i], &lens[i], &inds[i]), "ct_bind");
		}
		while (ct_fetch(cmd, CS_UNUSED, CS_UNUSED, CS_UNUSED, &rows_read) == CS_SUCCEED) {
			printf("ROW ");
			for (int i = 0; i < ncols && i < 16; i++)
				printf("%s%s", i ? "|" : "", inds[i] == -1 ? "NULL" : buf[i]);
			printf("\n");
		}
	}
	if (rc != CS_END_RESULTS) {
		printf("FAIL results\n");
		return 1;
	}
	printf("DONE\n");
	ct_cmd_drop(cmd);
	ct_close(conn, CS_UNUSED);
	ct_con_drop(conn);
	ct_exit(ctx, CS_UNUSED);
	cs_ctx_drop(ctx);
	return 0;
}
