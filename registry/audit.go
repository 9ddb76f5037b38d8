package registry

import (
	"context"
	"errors"
	"time"

	"github.com/cruxible/cruxprov/refusal"
)

// Unrunnable is an accepted pin the history holds intact that runs
// refuse: its approval expired, the threshold was raised, or an approver
// key was untrusted since it was accepted.
type Unrunnable struct {
	Provider string `json:"provider"`
	Revision int64  `json:"revision"`
	Code     string `json:"code"`
	Detail   string `json:"detail"`
}

// Audit is `registry log --verify`: the history as reg reads it, the
// trust state replayed, the pin entries and the registered interfaces
// against the history, every pin file as the history accepted it (none
// lost), and every pin not retired verified as a run would (floors
// untouched); those that do not run are listed, any other refusal fails
// it. Everything is read under one shared lock (a Dir's): read apart, a
// retirement approved between the pins and their verification failed
// the audit pin_unapproved for a registry that was intact (an executor's
// `registry log --verify` beside an operator's `provider retire`).
func Audit(ctx context.Context, reg Reader, now time.Time) (log []Entry, unrunnable []Unrunnable, err error) {
	release, err := readLock(ctx, reg)
	if err != nil {
		return nil, nil, err
	}
	defer release()
	if log, err = reg.Log(ctx); err != nil {
		return nil, nil, err
	}
	// The trust state is replayed even when no pin would replay it (none
	// accepted yet, or all retired).
	if err := VerifyTrust(ctx, reg); err != nil {
		return nil, nil, err
	}
	if err := VerifyHistory(ctx, reg); err != nil {
		return nil, nil, err
	}
	pins, err := CheckedPins(ctx, reg)
	if err != nil {
		return nil, nil, err
	}
	unrunnable = []Unrunnable{}
	for _, p := range pins {
		if p.Retired {
			continue
		}
		_, err := VerifyPin(ctx, reg, "", p.Provider, now)
		switch code := refusal.CodeOf(err); {
		case err == nil:
		case NotRunnable(err):
			detail := err.Error()
			var r *refusal.Error
			if errors.As(err, &r) {
				detail = r.Message()
			}
			unrunnable = append(unrunnable, Unrunnable{p.Provider, p.Revision, string(code), detail})
		default:
			return nil, nil, err
		}
	}
	return log, unrunnable, nil
}
