# make e2e-rds: the consumers against a database set up as RDS would be:
# a private MariaDB (its own port and data directory, started and stopped
# by the run) requiring TLS on a CA the run makes, migrated by
# `sluice migrate` as an admin, the SQS Lambda (under the RIE) and the
# Kafka worker storing as a user granted only what docs/controller.md
# lists, the password rotated mid-run. Needs the stack (moto, ElasticMQ,
# Kafka, the RIE); about a minute; JSON last line.
E2E_RDS_FLAGS ?=

.PHONY: e2e-rds

TEST_E2E += e2e-rds

## e2e-rds: TLS-required private MariaDB, least-privilege user, SQS Lambda and Kafka worker through a mid-run password rotation; JSON last line (docs/controller.md).
e2e-rds: e2e-bootstraps
	$(GO) build -o $(E2E_BIN)/sluice ./cmd/sluice
	$(GO) build -o $(E2E_BIN)/worker ./functions/worker
	eval "$$(bash localstack/stack/env.sh)" && $(GO) run ./internal/e2e/rds -consumer $(E2E_BIN)/sqs-consumer/bootstrap \
		-worker $(E2E_BIN)/worker -sluice $(E2E_BIN)/sluice $(E2E_RDS_FLAGS)

# make bench-inbox: the MySQL sink's inbox as it grows, on a private
# MariaDB (its own port and data directory, a 2 GB buffer pool): the
# row's size, the prune's cost per chunk of 500 rows, a Store of 10, at
# 1 M, 3 M and 10 M rows (BENCH_INBOX_FLAGS='--sizes=1000000,3000000' for
# less). About 20 minutes on the shared 2-core machine; JSON last line.
BENCH_INBOX_FLAGS ?=

.PHONY: bench-inbox

## bench-inbox: inbox row size and prune cost per chunk at 1 M, 3 M and 10 M rows on a private MariaDB; JSON last line (docs/consumers.md).
bench-inbox:
	$(GO) run ./internal/bench/inbox $(BENCH_INBOX_FLAGS)
