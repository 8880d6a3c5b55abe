// Package browsertest drives the customer web site (package web) in a real
// headless Chromium (Debian's chromium, through chromedp) against the whole
// service: Temporal dev server, worker with the real activities, PostgreSQL,
// and a Litecoin Core regtest node followed by a real chain watcher. Its
// tests write screenshots to $KERNODECK_SCREENSHOT_DIR (default
// .screenshots/ at the repository root, not committed).
package browsertest
