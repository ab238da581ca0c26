# The whole loop locally: the controller and consumer bootstraps
# under the Lambda RIE, driven by the local stand-ins (internal/localaws), MariaDB
# as the real plant (internal/dbload) whose CPU internal/cpupub publishes as AWS/RDS
# CPUUtilization, moto for SQS, DynamoDB and CloudWatch.
#
#   make e2e     starts what it needs (up.sh --record; stops only that), runs the
#                scenario (step test, tuning, disturbance, setpoint edit, invalid
#                edit, idle queue then a burst, drain), prints one JSON object as
#                its last line

E2E_BIN := $(BIN)/e2e
E2E_LAMBDA_FLAGS := -trimpath -tags lambda.norpc
E2E_FLAGS ?=
E2E_TUNE_FLAGS ?=

.PHONY: e2e e2e-bootstraps

TEST_E2E += e2e

## e2e-bootstraps: controller and SQS consumer bootstraps for this machine (CGO_ENABLED=0, lambda.norpc).
e2e-bootstraps:
	mkdir -p $(E2E_BIN)/controller $(E2E_BIN)/sqs-consumer
	CGO_ENABLED=0 $(GO) build $(E2E_LAMBDA_FLAGS) -o $(E2E_BIN)/controller/bootstrap ./functions/controller
	CGO_ENABLED=0 $(GO) build $(E2E_LAMBDA_FLAGS) -o $(E2E_BIN)/sqs-consumer/bootstrap ./functions/sqs-consumer

## e2e: the whole loop on the local stack with MariaDB as the plant; JSON last line (see docs/lab.md).
e2e: e2e-bootstraps
	$(GO) run ./internal/e2e/full -controller $(E2E_BIN)/controller/bootstrap -consumer $(E2E_BIN)/sqs-consumer/bootstrap $(E2E_FLAGS)

# make e2e-replica: the loop with two signals, the CPU of a private
# MariaDB primary (127.0.0.1:3316) and the replication lag of its replica
# (127.0.0.1:3317, single-threaded apply, CPU capped by cpulimit), started by
# localstack/stack/replica.sh; the lag is exported to a private Prometheus
# (127.0.0.1:9097). About 5 minutes; not part of `make test` (docs/replica.md).
E2E_REPLICA_FLAGS ?=

.PHONY: e2e-replica

## e2e-replica: override control on a real primary and replica: the loop switches to the replica's lag and holds it; JSON last line (see docs/replica.md).
e2e-replica: e2e-bootstraps
	$(GO) run ./internal/e2e/replica -controller $(E2E_BIN)/controller/bootstrap -consumer $(E2E_BIN)/sqs-consumer/bootstrap $(E2E_REPLICA_FLAGS)

# make e2e-tune   tuning a loop in production on the real plant (docs/tuning.md,
#                 "On a real database"): the live loop on hand-picked gains, the
#                 proposal from its HIST items (sluice tune --from-history), a
#                 shadow loop on the proposal, the shadow report; about 6 minutes,
#                 on the stack that is already running (eval env.sh); JSON last line.
#                 E2E_TUNE_DSN=DSN: another MariaDB than the stack's (a private
#                 server on its own port, whose CPU is then the loop's alone).
E2E_TUNE_DSN ?=
.PHONY: e2e-tune

## e2e-tune: history -> proposal -> shadow on MariaDB (the stack must be up); JSON last line (docs/tuning.md).
e2e-tune: e2e-bootstraps
	$(GO) build -o $(E2E_BIN)/sluice ./cmd/sluice
	eval "$$(bash localstack/stack/env.sh)" && $(if $(E2E_TUNE_DSN),SLUICE_MYSQL_DSN='$(E2E_TUNE_DSN)') $(GO) run ./internal/e2e/tune -controller $(E2E_BIN)/controller/bootstrap \
		-consumer $(E2E_BIN)/sqs-consumer/bootstrap -sluice $(E2E_BIN)/sluice $(E2E_TUNE_FLAGS)

# make e2e-cascade   the consumers' inner loop on the real plant: the loop on
#                    MariaDB's CPU (the real bootstraps, tuned from the
#                    documented model), another client's queries loading
#                    MariaDB once the loop is settled, run with the inner loop
#                    on and then off (PARAMS inner_loop, carried by RATE);
#                    JSON last line (docs/consumers.md, "On MariaDB"). The
#                    short run (about 130 s) ticks every 5 s and asserts
#                    behaviour: the inner loop learns and cuts, the run
#                    without it withholds nothing, steady CPU within 5
#                    points of the setpoint, nothing lost or applied twice.
#                    Each run waits for the CPU to settle within 2.5 points
#                    of the setpoint before its burst, and traces the leases
#                    through the burst (-inner-tolerance sets PARAMS
#                    inner_tolerance). MariaDB runs on a CPU of its own
#                    (E2E_CASCADE_CPUS, default 1: -mariadb-cpus; empty: as
#                    it runs), the workload scaled to it by a load probe.
#                    Not in make test: the short run takes over 3 minutes
#                    to learn the references, and the long run's ratio
#                    needs a quiet machine (docs/consumers.md, "On
#                    MariaDB").
#                    E2E_CASCADE_LONG=1: 30 s ticks with each CPU datapoint
#                    published 30 s late (a production pipeline at half
#                    scale), the lab's reference setpoint of 70 %, a
#                    3-minute burst of 20 points (about 16 minutes), and it
#                    also asserts 5 times fewer seconds above setpoint + 5
#                    with the inner loop (E2E_CASCADE_SETPOINT=30: the
#                    low setpoint, where the latency rises too little for
#                    that; docs/consumers.md, "On MariaDB").
E2E_CASCADE_LONG ?=
E2E_CASCADE_CPUS ?= 1
E2E_CASCADE_SETPOINT ?= $(if $(E2E_CASCADE_LONG),70,30)
E2E_CASCADE_FLAGS ?= -mariadb-cpus '$(E2E_CASCADE_CPUS)' $(if $(E2E_CASCADE_LONG),-tick 30s -metric-delay 30s -phase 90s -burst 3m -burst-points 20 -assert-ratio,-tick 5s -phase 10s -burst 12s)

.PHONY: e2e-cascade

## e2e-cascade: the inner loop on and off under a load burst on MariaDB; JSON last line (E2E_CASCADE_LONG=1: the long run at setpoint 70, ratio asserted).
e2e-cascade: e2e-bootstraps
	$(GO) run ./internal/e2e/full -scenario cascade -setpoint $(E2E_CASCADE_SETPOINT) -max-rate 100 -consumers 8 -log-dir .cache/e2e/cascade \
		-controller $(E2E_BIN)/controller/bootstrap -consumer $(E2E_BIN)/sqs-consumer/bootstrap $(E2E_CASCADE_FLAGS)
# make e2e-shared: several queues into one database on the real plant: two
# ElasticMQ queues into one MariaDB through the SQS consumer bootstraps, each
# queue's consumers on a member loop (weights 2:1) of one destination whose
# controller ticks on MariaDB's CPU; both backlogged (CPU in its band, stored
# counts by weight), a weight edit, one queue idle (its share taken by the
# other), every message stored once. About 80 s; JSON last line
# (docs/controller.md, "Several queues into one database").
# E2E_SHARED_FLAGS='-phase 60s -measure 120s' for the longer version.
# In make test since three runs in a row passed (78, 83 and 84 s) after two
# fixes: its weight-edit check (rates 10.16 and 2.88 once) failed because a
# member read as limited by demand on one lumpy 5 s count (fixed in the
# split), and its share window counted the consumers' start (fixed in the
# harness: it starts after two ticks with neither member limited).
E2E_SHARED_FLAGS ?=

.PHONY: e2e-shared

TEST_E2E += e2e-shared

## e2e-shared: two queues into one MariaDB, weights 2:1, on the real consumers and controller; JSON last line (docs/controller.md).
e2e-shared: e2e-bootstraps
	$(GO) run ./internal/e2e/shared -controller $(E2E_BIN)/controller/bootstrap -consumer $(E2E_BIN)/sqs-consumer/bootstrap $(E2E_SHARED_FLAGS)
# make e2e-foreign: a consumer Lambda without Sluice code (aws-lambda-go
# only, internal/e2e/foreign/consumer) under the RIE behind `sluice local
# esm --mapping --function`, paced through its mapping alone from the
# function's CloudWatch figures; MariaDB's CPU is the plant. About 90 s;
# JSON last line (docs/controller.md, "Foreign consumers").
# Not in make test: its settle check (mean CPU within 5 points of 30 over
# 20 s) fails on busy and on quiet machines alike. Busy (batches of 3 to 4
# s), four instances cannot take what setpoint 30 needs (22.3 % once);
# quiet (batches of 1.3 s), the rate it needs lies near the floor of two
# instances, the mapping is turned off and on during phase one and the CPU
# swings between 0 and 47 % (24.6 % in a CI run with six instances).
E2E_FOREIGN_FLAGS ?=

.PHONY: e2e-foreign

## e2e-foreign: a consumer without Sluice code paced by its mapping alone on MariaDB; JSON last line (docs/controller.md).
e2e-foreign: e2e-bootstraps
	mkdir -p $(E2E_BIN)/foreign
	CGO_ENABLED=0 $(GO) build $(E2E_LAMBDA_FLAGS) -o $(E2E_BIN)/foreign/bootstrap ./internal/e2e/foreign/consumer
	$(GO) build -o $(E2E_BIN)/sluice ./cmd/sluice
	$(GO) run ./internal/e2e/foreign -controller $(E2E_BIN)/controller/bootstrap -consumer $(E2E_BIN)/foreign/bootstrap \
		-sluice $(E2E_BIN)/sluice $(E2E_FOREIGN_FLAGS)
