package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/big"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/apiclient"
	"github.com/kernodeck/kernodeck/devnodes"
)

// burst is issue 23's busy block: n orders, each with an LTC payment
// request, paid by a few transactions of thousands of outputs mined in one
// block; then, per order, the time from the confirming block to `paid` and
// to `active`, and the bare ceiling: a signal to a minimal workflow that
// writes one row through an activity, for the same n. With -btc, more
// orders with a BTC payment request, paid by one transaction on btcd mined
// in one block just after Litecoin's, are watched beside them.
type burst struct {
	common
	n, conc  int
	ltcURL   string
	btc      int
	btcURL   string
	btcConf  int
	perTx    int
	days     int
	conf     int
	bare     bool
	bareRuns int
	detect   time.Duration
	timeout  time.Duration
	clients  [2]*apiclient.Client
	checkRun bool
	kill     bool
	rollout  string
	versions bool
	// temporalMetrics is the Temporal server's /metrics.
	temporalMetrics string
}

// burstOrder is an order of the burst and its payment request.
type burstOrder struct{ ref, address, amount string }

func (b *burst) flagsBurst(fs *flag.FlagSet) {
	b.flags(fs)
	b.prodlikeFlags(fs)
	fs.StringVar(&b.ltcURL, "ltc", envOr("KD_PRODLIKE_LTC_URL", ""), "Litecoin Core wallet RPC URL (http://user:pass@127.0.0.1:port/wallet/NAME)")
	fs.IntVar(&b.n, "n", 500, "orders in the burst (at most 20000)")
	fs.IntVar(&b.btc, "btc", 0, "more orders, with a BTC payment request, paid by one transaction on btcd (at most 2000)")
	fs.StringVar(&b.btcURL, "btc-url", envOr("KD_PRODLIKE_BTC_URL", ""), "btcd's RPC URL (http://user:pass@127.0.0.1:port), for -btc; "+
		"btcd mines to the development payer (devnodes.SendBitcoin)")
	fs.IntVar(&b.btcConf, "btc-conf", 2, "Bitcoin confirmations of the deployment's policy (blocks mined after the broadcast)")
	fs.IntVar(&b.conc, "c", 16, "concurrent API clients while creating the orders")
	fs.IntVar(&b.perTx, "per-tx", 1000, "outputs per paying transaction")
	fs.IntVar(&b.days, "days", 3, "rental length of each order (3 days keeps the LTC needed low)")
	fs.IntVar(&b.conf, "conf", 6, "Litecoin confirmations of the deployment's policy (blocks mined after the broadcast)")
	fs.BoolVar(&b.bare, "bare", true, "also run the bare loop (signal -> activity -> row) for the same n")
	fs.IntVar(&b.bareRuns, "bare-runs", 3, "runs of the bare loop, each once no vacuum runs: the burst is compared with their median and their fastest")
	fs.DurationVar(&b.detect, "detect", 3*time.Minute, "wait at most this long for every payment to be seen in the mempool before mining")
	fs.DurationVar(&b.timeout, "timeout", 0, "give up after (default 10 min + 0.5 s per order)")
	fs.BoolVar(&b.checkRun, "check", true, "check afterwards, order by order, that the chain and the books agree")
	fs.BoolVar(&b.kill, "kill", false, "after the block: SIGKILL the chainwatch holding the lease (+1 s), worker-1 (+4 s) and api-1 (+7 s) "+
		"of scripts/prodlike.sh, which restarts them; customers read their orders meanwhile")
	fs.StringVar(&b.rollout, "rollout", "", "after the block: a rolling restart of prodlike's workers onto this kernodeck binary "+
		"(go build -tags kdrollout: one workflow history version ahead), worker-1 then worker-2, each by SIGTERM")
	fs.BoolVar(&b.versions, "versions", false, "afterwards: count the orders' workflows by the history version they recorded, and those that took the kdrollout step")
	fs.StringVar(&b.temporalMetrics, "temporal-metrics", envOr("KD_PRODLIKE_TEMPORAL_METRICS", ""),
		"the Temporal server's /metrics URL: report how it handed the activities to the workers (eagerly or through matching)")
}

func (b *burst) run(ctx context.Context, out io.Writer) error {
	if b.n < 1 || b.n > 20000 || b.conc < 1 || b.conc > 256 || b.perTx < 1 || b.perTx > 2500 || b.conf < 1 {
		return fmt.Errorf("-n must be 1..20000, -c 1..256, -per-tx 1..2500, -conf >= 1")
	}
	if b.btc < 0 || b.btc > 2000 || b.btcConf < 1 {
		return fmt.Errorf("-btc must be 0..2000, -btc-conf >= 1")
	}
	if b.btc > 0 && b.btcURL == "" {
		return fmt.Errorf("-btc-url (btcd's RPC URL) is required with -btc")
	}
	if b.bare && (b.bareRuns < 1 || b.bareRuns > 9) {
		return fmt.Errorf("-bare-runs must be 1..9")
	}
	if b.kill && b.rollout != "" {
		return fmt.Errorf("-kill and -rollout are separate runs")
	}
	if b.ltcURL == "" {
		return fmt.Errorf("-ltc (the Litecoin wallet's RPC URL) is required")
	}
	var err error
	if b.clients, err = b.replicas(); err != nil {
		return err
	}
	if b.timeout == 0 {
		b.timeout = 10*time.Minute + time.Duration(b.n)*time.Second/2
	}
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	db, err := sqlx.Open("postgres", b.dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	counted, err := b.readCounters(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "# burst of %d orders, %s, %d cores, load average %s\n", b.n, time.Now().UTC().Format(time.RFC3339), runtime.NumCPU(), loadavg())
	if _, err := db.ExecContext(ctx, `UPDATE gpu_inventory SET total_gpus = total_gpus + $1 WHERE gpu_model = $2`, 2*b.n*8, b.model); err != nil {
		return fmt.Errorf("capacity: %w", err)
	}

	// Customers, a hundred orders each (their addresses confirmed).
	run := time.Now().UnixNano()
	total := b.n + b.btc
	tokens := make([]string, (total+ordersPerCustomer-1)/ordersPerCustomer)
	if err := parallel(ctx, len(tokens), min(b.conc, 4), func(ctx context.Context, i int) error {
		t, err := b.customer(ctx, fmt.Sprintf("burst-%d-%d@example.com", run, i), i)
		tokens[i] = t
		return err
	}); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `UPDATE accounts SET email_verified_at = now() WHERE email LIKE $1`,
		fmt.Sprintf("burst-%d-%%@example.com", run)); err != nil {
		return err
	}

	// Orders and their payment requests, through both API replicas: the
	// first n in LTC, the -btc others in BTC.
	orders := make([]burstOrder, total)
	start := time.Now()
	if err := parallel(ctx, total, b.conc, func(ctx context.Context, i int) error {
		api := b.clients[i%2]
		tok := tokens[i/ordersPerCustomer]
		ref, err := api.CreateOrder(ctx, tok, b.model, b.days)
		if err != nil {
			return fmt.Errorf("order %d: %w", i, err)
		}
		asset, network := "LTC", "litecoin"
		if i >= b.n {
			asset, network = "BTC", "bitcoin"
		}
		// The workflow may still be starting: retry a few times.
		for attempt := 0; ; attempt++ {
			addr, amount, err := api.PaymentRequest(ctx, tok, ref, asset, network)
			if err == nil {
				orders[i] = burstOrder{ref, addr, amount}
				return nil
			}
			if attempt == 30 {
				return fmt.Errorf("payment request of %s: %w", ref, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
		}
	}); err != nil {
		return err
	}
	setup := time.Since(start)
	withBTC := ""
	if b.btc > 0 {
		withBTC = fmt.Sprintf(" and %d with a BTC one", b.btc)
	}
	fmt.Fprintf(out, "%d orders with an LTC payment request%s in %.1f s (%.0f/s, c=%d, two API replicas)\n",
		b.n, withBTC, setup.Seconds(), float64(total)/setup.Seconds(), b.conc)

	// Enough mature coins, then the paying transactions.
	need := new(big.Rat)
	for _, o := range orders[:b.n] {
		a, ok := new(big.Rat).SetString(o.amount)
		if !ok {
			return fmt.Errorf("amount %q of %s", o.amount, o.ref)
		}
		need.Add(need, a)
	}
	needF, _ := need.Float64()
	if err := b.fund(ctx, needF+1); err != nil {
		return err
	}
	refs := make([]string, total)
	for i, o := range orders {
		refs[i] = o.ref
	}
	var txids []string
	tBroadcast := time.Now()
	for lo := 0; lo < b.n; lo += b.perTx {
		outs := map[string]json.Number{}
		for _, o := range orders[lo:min(lo+b.perTx, b.n)] {
			outs[o.address] = json.Number(o.amount)
		}
		var txid string
		if err := ltcRPC(ctx, b.ltcURL, "sendmany", []any{"", outs}, &txid); err != nil {
			return fmt.Errorf("sendmany: %w", err)
		}
		txids = append(txids, txid)
	}
	fmt.Fprintf(out, "broadcast %d transactions (%d outputs each at most, %.4f LTC in all) in %.1f s\n",
		len(txids), b.perTx, needF, time.Since(tBroadcast).Seconds())
	var btcTxid string
	if b.btc > 0 {
		if btcTxid, err = b.payBitcoin(ctx, out, orders[b.n:]); err != nil {
			return err
		}
	}

	// Push: the watcher, a peer of the node, sees them in the mempool.
	seen, err := b.waitStatus(ctx, db, refs, [][]string{{"payment_detected", "paid", "provisioning", "active"}}, b.detect)
	if err != nil {
		return err
	}
	detected := seen[0]
	lastDetected := time.Duration(0)
	for _, t := range detected {
		if !t.IsZero() {
			lastDetected = max(lastDetected, t.Sub(tBroadcast))
		}
	}
	fmt.Fprintf(out, "broadcast -> payment_detected: %d of %d within %.1f s (last at %.1f s)\n",
		countSet(detected), total, b.detect.Seconds(), lastDetected.Seconds())

	// One block pays them all; the policy's confirmations follow at once.
	var addr string
	if err := ltcRPC(ctx, b.ltcURL, "getnewaddress", nil, &addr); err != nil {
		return err
	}
	var blocks []string
	if err := ltcRPC(ctx, b.ltcURL, "generatetoaddress", []any{b.conf, addr}, &blocks); err != nil {
		return err
	}
	tBlock := time.Now()
	atBlock, err := b.readCounters(ctx)
	if err != nil {
		return err
	}
	var blk struct {
		Tx     []string `json:"tx"`
		Height int64    `json:"height"`
	}
	if err := ltcRPC(ctx, b.ltcURL, "getblock", []any{blocks[0], 1}, &blk); err != nil {
		return err
	}
	inBlock := 0
	for _, t := range txids {
		if slices.Contains(blk.Tx, t) {
			inBlock++
		}
	}
	fmt.Fprintf(out, "block %d holds %d of the %d paying transactions (%d transactions in all); %d confirmations mined\n",
		blk.Height, inBlock, len(txids), len(blk.Tx), b.conf)
	tBTCBlock := tBlock
	if b.btc > 0 {
		btcBlocks, err := b.mineBitcoin(ctx, out, btcTxid)
		if err != nil {
			return err
		}
		tBTCBlock = time.Now()
		blocks = append(blocks, btcBlocks...)
	}

	var paid, active []time.Time
	var wg sync.WaitGroup
	var perr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		seen, err := b.waitStatus(ctx, db, refs, [][]string{{"paid", "provisioning", "active"}, {"active"}}, 0)
		if perr = err; err == nil {
			paid, active = seen[0], seen[1]
		}
	}()
	var kills *killReport
	kctx, kcancel := context.WithCancel(ctx)
	defer kcancel()
	stopReading := func() *readReport { return nil }
	// replaced is closed when the kills or the rollout are over.
	replaced := make(chan struct{})
	if b.rollout != "" {
		kills = &killReport{}
		go func() { defer close(replaced); b.rollWorkers(kctx, tBlock, kills) }()
	}
	if b.kill {
		kills = &killReport{}
		go func() { defer close(replaced); b.killReplicas(kctx, db, tBlock, kills) }()
		// Customers read their orders through both replicas meanwhile.
		stopReading = b.reading(kctx, refs, tokens)
	}
	wg.Wait()
	atActive, err := b.readCounters(ctx)
	if err != nil {
		return err
	}
	if kills != nil {
		// A small burst may end before the kills or the rollout do: they
		// go on (the customers reading) to the last restart.
		<-replaced
	}
	readers := stopReading()
	kcancel()
	if perr != nil {
		return perr
	}
	toPaid := since(paid[:b.n], tBlock)
	toActive := since(active[:b.n], tBlock)
	printLatencies(out, "", "paid:  ", toPaid)
	printLatencies(out, "", "active:", toActive)
	if b.btc > 0 {
		printLatencies(out, "BTC ", "paid:  ", since(paid[b.n:], tBTCBlock))
		printLatencies(out, "BTC ", "active:", since(active[b.n:], tBTCBlock))
	}
	fmt.Fprintf(out, "load average after: %s\n", loadavg())
	if kills != nil {
		kills.mu.Lock()
		for _, line := range kills.lines {
			fmt.Fprintln(out, line)
		}
		kills.mu.Unlock()
	}
	if readers != nil {
		fmt.Fprintf(out, "customers' order reads during the burst: %s (api-1 killed or not yet restarted)\n", readers)
	}

	if b.checkRun {
		if btcTxid != "" {
			txids = append(txids, btcTxid)
		}
		if err := b.check(ctx, out, db, refs, txids, blocks); err != nil {
			return err
		}
	}
	b.reportCounters(ctx, out, counted, atBlock, atActive)
	if b.versions {
		if err := b.reportVersions(ctx, out, refs); err != nil {
			return err
		}
	}
	if b.bare {
		var reads func(context.Context) func() *readReport
		if b.kill {
			// The same customers read their orders during each bare run:
			// the ceiling and the burst share the machine with them alike.
			reads = func(ctx context.Context) func() *readReport { return b.reading(ctx, refs, tokens) }
		}
		median, best, err := b.bareLoop(ctx, out, db, reads)
		if err != nil {
			return fmt.Errorf("bare loop: %w", err)
		}
		paidRate, activeRate := float64(len(toPaid))/toPaid.q(1).Seconds(), float64(len(toActive))/toActive.q(1).Seconds()
		fmt.Fprintf(out, "ratio to the bare loop's median run: paid %.0f %%, active %.0f %%; to its fastest: paid %.0f %%, active %.0f %%\n",
			100*paidRate/median, 100*activeRate/median, 100*paidRate/best, 100*activeRate/best)
	}
	return nil
}

// fund mines blocks to the wallet until its mature balance covers need LTC
// (regtest: 50 LTC a block below height 150, halved every 150; Litecoin
// Core 0.21 cannot mine past height ~431 with wallet transactions pending).
func (b *burst) fund(ctx context.Context, need float64) error {
	for {
		var bal float64
		if err := ltcRPC(ctx, b.ltcURL, "getbalance", nil, &bal); err != nil {
			return err
		}
		if bal >= need {
			return nil
		}
		var h int64
		if err := ltcRPC(ctx, b.ltcURL, "getblockcount", nil, &h); err != nil {
			return err
		}
		if h > 400 {
			return fmt.Errorf("the wallet holds %.2f LTC, %.2f needed, and the chain is at %d: start a fresh deployment", bal, need, h)
		}
		var addr string
		if err := ltcRPC(ctx, b.ltcURL, "getnewaddress", nil, &addr); err != nil {
			return err
		}
		if err := ltcRPC(ctx, b.ltcURL, "generatetoaddress", []any{10, addr}, nil); err != nil {
			return err
		}
	}
}

// --- helpers -------------------------------------------------------------------

// ltcRPC is one JSON-RPC call to Litecoin Core (sendmany of thousands of
// outputs takes a while: a long timeout).
func ltcRPC(ctx context.Context, url, method string, params []any, out any) error {
	return devnodes.RPCWithin(ctx, 5*time.Minute, url, method, params, out)
}

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

func sec(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func loadavg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(raw))
	return strings.Join(f[:min(3, len(f))], " ")
}
