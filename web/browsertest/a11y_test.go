package browsertest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/kernodeck/kernodeck/domain"
)

// unlabelledJS lists the controls without an accessible name: a form
// control needs a label (label[for] or around it), aria-label or
// aria-labelledby pointing at text; a button its text or aria-label.
const unlabelledJS = `(() => {
	const named = s => !!s && s.trim() !== "";
	const byIDs = e => {
		const ids = (e.getAttribute("aria-labelledby") || "").split(/\s+/).filter(Boolean);
		return ids.length > 0 && ids.every(id => document.getElementById(id)) &&
			named(ids.map(id => document.getElementById(id).textContent).join(" "));
	};
	return [...document.querySelectorAll("input:not([type=hidden]), select, textarea, button")].filter(e => {
		if (named(e.getAttribute("aria-label")) || byIDs(e)) return false;
		if (e.tagName === "BUTTON") return !named(e.textContent);
		return !e.labels || ![...e.labels].some(l => named(l.textContent));
	}).map(e => e.outerHTML.slice(0, 200));
})()`

// lowContrastJS computes, for each visible text, the WCAG 2 contrast ratio
// of its computed colour against its effective background (the
// backgrounds of the element and its ancestors composited over white) and
// lists those under 4.5:1, or 3:1 for large text (24 px, or 18.66 px bold).
const lowContrastJS = `(() => {
	const parse = s => {
		const m = /^rgba?\(([^)]+)\)$/.exec(s.trim());
		if (!m) return null;
		const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
		return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1};
	};
	const over = (top, under) => ({r: top.r * top.a + under.r * (1 - top.a), g: top.g * top.a + under.g * (1 - top.a),
		b: top.b * top.a + under.b * (1 - top.a), a: 1});
	const background = el => {
		const layers = [];
		for (let e = el; e; e = e.parentElement) {
			const c = parse(getComputedStyle(e).backgroundColor);
			if (c && c.a > 0) { layers.push(c); if (c.a >= 1) break; }
		}
		let bg = {r: 255, g: 255, b: 255, a: 1};
		for (let i = layers.length - 1; i >= 0; i--) bg = over(layers[i], bg);
		return bg;
	};
	const lum = c => {
		const ch = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
		return 0.2126 * ch(c.r) + 0.7152 * ch(c.g) + 0.0722 * ch(c.b);
	};
	const hidden = el => {
		for (let e = el; e; e = e.parentElement) {
			const cs = getComputedStyle(e);
			if (cs.display === "none" || cs.visibility === "hidden" || cs.opacity === "0") return true;
			const r = e.getBoundingClientRect();
			if (cs.overflow !== "visible" && (r.width <= 1 || r.height <= 1)) return true;
		}
		return !el.checkVisibility({contentVisibilityAuto: true});
	};
	const els = new Set();
	const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
	for (let n = walk.nextNode(); n; n = walk.nextNode()) {
		if (n.textContent.trim() !== "" && n.parentElement && !["SCRIPT", "STYLE", "NOSCRIPT", "OPTION"].includes(n.parentElement.tagName)) els.add(n.parentElement);
	}
	document.querySelectorAll("input:not([type=hidden]):not([type=radio]):not([type=checkbox]), select, textarea").forEach(e => els.add(e));
	const low = [];
	for (const el of els) {
		if (el.disabled || hidden(el)) continue;
		const cs = getComputedStyle(el);
		const fg = parse(cs.color);
		if (!fg) { low.push("unreadable colour " + cs.color + " on " + el.tagName); continue; }
		const bg = background(el);
		const a = lum(over(fg, bg)), b = lum(bg);
		const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
		const size = parseFloat(cs.fontSize), bold = parseInt(cs.fontWeight, 10) >= 700;
		const need = size >= 24 || (size >= 18.66 && bold) ? 3 : 4.5;
		if (ratio < need) {
			low.push(el.tagName.toLowerCase() + (el.className ? "." + String(el.className).trim().replace(/\s+/g, ".") : "") +
				" «" + (el.textContent || el.value || "").trim().slice(0, 40) + "» " + ratio.toFixed(2) + ":1 < " + need + ":1 (" + cs.color + ")");
		}
	}
	return low;
})()`

// overflow is the page's width against the viewport's.
type overflow struct {
	Scroll int64    `json:"scroll"`
	Client int64    `json:"client"`
	Wide   []string `json:"wide"`
}

// overflowJS compares the document's width to the viewport's (without
// scrollbar) and names the first elements sticking out, to see why.
const overflowJS = `(() => {
	const d = document.documentElement, cw = d.clientWidth;
	const wide = [...document.body.querySelectorAll("*")].filter(e => e.getBoundingClientRect().right > cw + 0.5).slice(0, 5)
		.map(e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className ? "." + String(e.className).trim().replace(/\s+/g, ".") : "") +
			" right=" + Math.round(e.getBoundingClientRect().right));
	return {scroll: d.scrollWidth, client: cw, wide: wide};
})()`

// focusStepJS records the element Tab focused and its focused style:
// "new", "again" once Tab came back to an element already seen, or "none"
// when focus left the page.
const focusStepJS = `(() => {
	const e = document.activeElement;
	if (!e || e === document.body || e === document.documentElement) return "none";
	if (window.kdFocus.some(f => f.el === e)) return "again";
	const cs = getComputedStyle(e);
	window.kdFocus.push({el: e, outline: [cs.outlineStyle, cs.outlineWidth, cs.outlineColor, cs.outlineOffset].join(" "),
		outlineShown: cs.outlineStyle !== "none" && parseFloat(cs.outlineWidth) >= 1, shadow: cs.boxShadow});
	return "new";
})()`

// focusResult says, once focus is gone, which elements Tab reached show no
// focus indicator (an outline or box-shadow of their own, absent without
// focus) and which focusable elements Tab never reached.
type focusResult struct {
	Reached   int      `json:"reached"`
	NoRing    []string `json:"noRing"`
	Unreached []string `json:"unreached"`
}

const focusResultJS = `(() => {
	if (document.activeElement) document.activeElement.blur();
	const desc = e => e.outerHTML.slice(0, 160);
	const noRing = window.kdFocus.filter(f => {
		const cs = getComputedStyle(f.el);
		const outline = [cs.outlineStyle, cs.outlineWidth, cs.outlineColor, cs.outlineOffset].join(" ");
		const changed = outline !== f.outline || cs.boxShadow !== f.shadow;
		return !changed || !(f.outlineShown || f.shadow !== "none");
	}).map(f => desc(f.el));
	const reached = new Set(window.kdFocus.map(f => f.el));
	const groups = new Set(window.kdFocus.filter(f => f.el.type === "radio").map(f => f.el.form + "|" + f.el.name));
	const unreached = [...document.querySelectorAll("a[href], button, input:not([type=hidden]), select, textarea, summary, [tabindex]")]
		.filter(e => !e.disabled && e.tabIndex >= 0 && e.checkVisibility({contentVisibilityAuto: true, visibilityProperty: true}))
		.filter(e => e.type === "radio" ? !groups.has(e.form + "|" + e.name) : !reached.has(e))
		.map(desc);
	return {reached: reached.size, noRing: noRing, unreached: unreached};
})()`

// focusRings presses Tab until focus comes back to an element it already
// reached, and checks every focusable element was reached and showed a
// focus indicator.
func focusRings(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	eval[bool](t, ctx, `window.kdFocus = []; if (document.activeElement) document.activeElement.blur(); true`)
	outside := 0
	for steps := 0; ; steps++ {
		if steps == 300 {
			t.Fatalf("%s: Tab never came back to an element it reached", name)
		}
		run(t, ctx, "Tab", chromedp.KeyEvent(kb.Tab))
		r := eval[string](t, ctx, focusStepJS)
		if r == "again" {
			break
		}
		if r == "none" {
			if outside++; outside > 2 {
				t.Fatalf("%s: Tab does not come back into the page", name)
			}
			continue
		}
		outside = 0
	}
	r := eval[focusResult](t, ctx, focusResultJS)
	if r.Reached == 0 {
		t.Errorf("%s: Tab reached nothing", name)
	}
	if len(r.NoRing) > 0 {
		t.Errorf("%s: focused without a visible indicator: %v", name, r.NoRing)
	}
	if len(r.Unreached) > 0 {
		t.Errorf("%s: focusable but not reached with Tab: %v", name, r.Unreached)
	}
}

// The contrast check computes: on a page, text set to #999999 on white
// (2.85:1) fails, as normal text and as large text; #767676 (4.54:1)
// passes; #949494 (3.03:1) passes only as large text.
func contrastCheckComputes(t *testing.T, ctx context.Context) {
	t.Helper()
	low := eval[[]string](t, ctx, `(() => {
		const add = (id, color, size) => { const p = document.createElement("p"); p.id = id; p.textContent = id;
			p.style.color = color; p.style.fontSize = size; document.querySelector("main").append(p); };
		add("kd-fail-normal", "#999999", "16px"); add("kd-fail-large", "#999999", "24px");
		add("kd-pass-normal", "#767676", "16px"); add("kd-pass-large", "#949494", "24px"); add("kd-fail-small", "#949494", "16px");
		const low = `+lowContrastJS+`;
		document.querySelectorAll("[id^=kd-]").forEach(e => e.remove());
		return low;
	})()`)
	got := strings.Join(low, "\n")
	for _, id := range []string{"kd-fail-normal", "kd-fail-large", "kd-fail-small"} {
		if !strings.Contains(got, "«"+id+"»") {
			t.Errorf("the contrast check misses %s: %v", id, low)
		}
	}
	for _, id := range []string{"kd-pass-normal", "kd-pass-large"} {
		if strings.Contains(got, "«"+id+"»") {
			t.Errorf("the contrast check refuses %s: %v", id, low)
		}
	}
}

// Every page type: labels, width at 375 and 1280 px, contrast and focus
// indicators (checkPage), signed out and in, with an order awaiting
// payment, its checkout, its support form, a top-up, the balance with its
// history, and the order active.
func everyPageType(t *testing.T, s *shop) {
	ctx := browser(t)
	page := func(name, url, ready string) {
		t.Helper()
		run(t, ctx, name, chromedp.Navigate(s.srv.URL+url), visible(ready))
		checkPage(t, ctx, name)
	}
	page("register", "/register", `form[action="/register"]`)
	contrastCheckComputes(t, ctx)
	page("login", "/login", `form[action="/login"]`)
	page("configurator-signed-out", "/", "#resume")
	s.register(t, ctx, "Iris", "iris@example.com")
	page("orders-none", "/orders", "main h1")
	page("configurator", "/?gpu_model=b200&lots=2&duration_days=7", "#resume")
	run(t, ctx, "order", click(`button[formaction="/order"]`), visible(`form[action="/orders"]`))
	checkPage(t, ctx, "order-confirm")
	run(t, ctx, "confirm", click(`form[action="/orders"] button.primary`), visible(`#paiement form.methods`))
	ref := strings.TrimPrefix(eval[string](t, ctx, `location.pathname`), "/orders/")
	checkPage(t, ctx, "order-awaiting-payment")
	requestLTC(t, ctx)
	checkPage(t, ctx, "checkout")
	page("support-form", "/orders/"+ref+"/support", `form[action="/orders/`+ref+`/support"]`)
	page("orders", "/orders", "table")
	page("balance-empty", "/balance", ".available")
	run(t, ctx, "top up", click("#tu-10000"), click(`form[action="/topups"] button[type=submit]`), visible("#paiement"))
	tuRef := strings.TrimPrefix(eval[string](t, ctx, `location.pathname`), "/topups/")
	checkPage(t, ctx, "topup")
	requestLTC(t, ctx)
	checkPage(t, ctx, "topup-checkout")
	s.support(t, "POST", "/v1/support/topups/"+tuRef+"/attribute-payment", map[string]any{"reason": "virement reçu, ticket 8"})
	waitJS(t, ctx, "top-up credited", `document.querySelector("[data-status]").dataset.status === "`+domain.TopUpCredited+`"`)
	page("balance", "/balance", "table.history")
	s.support(t, "POST", "/v1/support/orders/"+ref+"/attribute-payment", map[string]any{"reason": "paiement vérifié, ticket 9"})
	run(t, ctx, "order page", chromedp.Navigate(s.srv.URL+"/orders/"+ref), visible("[data-status]"))
	waitJS(t, ctx, "the order active", `document.querySelector("[data-status]").dataset.status === "active" && !!document.querySelector("#ssh-cmd")`)
	checkPage(t, ctx, "order-active")
	page("order-extend", "/orders/"+ref+"/extend", "form.extend")
	run(t, ctx, "order page again", chromedp.Navigate(s.srv.URL+"/orders/"+ref), visible("#ssh-cmd"))
	if eval[bool](t, ctx, `!!document.querySelector("details.key-change")`) {
		run(t, ctx, "open the key change", click("details.key-change summary"), visible("details.key-change textarea"))
		checkPage(t, ctx, "order-active-key-change")
	}
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(s.srv.URL+"/orders/KD-NOPE"))
	if err != nil || resp.Status != 404 {
		t.Fatalf("not-found page: %v %v", resp, err)
	}
	checkPage(t, ctx, "not-found")
}

// tabTo presses Tab until the JavaScript condition holds.
func tabTo(t *testing.T, ctx context.Context, what, cond string) {
	t.Helper()
	pressUntil(t, ctx, kb.Tab, "Tab to "+what, cond)
}

// pressUntil presses key until the JavaScript condition holds (60 presses
// at most).
func pressUntil(t *testing.T, ctx context.Context, key, what, cond string) {
	t.Helper()
	for i := 0; !eval[bool](t, ctx, cond); i++ {
		if i == 60 {
			failPage(t, ctx, what, fmt.Errorf("not reached"))
		}
		run(t, ctx, what, chromedp.KeyEvent(key))
	}
}

// A customer configures and orders with the keyboard only: Tab to each
// field, arrows to choose, Enter on "Commander", Space on the confirmation.
func keyboardOnlyOrder(t *testing.T, s *shop) {
	ctx := browser(t)
	s.register(t, ctx, "Kim", "kim@example.com")
	run(t, ctx, "configurator", chromedp.Navigate(s.srv.URL+"/"), visible("#resume"))
	checked := func(name string) string {
		return fmt.Sprintf(`document.querySelector("input[name=%s]:checked").value`, name)
	}
	tabTo(t, ctx, "the GPU models", `document.activeElement.name === "gpu_model"`)
	pressUntil(t, ctx, kb.ArrowDown, "choose B200", checked("gpu_model")+` === "b200" && document.activeElement.value === "b200"`)
	tabTo(t, ctx, "the durations", `document.activeElement.name === "duration_days"`)
	pressUntil(t, ctx, kb.ArrowRight, "choose 30 days", checked("duration_days")+` === "30"`)
	tabTo(t, ctx, "the lots", `document.activeElement.id === "lots"`)
	pressUntil(t, ctx, kb.ArrowDown, "choose 2 lots", `document.activeElement.value === "2"`)
	// The summary followed the keyboard's choices.
	waitText(t, ctx, "#resume .total-gpus", "4 GPU")
	waitJS(t, ctx, "30 days in the summary", `document.querySelector("#resume").textContent.includes("30 jours")`)
	tabTo(t, ctx, "Commander", `document.activeElement.matches('button[formaction="/order"]')`)
	run(t, ctx, "Enter on Commander", chromedp.KeyEvent(kb.Enter), visible(`form[action="/orders"]`))
	if got := text(t, ctx, "#resume .total-gpus"); got != "4 GPU" {
		t.Fatalf("confirmation: %q", got)
	}
	tabTo(t, ctx, "Confirmer la commande", `document.activeElement.matches('form[action="/orders"] button.primary')`)
	run(t, ctx, "Space on Confirmer", chromedp.KeyEvent(" "), visible("#paiement"))
	ref := strings.TrimPrefix(eval[string](t, ctx, `location.pathname`), "/orders/")
	o, err := s.env.DB.GetOrder(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if o.Model != "b200" || o.Lots != 2 || o.DurationDays != 30 || o.TotalGPUs != 4 {
		t.Fatalf("ordered with the keyboard: %s × %d lots, %d days, %d GPUs", o.Model, o.Lots, o.DurationDays, o.TotalGPUs)
	}
}
