#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for troth's tests and CI.
#
#   scripts/pg-cluster.sh start   # create (first time) and start; print the database URL
#   scripts/pg-cluster.sh url     # print the URL of the running cluster
#   scripts/pg-cluster.sh stop    # stop the server and delete the cluster
#   scripts/pg-cluster.sh down    # stop the server, keep the cluster (start brings it back)
#
# Typical use:  export TROTH_TEST_PG_URL="$(scripts/pg-cluster.sh start)"
#
# Every command is idempotent. Only the URL goes to stdout; progress goes to stderr.
#
# The cluster lives in $TROTH_PG_DIR (default /tmp/troth-pg-cluster): data/, a unix socket
# directory, the server log and the chosen port. Authentication is trust on the socket and
# on 127.0.0.1 only (nothing listens elsewhere), and fsync stays on so the durability tests
# test something. PostgreSQL refuses to run as root, so as root the server runs as the
# unprivileged OS user $TROTH_PG_OS_USER (default: postgres, created if missing); the
# Debian packages are all that is needed. $TROTH_PG_BIN overrides where initdb/pg_ctl live.
set -euo pipefail

DIR="${TROTH_PG_DIR:-/tmp/troth-pg-cluster}"
DATA="$DIR/data"
SOCKET="$DIR/socket"
DB_USER="troth"
DB_NAME="troth_test"

log() { echo "pg-cluster: $*" >&2; }

bindir() {
    if [[ -n "${TROTH_PG_BIN:-}" ]]; then
        echo "$TROTH_PG_BIN"
        return
    fi
    # The newest server installed by the Debian packages; pg_config's bindir otherwise.
    local newest
    newest="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
    if [[ -n "$newest" && -x "$newest/initdb" ]]; then
        echo "$newest"
    elif command -v pg_config >/dev/null && [[ -x "$(pg_config --bindir)/initdb" ]]; then
        pg_config --bindir
    else
        log "no PostgreSQL server binaries found (install postgresql or set TROTH_PG_BIN)"
        exit 1
    fi
}

BIN="$(bindir)"

# Run a PostgreSQL binary as an unprivileged user when we are root.
as_owner() {
    if [[ "$(id -u)" == 0 ]]; then
        runuser -u "$OS_USER" -- "$@"
    else
        "$@"
    fi
}

ensure_os_user() {
    OS_USER="${TROTH_PG_OS_USER:-postgres}"
    if [[ "$(id -u)" == 0 ]] && ! id -u "$OS_USER" >/dev/null 2>&1; then
        log "creating OS user $OS_USER"
        useradd --system --no-create-home --shell /usr/sbin/nologin "$OS_USER"
    fi
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

port() { cat "$DIR/port"; }

url() { echo "postgresql://$DB_USER@127.0.0.1:$(port)/$DB_NAME"; }

running() { [[ -f "$DATA/postmaster.pid" ]] && as_owner "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; }

init_cluster() {
    log "initdb in $DATA"
    mkdir -p "$DIR"
    chmod 0755 "$DIR"
    mkdir -p "$SOCKET"
    free_port >"$DIR/port"
    if [[ "$(id -u)" == 0 ]]; then
        chown -R "$OS_USER" "$DIR"
    fi
    as_owner "$BIN/initdb" -D "$DATA" -U "$DB_USER" --auth=trust --encoding=UTF8 --locale=C \
        >"$DIR/initdb.log" 2>&1 || { cat "$DIR/initdb.log" >&2; exit 1; }
    # Appended settings win over the defaults above them in the file.
    as_owner tee -a "$DATA/postgresql.conf" >/dev/null <<EOF

# troth test cluster
port = $(port)
listen_addresses = '127.0.0.1'
unix_socket_directories = '$SOCKET'
fsync = on
synchronous_commit = on
max_connections = 300
EOF
}

start() {
    ensure_os_user
    if [[ ! -f "$DATA/PG_VERSION" ]]; then
        init_cluster
    fi
    if ! running; then
        log "starting on 127.0.0.1:$(port)"
        as_owner "$BIN/pg_ctl" -D "$DATA" -l "$DIR/server.log" -w -t 60 start >&2 \
            || { cat "$DIR/server.log" >&2; exit 1; }
    fi
    if ! as_owner "$BIN/psql" -h "$SOCKET" -p "$(port)" -U "$DB_USER" -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = '$DB_NAME'" | grep -q 1; then
        as_owner "$BIN/createdb" -h "$SOCKET" -p "$(port)" -U "$DB_USER" "$DB_NAME"
    fi
    url
}

stop() {
    ensure_os_user
    if [[ -f "$DATA/PG_VERSION" ]] && running; then
        log "stopping"
        as_owner "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >&2
    fi
    rm -rf "$DIR"
}

down() {
    ensure_os_user
    if [[ -f "$DATA/PG_VERSION" ]] && running; then
        log "stopping (the cluster stays)"
        as_owner "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >&2
    fi
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    down) down ;;
    url)
        ensure_os_user
        if ! running; then
            log "no cluster is running in $DIR (run: $0 start)"
            exit 1
        fi
        url
        ;;
    *)
        echo "usage: $0 start|stop|down|url" >&2
        exit 2
        ;;
esac
