#!/usr/bin/env bash
# A local PostgreSQL cluster on loopback with TechEmpower's database: hello_world, owned by
# benchmarkdbuser (password benchmarkdbpass), its World table (10,000 rows) and Fortune table
# (12 rows), and pg_stat_statements, which TechEmpower's verifier reads to count queries and
# updated rows.
#
#   bash bench/tfb/pg.sh start    installs Debian's postgresql when missing, creates the cluster
#                                 on first use, starts it; nothing when the database already
#                                 answers on the port; when a running cluster of Debian's holds
#                                 the port (the package's own, started), adds the database to it
#   bash bench/tfb/pg.sh stop     stops the cluster this script started (not another server)
#   bash bench/tfb/pg.sh status   exit 0 when hello_world answers on the port
#   bash bench/tfb/pg.sh psql     psql as benchmarkdbuser on hello_world (extra arguments to psql)
#
# Environment: TFB_DB_PORT [5432]; TFB_PG_DIR [/tmp/donkey-tfb-pg-PORT], the cluster's folder
# (data, socket, log). As root the server runs as Debian's postgres user, which PostgreSQL
# requires; the folder is then made its own.
set -euo pipefail

PORT="${TFB_DB_PORT:-5432}"
DIR="${TFB_PG_DIR:-${TMPDIR:-/tmp}/donkey-tfb-pg-$PORT}"
DB=hello_world
USER_NAME=benchmarkdbuser
PASSWORD=benchmarkdbpass

die() { echo "pg.sh: $*" >&2; exit 1; }
log() { echo "pg.sh: $*" >&2; }

install_postgres() {
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && return 0
  log "installing Debian's postgresql"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q >/dev/null
  # the package's own cluster is not used: keep it from starting on 5432 where an init runs
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q postgresql >/dev/null
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || die "postgresql did not install"
}

bin_dir() {
  ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1
}

# as_owner CMD...: runs CMD as the cluster's owner (postgres when this shell is root)
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

answers() {
  command -v psql >/dev/null 2>&1 || return 1
  PGPASSWORD="$PASSWORD" PGCONNECT_TIMEOUT=3 psql -h 127.0.0.1 -p "$PORT" -U "$USER_NAME" -d "$DB" \
    -Atqc "select count(*) from world" 2>/dev/null | grep -q '^10000$'
}

port_taken() {
  (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null
}

create_cluster() {
  local bin="$1"
  log "creating a cluster in $DIR on 127.0.0.1:$PORT"
  mkdir -p "$DIR"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$DIR"
  as_owner "$bin/initdb" -D "$DIR/data" -U postgres --auth-local=trust --auth-host=md5 \
    -E UTF8 --locale=C.UTF-8 >"$DIR/initdb.log" 2>&1 || { cat "$DIR/initdb.log" >&2; die "initdb failed"; }
  # Loopback only. md5, as TechEmpower's own database image: the reactive client needs no
  # SCRAM library for it. Commits are not waited for, as there.
  as_owner tee -a "$DIR/data/postgresql.conf" >/dev/null <<EOF
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$DIR'
password_encryption = md5
max_connections = 200
shared_buffers = 256MB
synchronous_commit = off
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track = all
jit = off
EOF
}

# su_psql ARGS...: psql as the cluster's superuser through its local socket (PG_BIN, PG_SOCK)
su_psql() { as_owner "$PG_BIN/psql" -h "$PG_SOCK" -p "$PORT" -U postgres -v ON_ERROR_STOP=1 -Atq "$@"; }

# provision BIN SOCKET_DIR: the role, the database, pg_stat_statements and the tables, each
# made unless it exists, through the cluster's local socket as its superuser
provision() {
  PG_BIN="$1" PG_SOCK="$2"
  log "creating what is missing of $DB"
  if [ -z "$(su_psql -d postgres -c "SELECT 1 FROM pg_roles WHERE rolname = '$USER_NAME'")" ]; then
    su_psql -d postgres -c "CREATE ROLE $USER_NAME LOGIN PASSWORD '$PASSWORD'"
  fi
  if [ -z "$(su_psql -d postgres -c "SELECT 1 FROM pg_database WHERE datname = '$DB'")" ]; then
    su_psql -d postgres -c "CREATE DATABASE $DB OWNER $USER_NAME ENCODING 'UTF8' TEMPLATE template0"
  fi
  su_psql -d "$DB" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" \
    -c "GRANT pg_read_all_stats TO $USER_NAME" \
    -c "GRANT EXECUTE ON FUNCTION pg_stat_statements_reset TO $USER_NAME"
  if [ -z "$(su_psql -d "$DB" -c "SELECT 1 FROM pg_tables WHERE tablename = 'world'")" ]; then
    # (read by this shell: the owner may not see into the checkout)
    su_psql -d "$DB" -c "SET ROLE $USER_NAME" -f - <"$(dirname "$0")/schema.sql"
  fi
}

# adopt: the port is a running cluster of Debian's (postgresql-common) without the database,
# as where the package's own cluster was started: the database is provisioned in it, the
# cluster restarted once if pg_stat_statements was not loaded. Needs root (the cluster's local
# superuser is the postgres account).
adopt() {
  command -v pg_lsclusters >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ] || return 1
  local ver name
  read -r ver name < <(pg_lsclusters -h 2>/dev/null | awk -v p="$PORT" '$3 == p && $4 == "online" { print $1, $2; exit }') || true
  [ -n "${ver:-}" ] || return 1
  local bin=/usr/lib/postgresql/$ver/bin
  log "adding $DB to the running cluster $ver/$name on port $PORT"
  provision "$bin" /var/run/postgresql
  local preload
  preload="$(su_psql -d postgres -c "SHOW shared_preload_libraries")"
  if [[ ",${preload// /}," != *,pg_stat_statements,* ]]; then
    log "loading pg_stat_statements in $ver/$name (a restart of that cluster)"
    su_psql -d postgres -c "ALTER SYSTEM SET shared_preload_libraries = '${preload:+$preload,}pg_stat_statements'"
    pg_ctlcluster "$ver" "$name" restart
  fi
}

start() {
  if answers; then
    log "$DB already answers on 127.0.0.1:$PORT"
    return 0
  fi
  if port_taken; then
    if adopt && answers; then
      log "$DB answers on 127.0.0.1:$PORT"
      return 0
    fi
    die "127.0.0.1:$PORT is taken by something that is not $DB and is not a local cluster to add it to (set TFB_DB_PORT)"
  fi
  install_postgres
  local bin fresh=false
  bin="$(bin_dir)"
  if [ ! -f "$DIR/data/PG_VERSION" ]; then
    create_cluster "$bin"
    fresh=true
  fi
  as_owner "$bin/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 60 start >/dev/null \
    || { tail -n 20 "$DIR/server.log" >&2; die "the server did not start"; }
  $fresh && provision "$bin" "$DIR"
  answers || die "$DB does not answer on 127.0.0.1:$PORT (see $DIR/server.log)"
  log "$DB answers on 127.0.0.1:$PORT"
}

stop() {
  [ -f "$DIR/data/postmaster.pid" ] || { log "no cluster of this script runs in $DIR"; return 0; }
  as_owner "$(bin_dir)/pg_ctl" -D "$DIR/data" -m fast -w stop >/dev/null
  log "stopped the cluster in $DIR"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) answers ;;
  psql) shift; PGPASSWORD="$PASSWORD" exec psql -h 127.0.0.1 -p "$PORT" -U "$USER_NAME" -d "$DB" "$@" ;;
  *) die "usage: bash bench/tfb/pg.sh start|stop|status|psql" ;;
esac
