#!/usr/bin/env bash
# 10-controller.sh creates the controller's DynamoDB table (pk, sk; on demand;
# the by-sk index through which the controller lists loops) and the PARAMS
# item of a default loop. Idempotent: an existing table is kept, and an
# existing PARAMS item (an operator's edit) is never overwritten.
#
# It calls the AWS CLI as ${AWS_CMD:-aws --endpoint-url ...}: moto_server
# (localstack/run-moto.sh, localstack/stack/up.sh) or LocalStack
# (AWS_CMD=awslocal, docker-compose.yml).
#
# Environment: SLUICE_TABLE (default sluice), SLUICE_LOOP (default
# "default"), SLUICE_DB_INSTANCE (the RDS instance whose CPU the default
# loop holds; default sluice-db).
set -euo pipefail

AWS_CMD=${AWS_CMD:-aws --endpoint-url ${AWS_ENDPOINT_URL:-http://127.0.0.1:4566}}
export AWS_DEFAULT_REGION=${AWS_DEFAULT_REGION:-us-east-1}
export AWS_PAGER=
table=${SLUICE_TABLE:-sluice}
loop_id=${SLUICE_LOOP:-default}
db=${SLUICE_DB_INSTANCE:-sluice-db}

aws_() { $AWS_CMD "$@"; }

if aws_ dynamodb describe-table --table-name "$table" >/dev/null 2>&1; then
	echo "10-controller: table $table exists"
else
	aws_ dynamodb create-table \
		--table-name "$table" \
		--billing-mode PAY_PER_REQUEST \
		--attribute-definitions AttributeName=pk,AttributeType=S AttributeName=sk,AttributeType=S \
		--key-schema AttributeName=pk,KeyType=HASH AttributeName=sk,KeyType=RANGE \
		--global-secondary-indexes '[{"IndexName":"by-sk","KeySchema":[{"AttributeName":"sk","KeyType":"HASH"},{"AttributeName":"pk","KeyType":"RANGE"}],"Projection":{"ProjectionType":"ALL"}}]' \
		>/dev/null
	aws_ dynamodb wait table-exists --table-name "$table"
	echo "10-controller: created table $table"
fi

# The default loop: CPU of the RDS instance $db held at 70 %, PI gains from
# SIMC on the reference plant (docs/controller.md), rate between 10 and
# 2000 messages/s, decay toward 50 messages/s while the metric is stale.
item=$(cat <<JSON
{
  "pk": {"S": "$loop_id"}, "sk": {"S": "PARAMS"},
  "enabled": {"BOOL": true},
  "mode": {"S": "auto"},
  "setpoint": {"N": "70"},
  "kp": {"N": "1"}, "ki": {"N": "0.05"}, "kd": {"N": "0"},
  "anti_windup": {"S": "conditional"},
  "setpoint_filter": {"S": "2m"},
  "ff_gain": {"N": "0.05"}, "ff_base": {"N": "10"}, "ff_tau": {"S": "15s"}, "ff_dead_time": {"S": "5s"},
  "min_rate": {"N": "10"}, "max_rate": {"N": "2000"}, "slew_limit": {"N": "200"},
  "tick_period": {"S": "1m"}, "rate_ttl": {"S": "3m"},
  "metric_source": {"S": "cloudwatch"},
  "metric_namespace": {"S": "AWS/RDS"}, "metric_name": {"S": "CPUUtilization"},
  "metric_dimensions": {"M": {"DBInstanceIdentifier": {"S": "$db"}}},
  "metric_statistic": {"S": "Average"}, "metric_period": {"S": "1m"},
  "stale_policy": {"S": "decay"}, "safe_rate": {"N": "50"}, "stale_after": {"S": "5m"}, "stale_decay": {"S": "5m"}
}
JSON
)
if out=$(aws_ dynamodb put-item --table-name "$table" --item "$item" \
	--condition-expression "attribute_not_exists(pk)" 2>&1); then
	echo "10-controller: created PARAMS of loop $loop_id"
elif grep -q ConditionalCheckFailed <<<"$out"; then
	echo "10-controller: PARAMS of loop $loop_id exists (kept)"
else
	echo "$out" >&2
	exit 1
fi
