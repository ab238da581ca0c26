# shellcheck shell=bash disable=SC2034 # the ports and versions are used by the scripts that source this file
# Shared helpers of the local stack scripts (up.sh, down.sh, mariadb.sh,
# init.sh). Sourced, never run. Everything the stack keeps (pids, logs, data
# of Prometheus and Kafka) lives under .cache/stack/ of the checkout; MariaDB
# keeps Debian's data directory /var/lib/mysql.

STACK_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
STACK_DIR=${SLUICE_STACK_DIR:-$STACK_ROOT/.cache/stack}
STACK_LOG=$STACK_DIR/log
STACK_RUN=$STACK_DIR/run
STACK_BIN=$STACK_ROOT/.cache/bin

MOTO_PORT=4566
ELASTICMQ_PORT=9324
MARIADB_PORT=3306
PROMETHEUS_PORT=9090
EXPORTER_PORT=9256
KAFKA_PORT=9092
KAFKA_CONTROLLER_PORT=9093

# RIE_VERSION is the pinned Lambda Runtime Interface Emulator (a pseudo-version:
# the project publishes no tagged module versions the Go proxy serves).
RIE_VERSION=v0.0.0-20261030222936-bef5c4ba774d

export DEBIAN_FRONTEND=noninteractive

# Where the machine image keeps moto_server, aws and go, should PATH lack them.
for d in "$HOME/.pyenv/shims" /usr/local/go/bin "$HOME/go/bin"; do
	[[ -d $d && :$PATH: != *:$d:* ]] && PATH=$PATH:$d
done
export PATH

# pip_install PKG...: pip into the current python3 (Debian's own python3
# refuses without --break-system-packages, PEP 668).
pip_install() {
	python3 -m pip install -q "$@" >>"$STACK_LOG/pip.log" 2>&1 ||
		python3 -m pip install -q --break-system-packages "$@" >>"$STACK_LOG/pip.log" 2>&1
}

mkdir -p "$STACK_LOG" "$STACK_RUN" "$STACK_BIN"

stack_t0=$(date +%s.%N)

# log prints a progress line on stderr.
log() { printf '[stack %5.1fs] %s\n' "$(elapsed "$stack_t0")" "$*" >&2; }

# die prints an error and exits 1.
die() {
	printf '[stack] ERROR: %s\n' "$*" >&2
	exit 1
}

# elapsed T0 prints the seconds since T0 (a `date +%s.%N` value).
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# port_open PORT succeeds when something accepts TCP connections on 127.0.0.1:PORT.
port_open() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# port_holder PORT prints the pid of the process listening on PORT (TCP), or
# nothing when the port is free.
port_holder() {
	local line
	line=$(ss -Hltnp "sport = :$1" 2>/dev/null | head -n1) || true
	if [[ $line =~ pid=([0-9]+) ]]; then
		echo "${BASH_REMATCH[1]}"
	elif [[ -n $line ]] || port_open "$1"; then
		echo "?"
	fi
}

# stack_lock serialises up.sh, down.sh and mariadb.sh across checkouts (the
# services and their ports are machine-wide): one at a time, others wait.
stack_lock() {
	local f=${SLUICE_STACK_LOCK:-/tmp/sluice-stack.lock}
	exec 9>>"$f"
	if ! flock -n 9; then
		log "waiting for another up.sh/down.sh/mariadb.sh (lock $f)"
		flock -w 900 9 || die "lock $f still held after 900s"
	fi
}

# pid_cmd PID prints the command line of PID on one line.
pid_cmd() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null; }

# pid_desc PID prints the start of PID's command line, for messages.
pid_desc() { pid_cmd "$1" | cut -c1-160; }

# pid_alive PID succeeds when PID is a live (non-zombie) process.
pid_alive() {
	[[ -n $1 && $1 != "?" ]] && kill -0 "$1" 2>/dev/null || return 1
	local state
	state=$(awk '/^State:/ { print $2 }' "/proc/$1/status" 2>/dev/null)
	[[ $state != Z ]]
}

# pid_ours PID succeeds when PID was started by this checkout's up.sh (the
# daemons inherit SLUICE_STACK_DIR=<this stack dir>).
pid_ours() { tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | grep -qxF "SLUICE_STACK_DIR=$STACK_DIR"; }

# pidfile_pid NAME prints the recorded pid of service NAME if it is alive.
pidfile_pid() {
	local f=$STACK_RUN/$1.pid pid
	[[ -f $f ]] || return 1
	pid=$(<"$f")
	if pid_alive "$pid"; then
		echo "$pid"
	else
		rm -f "$f"
		return 1
	fi
}

# start_daemon NAME CMD... starts CMD in a new session in the background,
# output appended to the service's log, and records its pid.
start_daemon() {
	local name=$1
	shift
	printf '\n==== %s: %s\n' "$(date -u +%FT%TZ)" "$*" >>"$STACK_LOG/$name.log"
	# A daemon runs at nice 0 even when up.sh runs under `nice` (MariaDB is the
	# plant whose CPU the lab measures). fd 9 (the stack lock) is closed so
	# that the daemon does not hold the lock.
	local renice=()
	(($(nice) != 0 && $(id -u) == 0)) && renice=(nice -n "$((-$(nice)))")
	SLUICE_STACK_DIR=$STACK_DIR "${renice[@]}" setsid "$@" >>"$STACK_LOG/$name.log" 2>&1 </dev/null 9>&- &
	echo $! >"$STACK_RUN/$name.pid"
}

# stop_pid NAME PID [TIMEOUT] stops PID and its process group: SIGTERM, then
# SIGKILL after TIMEOUT seconds (default 20).
stop_pid() {
	local name=$1 pid=$2 timeout=${3:-20} i
	pid_alive "$pid" || return 0
	log "$name: stopping pid $pid"
	if [[ $(ps -o pgid= -p "$pid" 2>/dev/null | tr -d ' ') == "$pid" ]]; then
		kill -TERM -- "-$pid" 2>/dev/null || true
	else
		kill -TERM "$pid" 2>/dev/null || true
	fi
	for ((i = 0; i < timeout * 5; i++)); do
		pid_alive "$pid" || return 0
		sleep 0.2
	done
	log "$name: pid $pid did not stop in ${timeout}s: SIGKILL"
	kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
	for ((i = 0; i < 25; i++)); do
		pid_alive "$pid" || return 0
		sleep 0.2
	done
	die "$name: pid $pid survives SIGKILL"
}

# wait_ready NAME TIMEOUT PID CHECK... waits until CHECK succeeds; fails early
# when PID (if not empty) dies, showing the end of the service's log.
wait_ready() {
	local name=$1 timeout=$2 pid=$3 t0
	shift 3
	t0=$(date +%s)
	while ! "$@" >/dev/null 2>&1; do
		if [[ -n $pid ]] && ! pid_alive "$pid"; then
			show_log "$name"
			log "$name: process $pid exited before it was ready (log: $STACK_LOG/$name.log)"
			return 1
		fi
		if (($(date +%s) - t0 >= timeout)); then
			show_log "$name"
			log "$name: not ready after ${timeout}s (log: $STACK_LOG/$name.log)"
			return 1
		fi
		sleep 0.3
	done
}

# show_log NAME prints the last lines of a service's log on stderr.
show_log() {
	[[ -f $STACK_LOG/$1.log ]] || return 0
	printf -- '---- last lines of %s\n' "$STACK_LOG/$1.log" >&2
	tail -n 25 "$STACK_LOG/$1.log" >&2
	printf -- '----\n' >&2
}

# http_ok URL succeeds when URL answers 2xx.
http_ok() { curl -fsS -o /dev/null --max-time 3 "$1"; }

apt_updated=0

# apt_install PKG... installs Debian packages that are missing, without
# starting their services (policy-rc.d), updating the package lists once when
# a package is unknown or an install fails.
apt_install() {
	local missing=() p
	for p in "$@"; do
		[[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == "install ok installed" ]] || missing+=("$p")
	done
	((${#missing[@]})) || return 0
	command -v apt-get >/dev/null || die "cannot install ${missing[*]}: apt-get not found (install them by hand)"
	[[ $(id -u) == 0 ]] || die "cannot install ${missing[*]}: not root (run as root or install them by hand)"
	local policy_created=0
	if [[ ! -e /usr/sbin/policy-rc.d ]]; then
		printf '#!/bin/sh\n# created by sluice localstack/stack/up.sh while installing packages\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 755 /usr/sbin/policy-rc.d
		policy_created=1
	fi
	local t0 rc=0 mark=0
	t0=$(date +%s.%N)
	[[ -f $STACK_LOG/apt.log ]] && mark=$(wc -l <"$STACK_LOG/apt.log")
	for p in "${missing[@]}"; do
		if [[ $apt_updated == 0 && ! $(apt-cache policy "$p" 2>/dev/null) =~ Candidate:\ [^\(] ]]; then
			apt_update
		fi
	done
	log "apt: installing ${missing[*]}"
	if ! apt_get install -y -q --no-install-recommends "${missing[@]}" >>"$STACK_LOG/apt.log" 2>&1; then
		if [[ $apt_updated == 0 ]]; then
			apt_update
			apt_get install -y -q --no-install-recommends "${missing[@]}" >>"$STACK_LOG/apt.log" 2>&1 || rc=$?
		else
			rc=1
		fi
	fi
	[[ $policy_created == 1 ]] && rm -f /usr/sbin/policy-rc.d
	if [[ $rc != 0 ]]; then
		tail -n +"$((mark + 1))" "$STACK_LOG/apt.log" | tail -n 20 >&2
		die "cannot install Debian packages ${missing[*]} (log: $STACK_LOG/apt.log)"
	fi
	log "apt: installed ${missing[*]} in $(elapsed "$t0")s"
}

apt_get() { apt-get -o DPkg::Lock::Timeout=600 -o Acquire::Retries=3 "$@"; }

apt_update() {
	log "apt: apt-get update"
	apt_get update -q >>"$STACK_LOG/apt.log" 2>&1 || die "apt-get update failed (log: $STACK_LOG/apt.log)"
	apt_updated=1
}

# moto_cmd prints the command that runs moto's server: localstack/moto_serial.py,
# moto's application one request at a time (its DynamoDB transactions are not
# atomic under concurrent requests; see the script).
moto_cmd() {
	if python3 -c 'import moto.server, werkzeug' 2>/dev/null; then
		echo python3 "$STACK_ROOT/localstack/moto_serial.py"
	else
		return 1
	fi
}

# mariadb_root runs the mariadb client as root over the unix socket.
mariadb_root() { mariadb --protocol=socket -uroot "$@"; }

# mariadb_pid prints the pid of the running mariadbd, if any: recorded by
# up.sh, else the listener on 3306 when it is a mariadbd.
mariadb_pid() {
	local pid
	if pid=$(pidfile_pid mariadb); then
		echo "$pid"
		return 0
	fi
	pid=$(port_holder "$MARIADB_PORT")
	if [[ -n $pid && $pid != "?" && $(pid_cmd "$pid") =~ (mariadbd|mysqld) ]]; then
		echo "$pid"
		return 0
	fi
	return 1
}

# mariadb_ready succeeds when MariaDB answers over its socket and TCP port.
mariadb_ready() { mariadb-admin --protocol=socket -uroot --connect-timeout=2 ping >/dev/null 2>&1 && port_open "$MARIADB_PORT"; }

# mariadb_launch starts mariadbd in the background, initialising its data
# directory if needed, and records its pid.
mariadb_launch() {
	[[ -x /usr/sbin/mariadbd ]] || die "mariadb: /usr/sbin/mariadbd not found (run localstack/stack/up.sh mariadb)"
	id mysql >/dev/null 2>&1 || die "mariadb: user mysql missing (reinstall mariadb-server)"
	mkdir -p /run/mysqld
	chown mysql:mysql /run/mysqld
	if [[ ! -d /var/lib/mysql/mysql ]]; then
		log "mariadb: initialising /var/lib/mysql"
		mkdir -p /var/lib/mysql
		chown mysql:mysql /var/lib/mysql
		mariadb-install-db --user=mysql --datadir=/var/lib/mysql --skip-test-db >>"$STACK_LOG/mariadb.log" 2>&1 ||
			die "mariadb: mariadb-install-db failed (log: $STACK_LOG/mariadb.log)"
	fi
	start_daemon mariadb /usr/sbin/mariadbd --user=mysql --bind-address=127.0.0.1 --port="$MARIADB_PORT" \
		--skip-name-resolve --max-connections=500
}

# mariadb_start starts mariadbd and waits until it answers.
mariadb_start() {
	mariadb_launch
	wait_ready mariadb 60 "$(<"$STACK_RUN/mariadb.pid")" mariadb_ready
}

# mariadb_stop stops the running mariadbd (SIGTERM: a clean shutdown) and
# waits until it is gone.
mariadb_stop() {
	local pid
	pid=$(mariadb_pid) || return 0
	stop_pid mariadb "$pid" 60
	rm -f "$STACK_RUN/mariadb.pid"
}

# maven_jars NAME POM DIR fetches the runtime jars that POM depends on into
# DIR with Maven, once per version of POM (its checksum is kept in DIR).
maven_jars() {
	local name=$1 pom=$2 dir=$3 sum t0
	sum=$(sha256sum "$pom" | cut -d' ' -f1)
	if [[ -f $dir/.pom.sha256 && $(<"$dir/.pom.sha256") == "$sum" ]]; then
		return 0
	fi
	command -v java >/dev/null || apt_install openjdk-17-jre-headless
	command -v mvn >/dev/null || apt_install maven
	t0=$(date +%s.%N)
	log "$name: fetching jars with Maven"
	rm -rf "$dir.tmp"
	mvn -q -B -f "$pom" dependency:copy-dependencies -DoutputDirectory="$dir.tmp" \
		>>"$STACK_LOG/$name-mvn.log" 2>&1 || {
		tail -n 30 "$STACK_LOG/$name-mvn.log" >&2
		die "$name: Maven could not fetch the jars of $pom (log: $STACK_LOG/$name-mvn.log)"
	}
	echo "$sum" >"$dir.tmp/.pom.sha256"
	rm -rf "$dir"
	mv "$dir.tmp" "$dir"
	log "$name: $(find "$dir" -name '*.jar' | wc -l) jars fetched in $(elapsed "$t0")s"
}

# sqs_server prints the service that serves SQS: elasticmq (the default) or
# moto, from SLUICE_SQS.
sqs_server() {
	case ${SLUICE_SQS:-elasticmq} in
	elasticmq | moto) echo "${SLUICE_SQS:-elasticmq}" ;;
	localstack)
		printf '[stack] ERROR: SLUICE_SQS=localstack: LocalStack serves SQS under Docker (make up-docker); up.sh serves it from elasticmq or moto\n' >&2
		return 1
		;;
	*)
		printf '[stack] ERROR: SLUICE_SQS=%s: want elasticmq or moto\n' "$SLUICE_SQS" >&2
		return 1
		;;
	esac
}

# sqs_port SERVER prints the port of the SQS server SERVER (elasticmq, moto).
sqs_port() { if [[ $1 == moto ]]; then echo "$MOTO_PORT"; else echo "$ELASTICMQ_PORT"; fi; }

# sqs_endpoint SERVER prints the endpoint URL of the SQS server SERVER.
sqs_endpoint() { echo "http://127.0.0.1:$(sqs_port "$1")"; }

# elasticmq_ready succeeds when ElasticMQ answers an SQS ListQueues.
elasticmq_ready() { http_ok "http://127.0.0.1:$ELASTICMQ_PORT/?Action=ListQueues&Version=2012-11-05"; }
