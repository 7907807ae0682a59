# shellcheck shell=bash
# scripts/bench's CONNECTIONS=1 mode: what a new connection and an idle one cost, apns-mock (and a
# BASELINE build, when given) against nghttpd, in one run. Sourced by scripts/bench once nghttpd is
# up and start_mock is defined; see the top of scripts/bench for the settings.
#
# 1. Idle memory, on servers that have served nothing yet (a server that has freed the heap of
#    earlier connections would place new ones in pages already resident, and apns-mock gives freed
#    memory back after a burst where nghttpd keeps it): each server is warmed up with a few
#    connections, then hold-connections.py opens IDLE connections in stages (1000, then up to
#    10000): TLS, the HTTP/2 preface and SETTINGS, until the server acknowledged them. The growth
#    of the server's VmRSS over its size before the first stage, divided by the connections open,
#    is its resident memory per idle connection: read at once (half a second after the stage), and
#    settled, 12 s later (an allocator may give freed pages back late: nghttpd's jemalloc purges
#    them after 10 s). The holder then checks that the server closed none of them.
# 2. CPU per new connection: ROUNDS rounds, alternating between the servers; in each, h2load opens
#    CONNECTIONS_PER_ROUND connections, RATE per 100 ms, each carrying one push (TLS handshake,
#    preface and SETTINGS, one request, close). The server's CPU (the run time of its threads,
#    /proc/<pid>/task/*/schedstat) over the round, divided by the connections, and the connections
#    per second h2load saw. At a rate below what a server sustains, connections per second only
#    says it kept up; 1 s / CPU per connection is how many one core would sustain.
# 3. Instructions per new connection (unless INSTRUCTIONS=0): each server again, alone, under
#    callgrind; after a warm-up, the user-space instructions over INSTRUCTION_CONNECTIONS
#    connections (one push each, RATE_UNDER_VALGRIND per 100 ms), divided by them. PROFILE_DIR
#    keeps the profiles (callgrind_annotate --inclusive=yes shows where a connection goes).

PER_ROUND=${CONNECTIONS_PER_ROUND:-2000}
RATE=${RATE:-50}
IDLE=${IDLE:-1000 10000}
INSTRUCTION_CONNECTIONS=${INSTRUCTION_CONNECTIONS:-300}
RATE_UNDER_VALGRIND=${RATE_UNDER_VALGRIND:-1}

# apns-mock with its defaults (one stream before a token: h2load's -m 1 needs no more), room for
# the idle connections, and a small ring (the pushes are not what is measured).
largest_idle=$(printf '%s\n' $IDLE | sort -n | tail -1)
printf 'server: { maxConnections: %d }\nrecording: { capacity: 1000 }\n' "$((largest_idle + 100))" >"$work/mock.yaml"

# Servers measured: "name port pid" lines, nghttpd first.
servers=("nghttpd $nghttpd_port $nghttpd_pid")
# shellcheck disable=SC2086 # EXTRA_MOCK_ARGS is a list of arguments
start_mock mock ${EXTRA_MOCK_ARGS:-}
servers+=("apns-mock $started_port $started_pid")
if [ -n "${BASELINE:-}" ]; then
    # shellcheck disable=SC2086
    start_binary=$BASELINE start_mock baseline ${EXTRA_MOCK_ARGS:-}
    servers+=("baseline $started_port $started_pid")
fi
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$nghttpd_port") 2>/dev/null && break; sleep 0.1; done

# One h2load run of `count` new connections with one push each against a port, `rate` opened per
# 100 ms; prints the connections per second, fails unless every push got a 2xx.
connection_load() {
    local port=$1 count=$2 rate=${3:-$RATE} out
    [ "$rate" -le "$count" ] || rate=$count  # h2load's rule
    out=$(h2load -n "$count" -c "$count" -m 1 -t 1 --rate "$rate" --rate-period 100ms -d "$work/payload.json" \
        -H "authorization: bearer $jwt" -H 'apns-topic: com.example.app' -H 'apns-push-type: alert' \
        "https://127.0.0.1:$port/3/device/$token" 2>&1) || true
    if ! grep -q "status codes: $count 2xx" <<<"$out"; then
        echo "h2load against port $port did not get $count successes:" >&2
        echo "$out" | tail -8 >&2
        exit 1
    fi
    sed -n 's/^finished in .*, \([0-9.]*\) req\/s.*/\1/p' <<<"$out"
}
# Nanoseconds the process's threads have run so far.
run_time() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'; }
resident_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "connections: idle memory at $(echo $IDLE | tr ' ' ','), then $ROUNDS rounds of $PER_ROUND new connections ($RATE per 100 ms, one push each); servers: $THREADS thread(s)"

# 1. Idle memory.
declare -A idle_kb
for server in "${servers[@]}"; do
    read -r name port pid <<<"$server"
    connection_load "$port" 20 >/dev/null
    sleep 0.5
    before=$(resident_kb "$pid")
    coproc holder { python3 scripts/bench-support/hold-connections.py "$port" "$work/certs/ca.pem" $IDLE; }
    for count in $IDLE; do
        read -r _ held <&"${holder[0]}" || { echo "holding connections to $name failed" >&2; exit 1; }
        [ "$held" = "$count" ] || { echo "holding connections to $name: held $held, not $count" >&2; exit 1; }
        sleep 0.5
        at_once=$(resident_kb "$pid")
        sleep 12
        settled=$(resident_kb "$pid")
        idle_kb[$name.$count]=$(awk -v b="$before" -v d="$at_once" -v c="$count" 'BEGIN { printf "%.1f", (d - b) / c }')
        idle_kb[$name.$count.settled]=$(awk -v b="$before" -v d="$settled" -v c="$count" 'BEGIN { printf "%.1f", (d - b) / c }')
        echo >&"${holder[1]}"
        read -r _ open <&"${holder[0]}" || { echo "holding connections to $name failed" >&2; exit 1; }
        [ "$open" = "$count" ] || { echo "$name closed $((count - open)) of the $count idle connections" >&2; exit 1; }
    done
    holder_pid=$holder_PID holder_in=${holder[1]}
    exec {holder_in}>&-
    wait "$holder_pid" 2>/dev/null || true
done
for count in $IDLE; do
    for when in '' .settled; do
        printf 'resident memory per idle connection, %d open, %s:' "$count" "$([ -z "$when" ] && echo 'read at once' || echo 'settled')"
        for server in "${servers[@]}"; do
            read -r name _ <<<"$server"
            printf '   %s %s kB' "$name" "${idle_kb[$name.$count$when]}"
            [ "$name" = nghttpd ] || printf ' (%.2f of nghttpd)' \
                "$(awk -v m="${idle_kb[$name.$count$when]}" -v n="${idle_kb[nghttpd.$count$when]}" 'BEGIN { print m / n }')"
        done
        printf '\n'
    done
done
sleep 2  # the held connections' closing settles

# 2. CPU per new connection.
declare -A cpu_list rate_list
for server in "${servers[@]}"; do
    read -r name port _ <<<"$server"
    connection_load "$port" "$((PER_ROUND / 10))" >/dev/null  # warm-up, not counted
done
mock_vs_nghttpd=()
mock_vs_baseline=()
for round in $(seq "$ROUNDS"); do
    declare -A this_round=()
    printf 'round %d:' "$round"
    for server in "${servers[@]}"; do
        read -r name port pid <<<"$server"
        before=$(run_time "$pid")
        rate=$(connection_load "$port" "$PER_ROUND")
        after=$(run_time "$pid")
        cpu=$(awk -v a="$after" -v b="$before" -v n="$PER_ROUND" 'BEGIN { printf "%.1f", (a - b) / 1000 / n }')
        this_round[$name]=$cpu
        cpu_list[$name]+="$cpu "
        rate_list[$name]+="$rate "
        printf '   %s %6.0f conn/s %6.1f us CPU/conn' "$name" "$rate" "$cpu"
    done
    printf '\n'
    mock_vs_nghttpd+=("$(awk -v m="${this_round[apns-mock]}" -v n="${this_round[nghttpd]}" 'BEGIN { print m / n }')")
    [ -z "${BASELINE:-}" ] || mock_vs_baseline+=("$(awk -v m="${this_round[apns-mock]}" -v b="${this_round[baseline]}" 'BEGIN { print m / b }')")
done
printf 'median over rounds:'
for server in "${servers[@]}"; do
    read -r name _ <<<"$server"
    cpu=$(printf '%s\n' ${cpu_list[$name]} | median)
    printf '   %s %6.0f conn/s, %6.1f us CPU/conn (%.0f conn/s per core)' "$name" \
        "$(printf '%s\n' ${rate_list[$name]} | median)" "$cpu" "$(awk -v c="$cpu" 'BEGIN { print 1e6 / c }')"
done
printf '\n'
printf 'CPU per new connection, apns-mock / nghttpd, paired by round (median of %d): %.3f\n' \
    "${#mock_vs_nghttpd[@]}" "$(printf '%s\n' "${mock_vs_nghttpd[@]}" | median)"
[ -z "${BASELINE:-}" ] || printf 'CPU per new connection, apns-mock / baseline, paired by round (median of %d): %.3f\n' \
    "${#mock_vs_baseline[@]}" "$(printf '%s\n' "${mock_vs_baseline[@]}" | median)"

# 3. Instructions per new connection.
[ "$INSTRUCTIONS" = 0 ] && exit 0
if [ -n "$instructions_missing" ]; then
    echo "instructions per connection: not counted ($instructions_missing)"
    exit 0
fi
for server in "${servers[@]}"; do
    read -r _ _ pid <<<"$server"
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
done
# Counts the server under callgrind with this pid over INSTRUCTION_CONNECTIONS connections.
count_connection_instructions() {
    local pid=$1 port=$2 name=$3 dump
    connection_load "$port" 20 "$RATE_UNDER_VALGRIND" >/dev/null
    callgrind_control -i on "$pid" >/dev/null 2>&1
    callgrind_control -z "$pid" >/dev/null 2>&1
    connection_load "$port" "$INSTRUCTION_CONNECTIONS" "$RATE_UNDER_VALGRIND" >/dev/null
    callgrind_control -d "$pid" >/dev/null 2>&1
    callgrind_control -i off "$pid" >/dev/null 2>&1
    dump=$(ls -t "$work/callgrind.$pid".* | head -1)
    [ -z "${PROFILE_DIR:-}" ] || { mkdir -p "$PROFILE_DIR"; cp "$dump" "$PROFILE_DIR/$name-connections.callgrind"; }
    awk -v n="$INSTRUCTION_CONNECTIONS" '/^(summary|totals):/ { printf "%.0f\n", $2 / n; exit }' "$dump"
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
port=$(free_port)
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/callgrind.%p" --log-file="$work/nghttpd.valgrind" \
    nghttpd -n "$THREADS" -d "$work/docroot" "$port" "$work/certs/server-key.pem" "$work/certs/server.pem" >/dev/null 2>&1 &
pids+=($!)
pid=$!
for _ in $(seq 300); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
declare -A instructions
instructions[nghttpd]=$(count_connection_instructions "$pid" "$port" nghttpd)
for server in "${servers[@]}"; do
    read -r name _ <<<"$server"
    [ "$name" != nghttpd ] || continue
    binary=$mock
    [ "$name" != baseline ] || binary=$BASELINE
    # shellcheck disable=SC2086
    start_binary=$binary start_callgrind_out="$work/callgrind.%p" start_mock "$name-callgrind" ${EXTRA_MOCK_ARGS:-}
    instructions[$name]=$(count_connection_instructions "$started_pid" "$started_port" "$name")
done
printf 'instructions per new connection (callgrind, %d connections after a warm-up; user space):' "$INSTRUCTION_CONNECTIONS"
for server in "${servers[@]}"; do
    read -r name _ <<<"$server"
    printf '   %s %d' "$name" "${instructions[$name]}"
    [ "$name" = nghttpd ] || printf ' (%.3f of nghttpd)' "$(awk -v m="${instructions[$name]}" -v n="${instructions[nghttpd]}" 'BEGIN { print m / n }')"
done
printf '\n'
