#!/usr/bin/env bash
# up.sh starts the local stack without Docker, installing what is missing.
#
#   localstack/stack/up.sh [--record FILE] [SERVICE...]
#
# Services: moto (moto_server on 127.0.0.1:4566: DynamoDB, CloudWatch, and
# SQS when SLUICE_SQS=moto), elasticmq (ElasticMQ on 127.0.0.1:9324: SQS),
# mariadb (127.0.0.1:3306, database and user `sluice`), prometheus
# (Prometheus on 127.0.0.1:9090 and prometheus-process-exporter watching
# mariadbd on 127.0.0.1:9256), kafka (single-node KRaft broker on
# 127.0.0.1:9092, controller 9093), chromium (installed only: tests start it),
# rie (the Lambda Runtime Interface Emulator, installed only), all.
# Default: moto elasticmq mariadb prometheus rie. Once moto and the SQS server
# (ElasticMQ, or moto under SLUICE_SQS=moto) answer, localstack/init/*.sh
# run against them (init.sh), again whenever either was restarted.
#
# Idempotent: a service that already runs is left alone (also one started by
# hand, when the program on its port is the expected one); a half-started one
# is stopped and started again. A port taken by another program is an error.
# --record FILE appends the services this call started, for
# `down.sh $(cat FILE)`. State, logs and pids: .cache/stack/.
set -euo pipefail
# shellcheck source=localstack/stack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

record=
services=()
while (($#)); do
	case $1 in
	--record)
		record=${2:?--record needs a file}
		shift 2
		;;
	-h | --help)
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	all)
		services+=(moto elasticmq mariadb prometheus kafka chromium rie)
		shift
		;;
	moto | elasticmq | mariadb | prometheus | kafka | chromium | rie)
		services+=("$1")
		shift
		;;
	*) die "unknown service '$1' (moto elasticmq mariadb prometheus kafka chromium rie all)" ;;
	esac
done
((${#services[@]})) || services=(moto elasticmq mariadb prometheus rie)
sqs=$(sqs_server) || exit 1
stack_lock

started=()

# ensure NAME PORT MATCH READY START TIMEOUT: leaves a running NAME alone,
# otherwise frees a half-started one and calls START, then waits for READY;
# fails when it did not get ready (and exits when the port is taken).
# MATCH is a regular expression over the command line of the program that
# may legitimately hold PORT.
ensure() {
	local name=$1 port=$2 match=$3 ready=$4 start=$5 timeout=$6 pid holder t0
	if pid=$(pidfile_pid "$name"); then
		if wait_ready "$name" "$timeout" "$pid" "$ready" 2>/dev/null; then
			log "$name: already running (pid $pid)"
			return 0
		fi
		log "$name: pid $pid runs but is not ready: restarting it"
		stop_pid "$name" "$pid"
		rm -f "$STACK_RUN/$name.pid"
	fi
	holder=$(port_holder "$port")
	if [[ -n $holder ]]; then
		local cmd='' desc
		[[ $holder != "?" ]] && cmd=$(pid_cmd "$holder")
		desc=${cmd:0:160}
		[[ -n $cmd && $cmd =~ $match ]] ||
			die "$name: port $port is taken by pid $holder (${desc:-unknown program}); stop it or free the port"
		# The expected program holds the port (maybe still starting): wait for it.
		if wait_ready "$name" "$timeout" "$holder" "$ready" 2>/dev/null; then
			if pid_ours "$holder"; then
				echo "$holder" >"$STACK_RUN/$name.pid"
				log "$name: already running (pid $holder, pid file restored)"
			else
				log "$name: already running on port $port (pid $holder, not started by this checkout's up.sh: left alone)"
			fi
			return 0
		fi
		pid_ours "$holder" ||
			die "$name: pid $holder ($desc) holds port $port but does not answer; stop it or free the port"
		log "$name: pid $holder (ours, no pid file) holds port $port but is not ready: restarting it"
		stop_pid "$name" "$holder"
	fi
	t0=$(date +%s.%N)
	"$start"
	pid=$(<"$STACK_RUN/$name.pid")
	if ! wait_ready "$name" "$timeout" "$pid" "$ready"; then
		stop_pid "$name" "$pid" 10 || true
		rm -f "$STACK_RUN/$name.pid"
		log "$name: did not start"
		return 1
	fi
	log "$name: started (pid $pid) in $(elapsed "$t0")s"
	started+=("$name")
}

# ---- moto_server ----------------------------------------------------------

# The dashboard page is static: cheap however much state moto holds.
moto_ready() { http_ok "http://127.0.0.1:$MOTO_PORT/moto-api/"; }

moto_start() {
	local cmd
	cmd=$(moto_cmd) || die "moto: moto_server not found"
	# shellcheck disable=SC2086 # cmd is `python3 localstack/moto_serial.py`
	MOTO_ACCOUNT_ID=000000000000 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_DEFAULT_REGION=us-east-1 \
		start_daemon moto $cmd -H 127.0.0.1 -p "$MOTO_PORT"
}

up_moto() {
	if ! moto_cmd >/dev/null; then
		log "moto: moto_server not found: pip install 'moto[server]'"
		pip_install 'moto[server]' ||
			die "moto: cannot install moto[server] with pip (log: $STACK_LOG/pip.log)"
	fi
	if ! command -v aws >/dev/null; then
		log "moto: aws CLI not found: pip install awscli"
		pip_install awscli ||
			die "moto: cannot install awscli with pip (log: $STACK_LOG/pip.log)"
	fi
	# The Python client of the consumer protocol (clients/python) and its test.
	if ! python3 -c 'import boto3' 2>/dev/null; then
		log "moto: boto3 not found: pip install boto3"
		pip_install boto3 ||
			die "moto: cannot install boto3 with pip (log: $STACK_LOG/pip.log)"
	fi
	ensure moto "$MOTO_PORT" 'moto_server|moto\.server|moto_serial\.py' moto_ready moto_start 30 || die "moto: did not start"
}

# ---- ElasticMQ -------------------------------------------------------------

ELASTICMQ_HOME=$STACK_ROOT/.cache/elasticmq

elasticmq_start() {
	sed "s|@PORT@|$ELASTICMQ_PORT|g" "$STACK_ROOT/localstack/elasticmq/elasticmq.conf" >"$ELASTICMQ_HOME/elasticmq.conf"
	start_daemon elasticmq java -Xms64m -Xmx512m -XX:+UseSerialGC -Djava.awt.headless=true \
		-Dconfig.file="$ELASTICMQ_HOME/elasticmq.conf" -cp "$ELASTICMQ_HOME/lib/*" org.elasticmq.server.Main
}

up_elasticmq() {
	mkdir -p "$ELASTICMQ_HOME"
	maven_jars elasticmq "$STACK_ROOT/localstack/elasticmq/pom.xml" "$ELASTICMQ_HOME/lib"
	ensure elasticmq "$ELASTICMQ_PORT" 'org\.elasticmq\.server\.Main' elasticmq_ready elasticmq_start 60 ||
		die "elasticmq: did not start"
}

# ---- the init scripts ------------------------------------------------------

# init_aws applies localstack/init/*.sh once per pair of processes (moto and
# the SQS server keep everything in memory): again after either restarted,
# not on every up.sh. It needs moto (DynamoDB) and the SQS server running.
init_aws() {
	local moto_pid sqs_pid stamp=$STACK_RUN/aws.init key
	moto_pid=$(port_holder "$MOTO_PORT")
	sqs_pid=$(port_holder "$(sqs_port "$sqs")")
	if [[ -z $moto_pid || -z $sqs_pid ]]; then
		log "init: skipped (needs moto and $sqs running: up.sh moto $sqs)"
		return 0
	fi
	key="moto=$moto_pid $sqs=$sqs_pid"
	if [[ -f $stamp && $(<"$stamp") == "$key" ]]; then
		log "init: already applied to $key (run localstack/stack/init.sh to apply them again)"
		return 0
	fi
	AWS_ENDPOINT_URL_SQS=$(sqs_endpoint "$sqs") bash "$STACK_ROOT/localstack/stack/init.sh"
	echo "$key" >"$stamp"
}

# ---- MariaDB --------------------------------------------------------------

# The test user may create databases named sluice_* (one per test package).
MARIADB_PROVISION="
CREATE DATABASE IF NOT EXISTS sluice;
CREATE USER IF NOT EXISTS 'sluice'@'127.0.0.1' IDENTIFIED BY 'sluice';
CREATE USER IF NOT EXISTS 'sluice'@'localhost' IDENTIFIED BY 'sluice';
GRANT ALL PRIVILEGES ON \`sluice\`.* TO 'sluice'@'127.0.0.1', 'sluice'@'localhost';
GRANT ALL PRIVILEGES ON \`sluice\\_%\`.* TO 'sluice'@'127.0.0.1', 'sluice'@'localhost';
GRANT PROCESS ON *.* TO 'sluice'@'127.0.0.1', 'sluice'@'localhost';
DELETE FROM mysql.global_priv WHERE User = '';
FLUSH PRIVILEGES;
"

up_mariadb() {
	[[ -x /usr/sbin/mariadbd ]] || apt_install mariadb-server mariadb-client
	ensure mariadb "$MARIADB_PORT" 'mariadbd|mysqld' mariadb_ready mariadb_launch 60 || die "mariadb: did not start"
	mariadb_root -e "$MARIADB_PROVISION" || die "mariadb: cannot create database and user sluice"
	mariadb --protocol=tcp -h127.0.0.1 -P"$MARIADB_PORT" -usluice -psluice -e 'SELECT 1' sluice >/dev/null ||
		die "mariadb: user sluice cannot log in over TCP"
	log "mariadb: database sluice ready (sluice:sluice@tcp(127.0.0.1:$MARIADB_PORT)/sluice)"
}

# ---- Prometheus and the process exporter ----------------------------------

exporter_ready() { http_ok "http://127.0.0.1:$EXPORTER_PORT/metrics"; }

exporter_start() {
	start_daemon process-exporter /usr/bin/prometheus-process-exporter \
		-web.listen-address="127.0.0.1:$EXPORTER_PORT" \
		-config.path="$STACK_ROOT/localstack/prometheus/process-exporter.yml" \
		-threads=false -gather-smaps=false
}

prometheus_ready() { http_ok "http://127.0.0.1:$PROMETHEUS_PORT/-/ready"; }

prometheus_start() {
	mkdir -p "$STACK_DIR/prometheus"
	start_daemon prometheus /usr/bin/prometheus \
		--config.file="$STACK_ROOT/localstack/prometheus/prometheus.yml" \
		--storage.tsdb.path="$STACK_DIR/prometheus" \
		--storage.tsdb.retention.time=2d \
		--web.listen-address="127.0.0.1:$PROMETHEUS_PORT" \
		--web.enable-lifecycle
}

up_prometheus() {
	[[ -x /usr/bin/prometheus && -x /usr/bin/prometheus-process-exporter ]] ||
		apt_install prometheus prometheus-process-exporter
	ensure process-exporter "$EXPORTER_PORT" 'process-exporter' exporter_ready exporter_start 20 ||
		die "process-exporter: did not start"
	ensure prometheus "$PROMETHEUS_PORT" 'prometheus' prometheus_ready prometheus_start 40 || die "prometheus: did not start"
}

# ---- Kafka ----------------------------------------------------------------

KAFKA_HOME=$STACK_ROOT/.cache/kafka

kafka_ready() { python3 "$STACK_ROOT/localstack/stack/kafka-ready.py" "127.0.0.1:$KAFKA_PORT"; }

KAFKA_JAVA=(java -Xms256m -Xmx512m -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true
	-Dlog4j2.configurationFile="$STACK_ROOT/localstack/kafka/log4j2.properties"
	-cp "$KAFKA_HOME/libs/*")

kafka_java() { "${KAFKA_JAVA[@]}" "$@"; }

# kafka_format writes server.properties and formats an empty log directory.
kafka_format() {
	sed "s|@DATA@|$KAFKA_HOME/data|" "$STACK_ROOT/localstack/kafka/server.properties" >"$KAFKA_HOME/server.properties"
	if [[ -f $KAFKA_HOME/data/meta.properties ]]; then
		return 0
	fi
	rm -rf "$KAFKA_HOME/data"
	local id
	id=$(kafka_java kafka.tools.StorageTool random-uuid 2>>"$STACK_LOG/kafka.log" | tail -n1)
	[[ -n $id ]] || die "kafka: StorageTool random-uuid failed (log: $STACK_LOG/kafka.log)"
	kafka_java kafka.tools.StorageTool format -t "$id" -c "$KAFKA_HOME/server.properties" \
		>>"$STACK_LOG/kafka.log" 2>&1 || die "kafka: StorageTool format failed (log: $STACK_LOG/kafka.log)"
	log "kafka: formatted $KAFKA_HOME/data (cluster $id)"
}

kafka_start() {
	kafka_format
	start_daemon kafka "${KAFKA_JAVA[@]}" kafka.Kafka "$KAFKA_HOME/server.properties"
}

up_kafka() {
	mkdir -p "$KAFKA_HOME"
	maven_jars kafka "$STACK_ROOT/localstack/kafka/pom.xml" "$KAFKA_HOME/libs"
	# The command-line tools (localstack/kafka/kafka-cli.sh), apart from the
	# broker's jars so that fetching them never touches a running broker.
	maven_jars kafka-tools "$STACK_ROOT/localstack/kafka/tools/pom.xml" "$STACK_ROOT/.cache/kafka-tools"
	local holder
	holder=$(port_holder "$KAFKA_CONTROLLER_PORT")
	if [[ -n $holder ]] && ! pidfile_pid kafka >/dev/null && [[ ! $(pid_cmd "$holder") =~ kafka\.Kafka ]]; then
		die "kafka: controller port $KAFKA_CONTROLLER_PORT is taken by pid $holder ($(pid_desc "$holder")); stop it or free the port"
	fi
	ensure kafka "$KAFKA_PORT" 'kafka\.Kafka' kafka_ready kafka_start 90 && return 0
	# A log directory left inconsistent by a killed broker: start afresh.
	log "kafka: wiping $KAFKA_HOME/data and trying once more"
	rm -rf "$KAFKA_HOME/data"
	ensure kafka "$KAFKA_PORT" 'kafka\.Kafka' kafka_ready kafka_start 90 || die "kafka: did not start"
}

# ---- installed only --------------------------------------------------------

up_chromium() {
	[[ -x /usr/bin/chromium ]] || apt_install chromium fonts-liberation
	log "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo installed) (/usr/bin/chromium)"
}

up_rie() {
	local bin=$STACK_BIN/aws-lambda-rie stamp=$STACK_BIN/aws-lambda-rie.version
	if [[ -x $bin && -f $stamp && $(<"$stamp") == "$RIE_VERSION" ]]; then
		log "rie: $bin ($RIE_VERSION)"
		return 0
	fi
	command -v go >/dev/null || die "rie: go not found (needed to install aws-lambda-rie)"
	local t0
	t0=$(date +%s.%N)
	local mod=github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$RIE_VERSION
	# From the module cache alone (as a file proxy) when the proxy cannot be reached.
	GOBIN=$STACK_BIN GOFLAGS=-buildvcs=false go install "$mod" >>"$STACK_LOG/rie.log" 2>&1 ||
		GOBIN=$STACK_BIN GOFLAGS=-buildvcs=false GOPROXY="file://$(go env GOMODCACHE)/cache/download" go install "$mod" >>"$STACK_LOG/rie.log" 2>&1 || {
		tail -n 20 "$STACK_LOG/rie.log" >&2
		die "rie: go install aws-lambda-rie@$RIE_VERSION failed (log: $STACK_LOG/rie.log)"
	}
	echo "$RIE_VERSION" >"$stamp"
	log "rie: installed $bin in $(elapsed "$t0")s"
}

# ---------------------------------------------------------------------------

# The order matters: Prometheus' process exporter watches mariadbd; the init
# scripts need moto and the SQS server.
for s in mariadb moto elasticmq prometheus kafka chromium rie; do
	for want in "${services[@]}"; do
		if [[ $want == "$s" ]]; then
			"up_$s"
			break
		fi
	done
done
if [[ " ${services[*]} " == *" moto "* || " ${services[*]} " == *" elasticmq "* ]]; then
	init_aws
fi

if [[ -n $record && ${#started[@]} -gt 0 ]]; then
	printf '%s\n' "${started[@]}" >>"$record"
fi
log "up: ${services[*]} ready (started now: ${started[*]:-none}; logs: $STACK_LOG; stop: make down)"
