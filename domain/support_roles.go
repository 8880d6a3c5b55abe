package domain

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Support roles (issue 39, item 4). Every agent holds RoleAgent (reads,
// support's actions on orders, top-ups and queued amounts); RoleSenior
// and RoleOperator add to it: a senior reviews the actions that wait for
// a second agent (four eyes, and later payouts), an operator works the
// GPU hosts (the hosts page, repair and retire, the flags of hosts a
// customer left dirty). The API checks them in its services, once.
type SupportRole string

const (
	RoleAgent    SupportRole = "agent"
	RoleSenior   SupportRole = "senior"
	RoleOperator SupportRole = "operator"
)

// supportRoleNames are the roles as agents read them.
var supportRoleNames = map[SupportRole]string{
	RoleAgent: "agent", RoleSenior: "senior", RoleOperator: "opérateur",
}

// supportRoleDuties say what a role is for, in a refusal.
var supportRoleDuties = map[SupportRole]string{
	RoleSenior:   "approuver ou refuser les actions qui attendent un second agent",
	RoleOperator: "travailler sur les hôtes GPU",
}

// Name is the role as agents read it ("opérateur").
func (r SupportRole) Name() string {
	if n, ok := supportRoleNames[r]; ok {
		return n
	}
	return string(r)
}

// SupportRoles are the roles one agent holds: RoleAgent always, then the
// others in a fixed order.
type SupportRoles []SupportRole

// Has reports whether the roles include r (RoleAgent: always).
func (rs SupportRoles) Has(r SupportRole) bool { return r == RoleAgent || slices.Contains(rs, r) }

// List is the roles held, RoleAgent first.
func (rs SupportRoles) List() []SupportRole {
	return append([]SupportRole{RoleAgent}, rs.normal()...)
}

// String is "senior+operator" (the variable's form), "agent" for none.
func (rs SupportRoles) String() string {
	var parts []string
	for _, r := range rs {
		if r != RoleAgent {
			parts = append(parts, string(r))
		}
	}
	if len(parts) == 0 {
		return string(RoleAgent)
	}
	return strings.Join(parts, "+")
}

// Names are the roles as agents read them ("agent, senior").
func (rs SupportRoles) Names() string {
	names := []string{RoleAgent.Name()}
	for _, r := range rs {
		if r != RoleAgent {
			names = append(names, r.Name())
		}
	}
	return strings.Join(names, ", ")
}

// ErrForbiddenRole refuses an agent without role r.
func ErrForbiddenRole(r SupportRole) *Error {
	return Errorf(ECodeForbiddenRole, "Réservé au rôle « %s » (%s) : votre rôle ne le permet pas. Rien n'a été changé.",
		r.Name(), supportRoleDuties[r])
}

// agentName is what an agent's name may be (KERNODECK_SUPPORT_TOKENS'
// names are recorded in the audit log).
var agentName = regexp.MustCompile(`^[A-Za-z0-9._@-]{1,64}$`)

// ParseSupportRoles reads KERNODECK_SUPPORT_ROLES: comma-separated
// agent:role pairs, several roles joined by "+"
// ("alice:senior,bob:agent,carol:operator+senior"). An agent appears once;
// an agent not listed holds RoleAgent alone.
func ParseSupportRoles(v string) (map[string]SupportRoles, error) {
	out := map[string]SupportRoles{}
	for _, entry := range strings.Split(v, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, roles, ok := strings.Cut(entry, ":")
		name = strings.TrimSpace(name)
		if !ok || !agentName.MatchString(name) || strings.TrimSpace(roles) == "" {
			return nil, fmt.Errorf("%q: want agent:role, roles joined by + (agent, senior, operator), e.g. carol:operator+senior", entry)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("agent %q is listed twice: give all their roles in one entry (e.g. %s:operator+senior)", name, name)
		}
		var rs SupportRoles
		for _, r := range strings.Split(roles, "+") {
			role := SupportRole(strings.TrimSpace(r))
			switch role {
			case RoleAgent, RoleSenior, RoleOperator:
			default:
				return nil, fmt.Errorf("agent %q: unknown role %q (agent, senior, operator)", name, role)
			}
			if slices.Contains(rs, role) {
				return nil, fmt.Errorf("agent %q: role %q given twice", name, role)
			}
			rs = append(rs, role)
		}
		out[name] = rs.normal()
	}
	return out, nil
}

// normal is rs without RoleAgent (implied), in a fixed order.
func (rs SupportRoles) normal() SupportRoles {
	out := SupportRoles{}
	for _, r := range []SupportRole{RoleSenior, RoleOperator} {
		if slices.Contains(rs, r) {
			out = append(out, r)
		}
	}
	return out
}
