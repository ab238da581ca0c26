#!/usr/bin/env bash
# down.sh stops what up.sh started (all services, or the ones named:
# moto elasticmq mariadb prometheus kafka), by their recorded pids, then checks the
# ports: a listener that this checkout's up.sh started (its environment
# carries SLUICE_STACK_DIR) is stopped too; any other listener is reported
# and left alone. Data stays: MariaDB's in /var/lib/mysql, Kafka's and
# Prometheus' under .cache/. `down.sh --purge` also deletes .cache/stack and
# Kafka's log directory.
set -euo pipefail
# shellcheck source=localstack/stack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

purge=0
names=()
for a in "$@"; do
	case $a in
	--purge) purge=1 ;;
	all) names+=(moto elasticmq mariadb prometheus kafka) ;;
	moto | elasticmq | mariadb | kafka | process-exporter) names+=("$a") ;;
	prometheus) names+=(prometheus process-exporter) ;;
	chromium | rie) ;; # installed only: nothing runs
	*) die "unknown service '$a' (moto elasticmq mariadb prometheus kafka all)" ;;
	esac
done
((${#names[@]})) || names=(moto elasticmq mariadb prometheus process-exporter kafka)
stack_lock

declare -A ports=(
	[moto]=$MOTO_PORT
	[elasticmq]=$ELASTICMQ_PORT
	[mariadb]=$MARIADB_PORT
	[prometheus]=$PROMETHEUS_PORT
	[process-exporter]=$EXPORTER_PORT
	[kafka]="$KAFKA_PORT $KAFKA_CONTROLLER_PORT"
)

# Stop consumers of a service before the service: exporter after Prometheus,
# MariaDB after the exporter; Kafka gets time for a clean shutdown.
order=(prometheus process-exporter kafka elasticmq moto mariadb)
for name in "${order[@]}"; do
	[[ " ${names[*]} " == *" $name "* ]] || continue
	if pid=$(pidfile_pid "$name"); then
		timeout=20
		[[ $name == mariadb || $name == kafka ]] && timeout=60
		stop_pid "$name" "$pid" "$timeout"
	fi
	rm -f "$STACK_RUN/$name.pid"
	[[ $name == moto || $name == elasticmq ]] && rm -f "$STACK_RUN/aws.init"
done

held=()
checked=()
for name in "${order[@]}"; do
	[[ " ${names[*]} " == *" $name "* ]] || continue
	for port in ${ports[$name]}; do
		checked+=("$port")
		holder=$(port_holder "$port")
		[[ -n $holder ]] || continue
		if [[ $holder != "?" ]] && pid_ours "$holder"; then
			stop_pid "$name" "$holder" 60
		else
			held+=("$port")
			log "$name: port $port is held by pid $holder ($(pid_desc "$holder")), not started by up.sh: left alone"
		fi
	done
done

if ((purge)); then
	rm -rf "$STACK_ROOT/.cache/kafka/data" "$STACK_DIR"
	log "down: purged $STACK_DIR and .cache/kafka/data"
fi
if ((${#held[@]})); then
	log "down: stopped what up.sh started; ports still held by other programs: ${held[*]}"
else
	log "down: stopped; ports ${checked[*]} are free"
fi
