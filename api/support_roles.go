package api

import "github.com/kernodeck/kernodeck/domain"

// Support roles (issue 39, item 4; domain.SupportRole): every agent is an
// agent; Config.AgentRoles (KERNODECK_SUPPORT_ROLES) makes some senior
// (ReviewAction: a second agent's approval or refusal of a four-eyes
// action; payouts' approval is to call requireRole(a, RoleSenior) too) or
// operator (the hosts: SupportHosts, RepairHost, RetireHost, HostFlags,
// CloseHostFlag). Each service checks its role first, from the
// configuration and the agent's name (never from roles a caller sends),
// so a refusal (403 forbidden_role) records and changes nothing; the
// console only hides what the agent cannot do.

// rolesOf are agent name's roles under this configuration.
func (s *Server) rolesOf(name string) domain.SupportRoles { return s.cfg.AgentRoles[name] }

// requireRole refuses a call without an agent, or by an agent without
// role r.
func (s *Server) requireRole(a *Agent, r domain.SupportRole) error {
	if err := requireAgent(a); err != nil {
		return err
	}
	if !s.rolesOf(a.Agent).Has(r) {
		return domain.ErrForbiddenRole(r)
	}
	return nil
}

// asRole runs read for agent a holding role r.
func asRole[T any](s *Server, a *Agent, r domain.SupportRole, read func() (T, error)) (T, error) {
	if err := s.requireRole(a, r); err != nil {
		var none T
		return none, err
	}
	return read()
}

// Holds reports whether the agent holds role r, as the console shows it
// (the services decide with requireRole).
func (a *agentSessionResponse) Holds(r domain.SupportRole) bool {
	return a != nil && domain.SupportRoles(a.Roles).Has(r)
}
