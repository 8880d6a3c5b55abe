package browsertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/ssh"

	"github.com/kernodeck/kernodeck/devnodes"
	"github.com/kernodeck/kernodeck/domain"
)

// A new customer configures 2 lots of B200 for 7 days and sees 4 GPUs and
// the total before ordering, registers, orders, asks for LTC on Litecoin
// instructions and sees amount, address, QR and countdown. The test pays
// that request on the Litecoin Core regtest node; the page, left open, goes
// to payment detected ("1 confirmation sur 2"), paid, provisioning and
// active without a reload and shows the access information and the
// period's dates.
func TestNewCustomerPaysInLTCAndWatchesTheOrderGoActive(t *testing.T) {
	s := newShop(t, shopOptions{litecoin: true})
	ctx := browser(t)

	run(t, ctx, "configure",
		chromedp.Navigate(s.srv.URL+"/"),
		visible("#resume"),
		click("#m-b200"),
		click("#d-7"),
		setSelect("#lots", "2"),
	)
	// The summary follows the fields (htmx), before any order exists.
	waitText(t, ctx, "#resume .total-gpus", "4 GPU")
	waitText(t, ctx, "#resume .total", "3\u202f118,00 USD")
	waitText(t, ctx, "#resume .availability", "Disponible maintenant")
	if got := text(t, ctx, "#resume"); !strings.Contains(got, "2 lots × 2 GPU par lot") || !strings.Contains(got, "1\u202f559,00 USD") {
		t.Fatalf("summary: %q", got)
	}
	screenshots(t, ctx, "configurator")

	// "Commander" asks for an account first, then comes back to the order.
	run(t, ctx, "order signed out",
		click(`button[formaction="/order"]`),
		visible(`form[action="/login"]`),
		click(`main a[href^="/register"]`),
		visible(`form[action="/register"]`),
		typeIn("#first_name", "Ada"),
		typeIn("#last_name", "Lovelace"),
		typeIn("#email", "ada@example.com"),
		typeIn("#password", "correct horse battery staple"),
		click(`form[action="/register"] button[type=submit]`),
		visible(`form[action="/orders"]`),
	)
	if got := text(t, ctx, "#resume .total"); got != "3\u202f118,00 USD" {
		t.Fatalf("confirmation total: %q", got)
	}
	run(t, ctx, "confirm order",
		click(`form[action="/orders"] button.primary`),
		visible(`#paiement form.methods`),
		click(`#pm-LTC-litecoin`),
		click(`#paiement form.methods button[type=submit]`),
		visible(`#pay-address`),
	)
	ref := eval[string](t, ctx, `location.pathname.split("/")[2]`)
	if !strings.HasPrefix(ref, "KD-") {
		t.Fatalf("order reference %q", ref)
	}
	if got := text(t, ctx, "#paiement .method"); got != "Méthode : LTC sur Litecoin" {
		t.Fatalf("method: %q", got)
	}
	amount, address := text(t, ctx, "#pay-amount"), text(t, ctx, "#pay-address")
	intents, err := s.env.DB.IntentsFor(s.env.Ctx, ref)
	if err != nil || len(intents) != 1 {
		t.Fatalf("intents of %s: %v %v", ref, intents, err)
	}
	in := intents[0]
	if address != in.Address || amount != domain.FormatUnits(&in.AmountBase.Int, in.Decimals) || !strings.HasPrefix(address, "rltc1") {
		t.Fatalf("page shows %s LTC to %s, request is %s to %s", amount, address, in.Amount, in.Address)
	}
	// The QR code is an image the browser loaded; the countdown runs.
	waitJS(t, ctx, "the QR code image loaded",
		`(() => { const i = document.querySelector("#paiement .qr img"); return !!i && i.complete && i.naturalWidth >= 100; })()`)
	waitText(t, ctx, "#paiement .countdown", "il reste")
	if got := text(t, ctx, "#paiement"); !strings.Contains(got, "n'est pas équivalent") || !strings.Contains(got, "3\u202f118,00 USD au cours de 100 USD par LTC") {
		t.Fatalf("checkout text: %q", got)
	}
	wallet := eval[string](t, ctx, `document.querySelector("#paiement a.wallet").getAttribute("href")`)
	if wallet != in.PaymentURI || !strings.HasPrefix(wallet, "litecoin:") {
		t.Fatalf("wallet link %q, want %q", wallet, in.PaymentURI)
	}
	screenshots(t, ctx, "checkout")

	// From here on the page is never reloaded: a marker set now must survive,
	// and every status the page shows is recorded as it appears.
	eval[bool](t, ctx, `window.kdMarker = "same page";
		window.kdStatuses = [document.querySelector("[data-status]").dataset.status];
		new MutationObserver(() => {
			const e = document.querySelector("[data-status]");
			if (e && window.kdStatuses[window.kdStatuses.length-1] !== e.dataset.status) window.kdStatuses.push(e.dataset.status);
		}).observe(document.body, {subtree: true, childList: true}); true`)

	// Sent and mined in one block: seen, one confirmation out of two.
	pctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	txid, err := devnodes.PayLitecoin(pctx, s.ltcURL, in, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("paid %s LTC to %s: %s", amount, address, txid)
	waitText(t, ctx, "#paiement .seen-payment .confirmations", fmt.Sprintf("1 confirmation sur %d", ltcConfirmations))
	if got := text(t, ctx, "#paiement .seen-payment"); !strings.Contains(got, amount+" LTC reçus") {
		t.Fatalf("payment seen: %q", got)
	}
	if err := devnodes.MineLitecoin(pctx, s.ltcURL, ltcConfirmations-1); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the order active on the open page",
		`document.querySelector("[data-status]").dataset.status === "active" && !!document.querySelector("#ssh-cmd")`)
	marker := eval[string](t, ctx, `window.kdMarker || ""`)
	statuses := eval[[]string](t, ctx, `window.kdStatuses`)
	if marker != "same page" {
		t.Fatal("the page was reloaded")
	}
	t.Logf("statuses shown by the open page: %v", statuses)
	if statuses[0] != domain.StatusAwaitingPayment || statuses[1] != domain.StatusPaymentDetected ||
		statuses[len(statuses)-1] != domain.StatusActive {
		t.Fatalf("statuses shown: %v", statuses)
	}
	// Steps can follow each other faster than the page fetches them; those
	// it showed came in order.
	rank := map[string]int{domain.StatusAwaitingPayment: 0, domain.StatusPaymentDetected: 1, domain.StatusPaid: 2,
		domain.StatusProvisioning: 3, domain.StatusActive: 4}
	for i := 1; i < len(statuses); i++ {
		if r, ok := rank[statuses[i]]; !ok || r <= rank[statuses[i-1]] {
			t.Fatalf("statuses shown out of order: %v", statuses)
		}
	}
	// Each step is on the page's tracking, as it happened.
	kinds := eval[[]string](t, ctx, `[...document.querySelectorAll(".timeline li")].map(li => li.dataset.kind)`)
	for _, k := range []string{domain.EventPaymentSeen, domain.EventPaymentConfirmed, domain.EventPaid,
		domain.EventProvisioningStep, domain.EventAccessAvailable} {
		if !contains(kinds, k) {
			t.Fatalf("timeline on the page lacks %s: %v", k, kinds)
		}
	}
	o := s.env.Order(ref)
	if ssh := text(t, ctx, "#ssh-cmd"); !strings.Contains(ssh, "ssh") || !strings.Contains(ssh, "@") {
		t.Fatalf("ssh command: %q", ssh)
	}
	if start, end := text(t, ctx, ".period-start"), text(t, ctx, ".period-end"); start == "" || end == "" ||
		!strings.Contains(end, frenchDay(*o.PeriodEnd)) {
		t.Fatalf("period %q → %q, order ends %v", start, end, o.PeriodEnd)
	}
	screenshots(t, ctx, "order-active")

	// The generated private key, downloaded from the page: an OpenSSH key
	// under the order's name whose public half is the fingerprint shown.
	dir := download(t, ctx, "the private key", click(`form[action="/orders/`+ref+`/private-key"] button`))
	key, err := os.ReadFile(filepath.Join(dir, "kernodeck-"+ref+".key"))
	if err != nil {
		t.Fatalf("downloaded key: %v", err)
	}
	signer, err := ssh.ParsePrivateKey(key)
	if err != nil {
		t.Fatalf("downloaded key: %v", err)
	}
	shown := eval[string](t, ctx, `[...document.querySelectorAll("#acces dt")].find(dt => dt.textContent === "Empreinte de la clé").nextElementSibling.textContent`)
	if got := ssh.FingerprintSHA256(signer.PublicKey()); got != shown {
		t.Fatalf("downloaded key %s, page shows %s", got, shown)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// frenchDay is how the site writes a date's day ("10 décembre 2026").
func frenchDay(t time.Time) string {
	months := []string{"janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre", "octobre", "novembre", "décembre"}
	t = t.UTC()
	return fmt.Sprintf("%d %s %d", t.Day(), months[t.Month()-1], t.Year())
}
