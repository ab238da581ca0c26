# The controller: the scheduled Lambda, its SAM template, the
# end-to-end run and the benchmarks.
#
#   make build-ControllerFunction ARTIFACTS_DIR=dir   what `sam build` calls (arm64 bootstrap)
#   make controller-bootstrap                         bootstrap for this machine (for the RIE)
#   make lint-template                                cfn-lint template.yaml (part of `make lint`)
#   make e2e-controller                               moto + RIE end-to-end run, JSON last line
#   make bench-controller                             API calls per tick, handler time, binary size
#   make local-controller TABLE=T [PERIOD=1m]         the real bootstrap under the RIE on a schedule against table T

CONTROLLER_PKG := ./functions/controller
CONTROLLER_HOST := $(BIN)/controller-host/bootstrap
CONTROLLER_ARM64 := $(BIN)/controller-arm64/bootstrap
GO_LAMBDA_FLAGS := -trimpath -ldflags='-s -w' -tags lambda.norpc
ARTIFACTS_DIR ?= $(BIN)/sam-artifacts

.PHONY: build-ControllerFunction controller-bootstrap controller-bootstrap-arm64 lint-template e2e-controller bench-controller local-controller

## build-ControllerFunction: SAM's makefile build (BuildMethod: makefile): bootstrap for provided.al2023 arm64 into $(ARTIFACTS_DIR).
build-ControllerFunction:
	mkdir -p $(ARTIFACTS_DIR)
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(GO_LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap $(CONTROLLER_PKG)

## controller-bootstrap: the controller's bootstrap for this machine, to run under the Runtime Interface Emulator.
controller-bootstrap:
	mkdir -p $(dir $(CONTROLLER_HOST))
	CGO_ENABLED=0 $(GO) build $(GO_LAMBDA_FLAGS) -o $(CONTROLLER_HOST) $(CONTROLLER_PKG)

controller-bootstrap-arm64:
	$(MAKE) --no-print-directory build-ControllerFunction ARTIFACTS_DIR=$(dir $(CONTROLLER_ARM64))

## lint-template: cfn-lint template.yaml.
lint-template:
	cfn-lint template.yaml

lint: lint-template

TEST_E2E += e2e-controller

## e2e-controller: starts moto_server and two RIEs, ticks the real bootstrap (single and concurrent), edits PARAMS with the aws CLI, stops them; JSON last line.
e2e-controller: controller-bootstrap
	$(GO) run ./internal/e2e/controller -bootstrap $(CONTROLLER_HOST)

## bench-controller: API calls per tick (1, 100, 1000 loops, on moto), handler time for 1000 loops (in memory), bootstrap size; JSON last line.
bench-controller: controller-bootstrap-arm64
	$(GO) run ./internal/e2e/controller/bench -bootstrap $(CONTROLLER_ARM64)


PERIOD ?= 1m

## local-controller: the controller bootstrap under the RIE, invoked every PERIOD against TABLE of the local endpoint (sluice local controller).
local-controller: controller-bootstrap
	@test -n "$(TABLE)" || { echo "make local-controller: set TABLE=<your table>" >&2; exit 2; }
	$(GO) run ./cmd/sluice local controller --table $(TABLE) --period $(PERIOD) --bootstrap $(CONTROLLER_HOST)
