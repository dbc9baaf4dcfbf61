#!/usr/bin/env bash
# A throwaway PgBouncer in transaction pooling mode in front of a PostgreSQL, to run the suite through it as a
# deployment behind PgBouncer would (docs/DEPLOY.md).
#
#   scripts/pgbouncer.sh start POSTGRES_URL DIR   writes DIR/pgbouncer.ini and DIR/userlist.txt, starts PgBouncer on
#                                                 the first free port of 127.0.0.1 from 6432 and prints its URL:
#                                                 POSTGRES_URL's user, password and database, through PgBouncer
#   scripts/pgbouncer.sh stop DIR                 stops the PgBouncer started in DIR (DIR itself stays the caller's)
#   scripts/pgbouncer.sh run POSTGRES_URL -- COMMAND [ARG...]
#                                                 starts one in a temp dir, runs COMMAND with TEST_DATABASE_URL through
#                                                 it and TEST_DATABASE_DIRECT_URL=POSTGRES_URL, stops it and removes the
#                                                 dir on exit; exits with COMMAND's status
#
# Any database name goes through (`*`), so the tests' scratch databases do too. Authentication is `trust` for the
# URL's user, which logs in to PostgreSQL with the URL's password, if any. PgBouncer refuses to run as root: as root,
# it runs as the `postgres` OS user, which must be able to read DIR. Needs pgbouncer on PATH or in /usr/sbin
# (apt-get install -y pgbouncer) and node (to read the URL and find a free port).
#
# PGBOUNCER_POOL_SIZE (default 20): server connections per database and user, as default_pool_size.
# PGBOUNCER_MAX_SERVER_CONNECTIONS (default 60): server connections to PostgreSQL in all, as max_user_connections:
#   keep it below PostgreSQL's max_connections less what connects straight (the suite's LISTEN and migrations).
set -euo pipefail

usage() {
  sed -n '5,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

pgbouncer_bin() {
  command -v pgbouncer || { [ -x /usr/sbin/pgbouncer ] && echo /usr/sbin/pgbouncer; } || {
    echo "pgbouncer: not installed (apt-get install -y pgbouncer)" >&2
    return 1
  }
}

# Runs a command as the `postgres` OS user when this script runs as root, as itself otherwise.
as_pg_user() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# Prints the first port from $1 upwards that nothing on 127.0.0.1 listens on.
free_port_from() {
  node -e '
    const net = require("net");
    const tryPort = (p) => {
      const s = net.createServer();
      s.once("error", () => tryPort(p + 1));
      s.listen(p, "127.0.0.1", () => s.close(() => console.log(p)));
    };
    tryPort(Number(process.argv[1]));
  ' "$1"
}

# Prints one field of a postgres:// URL, decoded: host, port, user, password, database; or the URL with host and
# port replaced (`via HOST:PORT`).
url_part() {
  node -e '
    const [, url, part, hostPort] = process.argv;
    const u = new URL(url);
    const fields = {
      host: u.hostname.replace(/^\[|\]$/g, ""),
      port: u.port || "5432",
      user: decodeURIComponent(u.username) || require("os").userInfo().username,
      password: decodeURIComponent(u.password),
      database: decodeURIComponent(u.pathname.slice(1)),
    };
    if (part === "via") {
      u.host = hostPort;
      console.log(u.toString());
    } else {
      console.log(fields[part]);
    }
  ' "$@"
}

start() {
  local url="$1" dir="$2" bin port user
  bin="$(pgbouncer_bin)"
  port="$(free_port_from 6432)"
  user="$(url_part "$url" user)"
  mkdir -p "$dir"
  # The userlist quotes with double quotes, doubled inside.
  printf '"%s" "%s"\n' "${user//\"/\"\"}" "$(url_part "$url" password | sed 's/"/""/g')" >"$dir/userlist.txt"
  cat >"$dir/pgbouncer.ini" <<EOF
[databases]
* = host=$(url_part "$url" host) port=$(url_part "$url" port)

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
admin_users = $user
pool_mode = transaction
max_client_conn = 2000
default_pool_size = ${PGBOUNCER_POOL_SIZE:-20}
max_user_connections = ${PGBOUNCER_MAX_SERVER_CONNECTIONS:-60}
; The suite's databases come and go: their idle server connections are given up soon, for the next ones.
server_idle_timeout = 5
autodb_idle_timeout = 30
; After a failed login to PostgreSQL (a test that refuses connections for a while), try again soon (default 15 s).
server_login_retry = 0.5
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
EOF
  if [ "$(id -u)" -eq 0 ]; then chown -R postgres: "$dir"; fi
  as_pg_user "$bin" -d "$dir/pgbouncer.ini" || { cat "$dir/pgbouncer.log" >&2 2>/dev/null; return 1; }
  for _ in $(seq 1 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
  done
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || {
    cat "$dir/pgbouncer.log" >&2
    echo "pgbouncer: did not start on 127.0.0.1:$port" >&2
    return 1
  }
  url_part "$url" via "127.0.0.1:$port"
}

stop() {
  local dir="$1" pid
  [ -f "$dir/pgbouncer.pid" ] || return 0
  pid="$(cat "$dir/pgbouncer.pid")"
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
}

run() {
  local url="$1" dir pooled status=0
  shift
  [ "${1:-}" = "--" ] && shift
  [ "$#" -gt 0 ] || usage
  dir="$(mktemp -d /tmp/conduit-pgbouncer.XXXXXX)"
  # shellcheck disable=SC2064 # $dir is fixed from here on
  trap "stop '$dir'; rm -rf '$dir'" EXIT
  pooled="$(start "$url" "$dir")"
  echo "PgBouncer ($("$(pgbouncer_bin)" --version | head -n 1)) in transaction mode: $pooled -> $url" >&2
  TEST_DATABASE_URL="$pooled" TEST_DATABASE_DIRECT_URL="$url" "$@" || status=$?
  return "$status"
}

case "${1:-}" in
  start) [ "$#" -eq 3 ] || usage; start "$2" "$3" ;;
  stop) [ "$#" -eq 2 ] || usage; stop "$2" ;;
  run) [ "$#" -ge 3 ] || usage; shift; run "$@" ;;
  *) usage ;;
esac
