# The drift detector's figures: the production loop on the
# reference scenario with noise 1, the plant's gain doubled, halved or its
# dead time 5 s to 20 s at 30 min (alone, and followed by a setpoint edit
# 70 % to 50 % EDITS later), and the whole scenario without a change, on
# SEEDS seeds; one JSON line per run, then a summary. Fails when a change
# of gain is said after 10 ticks (or never) or a run without a change says
# one. No services needed.
.PHONY: bench-drift
SEEDS ?= 5
EDITS ?= 1m,5m,15m
bench-drift:
	$(GO) run ./internal/demo/driftbench -seeds $(SEEDS) -noise 1 -edits $(EDITS) -check
