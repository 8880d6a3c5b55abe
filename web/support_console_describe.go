package web

// What a support action will change, said in French on its confirmation
// page before anything is done.

import (
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// credit is what act adds to the customer's available balance (0: none).
func credit(act consoleAction, d consoleFileData) int64 {
	switch {
	case act.Action == "refund":
		return act.AmountCents
	case act.Action == "refund-exception":
		if act.AmountCents > 0 {
			return act.AmountCents
		}
		for _, e := range d.Case.Exceptions {
			if e.ID == act.ExceptionID {
				return e.RemainingCents
			}
		}
	case act.Action == "attribute-payment" && d.TopUp != nil:
		return d.TopUp.TopUp.AmountCents
	}
	return 0
}

// describe says, in French, exactly what act will change on the file d
// (amounts in USD). It refuses what the file shows cannot apply.
func describe(act consoleAction, d consoleFileData) ([]string, error) {
	who := d.Case.Customer.FirstName + " " + d.Case.Customer.LastName + " (" + d.Case.Customer.Email + ")"
	if actionSpecs[act.Action].Exception {
		var e *api.ExceptionView
		for i := range d.Case.Exceptions {
			if d.Case.Exceptions[i].ID == act.ExceptionID {
				e = &d.Case.Exceptions[i]
			}
		}
		if e == nil {
			return nil, domain.Errorf(domain.ECodeNotFound, "Ce montant en attente n'appartient pas à ce dossier.")
		}
		return describeException(act, *e, d, who)
	}
	if d.Kind == domain.TargetTopUp {
		t := d.TopUp.TopUp
		switch act.Action {
		case "attribute-payment":
			return []string{
				fmt.Sprintf("La recharge %s de %s est attribuée sans paiement reçu : le solde de %s est crédité de %s.", t.Ref, usd(t.AmountCents), who, usd(t.AmountCents)),
				"Cette attribution ne correspond à aucun paiement reçu : elle n'est pas remboursable depuis la file.",
			}, nil
		case "cancel":
			return []string{fmt.Sprintf("La recharge %s (%s, statut « %s ») est annulée : elle n'attend plus de paiement et rien n'est crédité.", t.Ref, usd(t.AmountCents), label(statusLabels, t.Status))}, nil
		}
	}
	o := d.Order.Order
	due := max(0, o.TotalCents-o.PaidCents)
	switch act.Action {
	case "attribute-payment":
		amount := act.AmountCents
		if amount == 0 {
			amount = due
		}
		if amount > due {
			return nil, domain.FieldError("amount", fmt.Sprintf("Il ne reste que %s à payer sur cette commande.", usd(due)))
		}
		out := []string{fmt.Sprintf("%s sont comptés pour la commande %s (total %s, déjà compté %s, reste dû %s).", usd(amount), o.Ref, usd(o.TotalCents), usd(o.PaidCents), usd(due))}
		if amount == due {
			out = append(out, "La commande est alors payée : la préparation de la machine démarre.")
		} else {
			out = append(out, fmt.Sprintf("Il restera %s à payer.", usd(due-amount)))
		}
		return append(out, "Cette attribution ne correspond à aucun paiement reçu : elle n'est pas remboursable."), nil
	case "extend":
		if o.PeriodEnd == nil {
			return []string{fmt.Sprintf("La location %s durera %d %s de plus que prévu (%d jours au lieu de %d) ; la période n'a pas encore commencé.", o.Ref, act.Days, plural(act.Days, "jour", "jours"), o.DurationDays+act.Days, o.DurationDays),
				"Rien n'est facturé au client."}, nil
		}
		end := o.PeriodEnd.Add(time.Duration(act.Days) * 24 * time.Hour)
		return []string{fmt.Sprintf("La fin de la location %s passe du %s au %s (%d %s de plus).", o.Ref, frenchDate(*o.PeriodEnd), frenchDate(end), act.Days, plural(act.Days, "jour", "jours")),
			"Les rappels de fin sont recalculés ; rien n'est facturé au client."}, nil
	case "end-early":
		end := "la fin prévue"
		if o.PeriodEnd != nil {
			end = "la fin prévue le " + frenchDate(*o.PeriodEnd)
		}
		return []string{fmt.Sprintf("La location %s se termine maintenant, avant %s : l'accès est révoqué, la machine effacée et libérée.", o.Ref, end),
			"Rien n'est remboursé par cette action (un remboursement est une action à part)."}, nil
	case "close-host-flag":
		if len(d.OpenHostFlags) == 0 {
			return nil, domain.Errorf(domain.ECodeConflict, "Aucun signalement ouvert sur les machines de cette commande.")
		}
		var out []string
		for _, h := range d.OpenHostFlags {
			out = append(out, fmt.Sprintf("Le signalement de l'hôte %s (compte %s : %s) est clos : il quitte la file du support.", h.HostName, h.UnixUser, *h.CustomerFlag))
		}
		return append(out, "Rien ne change sur la machine ni pour le client ; l'action est inscrite au journal avec votre raison."), nil
	case "retry-provisioning":
		return []string{fmt.Sprintf("La préparation de la machine de %s reprend depuis l'étape bloquée (statut actuel « %s »).", o.Ref, label(statusLabels, o.Status))}, nil
	case "cancel":
		out := []string{fmt.Sprintf("La commande %s (%s, statut « %s ») est annulée : elle n'attend plus de paiement ; aucun montant ne bouge.", o.Ref, usd(o.TotalCents), label(statusLabels, o.Status))}
		if o.PaidCents > 0 {
			out = append(out, fmt.Sprintf("Déjà compté : %s. Le workflow refuse l'annulation tant qu'un montant reçu reste remboursable : remboursez-le d'abord.", usd(o.PaidCents)))
		}
		return out, nil
	case "refund":
		refundable := max(0, o.PaidCents-o.RefundedCents)
		return []string{fmt.Sprintf("%s sont remboursés au solde de %s, depuis ce que la commande %s a reçu (compté %s, déjà remboursé %s).", usd(act.AmountCents), who, o.Ref, usd(o.PaidCents), usd(o.RefundedCents)),
			fmt.Sprintf("Au plus %s restent remboursables ; le workflow refuse davantage.", usd(refundable))}, nil
	}
	return nil, domain.Errorf(domain.ECodeInvalid, "Action inconnue.")
}

func describeException(act consoleAction, e api.ExceptionView, d consoleFileData, who string) ([]string, error) {
	parts := []string{label(exceptionReasons, e.Reason)}
	if asset := assetAmount(e, d); asset != "" { // unknown for some reverted payments
		parts = append(parts, asset)
	}
	if e.TxID != "" {
		parts = append(parts, "transaction "+e.TxID)
	}
	what := fmt.Sprintf("montant en attente n° %d (%s)", e.ID, strings.Join(parts, ", "))
	switch act.Action {
	case "refund-exception":
		amount := act.AmountCents
		if amount == 0 {
			amount = e.RemainingCents
		}
		if amount <= 0 || amount > e.RemainingCents {
			return nil, domain.FieldError("amount", fmt.Sprintf("Il reste %s à rembourser sur ce montant.", usd(e.RemainingCents)))
		}
		return []string{fmt.Sprintf("%s du %s sont remboursés au solde de %s.", usd(amount), what, who),
			fmt.Sprintf("Il restera %s en attente sur ce montant.", usd(e.RemainingCents-amount))}, nil
	case "count-exception":
		if e.RemainingCents <= 0 {
			return nil, domain.Errorf(domain.ECodeConflict, "Rien ne reste à compter sur ce montant.")
		}
		amount := act.AmountCents
		if amount == 0 {
			amount = e.RemainingCents
		}
		if amount > e.RemainingCents {
			return nil, domain.FieldError("amount", fmt.Sprintf("Il reste %s à compter sur ce montant.", usd(e.RemainingCents)))
		}
		if d.Order != nil {
			o := d.Order.Order
			due := max(0, o.TotalCents-o.PaidCents)
			return []string{fmt.Sprintf("%s du %s sont comptés pour la commande %s, au plus ce qui reste dû (%s) : %s comptés, %s restent en attente.", usd(amount), what, o.Ref, usd(due), usd(min(amount, due)), usd(e.RemainingCents-min(amount, due))),
				"Seulement si la commande attend encore un paiement : sinon le workflow refuse."}, nil
		}
		t := d.TopUp.TopUp
		return []string{fmt.Sprintf("%s du %s sont comptés pour la recharge %s de %s, au plus ce qui lui manque ; le reste demeure en attente.", usd(amount), what, t.Ref, usd(t.AmountCents)),
			"Seulement si la recharge attend encore un paiement : sinon le workflow refuse."}, nil
	case "value-exception":
		if !e.NeedsValue {
			return nil, domain.Errorf(domain.ECodeConflict, "La valeur de ce montant est déjà connue.")
		}
		if act.ReturnedOnChain {
			return []string{fmt.Sprintf("Le %s est clos comme renvoyé sur la chaîne : rien n'est dû au client, rien n'est crédité.", what)}, nil
		}
		return []string{fmt.Sprintf("Le %s vaut désormais %s (une seule fois) : il se rembourse ou se compte ensuite comme les autres montants en attente.", what, usd(act.AmountCents)),
			"Rien n'est crédité par cette action."}, nil
	case "resolve-exception":
		if e.Reason != domain.ExceptionReverted {
			return nil, domain.Errorf(domain.ECodeConflict, "Seul un signalement de paiement annulé se clôt ; un montant se rembourse ou se compte.")
		}
		return []string{fmt.Sprintf("Le signalement n° %d (paiement %s annulé par une réorganisation, manque %s) est clos.", e.ID, e.TxID, usd(e.ShortfallCents)),
			"Aucun argent ne bouge ; la location continue (la terminer est une action à part)."}, nil
	}
	return nil, domain.Errorf(domain.ECodeInvalid, "Action inconnue.")
}

// assetAmount is what a queued amount received in its asset ("0.00036262
// BTC"), when a payment request of the file says the asset's decimals;
// else the asset alone.
func assetAmount(e api.ExceptionView, d consoleFileData) string {
	base, ok := new(big.Int).SetString(e.AmountBase, 10)
	if !ok {
		return e.Asset
	}
	for _, in := range d.Case.PaymentIntents {
		if in.Asset == e.Asset && in.Network == e.Network {
			return domain.FormatUnits(base, in.Decimals) + " " + e.Asset
		}
	}
	return e.Asset
}
