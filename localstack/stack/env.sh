#!/usr/bin/env bash
# env.sh prints the `export` lines that point tests and tools at the local
# stack (up.sh). Use:  eval "$(localstack/stack/env.sh)"
# internal/testenv reads these; SLUICE_INTEGRATION=1 makes a missing service
# fail a test instead of skipping it.
#
# SQS goes to ElasticMQ (AWS_ENDPOINT_URL_SQS, which the AWS SDKs prefer to
# AWS_ENDPOINT_URL for SQS alone); SLUICE_SQS=moto sends it to moto_server
# with everything else, SLUICE_SQS=localstack to LocalStack (make up-docker),
# both on 4566.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
case ${SLUICE_SQS:-elasticmq} in
elasticmq) sqs_endpoint=http://127.0.0.1:9324 ;;
moto | localstack) sqs_endpoint=http://127.0.0.1:4566 ;;
*)
	echo "env.sh: SLUICE_SQS=$SLUICE_SQS: want elasticmq, moto or localstack" >&2
	exit 1
	;;
esac
while IFS='=' read -r k v; do
	[[ -n $k ]] && printf "export %s='%s'\n" "$k" "$v"
done <<VARS
AWS_ENDPOINT_URL=http://127.0.0.1:4566
AWS_ENDPOINT_URL_SQS=$sqs_endpoint
SLUICE_SQS=${SLUICE_SQS:-elasticmq}
AWS_ACCESS_KEY_ID=test
AWS_SECRET_ACCESS_KEY=test
AWS_REGION=us-east-1
AWS_DEFAULT_REGION=us-east-1
AWS_PAGER=
MOTO_ACCOUNT_ID=000000000000
SLUICE_MYSQL_DSN=sluice:sluice@tcp(127.0.0.1:3306)/sluice?parseTime=true&multiStatements=true
SLUICE_MYSQL_ADDR=127.0.0.1:3306
SLUICE_KAFKA_BROKERS=127.0.0.1:9092
SLUICE_PROMETHEUS_BIN=/usr/bin/prometheus
SLUICE_PROMETHEUS_URL=http://127.0.0.1:9090
SLUICE_PROCESS_EXPORTER_URL=http://127.0.0.1:9256
SLUICE_RIE_BIN=$root/.cache/bin/aws-lambda-rie
SLUICE_CHROMIUM_BIN=/usr/bin/chromium
SLUICE_MARIADB_CTL=$root/localstack/stack/mariadb.sh
SLUICE_INTEGRATION=1
VARS
