# cron's crontab and at's at/atq/atrm, so the host-isolation tests can leave a
# customer's cron and at jobs on the stand-in host and check teardown removes
# them. Only the commands are needed: no daemon is started (policy-rc.d or no
# init here), so nothing the tests queue ever runs on this machine.
if ! command -v crontab >/dev/null 2>&1 || ! command -v atq >/dev/null 2>&1; then
	log "installing cron and at from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq && apt-get install -y -qq cron at >/dev/null
fi
