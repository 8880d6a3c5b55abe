package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

const supportUsage = `kernodeck support: act on orders and top-ups as a support agent.

Every action goes through the support API (so it is authenticated, audited
with your agent name and reason, and sent to the workflow).

Usage:
  kernodeck support [flags] show ORDER
  kernodeck support [flags] show-topup TOPUP
  kernodeck support [flags] attribute-payment ORDER --reason R [--amount-cents N]
  kernodeck support [flags] attribute-topup TOPUP --reason R [--amount-cents N]
  kernodeck support [flags] extend ORDER --days N --reason R
  kernodeck support [flags] end-early ORDER --reason R
  kernodeck support [flags] retry-provisioning ORDER --reason R
  kernodeck support [flags] cancel ORDER --reason R
  kernodeck support [flags] cancel-topup TOPUP --reason R
  kernodeck support [flags] refund ORDER --amount-cents N --reason R
  kernodeck support [flags] requests
  kernodeck support [flags] exceptions
  kernodeck support [flags] refund-exception ID --reason R [--amount-cents N]
  kernodeck support [flags] count-exception ID --reason R [--amount-cents N]
  kernodeck support [flags] resolve-exception ID --reason R   (a payment reverted after confirmation)
  kernodeck support [flags] value-exception ID --reason R (--amount-cents N | --returned-on-chain)
  kernodeck support [flags] find EMAIL|TXID|ADDRESS|REFERENCE
  kernodeck support [flags] awaiting-approval
  kernodeck support [flags] approve ACTION_ID --reason R   (another agent's money action; seniors only)
  kernodeck support [flags] decline ACTION_ID --reason R
  kernodeck support [flags] answer REQUEST_ID --message M

A money action above KERNODECK_FOUR_EYES_CENTS is recorded and answered
awaiting_approval: a second agent approves it (approve), which carries it
out, or declines it; its own agent can do neither.

Each action is sent with a new key of its own (Idempotency-Key): sent
again with --idempotency-key KEY (printed when an action fails or is in
progress), it is not carried out twice and its first answer comes back.

Flags (before the action):
  --url         support API base URL (env KERNODECK_SUPPORT_URL, default http://127.0.0.1:8080)
  --token-file  file holding the agent token (env KERNODECK_SUPPORT_TOKEN_FILE)

The agent token comes from the environment (KERNODECK_SUPPORT_TOKEN) or from
a file (--token-file, KERNODECK_SUPPORT_TOKEN_FILE), never from the command
line: arguments are visible to every user of the machine (ps, /proc) and
kept in shell histories. --token is refused.
`

// runSupport is the support agent's CLI. It returns the process exit code.
func runSupport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("support", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, supportUsage) }
	base := fs.String("url", envOr("KERNODECK_SUPPORT_URL", "http://127.0.0.1:8080"), "support API base URL")
	tokenFile := fs.String("token-file", os.Getenv("KERNODECK_SUPPORT_TOKEN_FILE"), "file holding the agent token")
	if tokenOnCommandLine(args) {
		fmt.Fprintln(stderr, "support: --token is refused: a token given as an argument is visible to every user of the machine (ps) "+
			"and kept in shell histories. Set KERNODECK_SUPPORT_TOKEN, or put the token in a file readable by you only "+
			"and pass --token-file FILE (or KERNODECK_SUPPORT_TOKEN_FILE).")
		return 2
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	args = fs.Args()
	if len(args) == 1 && (args[0] == "requests" || args[0] == "exceptions" || args[0] == "awaiting-approval") {
		args = append(args, "") // the queue takes no reference
	}
	if len(args) < 2 {
		fs.Usage()
		return 2
	}
	action, ref := args[0], args[1]
	af := flag.NewFlagSet(action, flag.ContinueOnError)
	af.SetOutput(stderr)
	reason := af.String("reason", "", "why (recorded in the audit log)")
	days := af.Int("days", 0, "days to add (extend)")
	cents := af.Int64("amount-cents", 0, "amount in USD cents")
	message := af.String("message", "", "answer to the customer (answer)")
	returned := af.Bool("returned-on-chain", false, "sent back on chain: closes it with no value (value-exception)")
	key := af.String("idempotency-key", "", "the action's key, to send it again without running it twice (default: a new one)")
	if err := af.Parse(args[2:]); err != nil {
		return 2
	}
	token, err := supportToken(*tokenFile)
	if err != nil {
		fmt.Fprintln(stderr, "support:", err)
		return 2
	}

	method, path := http.MethodPost, ""
	body := map[string]any{"reason": *reason}
	switch action {
	case "show":
		method, path, body = http.MethodGet, "/v1/support/orders/"+ref, nil
	case "show-topup":
		method, path, body = http.MethodGet, "/v1/support/topups/"+ref, nil
	case "attribute-payment":
		path = "/v1/support/orders/" + ref + "/attribute-payment"
		if *cents > 0 {
			body["amount_cents"] = *cents
		}
	case "attribute-topup":
		path = "/v1/support/topups/" + ref + "/attribute-payment"
		if *cents > 0 {
			body["amount_cents"] = *cents
		}
	case "extend":
		path = "/v1/support/orders/" + ref + "/extend"
		body["days"] = *days
	case "end-early", "retry-provisioning", "cancel":
		path = "/v1/support/orders/" + ref + "/" + action
	case "cancel-topup":
		path = "/v1/support/topups/" + ref + "/cancel"
	case "requests":
		method, path, body = http.MethodGet, "/v1/support/support-requests", nil
	case "answer":
		path = "/v1/support/support-requests/" + ref + "/answer"
		body = map[string]any{"message": *message}
	case "refund":
		path = "/v1/support/orders/" + ref + "/refund"
		body["amount_cents"] = *cents
	case "exceptions":
		method, path, body = http.MethodGet, "/v1/support/exceptions", nil
	case "resolve-exception":
		path = "/v1/support/exceptions/" + url.PathEscape(ref) + "/resolve"
	case "refund-exception", "count-exception":
		path = "/v1/support/exceptions/" + url.PathEscape(ref) + "/" + strings.TrimSuffix(action, "-exception")
		body["amount_cents"] = *cents
	case "value-exception":
		path = "/v1/support/exceptions/" + url.PathEscape(ref) + "/value"
		body["amount_cents"] = *cents
		if *returned {
			body["returned_on_chain"] = true
		}
	case "awaiting-approval":
		method, path, body = http.MethodGet, "/v1/support/actions/awaiting-approval", nil
	case "approve", "decline":
		path = "/v1/support/actions/" + url.PathEscape(ref) + "/" + action
	case "find":
		method, path, body = http.MethodGet, "/v1/support/find?q="+url.QueryEscape(ref), nil
	default:
		fmt.Fprintf(stderr, "support: unknown action %q\n\n", action)
		fs.Usage()
		return 2
	}

	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(*base, "/")+path, rd)
	if err != nil {
		fmt.Fprintln(stderr, "support:", err)
		return 1
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	keyed := method == http.MethodPost && action != "answer"
	if keyed {
		if *key == "" {
			*key = rand.Text()
		}
		req.Header.Set("Idempotency-Key", *key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(stderr, "support:", err)
		keyHint(stderr, keyed, *key)
		return 1
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var pretty bytes.Buffer
	if json.Indent(&pretty, out, "", "  ") == nil {
		out = pretty.Bytes()
	}
	if resp.StatusCode >= 300 {
		fmt.Fprintf(stderr, "support: %s\n%s\n", resp.Status, out)
		keyHint(stderr, keyed && resp.StatusCode >= 500, *key)
		return 1
	}
	fmt.Fprintf(stdout, "%s\n", out)
	keyHint(stderr, keyed && resp.StatusCode == http.StatusAccepted, *key)
	return 0
}

// keyHint tells how to send an action again without running it twice,
// when its answer may not be its last word (a failure, in progress).
func keyHint(w io.Writer, show bool, key string) {
	if show {
		fmt.Fprintf(w, "support: to ask again without running the action twice: --idempotency-key %s\n", key)
	}
}

// tokenOnCommandLine tells whether args pass a token as a flag (-token,
// --token, with its value after = or as the next argument), before or
// after the action. Values of other flags are skipped, so a message that
// reads "--token" is not mistaken for one.
func tokenOnCommandLine(args []string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return false
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			continue
		}
		if name == "token" {
			return true
		}
		if !hasValue && takesValue[name] {
			i++ // its value, whatever it reads
		}
	}
	return false
}

// takesValue are the CLI's flags that take a value as the next argument.
var takesValue = map[string]bool{"url": true, "token-file": true, "reason": true, "days": true, "amount-cents": true, "message": true}

// supportToken reads the agent token from file when one is named, else
// from KERNODECK_SUPPORT_TOKEN.
func supportToken(file string) (string, error) {
	if file == "" {
		if t := os.Getenv("KERNODECK_SUPPORT_TOKEN"); t != "" {
			return t, nil
		}
		return "", errors.New("no agent token: set KERNODECK_SUPPORT_TOKEN, or pass --token-file FILE (or KERNODECK_SUPPORT_TOKEN_FILE)")
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("agent token file: %w", err)
	}
	t := strings.TrimSpace(string(raw))
	if t == "" || strings.ContainsAny(t, "\r\n") {
		return "", fmt.Errorf("agent token file %s: one token expected, on one line", file)
	}
	return t, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
