// Package authz holds no code: its test runs Kernodeck's Temporal server
// (scripts/temporal-tools/kdtemporal, built by scripts/prodlike.sh
// build-tools) behind mutual TLS and checks what each client certificate may
// do (docs/temporal-authorization.md).
package authz
