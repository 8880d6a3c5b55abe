package web

// The console's words and formats for people: the labels of codes
// (queued amounts' reasons, support actions, states, outcomes, what a
// search matched) and the catalog's model names, with the customer pages'
// formatters (format.go, domain/french.go).

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/provision/sshhost"
)

var exceptionReasons = map[string]string{
	domain.ExceptionLate:       "Confirmé après l'échéance",
	domain.ExceptionOver:       "Au-delà du total",
	domain.ExceptionExtra:      "Arrivé hors attente de paiement",
	domain.ExceptionPartial:    "Compté, puis expiré impayé",
	domain.ExceptionAfterClose: "Arrivé après la clôture",
	domain.ExceptionDust:       "Poussière (sous le seuil)",
	domain.ExceptionReverted:   "Annulé par une réorganisation",
	domain.ExceptionOtherAsset: "Autre actif reçu",
	domain.ExceptionNotWatched: "Hors fenêtre de surveillance",
}

// exceptionReasonOrder is the order of the queue's filters.
var exceptionReasonOrder = []string{domain.ExceptionLate, domain.ExceptionOver, domain.ExceptionExtra,
	domain.ExceptionPartial, domain.ExceptionAfterClose, domain.ExceptionDust, domain.ExceptionReverted,
	domain.ExceptionOtherAsset, domain.ExceptionNotWatched}

var actionLabels = map[string]string{
	// support_actions.action
	domain.ActionAttributePayment:  "Attribution d'un paiement",
	actionCountException:           "Prise en compte d'un montant reçu",
	domain.ActionExtend:            "Prolongation",
	domain.ActionEndEarly:          "Fin anticipée",
	domain.ActionRetryProvisioning: "Relance de la préparation",
	domain.ActionCancel:            "Annulation",
	domain.ActionRefund:            "Remboursement au solde",
	domain.ActionRefundException:   "Remboursement d'un montant en attente",
	domain.ActionResolveException:  "Clôture d'un signalement",
	domain.ActionValueException:    "Valeur d'un autre actif",
	domain.ActionRepairHost:        "Remise en service d'un hôte",
	domain.ActionCloseHostFlag:     "Signalement de machine salie clos",
	domain.ActionRetireHost:        "Retrait d'un hôte de la rotation",
}

// stateLabels name payment requests' and chain payments' states.
var stateLabels = map[string]string{
	domain.IntentOpen: "ouverte", domain.IntentSuperseded: "remplacée par une autre",
	"seen": "vu, non confirmé", "confirmed": "confirmé", "answered": "répondue",
	"active": "active", "released": "libérée", "failed": "en échec",
	"available": "disponible", "reserved": "réservé", "in_use": "en service", "draining": "en retrait", "broken": "en panne",
}

func outcomeLabel(o *string) string {
	if o == nil {
		return "en cours"
	}
	switch *o {
	case "done":
		return "effectuée"
	case "rejected":
		return "refusée"
	case "failed":
		return "échouée"
	case domain.OutcomeDeclined:
		return "refusée par un second agent"
	}
	return "état inconnu" // a code of a newer version: no English word shown
}

// actionResult says, in French, where an audited action stands: its
// outcome, the French reason of a refusal (the detail's code left out),
// and who reviewed it when it needed a second agent.
func actionResult(a domain.SupportAction) string {
	out := outcomeLabel(a.Outcome)
	if a.AwaitingApproval() {
		out = "en attente d'un second agent"
	}
	if a.Outcome != nil && *a.Outcome == "rejected" && a.Detail != nil {
		if _, msg, ok := strings.Cut(*a.Detail, ": "); ok {
			out += " : " + msg
		}
	}
	if a.ReviewedBy != nil {
		out += " · revue par " + *a.ReviewedBy
	}
	return out
}

// resolutionLabels say how a reverted payment's flag was closed.
var resolutionLabels = map[string]string{
	"acknowledged": "clos par le support",
	"remined":      "clos : le paiement est de nouveau confirmé",
}

// actionCountException labels a queued amount counted for its order or
// top-up: recorded as an attribution (domain.ActionAttributePayment) whose
// params name the queued amount, it is no attribution for people.
const actionCountException = "count-exception"

// actionName is a support action's label: counting a queued amount
// (an attribution naming exception_id) has its own.
func actionName(a domain.SupportAction) string {
	if a.Action == domain.ActionAttributePayment && len(a.Params) > 0 {
		var p struct {
			ExceptionID int64 `json:"exception_id"`
		}
		if json.Unmarshal(a.Params, &p) == nil && p.ExceptionID > 0 {
			return actionLabels[actionCountException]
		}
	}
	return label(actionLabels, a.Action)
}

// matchedLabels say what a search matched (domain.FoundCase.Matched).
var matchedLabels = map[string]string{
	"reference": "référence", "email": "email", "txid": "transaction", "address": "adresse",
}

// gpuNames caches the catalog's model names for the console's lists
// (rows carry the model code only).
type gpuNames struct {
	mu    sync.Mutex
	names domain.GPUNames
	at    time.Time
}

// gpuNamesTTL is how long the console keeps the catalog's names.
const gpuNamesTTL = time.Minute

// gpuName is model's display name in the catalog ("NVIDIA B200"), or the
// code when the catalog cannot be read or does not name it.
func (s *Site) gpuName(model string) string {
	if model == "" {
		return ""
	}
	s.gpus.mu.Lock()
	defer s.gpus.mu.Unlock()
	if s.gpus.names == nil || time.Since(s.gpus.at) > gpuNamesTTL {
		if s.svc != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			cat, err := s.svc.Catalog(ctx)
			cancel()
			if err == nil {
				s.gpus.names, s.gpus.at = domain.NewGPUNames(cat.Models), time.Now()
			}
		}
	}
	return s.gpus.names.Name(model)
}

// namedHost is h with its model as the catalog names it, for the texts
// of the confirmation page.
func (s *Site) namedHost(h sshhost.Host) sshhost.Host {
	h.GPUModel = s.gpuName(h.GPUModel)
	return h
}

// roleNames are an agent's support roles as the console's header says
// them ("rôles agent, senior").
func roleNames(rs []domain.SupportRole) string {
	if len(rs) > 1 {
		return "rôles " + domain.SupportRoles(rs).Names()
	}
	return "rôle " + domain.SupportRoles(rs).Names()
}
