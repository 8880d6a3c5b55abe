// Command kdload is Kernodeck's bounded load generator. It drives a running
// service on this machine (loopback only) and prints what it measured:
//
//	kdload rentals  N rentals (at most 100,000) created through the API,
//	                paid by support attribution, provisioned by the worker's
//	                driver into their 30-day active period; a checkpoint line
//	                every -every active rentals (worker and Temporal server
//	                RSS, database sizes, rate); then workflow task latencies,
//	                history events per rental, PostgreSQL rows and size; on
//	                scripts/load.sh's service or prodlike's
//	kdload api      GET /v1/orders/{ref} and POST /v1/orders at rising
//	                concurrency beside GET /healthz, and a bare
//	                StartWorkflow + INSERT loop, as ratios
//	kdload burst    N orders with an LTC payment request paid by one block
//	                of a few transactions with thousands of outputs: per
//	                order block -> paid and -> active, then a bare loop
//	                (signal -> activity -> row) for the same N; run on
//	                scripts/prodlike.sh's deployment (issue 23)
//
// scripts/load.sh starts the service and runs both; BENCHMARKS.md records
// the results. Every loop is bounded in count and time.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: kdload rentals|api|burst [flags] (kdload CMD -h for the flags)
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	var err error
	switch args[0] {
	case "rentals":
		r := rentals{}
		r.flagsRentals(fs) // into r itself: a copy of a flag-bound value would keep the defaults
		if err = fs.Parse(args[1:]); err != nil {
			return 2
		}
		err = r.run(ctx, stdout)
	case "burst":
		b := burst{}
		b.flagsBurst(fs)
		if err = fs.Parse(args[1:]); err != nil {
			return 2
		}
		err = b.run(ctx, stdout)
	case "api":
		a := apiLoad{}
		a.flags(fs)
		fs.StringVar(&a.levels, "c", "1,4,16,64", "concurrency levels")
		fs.DurationVar(&a.each, "d", 10*time.Second, "duration of each measurement (at most 60s)")
		fs.IntVar(&a.rate, "rate", 1000, "then GET an order at this fixed rate (0: skip)")
		fs.DurationVar(&a.warmup, "warmup", 2*time.Second, "at the fixed rate first, reported apart (0: none)")
		if err = fs.Parse(args[1:]); err != nil {
			return 2
		}
		err = a.run(ctx, stdout)
	default:
		fmt.Fprint(stderr, usage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "kdload:", err)
		return 1
	}
	return 0
}
