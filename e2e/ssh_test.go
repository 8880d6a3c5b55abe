package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"golang.org/x/crypto/ssh"

	"github.com/kernodeck/kernodeck/apptest"
	"github.com/kernodeck/kernodeck/codec"
	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/hdwallet"
	"github.com/kernodeck/kernodeck/notify"
	"github.com/kernodeck/kernodeck/notify/mailtest"
	"github.com/kernodeck/kernodeck/payments"
	"github.com/kernodeck/kernodeck/postgres"
	"github.com/kernodeck/kernodeck/provision/sshhost"
	"github.com/kernodeck/kernodeck/provision/sshhost/sshtest"
	"github.com/kernodeck/kernodeck/rates"
	"github.com/kernodeck/kernodeck/secrets"
)

// e2eUserPrefix names the accounts this package creates on the machine.
const e2eUserPrefix = "kde-"

// The whole rental through the SSH driver on a real OpenSSH stand-in host:
// order (with availability in the quote), a payment request (BTC), the
// payment attributed by support,
// reserve / prepare / verify with nvidia-smi / access, the customer logs in
// with the generated key (shown once), a reminder, early end, teardown that
// removes the account; one email per step, each exactly once, none with a
// secret; and Temporal holds only ciphertext.
func TestRentalOverSSHWithMails(t *testing.T) {
	sshtest.RequireRoot(t)
	host := sshtest.Start(t, sshtest.RTXA5000)
	mp := mailtest.Start(t)
	e := newEnv(t, func(c *envConfig) {
		c.ssh = func(db *postgres.DB, kr *secrets.Keyring) *sshhost.Driver {
			return &sshhost.Driver{Store: postgres.Hosts{DB: db}, Keyring: kr, Signer: host.Admin, UserPrefix: e2eUserPrefix,
				ConnectTimeout: 5 * time.Second}
		}
		c.mail = &notify.SMTPConfig{Host: mp.SMTPHost, Port: mp.SMTPPort, Username: "u", Password: "p", TLS: "none"}
		// One reminder a few seconds into the 3-day period, so it is seen here.
		c.reminderOffsets = []time.Duration{72*time.Hour - 4*time.Second}
		c.payments = btcPayments(t)
	})
	inv := &sshhost.Inventory{Store: postgres.Hosts{DB: e.db}}
	if _, err := inv.Add(context.Background(), sshhost.Host{Name: "gpu-e2e-a5000", Address: host.Addr, Port: host.Port,
		Fingerprint: host.Fingerprint, KeyType: host.KeyType, GPUModel: "rtx-a5000", GPUCount: 1}); err != nil {
		t.Fatal(err)
	}
	dana := register(e, "Dana", "dana@example.com")
	cfg := map[string]any{"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 3, "preset": "notebook"}
	q := e.must(200, "POST", "/v1/quote", "", cfg)
	if av, _ := q["availability"].(map[string]any); av["available_now"] != true {
		t.Fatalf("quote availability: %v", q)
	}
	created := e.must(201, "POST", "/v1/orders", dana, cfg)
	ref := str(created["order"].(map[string]any)["reference"])
	waitStatus(e, dana, ref, "awaiting_payment")
	pi := e.must(201, "POST", "/v1/orders/"+ref+"/payment-intents", dana, map[string]any{"asset": "BTC", "network": "bitcoin"})["payment_intent"].(map[string]any)
	e.must(200, "POST", "/v1/support/orders/"+ref+"/attribute-payment", agentToken, map[string]any{"reason": "virement reçu, ticket 51"})
	waitStatus(e, dana, ref, "active")

	_, tl, access := order(e, dana, ref)
	user := str(access["username"])
	if !strings.HasPrefix(user, e2eUserPrefix) || str(access["host"]) != host.Addr || str(access["port"]) != fmt.Sprint(host.Port) {
		t.Fatalf("access: %v", access)
	}
	if str(access["gpu_model_seen"]) != "NVIDIA RTX A5000" || str(access["gpu_count_seen"]) != "1" ||
		str(access["driver_version"]) != "570.211.01" || str(access["cuda_version"]) != "12.8" {
		t.Fatalf("verification not shown: %v", access)
	}
	if access["private_key"] != nil || access["private_key_available"] != true {
		t.Fatalf("reading the order must not reveal the key, only say it can be: %v", access)
	}
	privateKey := str(e.must(200, "POST", "/v1/orders/"+ref+"/private-key", dana, nil)["private_key"])
	if !strings.Contains(privateKey, "OPENSSH PRIVATE KEY") || str(access["jupyter_token"]) == "" || str(access["jupyter_url"]) == "" {
		t.Fatalf("generated key or Jupyter access missing: %v", access)
	}
	if !slices.Contains(kinds(tl), "access_available") {
		t.Fatalf("timeline: %v", kinds(tl))
	}
	// Revealed to the owner only, and its first reveal is recorded: it is
	// erased once the display window has passed (postgres.Store).
	if _, _, again := order(e, dana, ref); again["private_key_shown_at"] == nil {
		t.Fatalf("first display of the private key not recorded: %v", again)
	}
	if sup := e.must(200, "GET", "/v1/support/orders/"+ref, agentToken, nil); strings.Contains(fmt.Sprint(sup), "PRIVATE KEY") {
		t.Fatal("support sees the private key")
	}
	// The customer really gets in with it, and finds the notebook preset.
	out := sshAs(t, host, user, privateKey, "cat ~/kernodeck/preset && test -s ~/.jupyter/jupyter_server_config.json && echo ok")
	if !strings.Contains(out, "notebook") || !strings.Contains(out, "ok") {
		t.Fatalf("customer session: %q", out)
	}
	if n := len(host.PasswdLines(t, user)); n != 1 {
		t.Fatalf("%d accounts for %s", n, user)
	}
	e.waitFor("the reminder", func() bool {
		_, tl, _ := order(e, dana, ref)
		return slices.Contains(kinds(tl), "reminder_sent")
	})

	e.must(200, "POST", "/v1/support/orders/"+ref+"/end-early", agentToken, map[string]any{"reason": "demande du client, ticket 52"})
	waitStatus(e, dana, ref, "ended")
	if got := host.PasswdLines(t, user); len(got) != 0 {
		t.Fatalf("account left after the end: %v", got)
	}
	var state string
	if err := e.db.Get(&state, `SELECT state FROM gpu_hosts WHERE name = 'gpu-e2e-a5000'`); err != nil || state != sshhost.StateAvailable {
		t.Fatalf("host state after the end: %q %v", state, err)
	}

	// The address confirmation (sent at registration), then one mail per
	// step of the order, each once.
	want := []string{
		"Confirmez votre adresse email Kernodeck",
		"Commande " + ref + " enregistrée",
		"Demande de paiement pour " + ref,
		"Règlement confirmé pour la commande " + ref,
		"Votre machine est prête (" + ref + ")",
		"Rappel : fin de votre location " + ref + ", exportez vos résultats",
		"Location " + ref + " terminée",
	}
	var msgs []mailtest.Message
	e.waitFor("one mail per step", func() bool {
		msgs = mp.Messages(t)
		return len(msgs) >= len(want)
	})
	// A duplicate would be a second outbox row or a second send: once the
	// rental's workflow has nothing left to do and no queued mail is
	// still to send, what mailpit holds is final.
	apptest.WaitSettled(t, context.Background(), e.tc, domain.RentalWorkflowID(ref))
	e.waitFor("every queued mail sent", func() bool {
		var left int
		if err := e.db.Get(&left, `SELECT count(*) FROM mail_outbox WHERE state IN ('pending', 'sending')`); err != nil {
			t.Fatal(err)
		}
		return left == 0
	})
	msgs = mp.Messages(t)
	count := map[string]int{}
	for _, m := range msgs {
		count[m.Subject]++
		for _, secret := range []string{privateKey, str(access["jupyter_token"]), "PRIVATE KEY"} {
			if strings.Contains(m.Text+m.HTML, secret) {
				t.Errorf("mail %q carries a secret", m.Subject)
			}
		}
		if m.To[0].Address != "dana@example.com" || !strings.Contains(m.Text, "Bonjour Dana") {
			t.Errorf("mail %q: to %v\n%s", m.Subject, m.To, m.Text)
		}
		if strings.HasPrefix(m.Subject, "Demande de paiement") {
			for _, part := range []string{str(pi["address"]), str(pi["amount"]) + " BTC", "BTC sur le réseau bitcoin", "Attention au réseau", "(23,57 USD)"} {
				if !strings.Contains(m.Text, part) {
					t.Errorf("payment request mail lacks %q:\n%s", part, m.Text)
				}
			}
		}
	}
	for _, s := range want {
		if count[s] != 1 {
			t.Errorf("mail %q received %d times (all: %v)", s, count[s], count)
		}
	}
	if len(msgs) != len(want) {
		t.Errorf("%d mails, want %d: %v", len(msgs), len(want), count)
	}

	// What the Temporal server (and its Web UI) holds is ciphertext.
	iter := e.tc.GetWorkflowHistory(context.Background(), "rental-"+ref, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	first, err := iter.Next()
	if err != nil {
		t.Fatal(err)
	}
	in := first.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()
	if len(in) == 0 || string(in[0].GetMetadata()["encoding"]) != codec.Encoding || strings.Contains(string(in[0].GetData()), ref) {
		t.Fatalf("workflow input stored in clear: %v", in)
	}
	replayHistory(t, e.tc, "rental-"+ref, "rental_ssh_end_early.json")
}

// btcPayments offers Bitcoin payment requests at a fixed rate.
func btcPayments(t *testing.T) func(db *postgres.DB) *payments.Service {
	return func(db *postgres.DB) *payments.Service {
		acc, err := hdwallet.ParseAccountKey(hdwallet.Bitcoin, bip84Zpub)
		if err != nil {
			t.Fatal(err)
		}
		fixed, err := rates.ParseStatic("BTC=65000.12", nil)
		if err != nil {
			t.Fatal(err)
		}
		return &payments.Service{Store: db, Rates: rates.Fresh{Source: fixed, MaxAge: time.Hour},
			Networks: map[string]payments.Network{"bitcoin": {Deriver: acc}}}
	}
}

func sshAs(t *testing.T, h *sshtest.Host, user, pemKey, cmd string) string {
	t.Helper()
	signer, err := ssh.ParsePrivateKey([]byte(pemKey))
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.Run(user, signer, cmd)
	if err != nil {
		t.Fatalf("customer: %v", err)
	}
	return out
}

// Two paid orders race for the last free host: one gets it, the other
// waits visibly in line (waiting_for_machine, its place shown, support
// sees it), never both on one machine; once the first rental ends, the
// second is served the freed host by itself, with no one's help.
func TestTwoOrdersRaceForTheLastHost(t *testing.T) {
	sshtest.RequireRoot(t)
	const prefix = "kdr-"
	host := sshtest.Start(t, sshtest.RTXA5000)
	e := newEnv(t, func(c *envConfig) {
		c.ssh = func(db *postgres.DB, kr *secrets.Keyring) *sshhost.Driver {
			return &sshhost.Driver{Store: postgres.Hosts{DB: db}, Keyring: kr, Signer: host.Admin, UserPrefix: prefix,
				ConnectTimeout: 5 * time.Second}
		}
	})
	if _, err := (&sshhost.Inventory{Store: postgres.Hosts{DB: e.db}}).Add(context.Background(), sshhost.Host{Name: "gpu-last", Address: host.Addr,
		Port: host.Port, Fingerprint: host.Fingerprint, KeyType: host.KeyType, GPUModel: "rtx-a5000", GPUCount: 1}); err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 7, "preset": "python"}
	tokens := []string{register(e, "Erin", "erin@example.com"), register(e, "Finn", "finn@example.com")}
	refs := make([]string, 2)
	for i, tok := range tokens {
		refs[i] = str(e.must(201, "POST", "/v1/orders", tok, cfg)["order"].(map[string]any)["reference"])
		waitStatus(e, tok, refs[i], "awaiting_payment")
	}
	done := make(chan struct{}, 2)
	for _, ref := range refs {
		go func() {
			defer func() { done <- struct{}{} }()
			e.call("POST", "/v1/support/orders/"+ref+"/attribute-payment", agentToken, map[string]any{"reason": "course au dernier hôte"})
		}()
	}
	<-done
	<-done
	status := func(i int) string {
		o, _, _ := order(e, tokens[i], refs[i])
		return str(o["status"])
	}
	e.waitFor("one active and one waiting", func() bool {
		a, b := status(0), status(1)
		return (a == "active" && b == "waiting_for_machine") || (a == "waiting_for_machine" && b == "active")
	})
	winner, loser := 0, 1
	if status(1) == "active" {
		winner, loser = 1, 0
	}
	o, tl, acc := order(e, tokens[loser], refs[loser])
	if acc != nil {
		t.Fatalf("the waiting order has access: %v", acc)
	}
	if pos := o["line_position"]; pos != 1.0 {
		t.Fatalf("the waiting order's place in line: %v", pos)
	}
	var failed map[string]any
	for _, ev := range tl {
		switch str(ev["kind"]) {
		case "waiting_for_machine":
			failed = ev
		case "provisioning_failed":
			t.Fatalf("the waiting order failed its provisioning: %v", ev)
		}
	}
	if failed == nil || !strings.Contains(str(failed["message"]), "file") {
		t.Fatalf("no visible wait: %v", failed)
	}
	if sup := e.must(200, "GET", "/v1/support/orders/"+refs[loser], agentToken, nil); !strings.Contains(fmt.Sprint(sup), "attend dans la file") {
		t.Fatalf("support does not see the no-capacity wait: %v", sup)
	}
	var active int
	_ = e.db.Get(&active, `SELECT count(*) FROM host_reservations WHERE state = 'active'`)
	if active != 1 {
		t.Fatalf("%d active reservations on one host", active)
	}
	t.Logf("%s got the host, %s waits: %s", refs[winner], refs[loser], failed["message"])

	e.must(200, "POST", "/v1/support/orders/"+refs[winner]+"/end-early", agentToken, map[string]any{"reason": "fin de la location"})
	waitStatus(e, tokens[winner], refs[winner], "ended")
	waitStatus(e, tokens[loser], refs[loser], "active")
	e.must(200, "POST", "/v1/support/orders/"+refs[loser]+"/end-early", agentToken, map[string]any{"reason": "fin du test"})
	waitStatus(e, tokens[loser], refs[loser], "ended")
	if got := host.PasswdLines(t, prefix); len(got) != 0 {
		t.Fatalf("accounts left: %v", got)
	}
}

// Capacity is known before money: with no free host of the order's
// configuration, the payment request is refused with a French message and
// nothing to pay, the order stays readable and awaiting payment; once a
// host is added the same request is accepted, and the host is held for the
// order (the quote now says nothing is free).
func TestPaymentRequestRefusedWithoutCapacityThenAccepted(t *testing.T) {
	sshtest.RequireRoot(t)
	host := sshtest.Start(t, sshtest.RTXA5000)
	e := newEnv(t, func(c *envConfig) {
		c.ssh = func(db *postgres.DB, kr *secrets.Keyring) *sshhost.Driver {
			return &sshhost.Driver{Store: postgres.Hosts{DB: db}, Keyring: kr, Signer: host.Admin, UserPrefix: "kdc-", ConnectTimeout: 5 * time.Second}
		}
		c.payments = btcPayments(t)
	})
	gil := register(e, "Gil", "gil@example.com")
	cfg := map[string]any{"gpu_model": "rtx-a5000", "lots": 1, "duration_days": 3, "preset": "python"}
	ref := str(e.must(201, "POST", "/v1/orders", gil, cfg)["order"].(map[string]any)["reference"])
	waitStatus(e, gil, ref, "awaiting_payment")
	code, body := e.call("POST", "/v1/orders/"+ref+"/payment-intents", gil, map[string]any{"asset": "BTC", "network": "bitcoin"})
	errBody, _ := body["error"].(map[string]any)
	if code != 409 || str(errBody["code"]) != "no_capacity" || !strings.Contains(str(errBody["message"]), "paiement n'est demandé") {
		t.Fatalf("payment request without capacity: %d %v", code, body)
	}
	t.Logf("refused: %s", errBody["message"])
	o, _, _ := order(e, gil, ref)
	if str(o["status"]) != "awaiting_payment" || o["payment_intent"] != nil {
		t.Fatalf("order after the refusal: %v", o)
	}
	var intents int
	_ = e.db.Get(&intents, `SELECT count(*) FROM payment_intents WHERE target_ref = $1`, ref)
	if intents != 0 {
		t.Fatalf("%d payment requests written", intents)
	}

	if _, err := (&sshhost.Inventory{Store: postgres.Hosts{DB: e.db}}).Add(context.Background(), sshhost.Host{Name: "gpu-added", Address: host.Addr,
		Port: host.Port, Fingerprint: host.Fingerprint, KeyType: host.KeyType, GPUModel: "rtx-a5000", GPUCount: 1}); err != nil {
		t.Fatal(err)
	}
	if q := e.must(200, "POST", "/v1/quote", gil, cfg); q["availability"].(map[string]any)["available_now"] != true {
		t.Fatalf("quote after the host was added: %v", q)
	}
	e.must(201, "POST", "/v1/orders/"+ref+"/payment-intents", gil, map[string]any{"asset": "BTC", "network": "bitcoin"})
	var held string
	_ = e.db.Get(&held, `SELECT h.name FROM live_capacity_holds l JOIN gpu_hosts h ON h.id = l.host_id WHERE l.order_ref = $1`, ref)
	if held != "gpu-added" {
		t.Fatalf("hold after the accepted request: %q", held)
	}
	// The quote is the same calculation: the held host is not offered again.
	if q := e.must(200, "POST", "/v1/quote", gil, cfg); q["availability"].(map[string]any)["available_now"] != false {
		t.Fatalf("quote while the host is held: %v", q)
	}

	// One host per order: with B200 hosts of 8 GPUs, 5 lots (10 GPUs) are
	// refused at the configurator with the size that exists; 4 lots are not.
	for _, name := range []string{"gpu-b200-1", "gpu-b200-2"} {
		if _, err := e.db.Exec(`INSERT INTO gpu_hosts (name, address, host_key_fingerprint, gpu_model, gpu_count)
			VALUES ($1, $1 || '.example', $2, 'b200', 8)`, name, host.Fingerprint); err != nil {
			t.Fatal(err)
		}
	}
	b200 := map[string]any{"gpu_model": "b200", "lots": 5, "duration_days": 3, "preset": "python"}
	q := e.must(200, "POST", "/v1/quote", gil, b200)
	if av := q["availability"].(map[string]any); av["available_now"] != false || fmt.Sprint(av["host_sizes"]) != "[8]" {
		t.Fatalf("quote of 10 B200: %v", q)
	}
	code, body = e.call("POST", "/v1/orders", gil, b200)
	errBody, _ = body["error"].(map[string]any)
	if code != 400 || str(errBody["field"]) != "lots" || !strings.Contains(str(errBody["message"]), "4 lots (8 GPU)") {
		t.Fatalf("order of 10 B200: %d %v", code, body)
	}
	t.Logf("10 B200 refused: %s", errBody["message"])
	b200["lots"] = 4
	e.must(201, "POST", "/v1/orders", gil, b200)
}

// A customer who lost their key gets their access back through the API:
// their new public key replaces the old one on the running host, then a
// generated pair is reissued and revealed; each time sshd refuses the
// previous key. The API only records the request; the worker's
// KeyRequests applies it with the hosts' admin key.
func TestCustomerReplacesThenReissuesKey(t *testing.T) {
	sshtest.RequireRoot(t)
	host := sshtest.Start(t, sshtest.RTXA5000)
	e := newEnv(t, func(c *envConfig) {
		c.ssh = func(db *postgres.DB, kr *secrets.Keyring) *sshhost.Driver {
			return &sshhost.Driver{Store: postgres.Hosts{DB: db}, Keyring: kr, Signer: host.Admin, UserPrefix: "kdk-", ConnectTimeout: 5 * time.Second}
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	keys := e.app.KeyRequests() // as `kernodeck worker` runs it
	keys.Poll = 100 * time.Millisecond
	go func() { _ = keys.Run(ctx) }()
	if _, err := (&sshhost.Inventory{Store: postgres.Hosts{DB: e.db}}).Add(context.Background(), sshhost.Host{Name: "gpu-keys", Address: host.Addr,
		Port: host.Port, Fingerprint: host.Fingerprint, KeyType: host.KeyType, GPUModel: "rtx-a5000", GPUCount: 1}); err != nil {
		t.Fatal(err)
	}
	keyPair := func() (ssh.Signer, string) {
		s, err := ssh.ParsePrivateKey(sshtest.NewKeyPEM(t))
		if err != nil {
			t.Fatal(err)
		}
		return s, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey())))
	}
	first, firstPub := keyPair()
	hana := register(e, "Hana", "hana@example.com")
	ref := str(e.must(201, "POST", "/v1/orders", hana, map[string]any{"gpu_model": "rtx-a5000", "lots": 1,
		"duration_days": 3, "preset": "python", "ssh_public_key": firstPub})["order"].(map[string]any)["reference"])
	waitStatus(e, hana, ref, "awaiting_payment")
	e.must(200, "POST", "/v1/support/orders/"+ref+"/attribute-payment", agentToken, map[string]any{"reason": "virement reçu, ticket 77"})
	waitStatus(e, hana, ref, "active")
	_, _, access := order(e, hana, ref)
	user := str(access["username"])
	if _, err := host.Run(user, first, "true"); err != nil {
		t.Fatal(err)
	}
	waitDone := func() {
		e.waitFor("the key change applied", func() bool {
			kr := e.must(200, "GET", "/v1/orders/"+ref+"/ssh-key/request", hana, nil)["key_request"].(map[string]any)
			if str(kr["state"]) == "failed" {
				t.Fatalf("key change failed: %v", kr)
			}
			return str(kr["state"]) == "done"
		})
	}

	second, secondPub := keyPair()
	e.must(202, "POST", "/v1/orders/"+ref+"/ssh-key", hana, map[string]any{"ssh_public_key": secondPub})
	waitDone()
	if _, err := host.Run(user, first, "true"); err == nil {
		t.Fatal("the replaced key still logs in")
	}
	if _, err := host.Run(user, second, "true"); err != nil {
		t.Fatalf("the new key: %v", err)
	}

	e.must(202, "POST", "/v1/orders/"+ref+"/ssh-key/reissue", hana, map[string]any{})
	waitDone()
	pemKey := str(e.must(200, "POST", "/v1/orders/"+ref+"/private-key", hana, map[string]any{})["private_key"])
	if out := sshAs(t, host, user, pemKey, "id -un"); strings.TrimSpace(out) != user {
		t.Fatalf("reissued key: %q", out)
	}
	if _, err := host.Run(user, second, "true"); err == nil {
		t.Fatal("the customer's key still logs in after the reissue")
	}
	// Another customer cannot touch this order.
	other := register(e, "Ivo", "ivo@example.com")
	if code, _ := e.call("POST", "/v1/orders/"+ref+"/ssh-key/reissue", other, map[string]any{}); code != 404 {
		t.Fatalf("another customer's reissue: %d", code)
	}
}

// A paid order whose capacity was held at its payment request never waits
// for a host while another order, paid at the same moment by support
// (nothing held), races it: 20 races. Ten lanes run at once, each its own
// configuration (n RTX A5000, on stand-in hosts showing n of them, so no
// lane's hosts fit another lane's orders), two rounds each. A round adds
// the lane's one free host (a new stand-in host); A asks for a payment
// (the host is held for A), then A and B are paid together. A gets that
// host and its timeline never says provisioning_failed nor waiting; B waits
// in line (no free machine); one active reservation on the host, A's. Support then cancels
// B (paid by an attribution alone, nothing to refund) so it takes no host
// of the next round; A keeps its machine.
func TestHeldOrderNeverWaitsWhileAnotherRaces(t *testing.T) {
	sshtest.RequireRoot(t)
	const lanes, rounds = 10, 2
	adminPEM := sshtest.NewKeyPEM(t)
	admin, err := ssh.ParsePrivateKey(adminPEM)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *envConfig) {
		c.ssh = func(db *postgres.DB, kr *secrets.Keyring) *sshhost.Driver {
			return &sshhost.Driver{Store: postgres.Hosts{DB: db}, Keyring: kr, Signer: admin, UserPrefix: "kdh-", ConnectTimeout: 5 * time.Second}
		}
		c.payments = btcPayments(t)
	})
	a, b := register(e, "Ada", "ada@example.com"), register(e, "Bea", "bea@example.com")
	start := time.Now()
	// Lanes are subtests run from goroutines, not t.Parallel: all ten run
	// at once whatever -parallel is.
	var wg sync.WaitGroup
	for lane := 1; lane <= lanes; lane++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(fmt.Sprintf("gpus=%d", lane), func(t *testing.T) {
				le := *e // the lane's failures are its own
				le.t = t
				heldOrderRaces(&le, a, b, lane, rounds, adminPEM)
			})
		}()
	}
	wg.Wait()
	t.Logf("%d races in %s", lanes*rounds, time.Since(start).Round(time.Millisecond))
}

// heldOrderRaces runs rounds races of customer a's held order against
// customer b's, for gpus RTX A5000 (see
// TestHeldOrderNeverWaitsWhileAnotherRaces).
func heldOrderRaces(e *env, a, b string, gpus, rounds int, adminPEM []byte) {
	t := e.t
	gpu := sshtest.GPU{Query: strings.Repeat(sshtest.RTXA5000.Query, gpus), Header: sshtest.RTXA5000.Header}
	cfg := map[string]any{"gpu_model": "rtx-a5000", "lots": gpus, "duration_days": 3, "preset": "python"}
	for round := 1; round <= rounds; round++ {
		host := sshtest.Start(t, gpu, sshtest.Options{AdminKeyPEM: adminPEM})
		name := fmt.Sprintf("gpu-held-%d-%d", gpus, round)
		h, err := (&sshhost.Inventory{Store: postgres.Hosts{DB: e.db}}).Add(context.Background(), sshhost.Host{Name: name, Address: host.Addr,
			Port: host.Port, Fingerprint: host.Fingerprint, KeyType: host.KeyType, GPUModel: "rtx-a5000", GPUCount: gpus})
		if err != nil {
			t.Fatal(err)
		}
		refA := str(e.must(201, "POST", "/v1/orders", a, cfg)["order"].(map[string]any)["reference"])
		refB := str(e.must(201, "POST", "/v1/orders", b, cfg)["order"].(map[string]any)["reference"])
		waitStatus(e, a, refA, "awaiting_payment")
		waitStatus(e, b, refB, "awaiting_payment")
		e.must(201, "POST", "/v1/orders/"+refA+"/payment-intents", a, map[string]any{"asset": "BTC", "network": "bitcoin"})
		var held int64
		_ = e.db.Get(&held, `SELECT host_id FROM live_capacity_holds WHERE order_ref = $1`, refA)
		if held != h.ID {
			t.Fatalf("round %d: %s holds host %d, want %s (%d)", round, refA, held, name, h.ID)
		}

		// A (held) and B (nothing held) are paid at the same moment.
		codes := make([]int, 2)
		bodies := make([]map[string]any, 2)
		var wg sync.WaitGroup
		ready := make(chan struct{})
		for i, ref := range []string{refA, refB} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-ready
				codes[i], bodies[i] = e.call("POST", "/v1/support/orders/"+ref+"/attribute-payment", agentToken,
					map[string]any{"reason": fmt.Sprintf("course, tour %d", round)})
			}()
		}
		close(ready)
		wg.Wait()
		if codes[0] != 200 || codes[1] != 200 {
			t.Fatalf("round %d: attributions %d %v, %d %v", round, codes[0], bodies[0], codes[1], bodies[1])
		}

		status := func(tok, ref string) string {
			o, _, _ := order(e, tok, ref)
			return str(o["status"])
		}
		e.waitFor(fmt.Sprintf("round %d: %s active, %s waiting", round, refA, refB), func() bool {
			sa, sb := status(a, refA), status(b, refB)
			if sa == "provisioning_failed" || sa == "waiting_for_machine" {
				t.Fatalf("round %d: the held order %s waits for a host (%s is %s)", round, refA, refB, sb)
			}
			return sa == "active" && sb == "waiting_for_machine"
		})
		if _, tl, _ := order(e, a, refA); slices.Contains(kinds(tl), "provisioning_failed") || slices.Contains(kinds(tl), "waiting_for_machine") {
			t.Fatalf("round %d: the held order's timeline: %v", round, kinds(tl))
		}
		if _, _, acc := order(e, b, refB); acc != nil {
			t.Fatalf("round %d: the waiting order has access: %v", round, acc)
		}
		if sup := e.must(200, "GET", "/v1/support/orders/"+refB, agentToken, nil); !strings.Contains(fmt.Sprint(sup), "attend dans la file") {
			t.Fatalf("round %d: %s waits for another reason: %v", round, refB, sup)
		}
		var owners []string
		_ = e.db.Select(&owners, `SELECT order_ref FROM host_reservations WHERE host_id = $1 AND state = 'active'`, h.ID)
		if len(owners) != 1 || owners[0] != refA {
			t.Fatalf("round %d: active reservations on %s: %v (held by %s)", round, name, owners, refA)
		}
		e.must(200, "POST", "/v1/support/orders/"+refB+"/cancel", agentToken, map[string]any{"reason": "aucune machine, fin du tour"})
		waitStatus(e, b, refB, "cancelled")
	}
}
