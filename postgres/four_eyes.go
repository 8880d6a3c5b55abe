package postgres

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/kernodeck/kernodeck/domain"
)

// lockAgent serialises, for one agent, the check of their daily cap and
// the action that follows it (a transaction-scoped advisory lock).
func lockAgent(ctx context.Context, tx *sqlx.Tx, agent string) error {
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('support-agent:' || $1, 0))`, agent); err != nil {
		return fmt.Errorf("lock agent %s: %w", agent, err)
	}
	return nil
}

// movedByAgent is the money an agent's actions moved within the cap's
// window: those they asked (done, or still open: awaiting approval or
// running) and those they approved. Refused, failed and declined ones
// moved nothing.
const movedByAgent = `SELECT COALESCE(SUM(money_cents), 0) FROM support_actions
	WHERE money_cents > 0 AND (outcome IS NULL OR outcome = 'done')
	  AND ((agent = $1 AND created_at > now() - $2::interval)
	    OR (reviewed_by = $1 AND approved AND reviewed_at > now() - $2::interval))`

func capWindow() string { return fmt.Sprintf("%d seconds", int64(domain.AgentCapWindow.Seconds())) }

// checkAgentCap refuses cents more from agent when it passes capCents.
func checkAgentCap(ctx context.Context, tx *sqlx.Tx, agent string, cents, capCents int64) error {
	var moved int64
	if err := tx.GetContext(ctx, &moved, movedByAgent, agent, capWindow()); err != nil {
		return fmt.Errorf("moved by %s: %w", agent, err)
	}
	if moved+cents > capCents {
		return domain.Errorf(domain.ECodeAgentDailyCap,
			"Plafond atteint : vos actions des dernières 24 heures ont déjà déplacé %s USD, et celle-ci (%s USD) dépasserait votre plafond de %s USD. "+
				"Rien n'a été fait ; un autre agent peut s'en charger.",
			domain.FormatUSD(moved), domain.FormatUSD(cents), domain.FormatUSD(capCents))
	}
	return nil
}

// AgentMoved is what one agent's actions moved within the cap's window.
type AgentMoved struct {
	Agent string `db:"agent"`
	Cents int64  `db:"cents"`
}

// MovedByAgents lists, per agent with any, the money their actions moved
// within the cap's window (metrics, at scrape time).
func (db *DB) MovedByAgents(ctx context.Context) ([]AgentMoved, error) {
	var out []AgentMoved
	if err := db.SelectContext(ctx, &out, `
		WITH recent AS (
			SELECT agent, reviewed_by, approved, money_cents, created_at, reviewed_at FROM support_actions
			WHERE money_cents > 0 AND (outcome IS NULL OR outcome = 'done')
			  AND (created_at > now() - $1::interval OR reviewed_at > now() - $1::interval))
		SELECT agent, SUM(cents)::bigint AS cents FROM (
			SELECT agent, money_cents AS cents FROM recent WHERE created_at > now() - $1::interval
			UNION ALL
			SELECT reviewed_by, money_cents FROM recent WHERE approved AND reviewed_at > now() - $1::interval) m
		GROUP BY agent ORDER BY agent`, capWindow()); err != nil {
		return nil, fmt.Errorf("moved by agents: %w", err)
	}
	return out, nil
}

// AwaitingApproval lists the support actions a second agent has to
// review, and those approved whose run has no outcome yet (the approver
// runs them again), oldest first.
func (db *DB) AwaitingApproval(ctx context.Context) ([]domain.SupportAction, error) {
	out := []domain.SupportAction{}
	if err := db.SelectContext(ctx, &out, `SELECT `+supportActionColumnList+` FROM support_actions
		WHERE needs_approval AND outcome IS NULL ORDER BY id`); err != nil {
		return nil, fmt.Errorf("actions awaiting approval: %w", err)
	}
	return out, nil
}

// ReviewSupportAction writes, once, a second agent's approval or refusal
// of an action that needs one. The agent who asked is refused
// (own_action), as is an action reviewed already, by another agent or the
// other way (conflict). An approval counts toward the reviewer's daily
// cap (capCents); a refusal closes the action (outcome declined). The
// same reviewer approving again an approved action that has no outcome
// gets it back, to run it again (its workflow update is keyed by the
// action's ID, so it is carried out once).
func (db *DB) ReviewSupportAction(ctx context.Context, id int64, reviewer string, approve bool, reason string, capCents int64) (domain.SupportAction, error) {
	var a domain.SupportAction
	err := db.inTx(ctx, func(tx *sqlx.Tx) error {
		if err := lockAgent(ctx, tx, reviewer); err != nil {
			return err
		}
		if err := tx.GetContext(ctx, &a, `SELECT `+supportActionColumnList+` FROM support_actions WHERE id = $1 FOR UPDATE`, id); err != nil {
			return fmt.Errorf("support action %d: %w", id, notFound(err))
		}
		switch {
		case !a.NeedsApproval:
			return domain.Errorf(domain.ECodeConflict, "L'action n° %d n'attend l'accord de personne.", id)
		case a.Agent == reviewer:
			return domain.Errorf(domain.ECodeOwnAction,
				"Vous avez demandé l'action n° %d : un second agent doit l'approuver ou la refuser, pas vous.", id)
		case a.ReviewedBy != nil:
			if approve && *a.Approved && *a.ReviewedBy == reviewer && a.Outcome == nil {
				return nil // approved, its run unfinished: run it again
			}
			verdict := "refusée"
			if *a.Approved {
				verdict = "approuvée"
			}
			return domain.Errorf(domain.ECodeConflict, "L'action n° %d a déjà été %s par %s.", id, verdict, *a.ReviewedBy)
		case a.Outcome != nil:
			return domain.Errorf(domain.ECodeConflict, "L'action n° %d est déjà close.", id)
		}
		if approve {
			if err := checkAgentCap(ctx, tx, reviewer, a.MoneyCents, capCents); err != nil {
				return err
			}
			return tx.GetContext(ctx, &a, `UPDATE support_actions SET reviewed_by = $2, approved = true, review_reason = $3,
				reviewed_at = now() WHERE id = $1 RETURNING `+supportActionColumnList, id, reviewer, reason)
		}
		return tx.GetContext(ctx, &a, `UPDATE support_actions SET reviewed_by = $2, approved = false, review_reason = $3,
			reviewed_at = now(), outcome = 'declined', detail = 'declined by ' || $2, done_at = now()
			WHERE id = $1 RETURNING `+supportActionColumnList, id, reviewer, reason)
	})
	if err != nil {
		return domain.SupportAction{}, err
	}
	return a, nil
}
