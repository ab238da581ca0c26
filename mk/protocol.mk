# The consumer protocol (docs/protocol.md): its lease benchmark.
.PHONY: bench-leases

## bench-leases: capacity one consumer consumes per second in each lease layout
## (1,000 live and 10,000 lapsed leases in one loop, then over 100 loops), computed
## as DynamoDB bills it, on the local DynamoDB; prints one JSON line. About 30 min
## on a busy moto (it seeds 66,000 items).
bench-leases:
	bash localstack/stack/up.sh moto
	$(STACK_ENV) && set -o pipefail && SLUICE_LEASE_BENCH_LIVE=$${SLUICE_LEASE_BENCH_LIVE:-1000} SLUICE_LEASE_BENCH_LAPSED=$${SLUICE_LEASE_BENCH_LAPSED:-10000} \
		$(GO) test -count=1 -timeout 60m -run TestLeaseCapacity -v ./internal/bench/leases/ | grep '^{"bench"'
