# promtool (Debian's prometheus package) checks and unit-tests the alert rules
# in deploy/monitoring.
if ! command -v promtool >/dev/null 2>&1; then
	log "installing promtool from Debian's prometheus package"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
