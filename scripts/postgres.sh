#!/usr/bin/env bash
# Start a PostgreSQL cluster under .prefect/pg for a shared Prefect server, and print the
# connection URL. Uses Debian's postgresql (apt-get install -y postgresql).
#   eval "$(bash scripts/postgres.sh)"   # exports PREFECT_API_DATABASE_CONNECTION_URL
set -euo pipefail
source "$(dirname "$0")/prefect_env.sh" >/dev/null
PG_BIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
[ -x "$PG_BIN/initdb" ] || { echo "echo 'install postgresql first: apt-get install -y postgresql' >&2; exit 1"; exit 1; }
PG_PORT="${PG_PORT:-5433}"
PG_DIR="$PREFECT_HOME/pg"
RUN_AS=()
if [ "$(id -u)" = 0 ]; then RUN_AS=(runuser -u postgres --); fi   # postgres refuses to run as root
if [ ! -f "$PG_DIR/data/PG_VERSION" ]; then
  mkdir -p "$PG_DIR"; [ "$(id -u)" = 0 ] && chown postgres "$PG_DIR"
  "${RUN_AS[@]}" "$PG_BIN/initdb" -D "$PG_DIR/data" -U prefect --auth=trust >"$PREFECT_HOME/pg-init.log" 2>&1
fi
if ! "${RUN_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DIR/data" status >/dev/null 2>&1; then
  "${RUN_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w \
    -o "-p $PG_PORT -k $PG_DIR -c listen_addresses=127.0.0.1" start >/dev/null
fi
"${RUN_AS[@]}" "$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U prefect -d postgres -tAc \
  "SELECT 1 FROM pg_database WHERE datname='prefect'" | grep -q 1 \
  || "${RUN_AS[@]}" "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U prefect prefect
echo "export PREFECT_API_DATABASE_CONNECTION_URL=postgresql+asyncpg://prefect@127.0.0.1:$PG_PORT/prefect"
