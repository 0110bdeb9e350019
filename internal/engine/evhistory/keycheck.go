package evhistory

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// ErrKeyMismatch: the store's history is kept under another key.
var ErrKeyMismatch = errors.New("the history is kept under another key")

// DefaultKeyCheckEvery is how often a process checks the store's key by
// default; the lease is KeyLeaseFactor times longer.
const (
	DefaultKeyCheckEvery = time.Minute
	KeyLeaseFactor       = 3
)

// LoadSecret returns the history's key: the file's content when file is
// set (a mounted Secret), else $HISTORY_KEY (a Secret's value in the
// environment). Surrounding white space is trimmed, the same way for
// both, so the manager reading a file and a worker its environment agree.
func LoadSecret(file string) ([]byte, error) {
	var raw, from string
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("history key file: %w", err)
		}
		raw, from = string(b), file
	} else {
		raw, from = os.Getenv(SecretEnv), "$"+SecretEnv
	}
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, fmt.Errorf("the verification history needs a key: set %s or --history-key-file (in a cluster worker pods get %s "+
			"from the installation secret <release>-history-key, which the manager and the API read by name); "+
			"or run without a history (--history-url=off)", SecretEnv, SecretEnv)
	}
	if len(raw) < MinSecretBytes {
		return nil, fmt.Errorf("the history key in %s has %d bytes, want at least %d", from, len(raw), MinSecretBytes)
	}
	return []byte(raw), nil
}

// fingerprint identifies a secret and scope without revealing the secret.
func fingerprint(secret []byte, scope Scope) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("emaildata/evhistory/key-fingerprint/v1\x00"))
	m.Write([]byte(scope))
	return m.Sum(nil)[:16]
}

// short is how logs and statuses name a fingerprint.
func short(fp []byte) string {
	if len(fp) > 4 {
		fp = fp[:4]
	}
	return hex.EncodeToString(fp)
}

// keyRetry is how long after a key check the store did not answer the
// next one is tried.
const keyRetry = 5 * time.Second

// errKeyUnchecked: the store has not answered a key check yet.
var errKeyUnchecked = errors.New("the store has not answered the key check yet")

// Key check states.
const (
	keyUnchecked int32 = iota // the store has not answered yet
	keyOK
	keyMismatch
)

// CheckKey claims the store's key fingerprint now: see the package's key
// check. It returns ErrKeyMismatch (wrapped) while the store is kept
// under another key, and the store's error when it does not answer (the
// state is then unchanged).
func (h *History) CheckKey(ctx context.Context) error {
	h.keyMu.Lock()
	defer h.keyMu.Unlock()
	err := h.checkKeyLocked(ctx)
	if errors.Is(err, ErrKeyMismatch) {
		h.keyMismatches.Add(1)
	}
	return err
}

func (h *History) checkKeyLocked(ctx context.Context) error {
	held, published, err := h.store.ClaimKey(ctx, h.fp, h.lease)
	if err != nil {
		return fmt.Errorf("key check: %w", err)
	}
	h.lastCheck = h.now()
	prev := h.keyState.Load()
	if !bytes.Equal(held, h.fp) {
		h.setDetail(fmt.Sprintf("the store's history is kept under key %s and this process's key is %s (%s scope): "+
			"processes run with different %s values (or scopes); this one neither reads nor writes the history until they agree",
			short(held), short(h.fp), h.scope, SecretEnv))
		h.keyState.Store(keyMismatch)
		if prev != keyMismatch {
			h.log.Error("verification history key mismatch: "+h.Detail(), "storeKey", short(held), "ownKey", short(h.fp))
		}
		return fmt.Errorf("%w (%s)", ErrKeyMismatch, short(held))
	}
	switch {
	case published && h.seen:
		h.keyLost.Add(1)
		h.log.Warn("the verification history's key fingerprint was gone from its store: the store lost its data "+
			"(restarted without persistence, flushed) or no process renewed it for a lease; published again, and the "+
			"verdicts kept before are gone (their addresses are probed again)", "key", short(h.fp))
	case prev == keyMismatch:
		h.log.Info("verification history: the store's key is this process's again; the history is in use", "key", short(h.fp))
	case published:
		h.log.Info("verification history: key fingerprint published", "key", short(h.fp), "scope", string(h.scope))
	}
	h.seen = true
	h.setDetail("")
	h.keyState.Store(keyOK)
	return nil
}

// keyReady checks the key when a check is due and says whether the
// history may be read and written now. Each call refused for a mismatch
// is counted (history_key_mismatches): so a list's shard summary, which
// counts what happened during the shard, shows it whenever the shard
// asked a history it could not use, whenever the mismatch began.
func (h *History) keyReady(ctx context.Context) error {
	h.keyMu.Lock()
	defer h.keyMu.Unlock()
	var err error
	now := h.now()
	due := h.keyState.Load() == keyUnchecked || now.Sub(h.lastCheck) >= h.checkEvery
	switch {
	case due && now.Sub(h.lastTry) >= keyRetry:
		// One try at a time, and after a failed one none for keyRetry:
		// with the store away, calls must not queue here behind its
		// timeouts (they fail on their own, in parallel).
		h.lastTry = now
		err = h.checkKeyLocked(ctx)
	case h.keyState.Load() == keyUnchecked:
		err = errKeyUnchecked
	}
	if err == nil && h.keyState.Load() == keyMismatch {
		err = ErrKeyMismatch
	}
	if errors.Is(err, ErrKeyMismatch) {
		h.keyMismatches.Add(1)
	}
	return err
}

// watch checks the key every checkEvery until ctx ends, so that an idle
// process keeps its lease and its Health is current.
func (h *History) watch(ctx context.Context) {
	defer close(h.watchDone)
	t := h.clk.NewTicker(h.checkEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			_ = h.CheckKey(ctx) // a store away is counted by the calls that need it
		}
	}
}

func (h *History) setDetail(s string) {
	h.detailMu.Lock()
	h.detail = s
	h.detailMu.Unlock()
}

// Detail says why the history is not in use ("" when it is, or the store
// has not answered yet).
func (h *History) Detail() string {
	h.detailMu.Lock()
	defer h.detailMu.Unlock()
	return h.detail
}

// Health says whether this process uses the history: false, with why,
// while the store's history is kept under another key.
func (h *History) Health() (ok bool, detail string) {
	if h.keyState.Load() == keyMismatch {
		return false, h.Detail()
	}
	return true, ""
}

// Fingerprint is the short fingerprint of this process's key and scope,
// as logs and statuses name it.
func (h *History) Fingerprint() string { return short(h.fp) }
