# The consumers: the SQS consumer Lambda, the Kafka consumer Lambda,
# the ECS worker, the consumer benchmark.
#
#   make build-SqsConsumerFunction ARTIFACTS_DIR=dir   what `sam build` calls (arm64 bootstrap)
#   make sqs-consumer-bootstrap                        bootstrap for this machine (for the RIE)
#   make build-KafkaConsumerFunction ARTIFACTS_DIR=dir what `sam build` calls (arm64 bootstrap)
#   make kafka-consumer-bootstrap                      the Kafka consumer's bootstrap for this machine
#   make worker-image                                  docker build of infra/worker/Dockerfile (linux/arm64)
#   make bench-consumers                               pacing (in-process, kafka-lambda), overhead, scaling (1 -> 8 -> 3),
#                                                      no-loss (sqs-lambda, sqs-worker, kafka-worker, kafka-lambda),
#                                                      lambda_cost (GB-s per million, paced and fixed); JSON last line
#
# BENCH_CONSUMERS_FLAGS passes flags to the benchmark, e.g.
#   make bench-consumers BENCH_CONSUMERS_FLAGS='--window=10s --messages=1000'
# The default (60 s windows, 10,000 messages per no-loss path) takes about
# 40 minutes (the kafka-lambda pacing rows, 1 and 4 partitions at 10 and
# 100 msg/s, add 8; the lambda_cost rows, 30 RIEs, five 85 s windows, add 8:
# BENCH_CONSUMERS_FLAGS='--only=cost' runs them alone). SQS is ElasticMQ's
# (SLUICE_SQS=moto: moto's, far slower).

SQS_CONSUMER_PKG := ./functions/sqs-consumer
SQS_CONSUMER_HOST := $(BIN)/sqs-consumer-host/bootstrap
SQS_CONSUMER_FLAGS := -trimpath -ldflags='-s -w' -tags lambda.norpc
KAFKA_CONSUMER_PKG := ./functions/kafka-consumer
KAFKA_CONSUMER_HOST := $(BIN)/kafka-consumer-host/bootstrap
ARTIFACTS_DIR ?= $(BIN)/sam-artifacts
BENCH_CONSUMERS_FLAGS ?=

# consumer-bootstrap OUT PKG [GOOS=... GOARCH=...]: build a consumer's bootstrap.
define consumer-bootstrap
	mkdir -p $(dir $(1))
	$(strip CGO_ENABLED=0 $(3)) $(GO) build $(SQS_CONSUMER_FLAGS) -o $(1) $(2)
endef

.PHONY: build-SqsConsumerFunction sqs-consumer-bootstrap build-KafkaConsumerFunction kafka-consumer-bootstrap worker-image bench-consumers

## build-SqsConsumerFunction: SAM's makefile build: the SQS consumer's bootstrap for provided.al2023 arm64 into $(ARTIFACTS_DIR).
build-SqsConsumerFunction:
	$(call consumer-bootstrap,$(ARTIFACTS_DIR)/bootstrap,$(SQS_CONSUMER_PKG),GOOS=linux GOARCH=arm64)

## sqs-consumer-bootstrap: the SQS consumer's bootstrap for this machine (to run under the RIE).
sqs-consumer-bootstrap:
	$(call consumer-bootstrap,$(SQS_CONSUMER_HOST),$(SQS_CONSUMER_PKG))

## build-KafkaConsumerFunction: SAM's makefile build: the Kafka consumer's bootstrap for provided.al2023 arm64 into $(ARTIFACTS_DIR).
build-KafkaConsumerFunction:
	$(call consumer-bootstrap,$(ARTIFACTS_DIR)/bootstrap,$(KAFKA_CONSUMER_PKG),GOOS=linux GOARCH=arm64)

## kafka-consumer-bootstrap: the Kafka consumer's bootstrap for this machine (to run under the RIE behind `sluice local kafka-esm`).
kafka-consumer-bootstrap:
	$(call consumer-bootstrap,$(KAFKA_CONSUMER_HOST),$(KAFKA_CONSUMER_PKG))

## worker-image: the ECS worker's container image for the task's CPU, linux/arm64 as template.yaml's (needs Docker with BuildKit).
worker-image:
	docker build --platform linux/arm64 -f infra/worker/Dockerfile -t sluice-worker .

## bench-consumers: starts moto, ElasticMQ (SQS), MariaDB, Kafka and the RIE (localstack/stack/up.sh), runs the consumer benchmark, stops what it started; JSON last line.
bench-consumers:
	@rec=$$(mktemp); \
	trap 'if [ -s "$$rec" ]; then bash localstack/stack/down.sh $$(cat "$$rec") >&2; fi; rm -f "$$rec"' EXIT; \
	bash localstack/stack/up.sh --record "$$rec" moto elasticmq mariadb rie kafka >&2 || exit 1; \
	eval "$$(bash localstack/stack/env.sh)"; \
	$(GO) run ./internal/bench/consumers/cmd/bench-consumers $(BENCH_CONSUMERS_FLAGS)
