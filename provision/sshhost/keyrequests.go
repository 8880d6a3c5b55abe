package sshhost

import (
	"context"
	"log/slog"
	"time"

	"github.com/kernodeck/kernodeck/domain"
	"github.com/kernodeck/kernodeck/postgres"
)

// KeyRequests applies the customers' key changes (access_key_requests,
// written by the API) on their hosts: the worker holds the hosts' admin
// key, the API does not.
type KeyRequests struct {
	Store  KeyRequestStore
	Driver *Driver
	// Poll is the pause when nothing is pending (default 2 s).
	Poll time.Duration
	// MaxAttempts failed connections or scripts before the request is
	// given up, with a message for the customer (default 5).
	MaxAttempts int
	Logger      *slog.Logger
}

// KeyRequestStore holds the customers' key change requests
// (postgres.DB).
type KeyRequestStore interface {
	ClaimKeyRequest(ctx context.Context, lease time.Duration) (p postgres.PendingKeyRequest, ok bool, err error)
	FinishKeyRequest(ctx context.Context, id int64, failure string) error
}

// keyRequestLease bounds one application (connect, run setkey.sh).
const keyRequestLease = 2 * time.Minute

// Run applies pending requests until ctx ends.
func (k *KeyRequests) Run(ctx context.Context) error {
	poll, maxAttempts, log := k.Poll, k.MaxAttempts, k.Logger
	if poll <= 0 {
		poll = 2 * time.Second
	}
	if maxAttempts <= 0 {
		maxAttempts = 5
	}
	if log == nil {
		log = slog.Default()
	}
	for {
		worked, err := k.applyOne(ctx, maxAttempts, log)
		if err != nil {
			log.Warn("key request", "err", err)
		}
		if worked && err == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// applyOne applies the oldest pending request, if any.
func (k *KeyRequests) applyOne(ctx context.Context, maxAttempts int, log *slog.Logger) (bool, error) {
	p, ok, err := k.Store.ClaimKeyRequest(ctx, keyRequestLease)
	if err != nil || !ok {
		return false, err
	}
	actx, cancel := context.WithTimeout(ctx, keyRequestLease)
	defer cancel()
	if p.Kind == domain.KeyRequestReplace {
		err = k.Driver.ReplaceKey(actx, p.OrderRef, p.PublicKey.String)
	} else {
		err = k.Driver.ReissueKey(actx, p.OrderRef)
	}
	var failure string
	switch {
	case err == nil:
	case domain.ErrorCode(err) != domain.ECodeInternal:
		failure = domain.ErrorMessage(err)
	case p.Attempts >= maxAttempts:
		failure = "La clé n'a pas pu être changée sur la machine : le support est prévenu, réessayez plus tard."
	default:
		// Left pending: retried when the lease ends.
		return true, err
	}
	if failure != "" {
		log.Error("key request failed", "order", p.OrderRef, "kind", p.Kind, "err", err)
	} else {
		log.Info("key request applied", "order", p.OrderRef, "kind", p.Kind)
	}
	return true, k.Store.FinishKeyRequest(ctx, p.ID, failure)
}
