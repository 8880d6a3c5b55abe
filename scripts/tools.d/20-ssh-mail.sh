# A real OpenSSH server (stand-in GPU hosts) and a real SMTP server (mailpit)
# for the provisioning and notification tests.
if [ ! -x /usr/sbin/sshd ]; then
	log "installing openssh-server from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq && apt-get install -y -qq openssh-server >/dev/null
fi
# uidmap's newuidmap/newgidmap: the host-isolation tests check a customer
# gets no subordinate ids, and that a range granted anyway (and used) is
# cleaned by the release.
if [ ! -x /usr/bin/newuidmap ]; then
	log "installing uidmap from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq && apt-get install -y -qq uidmap >/dev/null
fi
if [ ! -x "$GOBIN_DIR/mailpit" ]; then
	log "installing mailpit v1.33.1"
	GOFLAGS=-buildvcs=false go install github.com/axllent/mailpit@v1.33.1
fi
