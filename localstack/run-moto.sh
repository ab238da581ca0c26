#!/usr/bin/env bash
# run-moto.sh starts moto_server on 127.0.0.1:${MOTO_PORT:-4566} without
# Docker, applies localstack/init/*.sh to it, runs the command given (if
# any) with the endpoint's environment, and stops moto_server again. Every
# service goes to that moto_server, SQS included (AWS_ENDPOINT_URL_SQS): the
# stack of localstack/stack/up.sh serves SQS from ElasticMQ instead.
#
#   localstack/run-moto.sh                      start, init, stop (a smoke run)
#   localstack/run-moto.sh go test ./pkg/...    start, init, run the command, stop
#
# When the port is already served (for example by localstack/stack/up.sh),
# that server is used and left running. The full local stack (MariaDB,
# Prometheus, Kafka too) is localstack/stack/up.sh.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
port=${MOTO_PORT:-4566}
endpoint=http://127.0.0.1:$port

export AWS_ENDPOINT_URL=$endpoint
export AWS_ENDPOINT_URL_SQS=$endpoint
export AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-test}
export AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-test}
export AWS_DEFAULT_REGION=${AWS_DEFAULT_REGION:-us-east-1}
export AWS_REGION=${AWS_REGION:-$AWS_DEFAULT_REGION}
export MOTO_ACCOUNT_ID=${MOTO_ACCOUNT_ID:-000000000000}
export AWS_PAGER=

up() { curl -fsS -o /dev/null "$endpoint/moto-api/" 2>/dev/null; }

pid=
stop() {
	if [[ -n $pid ]]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		echo "run-moto: stopped moto_server (pid $pid)" >&2
	fi
}
trap stop EXIT

if up; then
	echo "run-moto: $endpoint already serves; using it (left running)" >&2
else
	python3 -c 'import moto.server, werkzeug' 2>/dev/null || {
		echo "run-moto: moto's server not found (pip install 'moto[server]')" >&2
		exit 1
	}
	log=${TMPDIR:-/tmp}/run-moto-$port.log
	# moto one request at a time: its DynamoDB transactions are not atomic
	# under concurrent requests (localstack/moto_serial.py).
	python3 "$root/localstack/moto_serial.py" -H 127.0.0.1 -p "$port" >"$log" 2>&1 &
	pid=$!
	for _ in $(seq 1 100); do
		up && break
		kill -0 "$pid" 2>/dev/null || {
			cat "$log" >&2
			echo "run-moto: moto_server exited" >&2
			exit 1
		}
		sleep 0.2
	done
	up || {
		echo "run-moto: moto_server did not answer on $endpoint" >&2
		exit 1
	}
	echo "run-moto: moto_server on $endpoint (pid $pid, log $log)" >&2
fi

for f in "$root"/localstack/init/*.sh; do
	bash "$f"
done

if (($# > 0)); then
	"$@"
fi
