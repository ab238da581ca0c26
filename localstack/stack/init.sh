#!/usr/bin/env bash
# init.sh applies localstack/init/*.sh, in name order, to the local AWS
# endpoints that up.sh started: moto_server for DynamoDB and CloudWatch
# (AWS_ENDPOINT_URL), ElasticMQ for SQS (AWS_ENDPOINT_URL_SQS; moto's under
# SLUICE_SQS=moto). Run it again after `POST /moto-api/reset`.
#
# The contract of an init script (the same file runs in LocalStack's
# /etc/localstack/init/ready.d/ under docker-compose):
#   - it calls the AWS CLI as  ${AWS_CMD:-aws --endpoint-url ${AWS_ENDPOINT_URL:-http://127.0.0.1:4566}},
#     and for SQS as  ${AWS_CMD:-aws --endpoint-url ${AWS_ENDPOINT_URL_SQS:-${AWS_ENDPOINT_URL:-...}}}
#     (awscli v1 ignores the endpoint variables for sqs; LocalStack sets
#     AWS_CMD=awslocal in docker-compose.yml, which serves every service);
#   - it relies on AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION
#     (set here and in docker-compose.yml) and account 000000000000;
#   - it is idempotent: running it twice against the same endpoint succeeds;
#   - it exits non-zero on a real failure (up.sh then stops with its output).
set -euo pipefail
# shellcheck source=localstack/stack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

export AWS_ENDPOINT_URL=${AWS_ENDPOINT_URL:-http://127.0.0.1:$MOTO_PORT}
sqs=$(sqs_server) || exit 1
export AWS_ENDPOINT_URL_SQS=${AWS_ENDPOINT_URL_SQS:-$(sqs_endpoint "$sqs")}
export AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-test}
export AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-test}
export AWS_DEFAULT_REGION=${AWS_DEFAULT_REGION:-us-east-1}
export AWS_REGION=${AWS_REGION:-$AWS_DEFAULT_REGION}
export AWS_PAGER=

shopt -s nullglob
scripts=("$STACK_ROOT"/localstack/init/*.sh)
if ((${#scripts[@]} == 0)); then
	log "init: no localstack/init/*.sh"
	exit 0
fi
for f in "${scripts[@]}"; do
	t0=$(date +%s.%N)
	if ! bash "$f" >>"$STACK_LOG/init.log" 2>&1; then
		tail -n 30 "$STACK_LOG/init.log" >&2
		die "init: ${f#"$STACK_ROOT"/} failed (log: $STACK_LOG/init.log)"
	fi
	log "init: ${f#"$STACK_ROOT"/} applied in $(elapsed "$t0")s (AWS $AWS_ENDPOINT_URL, SQS $AWS_ENDPOINT_URL_SQS)"
done
