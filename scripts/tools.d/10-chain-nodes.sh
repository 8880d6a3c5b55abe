# Local chain nodes for the chain watchers' integration tests and `dev`:
# btcd (Bitcoin regtest), Litecoin Core (regtest), geth (dev mode).
if [ ! -x "$GOBIN_DIR/btcd" ]; then
	log "installing btcd v0.24.2"
	GOFLAGS=-buildvcs=false go install github.com/btcsuite/btcd@v0.24.2
fi
if [ ! -x "$GOBIN_DIR/geth" ]; then
	log "installing geth v1.17.10 (several minutes the first time)"
	GOFLAGS=-buildvcs=false go install github.com/ethereum/go-ethereum/cmd/geth@v1.17.10
fi
if [ ! -x /usr/lib/litecoin/litecoind ]; then
	log "installing Litecoin Core from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq && apt-get install -y -qq litecoind >/dev/null
fi
