#!/usr/bin/env bash
# replica.sh runs a private MariaDB primary and a replica that replicates
# from it on loopback, for `make e2e-replica` (internal/e2e/replica). It never
# touches the stack's MariaDB on 3306.
#
#   replica.sh start    start (initialising on first use) the primary on
#                       127.0.0.1:3316, the replica on 127.0.0.1:3317 and a
#                       private Prometheus on 127.0.0.1:9097 scraping the
#                       replica's lag exporter (127.0.0.1:9318, served by
#                       the e2e harness) and the stack's process exporter
#   replica.sh cap      cap the replica's CPU (below)
#   replica.sh uncap    remove the cap (the harness loads its schema uncapped)
#   replica.sh stop     stop them all (clean shutdown); the data stays
#   replica.sh reset    stop, then remove the data directories
#   replica.sh status   exit 0 when both answer and the replica's IO and SQL
#                       threads run
#
# The primary: binary log in ROW format, GTID, durable (sync_binlog=1,
# innodb_flush_log_at_trx_commit=1; log_bin_trust_function_creators=1 so
# that the harness user creates the workload's triggers). The replica: GTID replication from the
# primary (CHANGE MASTER TO ... MASTER_USE_GTID=slave_pos), read-only,
# single-threaded apply (slave_parallel_threads=0: one SQL thread applies
# every transaction in order, while the primary runs the consumers'
# transactions concurrently), durable like the primary (sync_relay_log=1,
# sync_relay_log_info=1, sync_master_info=1), with a redo log of 1 GB (with
# the default 96 MB the checkpoint age was past the adaptive flushing's low
# water mark a minute into a run: the page cleaner's flushing would share the
# CPU cap with the SQL thread), and a CPU cap of
# SLUICE_REPLICA_CPU percent of one core (default 5; `replica.sh cap`): a
# CFS quota of a cgroup of its own, or cpulimit where no cgroup can be made:
# a much smaller machine than the primary. Both servers
# accept sluice:sluice (databases sluice_*, plus replication monitoring and
# control on the replica for the harness).
#
# Data, logs and pids: .cache/stack/replica/, .cache/stack/log/, .cache/stack/run/.
set -euo pipefail
# shellcheck source=localstack/stack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REPLICA_DIR=$STACK_DIR/replica
PRIMARY_PORT=${SLUICE_REPLICA_PRIMARY_PORT:-3316}
REPLICA_PORT=${SLUICE_REPLICA_PORT:-3317}
REPLICA_PROM_PORT=${SLUICE_REPLICA_PROMETHEUS_PORT:-9097}
LAG_EXPORTER_PORT=${SLUICE_REPLICA_LAG_EXPORTER_PORT:-9318}
REPLICA_CPU=${SLUICE_REPLICA_CPU:-5}

# The names of the services in .cache/stack/run and .cache/stack/log.
P=mariadb-primary-$PRIMARY_PORT
R=mariadb-replica-$REPLICA_PORT
CAP=cpulimit-replica-$REPLICA_PORT
PROM=prometheus-replica-$REPLICA_PROM_PORT

sock() { echo "$REPLICA_DIR/$1/mysqld.sock"; }

# sql NAME ARGS...: the mariadb client as root over NAME's socket.
sql() {
	local name=$1
	shift
	mariadb --protocol=socket --socket="$(sock "$name")" -uroot "$@"
}

ready_primary() { mariadb-admin --socket="$(sock primary)" -uroot --connect-timeout=2 ping >/dev/null 2>&1 && port_open "$PRIMARY_PORT"; }
ready_replica() { mariadb-admin --socket="$(sock replica)" -uroot --connect-timeout=2 ping >/dev/null 2>&1 && port_open "$REPLICA_PORT"; }

# launch NAME PORT SERVICE FLAGS...: start one mariadbd with its own data
# directory (initialised on first use) and no option files.
launch() {
	local name=$1 port=$2 svc=$3 dir=$REPLICA_DIR/$1
	shift 3
	mkdir -p "$dir/data"
	chown -R mysql:mysql "$dir"
	if [[ ! -d $dir/data/mysql ]]; then
		log "$name: initialising $dir/data"
		mariadb-install-db --no-defaults --user=mysql --datadir="$dir/data" --skip-test-db \
			>>"$STACK_LOG/$svc.log" 2>&1 || die "$name: mariadb-install-db failed (log: $STACK_LOG/$svc.log)"
	fi
	start_daemon "$svc" /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$dir/data" \
		--socket="$(sock "$name")" --pid-file="$dir/mariadbd.pid" --bind-address=127.0.0.1 --port="$port" \
		--skip-name-resolve --max-connections=300 --innodb-buffer-pool-size=256M \
		--innodb-flush-log-at-trx-commit=1 --log-bin-trust-function-creators=1 "$@"
}

start_primary() {
	launch primary "$PRIMARY_PORT" "$P" --server-id=1 --log-bin=mysql-bin --binlog-format=ROW \
		--sync-binlog=1 --gtid-domain-id=0
}

start_replica() {
	launch replica "$REPLICA_PORT" "$R" --server-id=2 --relay-log=relay-bin --read-only \
		--slave-parallel-threads=0 --sync-relay-log=1 --sync-relay-log-info=1 --sync-master-info=1 \
		--innodb-log-file-size=1G
}

# The users, made on the primary and replicated: the first transactions of
# the binary log, so that the replica starting from an empty GTID position
# creates them too.
PROVISION="
CREATE USER IF NOT EXISTS 'repl'@'127.0.0.1' IDENTIFIED BY 'repl';
GRANT REPLICATION SLAVE ON *.* TO 'repl'@'127.0.0.1';
CREATE USER IF NOT EXISTS 'sluice'@'127.0.0.1' IDENTIFIED BY 'sluice';
GRANT ALL PRIVILEGES ON \`sluice\\_%\`.* TO 'sluice'@'127.0.0.1';
GRANT PROCESS, SLAVE MONITOR, REPLICATION SLAVE ADMIN, BINLOG MONITOR ON *.* TO 'sluice'@'127.0.0.1';
"

replicating() {
	local st
	st=$(sql replica -e 'SHOW SLAVE STATUS\G' 2>/dev/null) || return 1
	[[ $st == *"Slave_IO_Running: Yes"* && $st == *"Slave_SQL_Running: Yes"* ]]
}

# The replica's CPU cap is a CFS quota of its cgroup (precise, every
# thread of mariadbd) when this machine lets root make one (cgroup v2 with
# the cpu controller, or v1's cpu hierarchy), otherwise cpulimit (SIGSTOP /
# SIGCONT, coarser: it converges over seconds).
CGROUP_NAME=sluice-replica-$REPLICA_PORT

# cgroup_dir prints the cgroup of the cap (creating it) or fails.
cgroup_dir() {
	local d
	if [[ -f /sys/fs/cgroup/cgroup.controllers ]] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers; then
		d=/sys/fs/cgroup/$CGROUP_NAME
		grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null ||
			echo +cpu >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || return 1
		mkdir -p "$d" 2>/dev/null && [[ -f $d/cpu.max ]] || return 1
	elif [[ -d /sys/fs/cgroup/cpu && -w /sys/fs/cgroup/cpu ]]; then
		d=/sys/fs/cgroup/cpu/$CGROUP_NAME
		mkdir -p "$d" 2>/dev/null && [[ -f $d/cpu.cfs_quota_us ]] || return 1
	else
		return 1
	fi
	echo "$d"
}

# cap_start caps the replica's mariadbd at REPLICA_CPU percent of one core.
cap_start() {
	local pid d quota
	pid=$(pidfile_pid "$R") || die "replica: not running"
	quota=$(awk -v p="$REPLICA_CPU" 'BEGIN { q = int(p * 1000); if (q < 1000) q = 1000; print q }')
	if d=$(cgroup_dir); then
		if [[ -f $d/cpu.max ]]; then
			echo "$quota 100000" >"$d/cpu.max"
		else
			echo 100000 >"$d/cpu.cfs_period_us"
			echo "$quota" >"$d/cpu.cfs_quota_us"
		fi
		echo "$pid" >"$d/cgroup.procs"
		echo "$d" >"$STACK_RUN/$CAP.cgroup"
		log "replica: CPU capped at $REPLICA_CPU % of one core (cgroup $d: ${quota} us per 100 ms)"
		return 0
	fi
	[[ -x /usr/bin/cpulimit ]] || apt_install cpulimit
	start_daemon "$CAP" /usr/bin/cpulimit --pid="$pid" --limit="$REPLICA_CPU"
	log "replica: CPU capped at $REPLICA_CPU % of one core (cpulimit: no writable cgroup)"
}

prom_config() {
	cat <<EOF
# Generated by localstack/stack/replica.sh: the private Prometheus of
# make e2e-replica (1-s scrapes).
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
scrape_configs:
  - job_name: replica-lag
    static_configs:
      - targets: ["127.0.0.1:$LAG_EXPORTER_PORT"]
  - job_name: process-exporter
    static_configs:
      - targets: ["127.0.0.1:$EXPORTER_PORT"]
EOF
}

prom_ready() { http_ok "http://127.0.0.1:$REPLICA_PROM_PORT/-/ready"; }

prom_start() {
	mkdir -p "$REPLICA_DIR/prometheus"
	prom_config >"$REPLICA_DIR/prometheus.yml"
	start_daemon "$PROM" /usr/bin/prometheus --config.file="$REPLICA_DIR/prometheus.yml" \
		--storage.tsdb.path="$REPLICA_DIR/prometheus" --storage.tsdb.retention.time=1d \
		--web.listen-address="127.0.0.1:$REPLICA_PROM_PORT"
}

# up SERVICE PORT READY START: start SERVICE unless it runs; fail when its
# port is held by another program.
up() {
	local svc=$1 port=$2 ready=$3 start=$4 pid holder
	if pid=$(pidfile_pid "$svc") && wait_ready "$svc" 60 "$pid" "$ready"; then
		return 0
	fi
	holder=$(port_holder "$port")
	[[ -z $holder ]] || die "$svc: port $port is taken by pid $holder ($(pid_desc "$holder"))"
	"$start"
	wait_ready "$svc" 60 "$(<"$STACK_RUN/$svc.pid")" "$ready" || die "$svc: did not start"
	log "$svc: started (pid $(<"$STACK_RUN/$svc.pid"))"
}

start() {
	[[ -x /usr/sbin/mariadbd ]] || apt_install mariadb-server mariadb-client
	[[ -x /usr/bin/prometheus ]] || apt_install prometheus
	up "$P" "$PRIMARY_PORT" ready_primary start_primary
	sql primary -e "$PROVISION" || die "primary: cannot create the users"
	up "$R" "$REPLICA_PORT" ready_replica start_replica
	if ! replicating; then
		log "replica: CHANGE MASTER TO 127.0.0.1:$PRIMARY_PORT (GTID)"
		sql replica -e "STOP SLAVE; CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=$PRIMARY_PORT,
			MASTER_USER='repl', MASTER_PASSWORD='repl', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1;
			START SLAVE;" || die "replica: CHANGE MASTER TO failed"
		wait_ready "$R" 30 "" replicating || die "replica: not replicating (SHOW SLAVE STATUS on 127.0.0.1:$REPLICA_PORT)"
	fi
	up "$PROM" "$REPLICA_PROM_PORT" prom_ready prom_start
	log "replica: primary 127.0.0.1:$PRIMARY_PORT, replica 127.0.0.1:$REPLICA_PORT (replica.sh cap: $REPLICA_CPU % of one core), prometheus 127.0.0.1:$REPLICA_PROM_PORT"
}

uncap() {
	local pid
	if pid=$(pidfile_pid "$CAP"); then
		stop_pid "$CAP" "$pid" 10
	fi
	rm -f "$STACK_RUN/$CAP.pid"
	local d
	if [[ -f $STACK_RUN/$CAP.cgroup ]]; then
		d=$(<"$STACK_RUN/$CAP.cgroup")
		if [[ -f $d/cpu.max ]]; then echo "max 100000" >"$d/cpu.max"; else echo -1 >"$d/cpu.cfs_quota_us"; fi
		rm -f "$STACK_RUN/$CAP.cgroup"
	fi
	# cpulimit resumes the process it stops when it exits; make sure.
	if pid=$(pidfile_pid "$R"); then kill -CONT "$pid" 2>/dev/null || true; fi
}

stop() {
	local svc pid
	uncap
	for svc in "$PROM" "$R" "$P"; do
		if pid=$(pidfile_pid "$svc"); then
			stop_pid "$svc" "$pid" 60
		fi
		rm -f "$STACK_RUN/$svc.pid"
	done
	# The cap's cgroup, empty once the replica is gone.
	rmdir "/sys/fs/cgroup/$CGROUP_NAME" "/sys/fs/cgroup/cpu/$CGROUP_NAME" 2>/dev/null || true
}

case ${1:-} in
start)
	stack_lock
	start
	;;
stop)
	stack_lock
	stop
	;;
reset)
	stack_lock
	stop
	rm -rf "$REPLICA_DIR"
	;;
cap)
	uncap
	cap_start
	;;
uncap) uncap ;;
status) ready_primary && ready_replica && replicating ;;
*)
	echo "usage: $0 start|cap|uncap|stop|reset|status" >&2
	exit 2
	;;
esac
