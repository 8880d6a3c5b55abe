package api

import (
	"context"
	"time"

	"github.com/kernodeck/kernodeck/domain"
)

// The support console's reads: its queues, its search and its files.

// asAgent runs read for agent a (none: errAgentRequired).
func asAgent[T any](a *Agent, read func() (T, error)) (T, error) {
	if err := requireAgent(a); err != nil {
		var none T
		return none, err
	}
	return read()
}

// SupportExceptions lists every received amount not settled, oldest first.
func (s *Server) SupportExceptions(ctx context.Context, a *Agent) ([]ExceptionView, error) {
	if err := requireAgent(a); err != nil {
		return nil, err
	}
	es, err := s.stores.Support.OpenExceptions(ctx)
	if err != nil {
		return nil, err
	}
	return viewExceptions(es), nil
}

// OpenSupportRequests lists the customers' support requests not answered
// yet, the oldest (at most openRequestsShown).
func (s *Server) OpenSupportRequests(ctx context.Context, a *Agent) ([]domain.SupportRequest, error) {
	return asAgent(a, func() ([]domain.SupportRequest, error) {
		return s.stores.Support.OpenSupportRequests(ctx, openRequestsShown)
	})
}

// ProvisioningFailures lists the orders whose provisioning failed, waiting
// for support (retry, refund or cancel them).
func (s *Server) ProvisioningFailures(ctx context.Context, a *Agent) ([]domain.StuckOrder, error) {
	return asAgent(a, func() ([]domain.StuckOrder, error) { return s.stores.SupportHosts.ProvisioningFailures(ctx) })
}

// TeardownsStuck lists the rentals whose teardown keeps failing (support
// checks the host, which may still hold the customer's data and access;
// the workflow goes on retrying).
func (s *Server) TeardownsStuck(ctx context.Context, a *Agent) ([]domain.StuckTeardown, error) {
	return asAgent(a, func() ([]domain.StuckTeardown, error) { return s.stores.SupportHosts.TeardownsStuck(ctx) })
}

// HostFlags lists the hosts their customer made dirty on purpose (support
// reads what the customer did, then closes the flag).
func (s *Server) HostFlags(ctx context.Context, a *Agent) ([]domain.HostFlag, error) {
	return asRole(s, a, domain.RoleOperator, func() ([]domain.HostFlag, error) { return s.stores.SupportHosts.HostFlags(ctx) })
}

// MachineQueue lists the paid orders waiting for a machine, line by line
// (model, then GPUs), each line in payment order with its position.
func (s *Server) MachineQueue(ctx context.Context, a *Agent) ([]domain.WaitingOrder, error) {
	return asAgent(a, func() ([]domain.WaitingOrder, error) { return s.stores.SupportHosts.MachineQueue(ctx) })
}

// Approvals are the money actions waiting for a second agent (and those
// approved whose run has no outcome yet), with the agent asking and the
// limits (GET /v1/support/actions/awaiting-approval).
type Approvals struct {
	Actions            []domain.SupportAction `json:"actions"`
	Agent              string                 `json:"agent"`
	AgentDailyCapCents int64                  `json:"agent_daily_cap_cents"`
	FourEyesCents      int64                  `json:"four_eyes_cents"`
}

// AwaitingApproval lists the money actions waiting for a second agent.
func (s *Server) AwaitingApproval(ctx context.Context, a *Agent) (Approvals, error) {
	if err := requireAgent(a); err != nil {
		return Approvals{}, err
	}
	actions, err := s.stores.Support.AwaitingApproval(ctx)
	if err != nil {
		return Approvals{}, err
	}
	return Approvals{Actions: actions, Agent: a.Agent, AgentDailyCapCents: s.cfg.SupportLimits.AgentDailyCapCents,
		FourEyesCents: s.cfg.SupportLimits.FourEyesCents}, nil
}

// FindCases finds orders and top-ups by reference, customer email, txid
// or payment address.
func (s *Server) FindCases(ctx context.Context, a *Agent, q string) ([]domain.FoundCase, error) {
	if err := requireAgent(a); err != nil {
		return nil, err
	}
	if len(q) < 3 || len(q) > 200 {
		return nil, domain.FieldError("q", "Indiquez une référence, un e-mail, un identifiant de transaction ou une adresse (3 à 200 caractères).")
	}
	return s.stores.Support.Find(ctx, q)
}

// SupportOrder is support's view of order ref.
func (s *Server) SupportOrder(ctx context.Context, a *Agent, ref string) (SupportOrderDetail, error) {
	if err := requireAgent(a); err != nil {
		return supportOrderDetail{}, err
	}
	o, err := s.stores.Orders.GetOrder(ctx, ref)
	if err != nil {
		return supportOrderDetail{}, notFoundAs(err, errOrderNotFound)
	}
	d := supportOrderDetail{Order: viewOrder(o), AllowedActions: allowedActions(domain.TargetOrder, o.Status)}
	if d.supportCase, err = s.supportCase(ctx, o.Ref, o.AccountID); err != nil {
		return d, err
	}
	acc, err := s.stores.Orders.Access(ctx, o.Ref)
	switch {
	case err == nil:
		acc.Password = ""
		d.AccessPresent, d.Access = true, &acc
	case domain.ErrorCode(err) != domain.ECodeNotFound:
		return d, err
	}
	if d.SupportRequests, err = s.stores.Support.ListSupportRequests(ctx, o.Ref, 0); err != nil {
		return d, err
	}
	d.Hosts, err = s.stores.SupportHosts.OrderHosts(ctx, o.Ref)
	return d, err
}

// SupportTopUp is support's view of top-up ref.
func (s *Server) SupportTopUp(ctx context.Context, a *Agent, ref string) (SupportTopUpDetail, error) {
	if err := requireAgent(a); err != nil {
		return supportTopUpDetail{}, err
	}
	t, err := s.stores.TopUps.GetTopUp(ctx, ref)
	if err != nil {
		return supportTopUpDetail{}, notFoundAs(err, errTopUpNotFound)
	}
	d := supportTopUpDetail{TopUp: viewTopUp(t), AllowedActions: allowedActions(domain.TargetTopUp, t.Status)}
	d.supportCase, err = s.supportCase(ctx, t.Ref, t.AccountID)
	return d, err
}

var errCustomerNotFound = domain.Errorf(domain.ECodeNotFound, "Client introuvable.")

// SupportCustomer is what support sees of customer id: the account, its
// balance, its orders and top-ups and the balance's movements.
func (s *Server) SupportCustomer(ctx context.Context, a *Agent, id int64) (SupportCustomerDetail, error) {
	var d supportCustomerDetail
	if err := requireAgent(a); err != nil {
		return d, err
	}
	if id <= 0 {
		return d, errCustomerNotFound
	}
	var err error
	if d.Customer, err = s.stores.Accounts.Account(ctx, id); err != nil {
		return d, notFoundAs(err, errCustomerNotFound)
	}
	if d.Balance, err = s.stores.Balances.Balance(ctx, id); err != nil {
		return d, err
	}
	if d.TwoFactor, err = s.CustomerTwoFactor(ctx, id); err != nil {
		return d, err
	}
	orders, err := s.stores.Orders.ListOrders(ctx, id)
	if err != nil {
		return d, err
	}
	d.Orders = make([]orderView, len(orders))
	for i, o := range orders {
		d.Orders[i] = viewOrder(o)
	}
	topups, err := s.stores.TopUps.ListTopUps(ctx, id)
	if err != nil {
		return d, err
	}
	d.TopUps = make([]topUpView, len(topups))
	for i, t := range topups {
		d.TopUps[i] = viewTopUp(t)
	}
	d.Movements, err = s.stores.BalanceHistory.BalanceHistory(ctx, id, maxBalanceHistory)
	return d, err
}

var errRequestNotFound = domain.Errorf(domain.ECodeNotFound, "Demande de support introuvable.")

// AnswerSupportRequest answers customer's support request id: the answer
// is shown on the order's tracking with the agent's name and mailed to
// the customer.
func (s *Server) AnswerSupportRequest(ctx context.Context, a *Agent, id int64, message string) (domain.SupportRequest, error) {
	if err := requireAgent(a); err != nil {
		return domain.SupportRequest{}, err
	}
	msg, err := text("message", message, 1, 10000, "La réponse doit comporter de 1 à 10000 caractères.")
	if err != nil {
		return domain.SupportRequest{}, err
	}
	if id <= 0 {
		return domain.SupportRequest{}, errRequestNotFound
	}
	r, err := s.stores.Support.AnswerSupportRequest(ctx, id, a.Agent, msg, time.Now())
	if err != nil {
		return r, notFoundAs(err, errRequestNotFound)
	}
	return r, nil
}

// SupportHosts lists the inventory (state and note, the order holding a
// host, the last release check) with the operators' actions on hosts.
func (s *Server) SupportHosts(ctx context.Context, a *Agent) (SupportHostList, error) {
	if err := s.requireRole(a, domain.RoleOperator); err != nil {
		return supportHostList{}, err
	}
	if s.hosts == nil {
		return supportHostList{}, errNoHostInventory
	}
	hosts, err := s.hosts.List(ctx)
	if err != nil {
		return supportHostList{}, err
	}
	out := supportHostList{Hosts: hosts, Actions: []domain.SupportAction{}}
	for _, h := range hosts {
		acts, err := s.stores.Support.ListSupportActions(ctx, hostTarget(h.Name))
		if err != nil {
			return supportHostList{}, err
		}
		out.Actions = append(out.Actions, acts...)
	}
	return out, nil
}
