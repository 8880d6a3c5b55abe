# systemd-analyze, for `go test ./deploy` (TestSystemdUnitsVerify runs
# `systemd-analyze verify` on deploy/systemd's units and skips without it).
# Debian's systemd package provides it; nothing is started (no systemd runs
# as PID 1 here, and the test only verifies unit files).
if ! command -v systemd-analyze >/dev/null 2>&1; then
	log "installing systemd (for systemd-analyze) from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq && apt-get install -y -qq systemd >/dev/null
fi
