# The local stack (localstack/stack/): moto_server (DynamoDB, CloudWatch),
# ElasticMQ (SQS), MariaDB, Prometheus with the process exporter, Kafka,
# Chromium and the Lambda RIE, without Docker.
#
#   make up [KAFKA=1] [SERVICES="moto mariadb ..."]   start (installs what is missing)
#   make down                                          stop what up started
#   make env                                           print the exports the tests use
#   make status                                        which services answer, on which pid
#   make test-sqs-servers                              the short SQS tests on ElasticMQ, then on moto
#   make bench-sqs                                     SQS throughput, ElasticMQ and moto in one run
#   make up-docker / make down-docker                  LocalStack + MariaDB with Docker instead
#
# SLUICE_SQS=moto (in the environment) serves SQS from moto_server instead of
# ElasticMQ: env.sh points AWS_ENDPOINT_URL_SQS there and up.sh's init
# scripts create the queues there.
#
# End-to-end targets of other fragments register themselves for `make test`
# with `TEST_E2E += <target>` (run after `go test`, with the stack's env).

STACK := localstack/stack
# STACK_SERVICES is what `make test` starts.
STACK_SERVICES ?= moto elasticmq mariadb prometheus kafka chromium rie
# GO_TEST_FLAGS: packages run one at a time (-p 1) because they share the
# stack, and some inject faults into it (MariaDB restarts) that would hit the
# tests of another package running at the same time. `go vet` has already
# compiled the dependencies in parallel.
GO_TEST_FLAGS ?= -count=1 -p 1 -timeout 30m
# STACK_ENV exports the stack's environment in a recipe line: $(STACK_ENV) && cmd.
STACK_ENV = eval "$$(bash $(STACK)/env.sh)"
SERVICES ?= moto elasticmq mariadb prometheus rie $(if $(KAFKA),kafka)
# SQS_SMOKE_TESTS: the short SQS tests run against each SQS server.
SQS_SMOKE_TESTS ?= ^(TestQueueAckReleaseDeadLetter|TestRedrivePolicyMovesToDLQ)$$
BENCH_SQS_FLAGS ?=
COMPOSE ?= docker compose

.PHONY: up down env status test-e2e test-sqs-servers bench-sqs up-docker down-docker

TEST_E2E += test-sqs-servers

## up: start the local stack (moto :4566, ElasticMQ :9324, MariaDB :3306, Prometheus :9090, process exporter :9256; KAFKA=1 adds Kafka :9092).
up:
	bash $(STACK)/up.sh $(SERVICES)

## down: stop what `make up` started; no process left, no port held.
down:
	bash $(STACK)/down.sh

## status: which services of the local stack answer, their pids, who started them.
status:
	@bash $(STACK)/status.sh

## env: the environment of the local stack, as export lines (eval "$$(make -s env)").
env:
	@bash $(STACK)/env.sh

## test-sqs-servers: the short SQS tests (ack, release, dead letter, redrive policy) on ElasticMQ, then on moto_server (SLUICE_SQS=moto), so that both stay working.
test-sqs-servers:
	@set -e; for s in elasticmq moto; do \
		echo "==== SQS on $$s"; \
		( eval "$$(SLUICE_SQS=$$s bash $(STACK)/env.sh)" && \
		  $(GO) test -count=1 -v -run '$(SQS_SMOKE_TESTS)' ./pkg/adapter/sqsqueue ); \
	done

## bench-sqs: SQS send and receive+delete throughput on ElasticMQ and moto_server in one run (starts both, stops what it started); JSON last line.
bench-sqs:
	@rec=$$(mktemp); \
	trap 'if [ -s "$$rec" ]; then bash $(STACK)/down.sh $$(cat "$$rec") >&2; fi; rm -f "$$rec"' EXIT; \
	bash $(STACK)/up.sh --record "$$rec" moto elasticmq >&2 || exit 1; \
	eval "$$(bash $(STACK)/env.sh)"; \
	$(GO) run ./internal/bench/sqsthroughput/cmd/bench-sqs $(BENCH_SQS_FLAGS)

# test-e2e runs each end-to-end target registered in TEST_E2E, and e2e-controller
# and e2e when a fragment defines them, with the stack's environment.
test-e2e:
	@set -e; targets="$(TEST_E2E)"; \
	db=$$($(MAKE) --no-print-directory -pRrq -f $(firstword $(MAKEFILE_LIST)) : 2>/dev/null || true); \
	for t in e2e-controller e2e; do \
		if grep -q "^$$t:" <<<"$$db"; then targets="$$targets $$t"; fi; \
	done; \
	targets=$$(printf '%s\n' $$targets | awk 'NF && !seen[$$0]++'); \
	if [ -z "$$targets" ]; then echo "test-e2e: no end-to-end target defined yet"; exit 0; fi; \
	for t in $$targets; do \
		echo "==== make $$t"; \
		$(STACK_ENV) && $(MAKE) --no-print-directory $$t; \
	done

## up-docker: LocalStack (pinned) and MariaDB with Docker Compose, for machines with a Docker engine.
up-docker:
	$(COMPOSE) -f localstack/docker-compose.yml up -d --wait

## down-docker: stop and remove the Docker Compose stack.
down-docker:
	$(COMPOSE) -f localstack/docker-compose.yml down -v
