#!/usr/bin/env bash
# Every chime role as a process of its own on one machine, sharing one
# embedded broker that runs as a process of its own too: restarting a role
# leaves the broker and the other roles running. Run it from the
# repository root after `make build` and `make clickhouse` (the sink starts
# a local ClickHouse); it checks itself with a job that calls `chime echo`,
# then runs until Ctrl-C, which stops every process cleanly.
#
#   docs/separate-processes.sh [DIR]
#
# DIR (default .chime-roles) holds each process's state dir and its log
# (DIR/<process>.log). The API listens on $CHIME_API_ADDR (127.0.0.1:8080),
# chime echo on $ECHO_ADDR (127.0.0.1:9999); the broker, the scheduler's
# query server and the local ClickHouse take free ports.
set -euo pipefail
set -m    # each process in a group of its own: Ctrl-C reaches the script alone
umask 077 # the state dirs and the secrets below are the operator's alone

chime=${CHIME:-bin/chime}
dir=${1:-.chime-roles}
api_addr=${CHIME_API_ADDR:-127.0.0.1:8080}
echo_addr=${ECHO_ADDR:-127.0.0.1:9999}
mkdir -p "$dir"

# On Ctrl-C (or SIGTERM) every process stops cleanly (SIGTERM), the roles
# first and the broker last: they leave their groups and flush to it.
pids=()
stop() {
	[ ${#pids[@]} -gt 0 ] || return 0
	kill "${pids[@]:1}" 2>/dev/null || true
	wait "${pids[@]:1}" 2>/dev/null || true
	kill "${pids[0]}" 2>/dev/null || true
	wait 2>/dev/null || true
}
trap stop EXIT
trap 'exit 0' INT TERM

# start NAME ARGS...: runs chime ARGS in the background, logging to
# DIR/NAME.log; its process id is in DIR/NAME.pid.
start() {
	local name=$1
	shift
	"$chime" "$@" >"$dir/$name.log" 2>&1 &
	pids+=($!)
	echo $! >"$dir/$name.pid"
}

# await NAME TEXT: waits until DIR/NAME.log shows TEXT (two minutes at most).
await() {
	for _ in $(seq 600); do
		grep -q "$2" "$dir/$1.log" && return
		sleep 0.2
	done
	echo "$1 did not log $2 within two minutes; see $dir/$1.log" >&2
	exit 1
}

# The broker. It writes its address and the credential its clients
# authenticate with into its state dir.
start broker broker --state-dir "$dir/broker"
await broker 'msg="broker ready"'
CHIME_BROKERS=$(cat "$dir/broker/kafka-brokers")
CHIME_KAFKA_SASL_USER=chime
CHIME_KAFKA_SASL_PASSWORD=$(cut -d: -f2 "$dir/broker/kafka-credential")
export CHIME_BROKERS CHIME_KAFKA_SASL_USER CHIME_KAFKA_SASL_PASSWORD

# Secrets the processes share, kept for the next run: the admin token (the
# API's, and chime client's) and the query secret (the API signs its job
# reads to the schedulers with it).
for secret in admin-token query-secret; do
	[ -s "$dir/$secret" ] || head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$dir/$secret"
done
CHIME_ADMIN_TOKEN=$(cat "$dir/admin-token")
CHIME_QUERY_SECRET=$(cat "$dir/query-secret")
export CHIME_ADMIN_TOKEN CHIME_QUERY_SECRET

# The dispatcher's SSRF guard refuses callbacks to 127.0.0.0/8 and ::1
# unless told: this machine's chime echo is such a callback.
export CHIME_DISPATCHER_ALLOW_LOOPBACK=true

# Every role, each with a state dir of its own. The sink starts a local
# ClickHouse under its state dir; the API reads analytics from it.
start scheduler scheduler --state-dir "$dir/scheduler"
start dispatcher dispatcher --state-dir "$dir/dispatcher"
start breaker breaker --state-dir "$dir/breaker"
start sink sink --state-dir "$dir/sink"
await sink 'msg="local ClickHouse started"'
CHIME_CLICKHOUSE_DSN=$(grep -o 'CHIME_CLICKHOUSE_DSN=[^ ]*' "$dir/sink.log" | head -1 | cut -d= -f2-)
CHIME_CLICKHOUSE_PASSWORD=$(cut -d: -f2 "$dir/sink/clickhouse-credential")
export CHIME_CLICKHOUSE_DSN CHIME_CLICKHOUSE_PASSWORD
start api api --state-dir "$dir/api" --addr "$api_addr"
start echo echo -addr "$echo_addr"
await scheduler 'msg="scheduler ready"'
await dispatcher 'msg="dispatcher consuming"'
await breaker 'msg="breaker ready"'
await sink 'msg="analytics sink consuming"'
await api 'msg="api ready"'
# What the roles were started with, for restarting one of them by hand.
export -p | grep ' CHIME_' >"$dir/env"

# The check: a namespace, a job that calls chime echo two seconds later,
# and the namespace's stats from ClickHouse.
export CHIME_API_URL=http://$api_addr
"$chime" client ns-put acme >/dev/null
"$chime" client schedule acme '{"id": "hello", "schedule": {"in": "2s"}, "callback": {"url": "http://'"$echo_addr"'/hook", "body": {"hello": "chime"}}}' >/dev/null
await echo 'POST /hook'
"$chime" client stats acme
echo "every role is up in $dir; chime client reads the admin token with --state-dir $dir; Ctrl-C stops them"
wait
