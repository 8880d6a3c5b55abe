package api

import (
	"context"

	"github.com/kernodeck/kernodeck/domain"
)

// The support side of payouts: agents approve or decline them, and build,
// export and close the batches an operator signs off the server.

// SupportPayouts lists payouts of status (all when empty), newest first.
func (s *Server) SupportPayouts(ctx context.Context, a *Agent, status domain.PayoutStatus) ([]domain.Payout, error) {
	p, err := s.agentPayouts(a)
	if err != nil {
		return nil, err
	}
	return p.Store.SupportPayouts(ctx, status, 200)
}

func (s *Server) agentPayouts(a *Agent) (*PayoutDeps, error) {
	if err := requireAgent(a); err != nil {
		return nil, err
	}
	return s.payoutsOn()
}

// ApprovePayout is an agent's approval; above the four-eyes threshold it
// takes a second, senior agent.
func (s *Server) ApprovePayout(ctx context.Context, a *Agent, ref string) (domain.Payout, error) {
	p, err := s.agentPayouts(a)
	if err != nil {
		return domain.Payout{}, err
	}
	return p.Store.ApprovePayout(ctx, ref, a.Agent, s.rolesOf(a.Agent).Has(domain.RoleSenior))
}

// DeclinePayout is an agent's refusal, with its reason for the customer.
func (s *Server) DeclinePayout(ctx context.Context, a *Agent, ref, reason string) (domain.Payout, error) {
	p, err := s.agentPayouts(a)
	if err != nil {
		return domain.Payout{}, err
	}
	if err := CheckReviewReason(reason); err != nil {
		return domain.Payout{}, err
	}
	return p.Store.DeclinePayout(ctx, ref, a.Agent, reason)
}

// BatchView is a batch, its payouts and its export for the signer.
type BatchView struct {
	domain.PayoutBatch
	Payouts []domain.Payout    `json:"payouts"`
	Export  domain.BatchExport `json:"export"`
}

// utxo reports whether a network's batches are a PSBT.
func utxo(network string) bool {
	return network == domain.NetworkBitcoin || network == domain.NetworkLitecoin
}

// OpenPayoutBatch (a senior's) gathers the approved payouts of one method in a batch
// (or returns the open one), exports it and starts its workflow.
func (s *Server) OpenPayoutBatch(ctx context.Context, a *Agent, network, asset string) (BatchView, error) {
	p, err := s.agentPayouts(a)
	if err != nil {
		return BatchView{}, err
	}
	if err := s.requireRole(a, domain.RoleSenior); err != nil {
		return BatchView{}, err
	}
	if _, ok := domain.LookupMethod(asset, network); !ok {
		return BatchView{}, domain.FieldError("asset", "Ce moyen de paiement n'existe pas.")
	}
	if err := s.WorkflowsReady(ctx); err != nil {
		return BatchView{}, err
	}
	b, ps, err := p.Store.OpenBatch(ctx, network, asset, a.Agent)
	if err != nil {
		return BatchView{}, err
	}
	if utxo(network) && b.PSBT == nil {
		outs, err := p.Store.SpendableOutputs(ctx, network)
		if err != nil {
			return BatchView{}, err
		}
		ex, err := p.Chain.Export(ctx, b, ps, outs)
		if err != nil {
			// Not left holding its payouts: they wait for the next batch.
			if verr := p.Store.VoidOpenBatch(ctx, b.Ref); verr != nil {
				s.log.Error("payouts: a batch that could not be exported stays open", "batch", b.Ref, "err", verr)
			}
			return BatchView{}, err
		}
		if err := p.Store.SaveBatchPSBT(ctx, b.Ref, ex); err != nil {
			return BatchView{}, err
		}
	}
	if err := p.Workflows.StartPayoutBatch(ctx, b.Ref); err != nil {
		return BatchView{}, err
	}
	return s.PayoutBatch(ctx, a, b.Ref)
}

// PayoutBatch reads a batch with its export.
func (s *Server) PayoutBatch(ctx context.Context, a *Agent, ref string) (BatchView, error) {
	p, err := s.agentPayouts(a)
	if err != nil {
		return BatchView{}, err
	}
	b, ps, err := p.Store.Batch(ctx, ref)
	if err != nil {
		return BatchView{}, notFoundAs(err, domain.Errorf(domain.ECodeNotFound, "Aucun lot de retraits %s.", ref))
	}
	v := BatchView{PayoutBatch: b, Payouts: ps}
	if b.PSBT != nil {
		v.Export.PSBT = *b.PSBT
		if b.FeeBase != nil {
			v.Export.FeeBase = *b.FeeBase
		}
	} else if !utxo(b.Network) {
		if v.Export, err = p.Chain.Export(ctx, b, ps, nil); err != nil {
			return BatchView{}, err
		}
	}
	return v, nil
}

// SubmitSignedBatch (a senior's) closes an open batch: for BTC and LTC with its signed
// transaction, checked to pay exactly the batch's payouts (the watchers
// broadcast it); elsewhere (signed empty) the operator says the transfer
// list was sent from the payout wallet. Each payout is then watched at its
// address.
func (s *Server) SubmitSignedBatch(ctx context.Context, a *Agent, ref, signed string) (BatchView, error) {
	p, err := s.agentPayouts(a)
	if err != nil {
		return BatchView{}, err
	}
	if err := s.requireRole(a, domain.RoleSenior); err != nil {
		return BatchView{}, err
	}
	b, ps, err := p.Store.Batch(ctx, ref)
	if err != nil {
		return BatchView{}, notFoundAs(err, domain.Errorf(domain.ECodeNotFound, "Aucun lot de retraits %s.", ref))
	}
	var txid, raw string
	if utxo(b.Network) {
		if signed == "" {
			return BatchView{}, domain.FieldError("transaction", "Collez la transaction signée (hexadécimal) ou le PSBT finalisé (base64).")
		}
		if txid, raw, err = p.Chain.CheckSigned(b, ps, signed); err != nil {
			return BatchView{}, err
		}
	}
	if err := p.Store.SignBatch(ctx, ref, txid, raw, a.Agent, p.Chain.Dress); err != nil {
		return BatchView{}, err
	}
	if err := p.Workflows.TellPayoutBatch(ctx, ref, false); err != nil {
		s.log.Warn("payouts: batch signed, its workflow not told yet", "batch", ref, "err", err)
	}
	return s.PayoutBatch(ctx, a, ref)
}
