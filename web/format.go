package web

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/kernodeck/kernodeck/domain"
)

// frenchDate renders a time as "3 décembre 2026 à 15:05 (14:05 UTC)"
// (domain.FrenchDate: the one date style of the site and the console).
func frenchDate(t time.Time) string { return domain.FrenchDate(t) }

// usd renders cents as "1 234,56 USD" (domain.FrenchUSD, the mails' too).
func usd(cents int64) string { return domain.FrenchUSD(cents) }

var statusLabels = map[string]string{
	domain.StatusAwaitingPayment:    "En attente de paiement",
	domain.StatusPaymentDetected:    "Paiement détecté, en attente de confirmation",
	domain.StatusPaid:               "Payée",
	domain.StatusWaitingForMachine:  "En attente d'une machine",
	domain.StatusProvisioning:       "Préparation de la machine",
	domain.StatusProvisioningFailed: "Préparation bloquée : le support intervient",
	domain.StatusActive:             "Active",
	domain.StatusEnding:             "Fin de location en cours",
	domain.StatusEnded:              "Terminée",
	domain.StatusCancelled:          "Annulée",
	domain.StatusExpired:            "Expirée (non payée à temps)",
	domain.StatusRefunded:           "Remboursée",
	domain.TopUpCredited:            "Créditée",
}

// label is labels[key], or the key itself when it has no label.
func label(labels map[string]string, key string) string {
	if l, ok := labels[key]; ok {
		return l
	}
	return key
}

// networkNames are the networks as people read them (domain.NetworkNames).
var networkNames = domain.NetworkNames

// methodLabel spells asset and network together: "USDT sur Tron".
func methodLabel(asset, network string) string {
	return asset + " sur " + label(networkNames, network)
}

// frenchRate renders a rate as stored ("65000", "0.99981234") the French
// way: "65 000", "0,99981234" (FrenchUSD's separators).
func frenchRate(rate string) string {
	sign := ""
	if strings.HasPrefix(rate, "-") {
		sign, rate = "-", rate[1:]
	}
	whole, frac, hasFrac := strings.Cut(rate, ".")
	for _, r := range whole + frac {
		if r < '0' || r > '9' {
			return sign + rate // not a plain decimal: as stored
		}
	}
	var b strings.Builder
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteRune('\u202f')
		}
		b.WriteRune(r)
	}
	if hasFrac && strings.Trim(frac, "0") != "" {
		b.WriteString("," + strings.TrimRight(frac, "0"))
	}
	return sign + b.String()
}

var vendorStacks = map[string]string{"nvidia": "NVIDIA · CUDA", "amd": "AMD · ROCm"}

// computeStacks names an order's compute stack with what it means for the
// customer's application (the FAQ: CUDA for NVIDIA, ROCm for AMD).
var computeStacks = map[string]string{
	"cuda": "CUDA (GPU NVIDIA) : votre application doit prendre en charge CUDA",
	"rocm": "ROCm (GPU AMD) : votre application doit prendre en charge ROCm, pas CUDA",
}

var presetLabels = map[string]string{
	"python": "Python", "pytorch": "PyTorch", "notebook": "Notebook (Jupyter)", "inference": "Inférence",
}

// plural picks the singular or plural word for n (any integer type).
func plural(n any, one, many string) string {
	var v int64
	switch x := n.(type) {
	case int:
		v = int64(x)
	case int64:
		v = x
	case int32:
		v = int64(x)
	}
	if v > 1 || v < -1 {
		return many
	}
	return one
}

var movementLabels = map[string]string{
	domain.MovementTopUp:        "Recharge créditée",
	domain.MovementOrderPayment: "Location réglée par le solde",
	domain.MovementRefund:       "Remboursement sur le solde",
	domain.MovementReversal:     "Paiement annulé par le réseau",
	domain.MovementPayout:       "Retrait",
	domain.MovementExtension:    "Prolongation réglée par le solde",
}

// walletSchemes are the payment URI schemes the payments package builds
// (BIP21, EIP-681, Solana Pay, Tron).
var walletSchemes = []string{"bitcoin:", "litecoin:", "ethereum:", "solana:", "tron:"}

// walletURL lets a payment URI through html/template's URL filter, which
// would otherwise replace the wallet scheme. Anything else (Tron has no
// common scheme: its "URI" is the address) gives "": no wallet link.
func walletURL(uri string) template.URL {
	for _, s := range walletSchemes {
		if strings.HasPrefix(uri, s) {
			return template.URL(uri) // built by package payments from validated data
		}
	}
	return ""
}

// readableTimeline rewrites timeline messages as customers read them
// (domain.CustomerText): they are kept as written, "3118.00 USD" and model
// codes included, some by workflows into their histories.
func readableTimeline(tl []domain.TimelineEvent, names domain.GPUNames) {
	for i := range tl {
		tl[i].Message = readableText(tl[i].Message, names)
	}
}

// readableText is a stored text as people read it on the site and the
// console: domain.CustomerText, and the presets the provisioning's steps
// name by their code ("(python)") as the configurator names them.
func readableText(s string, names domain.GPUNames) string {
	s = domain.CustomerText(s, names)
	if strings.Contains(s, "(") {
		for code, name := range presetLabels {
			s = strings.ReplaceAll(s, "("+code+")", "("+name+")")
		}
	}
	return s
}

// lastEventID is the newest timeline entry's ID (the live stream resumes
// after it), 0 for none.
func lastEventID(tl []domain.TimelineEvent) int64 {
	var last int64
	for _, ev := range tl {
		last = max(last, ev.ID)
	}
	return last
}

func (s *Site) funcs() template.FuncMap {
	return template.FuncMap{
		"date":   frenchDate,
		"usd":    usd,
		"status": func(s string) string { return label(statusLabels, s) },
		"method": methodLabel,
		// The vendor and its compute stack, as the FAQ names them.
		"vendor":    func(v string) string { return label(vendorStacks, strings.ToLower(v)) },
		"preset":    func(p string) string { return label(presetLabels, p) },
		"stack":     func(s string) string { return label(computeStacks, s) },
		"plural":    plural,
		"network":   domain.NetworkName,
		"rate":      frenchRate,
		"movement":  func(k string) string { return label(movementLabels, k) },
		"activity":  func(k string) string { return label(activityLabels, k) },
		"wallet":    walletURL,
		"lastEvent": lastEventID,
		"iso":       func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"asset": func(name string) (string, error) {
			if s.assets == nil {
				return "", fmt.Errorf("assets not loaded")
			}
			return s.assets.url(name)
		},
		"field": func(p page, name string) string { return p.FieldErrors[name] },
		"deref": func(t *time.Time) time.Time {
			if t == nil {
				return time.Time{}
			}
			return *t
		},
	}
}
