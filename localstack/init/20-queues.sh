#!/usr/bin/env bash
# 20-queues.sh creates the consumers' SQS queue and its dead-letter queue,
# with a redrive policy that moves a message to the DLQ after
# maxReceiveCount receives. Idempotent: existing queues are kept and their
# redrive policy set again.
#
# It calls the AWS CLI as ${AWS_CMD:-aws --endpoint-url ...}, the endpoint
# being AWS_ENDPOINT_URL_SQS, else AWS_ENDPOINT_URL: ElasticMQ or moto_server
# (localstack/stack/up.sh) or LocalStack (AWS_CMD=awslocal). awscli v1
# ignores the endpoint variables for sqs, hence the explicit --endpoint-url.
# The DLQ's ARN comes from the server (ElasticMQ, moto and LocalStack each
# shape queue URLs their own way).
#
# Environment: SLUICE_QUEUE (default sluice-orders; the DLQ is
# <queue>-dlq), SLUICE_MAX_RECEIVE (default 5), SLUICE_VISIBILITY (seconds,
# default 60: above the consumers' MaxHold plus a store).
set -euo pipefail

AWS_CMD=${AWS_CMD:-aws --endpoint-url ${AWS_ENDPOINT_URL_SQS:-${AWS_ENDPOINT_URL:-http://127.0.0.1:4566}}}
export AWS_DEFAULT_REGION=${AWS_DEFAULT_REGION:-us-east-1}
export AWS_PAGER=
queue=${SLUICE_QUEUE:-sluice-orders}
max_receive=${SLUICE_MAX_RECEIVE:-5}
visibility=${SLUICE_VISIBILITY:-60}

aws_() { $AWS_CMD "$@"; }

dlq_url=$(aws_ sqs create-queue --queue-name "$queue-dlq" \
	--attributes MessageRetentionPeriod=1209600 --query QueueUrl --output text)
dlq_arn=$(aws_ sqs get-queue-attributes --queue-url "$dlq_url" \
	--attribute-names QueueArn --query Attributes.QueueArn --output text)
redrive="{\"deadLetterTargetArn\":\"$dlq_arn\",\"maxReceiveCount\":\"$max_receive\"}"

# create-queue returns the existing queue when its attributes match; set
# them afterwards so that a queue created earlier with other values is
# brought in line instead of failing.
url=$(aws_ sqs create-queue --queue-name "$queue" --query QueueUrl --output text)
attrs=$(printf '{"VisibilityTimeout":"%s","ReceiveMessageWaitTimeSeconds":"20","RedrivePolicy":%s}' \
	"$visibility" "$(printf '%s' "$redrive" | sed 's/"/\\"/g; s/^/"/; s/$/"/')")
aws_ sqs set-queue-attributes --queue-url "$url" --attributes "$attrs"
echo "20-queues: $url (DLQ $dlq_url after $max_receive receives, visibility ${visibility}s)"
