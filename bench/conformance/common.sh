# Shared by the conformance scripts (sourced): the bitcase command, bounded waits, server cleanup.
bitcase=(${PYTHON:-python3} -m assurance.cli)
servers=()

# wait_up URL SECONDS LOG PID: poll URL until it answers 200; fail with the log's tail after SECONDS
# or as soon as the server process PID exits.
wait_up() {
  local url=$1 limit=$2 log=$3 pid=$4 started=$SECONDS
  until curl -sf -o /dev/null --max-time 5 "$url"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "the server exited before answering $url; its log ends:" >&2; tail -20 "$log" >&2; return 1
    fi
    if (( SECONDS - started > limit )); then
      echo "no answer from $url within $limit s; the server's log ends:" >&2; tail -20 "$log" >&2; return 1
    fi
    sleep 1
  done
  echo "up after $(( SECONDS - started )) s: $url" >&2
}

# stop_server PID: SIGTERM, then SIGKILL after 30 s.
stop_server() {
  local pid=$1 i
  kill "$pid" 2>/dev/null || return 0
  for i in $(seq 30); do kill -0 "$pid" 2>/dev/null || return 0; sleep 1; done
  echo "the server ($pid) ignored SIGTERM for 30 s; killing it" >&2
  kill -9 "$pid" 2>/dev/null || true
}

stop_all() { local p; for p in "${servers[@]}"; do stop_server "$p"; done; }
trap stop_all EXIT
