package web

// The support console's single-use keys (issue 36, item 4): each
// confirmation page carries a fresh key of its own, which the support
// service takes as the action's idempotency key. The same confirmation
// posted twice runs the action once and shows its first result; an action
// posted without a key from its confirmation page (or with the form
// changed since) is refused before anything is carried out.

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/kernodeck/kernodeck/api"
	"github.com/kernodeck/kernodeck/domain"
)

// errNotConfirmed refuses an action that did not come from its
// confirmation page.
var errNotConfirmed = domain.Errorf(domain.ECodeInvalid,
	"cette action n'a pas été confirmée depuis sa page de confirmation (ou le formulaire a changé depuis) ; rien n'a été fait. "+
		"Vérifiez-la puis confirmez-la.")

// actionKey is a confirmation page's key: a fresh nonce, and a MAC of the
// nonce and of what the page confirms under the agent's session (its
// CSRF token, the session's own, never sent by another agent's browser).
// Several API replicas check it alike: it needs no state of its own.
func actionKey(a *agent, act consoleAction) (string, error) {
	var n [16]byte
	if _, err := rand.Read(n[:]); err != nil {
		return "", err
	}
	nonce := base64.RawURLEncoding.EncodeToString(n[:])
	return nonce + "." + actionMAC(a, act, nonce), nil
}

// confirmedKey reports whether key is one actionKey made for act in this
// session.
func confirmedKey(a *agent, act consoleAction, key string) bool {
	nonce, mac, ok := strings.Cut(key, ".")
	if !ok || nonce == "" || a.CSRFToken == "" {
		return false
	}
	return hmac.Equal([]byte(mac), []byte(actionMAC(a, act, nonce)))
}

func actionMAC(a *agent, act consoleAction, nonce string) string {
	m := hmac.New(sha256.New, []byte(a.CSRFToken))
	for _, f := range []string{"kernodeck console action", a.Agent, nonce, act.Kind, act.Ref, act.Action,
		strconv.FormatInt(act.ExceptionID, 10), strconv.FormatInt(act.AmountCents, 10), strconv.Itoa(act.Days),
		strconv.FormatBool(act.ReturnedOnChain), act.Reason} {
		m.Write([]byte(strconv.Itoa(len(f)) + ":" + f + ","))
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:24])
}

// postSupportAction carries out a confirmed action (the form's CSRF
// token, its confirmation page's key, which run takes as the action's
// idempotency key) and returns the ID of its audit record; replayed says
// the key was sent before: nothing was done again, the answer is the
// first one. An action recorded to wait for a second agent is no refusal.
func (s *Site) postSupportAction(c *gin.Context, a *agent, act consoleAction,
	run func(ctx context.Context, key string) (api.ActionOutcome, error)) (id int64, replayed bool, err error) {
	key := c.PostForm("key")
	if !confirmedKey(a, act, key) {
		return 0, false, errNotConfirmed
	}
	if err := s.svc.CheckAgentCSRF(a, c.PostForm("csrf")); err != nil {
		return 0, false, err
	}
	out, err := run(c.Request.Context(), key)
	if domain.ErrorCode(err) == domain.ECodeAwaitingApproval && out.Action.ID > 0 {
		// Recorded, waiting for a second agent: the file says so.
		err = nil
	}
	return out.Action.ID, out.Replayed, err
}

// replayNotice says that a confirmation was posted again.
const replayNotice = "Cette confirmation avait déjà été envoyée : l'action n'a pas été refaite, voici son résultat. "

// replayed is replayNotice when the page shows an action whose
// confirmation was posted again (actionQuery), else "".
func replayed(c *gin.Context) string {
	if c.Query("renvoi") != "" {
		return replayNotice
	}
	return ""
}
