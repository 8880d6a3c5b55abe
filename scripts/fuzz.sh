#!/usr/bin/env bash
# Runs every fuzz target for KERNODECK_FUZZTIME each (default 3s: a short
# pass, about 8 minutes with the instrumented builds; not part of the test
# command, which replays the seed corpora; BENCHMARKS.md records the long
# runs, e.g. KERNODECK_FUZZTIME=10m scripts/fuzz.sh). Only FUZZ=<name> runs
# one target.
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
	./payout:FuzzCheck
	./payout:FuzzCheckSigned
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
	corpus="$pkg/testdata/fuzz/$name"
	before=$(ls "$corpus" 2>/dev/null | sort || true)
	out=$(mktemp)
	if go test -run '^$' -timeout 0 -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime 1s "$pkg" 2>&1 | tee "$out"; then
		rm -f "$out"
		continue
	fi
	after=$(ls "$corpus" 2>/dev/null | sort || true)
	# Go's fuzz coordinator can end a duration run with a bare "context
	# deadline exceeded" and no failing input (golang/go#75804, fixed in Go
	# 1.27): not a finding. Anything else, or a new input, fails.
	if [ "$before" = "$after" ] && grep -q '^    context deadline exceeded$' "$out" && ! grep -q 'Failing input written' "$out"; then
		echo "fuzz $pkg $name: the fuzz coordinator's deadline race (golang/go#75804), no failing input: not a failure"
		rm -f "$out"
		continue
	fi
	rm -f "$out"
	exit 1
done
