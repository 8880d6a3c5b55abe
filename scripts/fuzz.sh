#!/usr/bin/env bash
# Runs every fuzz target for KERNODECK_FUZZTIME each (default 3s: the short
# pass scripts/test.sh makes; BENCHMARKS.md records the long runs, e.g.
# KERNODECK_FUZZTIME=10m scripts/fuzz.sh). Only FUZZ=<name> runs one target.
# A failure leaves its input in <package>/testdata/fuzz/<target>/: commit it
# with the fix, it is then replayed by every `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${KERNODECK_FUZZTIME:-3s}"
targets=(
	./api:FuzzJSONBodies
	./chainwatch/utxo:FuzzDecodeBlock
	./chainwatch/evm:FuzzDecodeTransfer
	./chainwatch/tron:FuzzBlock
	./chainwatch/solana:FuzzRPC
	./payments:FuzzPaymentURI
	./hdwallet:FuzzDerive
	./hdwallet:FuzzValidateAddress
)
for t in "${targets[@]}"; do
	pkg="${t%%:*}" name="${t##*:}"
	if [ -n "${FUZZ:-}" ] && [ "$FUZZ" != "$name" ]; then
		continue
	fi
	echo "fuzz $pkg $name for $fuzztime"
	# Minimizing a new input defaults to 60 s (long on the recorded blocks): 1 s.
	# -timeout 0: go test's default 10 m deadline would end a 10 m run with
	# "context deadline exceeded" instead of its result.
	go test -run '^$' -timeout 0 -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime 1s "$pkg"
done
