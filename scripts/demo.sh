#!/usr/bin/env bash
# `make demo`: the whole stack on this machine, with a small batch to play.
#
# Starts redis-server (its own, in var/redis, unless something already answers on TURKFLOW_REDIS_URL),
# migrates the database, loads the sample tasks, launches a 3-conversation batch on the local provider
# (once: a second run reuses it), starts the Procfile's processes (a Celery worker per queue, Celery beat,
# gunicorn on a Unix socket in the data directory and nginx in front of it on 127.0.0.1:${TURKFLOW_PORT:-5000})
# and prints a student and a teacher join link. Ctrl-C stops
# everything this script started; the database in var/ stays for the next run. A process that dies is
# started again (said on the console and in its log), unless it keeps dying at once.
set -euo pipefail
cd "$(dirname "$0")/.."

export PATH="$PWD/.venv/bin:$PATH"
export TURKFLOW_DATA_DIR=${TURKFLOW_DATA_DIR:-var}
port=${TURKFLOW_PORT:-5000}
export TURKFLOW_PUBLIC_URL=${TURKFLOW_PUBLIC_URL:-http://127.0.0.1:$port}
export TURKFLOW_REDIS_URL=${TURKFLOW_REDIS_URL:-redis://127.0.0.1:6379/0}
logs=$TURKFLOW_DATA_DIR/demo
mkdir -p "$logs"

say() { printf 'demo: %s\n' "$*"; }
fail() { printf 'demo: error: %s\n' "$*" >&2; exit 1; }

started=()  # "name:pid" of every process this script started, stopped in reverse order
stop() {
  trap - INT TERM EXIT
  local i entry
  for ((i = ${#started[@]} - 1; i >= 0; i--)); do
    entry=${started[i]}
    kill -TERM "${entry#*:}" 2>/dev/null || true
  done
  for entry in "${started[@]}"; do
    wait "${entry#*:}" 2>/dev/null || true
  done
  [ ${#started[@]} -eq 0 ] || say "stopped ${started[*]%%:*}"
}
trap stop EXIT
trap 'exit 0' INT TERM  # Ctrl-C is how a demo ends: a normal stop, not an error

redis_answers() {
  python - "$TURKFLOW_REDIS_URL" <<'PY' >/dev/null 2>&1
import sys, redis
redis.Redis.from_url(sys.argv[1], socket_connect_timeout=1, socket_timeout=1).ping()
PY
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# port_free: the front server could bind the web port now (the bind it makes: 127.0.0.1, SO_REUSEADDR). A connection
# test is not enough: a port held by processes that no longer accept can still take connections.
port_free() {
  python - "$port" <<'PY' >/dev/null 2>&1
import socket, sys
with socket.socket() as s:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(sys.argv[1])))
PY
}

# wait_for_port SECONDS: until the web port is free, for at most SECONDS.
wait_for_port() {
  local deadline=$((SECONDS + $1))
  until port_free; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.5
  done
}

# wait_for NAME CHECK...: poll CHECK for up to 30 s while the process NAME keeps running.
wait_for() {
  local name=$1 pid=${started[-1]#*:}; shift
  for _ in $(seq 300); do
    "$@" && return 0
    kill -0 "$pid" 2>/dev/null || { tail -n 20 "$logs/$name.log" >&2; fail "$name exited; log: $logs/$name.log"; }
    sleep 0.1
  done
  tail -n 20 "$logs/$name.log" >&2
  fail "$name did not come up within 30 s; log: $logs/$name.log"
}

# ---- Redis ----------------------------------------------------------------------------------------------
if redis_answers; then
  say "using the Redis already answering at $TURKFLOW_REDIS_URL"
else
  read -r redis_host redis_port < <(python -c 'import sys; from urllib.parse import urlsplit
u = urlsplit(sys.argv[1]); print(u.hostname or "127.0.0.1", u.port or 6379)' "$TURKFLOW_REDIS_URL")
  case $redis_host in
    127.0.0.1|localhost) ;;
    *) fail "nothing answers at $TURKFLOW_REDIS_URL, and it is not this machine: start that Redis first" ;;
  esac
  mkdir -p "$TURKFLOW_DATA_DIR/redis"
  redis_command="exec redis-server --bind 127.0.0.1 --port $redis_port --dir $(printf %q "$TURKFLOW_DATA_DIR/redis")"
  redis_command+=" --appendonly yes --save '' --daemonize no"
  (eval "$redis_command") >>"$logs/redis.log" 2>&1 &
  started+=("redis:$!")
  wait_for redis redis_answers
  say "started redis-server on 127.0.0.1:$redis_port (data in $TURKFLOW_DATA_DIR/redis)"
fi

port_free || fail "port $port is in use (is another demo running?); set TURKFLOW_PORT to another port"

# ---- data: schema, tasks, a batch, two workers ----------------------------------------------------------
turkflow db upgrade
turkflow tasks load --sample
launch=$(turkflow batch launch --all --provider local --conversations 3 --max-turns 8 --name demo --skip-if-exists)
echo "$launch"
batch_id=$(sed -n 's/^\(launched \)\{0,1\}batch \([0-9][0-9]*\).*/\2/p' <<<"$launch" | head -n 1)
join_link() {  # the demo worker of a role, reused on later runs
  turkflow worker link "demo-$1" 2>/dev/null || turkflow worker invite --role "$1" --name "demo-$1" --onboarded 2>/dev/null
}
student_url=$(join_link student)
teacher_url=$(join_link teacher)

# ---- the Procfile's processes ---------------------------------------------------------------------------
command_of() {
  if [ "$1" = redis ]; then echo "$redis_command"; return; fi
  local command
  command=$(sed -n "s/^$1: //p" Procfile)
  [ -n "$command" ] || fail "Procfile has no '$1' process"
  echo "exec $command"
}
start() {
  : >"$logs/$1.log"
  (eval "$(command_of "$1")") >>"$logs/$1.log" 2>&1 &
  started+=("$1:$!")
}
export WEB_BIND=127.0.0.1:$port WEB_CONCURRENCY=${WEB_CONCURRENCY:-2}
export TURNS_CONCURRENCY=${TURNS_CONCURRENCY:-1} REVIEWS_CONCURRENCY=${REVIEWS_CONCURRENCY:-1}
export PLATFORM_CONCURRENCY=${PLATFORM_CONCURRENCY:-1}
for queue in turns reviews platform; do  # a Celery worker per queue, as the Procfile runs them
  start "$queue"
  wait_for "$queue" grep -q "ready\." "$logs/$queue.log"
done
start beat
start web
wait_for web test -S "$TURKFLOW_DATA_DIR/web.sock"
start front  # nginx: takes each request whole before gunicorn's threads see it (turkflow/web/front.py)
wait_for front port_in_use "$port"
say "started ${started[*]%%:*} (logs in $logs/)"

cat <<EOF

turkflow is running at $TURKFLOW_PUBLIC_URL: play both roles of a conversation.
  student:  $student_url
  teacher:  $teacher_url
Both demo workers are onboarded already (workers you invite take their role's quiz first).
Open each link in its own browser window, one of them private (a link signs its window in as that
worker). As the student, take a turn from the queue and submit it; the teacher's turn opens a moment
later in the teacher's queue.

EOF
turkflow batch status ${batch_id:+"$batch_id"}
echo
say "Ctrl-C stops everything this script started"

# Run until Ctrl-C, starting again whatever dies (a crash, an OOM kill, a kill -9). A process that dies
# 5 times within a minute is failing at start, not crashing now and then: then the demo stops.
declare -A deaths=()
while true; do
  pids=()
  for entry in "${started[@]}"; do pids+=("${entry#*:}"); done
  set +e
  wait -n -p died "${pids[@]}"
  status=$?
  set -e
  for i in "${!started[@]}"; do
    [ "${started[i]#*:}" = "$died" ] || continue
    name=${started[i]%%:*}
    deaths[$name]="${deaths[$name]:-} $SECONDS"
    recent=0
    for at in ${deaths[$name]}; do [ $((SECONDS - at)) -lt 60 ] && recent=$((recent + 1)); done
    [ "$recent" -lt 5 ] || fail "$name died $recent times within a minute; log: $logs/$name.log"
    message="$name exited with status $status at $(date -u +%H:%M:%S); starting it again"
    say "$message"
    printf '\n==== demo: %s ====\n' "$message" >>"$logs/$name.log"
    if [ "$name" = front ] && ! port_free; then
      # nginx's worker processes may outlive a master killed with SIGKILL for a moment, holding its port; an
      # nginx started meanwhile would give up at once. (A gunicorn started again takes its socket over.)
      say "port $port is still held, most likely by the workers of the front process that died; waiting up to 60 s"
      wait_for_port 60 || fail "port $port is still held after 60 s; \`ss -ltnp 'sport = :$port'\` shows by what"
      say "port $port is free"
    fi
    (eval "$(command_of "$name")") >>"$logs/$name.log" 2>&1 &
    started[i]="$name:$!"
  done
done
