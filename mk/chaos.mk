# The consumers under real faults.
#
#   make chaos                              every scenario at full size; JSON last line
#   make chaos CHAOS_FLAGS='--only=slow-sink --scale=0.1'
#
# It starts what it needs (moto for DynamoDB, ElasticMQ for SQS, Kafka, the
# Lambda RIE; localstack/stack/up.sh --record) and stops only what it
# started. The destination is an in-process HTTP service whose answers each
# scenario controls. The full run takes several hours on the shared 2-core
# machine, one scenario after another (rate-zero-30m about 31 minutes on each
# of four paths, mysql-down-15m 16 to 23, brownout-90 on sqs-lambda up to its
# 75-minute limit); docs/consumers.md has the times measured.

CHAOS_FLAGS ?=

.PHONY: chaos

## chaos: the consumers' fault scenarios on the real SQS Lambda and worker paths; JSON last line.
chaos:
	@rec=$$(mktemp); \
	trap 'if [ -s "$$rec" ]; then bash localstack/stack/down.sh $$(cat "$$rec") >&2; fi; rm -f "$$rec"' EXIT; \
	bash localstack/stack/up.sh --record "$$rec" moto elasticmq kafka rie >&2 || exit 1; \
	eval "$$(bash localstack/stack/env.sh)"; \
	$(GO) run ./internal/chaos/cmd/chaos $(CHAOS_FLAGS)
