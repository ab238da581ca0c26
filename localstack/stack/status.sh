#!/usr/bin/env bash
# status.sh prints, for each service of the local stack, whether it answers,
# which pid holds its port and whether this checkout's up.sh started it.
# Exit 0 when every service listed (default: all daemons) answers.
set -euo pipefail
# shellcheck source=localstack/stack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

names=("$@")
((${#names[@]})) || names=(moto elasticmq mariadb process-exporter prometheus kafka)
declare -A port=([moto]=$MOTO_PORT [elasticmq]=$ELASTICMQ_PORT [mariadb]=$MARIADB_PORT [process-exporter]=$EXPORTER_PORT
	[prometheus]=$PROMETHEUS_PORT [kafka]=$KAFKA_PORT)
# shellcheck disable=SC2317 # called as "ready_$n"
ready_moto() { http_ok "http://127.0.0.1:$MOTO_PORT/moto-api/"; }
# shellcheck disable=SC2317
ready_elasticmq() { elasticmq_ready; }
# shellcheck disable=SC2317
ready_mariadb() { mariadb_ready; }
# shellcheck disable=SC2317
ready_process-exporter() { http_ok "http://127.0.0.1:$EXPORTER_PORT/metrics"; }
# shellcheck disable=SC2317
ready_prometheus() { http_ok "http://127.0.0.1:$PROMETHEUS_PORT/-/ready"; }
# shellcheck disable=SC2317
ready_kafka() { python3 "$STACK_ROOT/localstack/stack/kafka-ready.py" "127.0.0.1:$KAFKA_PORT" >/dev/null 2>&1; }

rc=0
printf '%-17s %-6s %-8s %-7s %s\n' service port state pid "started by"
for n in "${names[@]}"; do
	[[ -n ${port[$n]:-} ]] || die "unknown service '$n' (moto elasticmq mariadb process-exporter prometheus kafka)"
	p=${port[$n]}
	holder=$(port_holder "$p")
	state=down by=-
	if [[ -n $holder ]]; then
		if "ready_$n" 2>/dev/null; then state=up; else state=starting; fi
		if [[ $holder != "?" ]] && pid_ours "$holder"; then by="this checkout's up.sh"; else by=other; fi
	fi
	[[ $state == up ]] || rc=1
	printf '%-17s %-6s %-8s %-7s %s\n' "$n" "$p" "$state" "${holder:--}" "$by"
done
exit "$rc"
