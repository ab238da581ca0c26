# Sluice. The two commands a newcomer needs: `make demo` and `make test`.
SHELL := /bin/bash
GO ?= go
BIN := bin

.PHONY: demo test test-unit bench lint build clean

## demo: the embedded demo (simulated plant, in-memory stores, accelerated time). No services needed.
demo:
	$(GO) run ./cmd/sluice demo

## test: installs and starts what the tests need (localstack/stack/up.sh; they keep
## running for fast re-runs, `make down` stops them), then runs every test with the
## stack's environment (SLUICE_INTEGRATION=1): go vet, go test, the e2e targets.
test:
	bash localstack/stack/up.sh $(STACK_SERVICES)
	$(STACK_ENV) && $(GO) vet ./... && $(GO) test $(GO_TEST_FLAGS) ./...
	$(MAKE) --no-print-directory test-e2e

test-unit:
	$(GO) vet ./...
	$(GO) test -count=1 ./...

## bench: the Go benchmarks (with ratios against a baseline measured in the same
## run) and the controller's benchmark (API calls per tick, handler time, binary
## size; it starts its own moto_server), merged into one JSON object on the last line.
bench:
	mkdir -p out
	$(GO) test -run '^$$' -bench . -benchmem ./... | tee out/bench-go.txt
	$(MAKE) --no-print-directory bench-controller | tee out/bench-controller.txt
	@$(GO) run ./internal/bench/report -go out/bench-go.txt -json controller=out/bench-controller.txt

## lint: go vet and staticcheck.
lint:
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# Targets of each part of the system (e2e-controller, bench-consumers, up, down, ...).
include $(wildcard mk/*.mk)

build:
	$(GO) build ./...

clean:
	rm -rf $(BIN) .aws-sam
