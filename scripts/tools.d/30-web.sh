# The web site's tools: Debian's Chromium for the browser tests (web/browsertest,
# driven with chromedp) and @redocly/cli, which lints the OpenAPI document in
# scripts/test.sh. Redocly goes to a folder outside the repository, linked
# as $GOBIN_DIR/redocly (on the test script's PATH).
if [ ! -x /usr/bin/chromium ]; then
	log "installing chromium from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq && apt-get install -y -qq -o DPkg::Lock::Timeout=600 chromium >/dev/null
fi
REDOCLY_VERSION=2.77.0
REDOCLY_DIR="${KERNODECK_TOOLS_DIR:-$HOME/.cache/kernodeck-tools}/redocly-$REDOCLY_VERSION"
if [ ! -x "$REDOCLY_DIR/node_modules/.bin/redocly" ]; then
	log "installing @redocly/cli $REDOCLY_VERSION with npm"
	mkdir -p "$REDOCLY_DIR"
	npm install --prefix "$REDOCLY_DIR" --no-audit --no-fund --loglevel=error "@redocly/cli@$REDOCLY_VERSION" >/dev/null
fi
ln -sf "$REDOCLY_DIR/node_modules/.bin/redocly" "$GOBIN_DIR/redocly"
