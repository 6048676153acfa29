# Shared by scripts/demo and scripts/test (sourced, not run).

# build_and_install REPO [MAKEFLAGS...]: build the extension and install it
# into PostgreSQL 15.  Quiet unless something fails.
build_and_install() {
	local repo=$1; shift
	echo "== build and install"
	make -C "$repo" -s clean >/dev/null
	make -C "$repo" -s "$@" all
	make -C "$repo" -s install >/dev/null
}

# private_copy REPO: a copy of the tree (in $TMPDIR, default /tmp) owned by
# the unprivileged "postgres" user (initdb and pg_ctl refuse root), or by
# the caller when not root; prints its path.
private_copy() {
	local repo=$1 work
	work=$(mktemp -d "${TMPDIR:-/tmp}/mssql_cdc-run.XXXXXX")
	rsync -a --exclude node_modules --exclude .git --exclude tmp_check "$repo/" "$work/"
	[ "$(id -u)" != 0 ] || chown -R postgres:postgres "$work"
	echo "$work"
}

PGBIN=/usr/lib/postgresql/15/bin
