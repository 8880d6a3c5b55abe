// Package chaos holds the chaos run (build tag chaos): `go test -tags chaos
// ./chaos -v -timeout 40m`. See chaos_test.go and BENCHMARKS.md.
package chaos
