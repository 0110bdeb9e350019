package listid

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/emaildata/emaildata/internal/platform/installsecret"
)

// Public IDs that do not count. The counter's values, handed out as they
// are, would tell a tenant how many lists every tenant submitted between
// two of its own. With Obscure set, the ID of counter value n is
// PermutedBase + P(n), P a keyed permutation of the 40-bit integers (a
// balanced Feistel network of PermuteRounds rounds whose round function is
// HMAC-SHA256 under the installation's key): IDs stay positive integers
// (13 digits, below 2^53, so JSON clients in any language hold them
// exactly), two counter values never share an ID, and without the key
// consecutive lists get unrelated IDs. The range starts above any plain
// counter value, so the IDs handed out before keep their meaning and are
// never handed out again.
//
// The key is an installation secret (internal/platform/installsecret,
// ListIDKey): random bytes in a Secret the elected manager makes at start
// and never replaces. An allocator only reads it, by name: until it exists
// no ID is handed out (ErrKeyMissing). The counter records a check of it
// (keyCheckKey), and an allocator finding another key refuses to hand out
// IDs: a new key could repeat an old ID.
const (
	// PermutedBase is the first permuted ID: 2^40.
	PermutedBase = int64(1) << permuteBits
	// PermuteRounds of the Feistel network: 8, as NIST's FF3-1
	// format-preserving encryption uses (a hand-written network because
	// no FF1/FF3 module is served by the module proxy here; the Feistel
	// structure makes it a permutation whatever the round function).
	PermuteRounds = 8

	permuteBits = 40
	halfBits    = permuteBits / 2
	halfMask    = uint64(1)<<halfBits - 1
	// keyCheckKey, in the counter, holds keyCheck of the key its IDs were
	// made with.
	keyCheckKey = "key-check"
)

// permutation is the keyed Feistel permutation of [0, 2^40).
type permutation struct{ key []byte }

// apply maps x (below 2^40) to its image, below 2^40.
func (p permutation) apply(x uint64) uint64 {
	l, r := x>>halfBits, x&halfMask
	for round := 0; round < PermuteRounds; round++ {
		l, r = r, l^p.round(round, r)
	}
	return l<<halfBits | r
}

// invert is apply's inverse (for tests, and to tell an ID's counter value).
func (p permutation) invert(y uint64) uint64 {
	l, r := y>>halfBits, y&halfMask
	for round := PermuteRounds - 1; round >= 0; round-- {
		l, r = r^p.round(round, l), l
	}
	return l<<halfBits | r
}

func (p permutation) round(round int, half uint64) uint64 {
	mac := hmac.New(sha256.New, p.key)
	var b [9]byte
	b[0] = byte(round)
	binary.BigEndian.PutUint64(b[1:], half)
	mac.Write(b[:])
	return binary.BigEndian.Uint64(mac.Sum(nil)) & halfMask
}

// keyCheck identifies a key without revealing it.
func (p permutation) keyCheck() string {
	mac := hmac.New(sha256.New, p.key)
	mac.Write([]byte("emaildata list id key check"))
	return hex.EncodeToString(mac.Sum(nil)[:16])
}

// publicID is the ID of counter value n.
func (p permutation) publicID(n int64) (int64, error) {
	if n < 0 || n >= PermutedBase {
		return 0, fmt.Errorf("list id counter value %d is outside the %d IDs the key permutes", n, PermutedBase)
	}
	return PermutedBase + int64(p.apply(uint64(n))), nil
}

// ErrKeyMissing: the key Secret does not exist (yet). The elected manager
// makes it when it starts; callers answer "try again later".
var ErrKeyMissing = errors.New("the list ID key Secret does not exist yet")

// permutation returns the installation's permutation, reading its key
// from the Secret by name (never creating it: see ErrKeyMissing).
func (a *Allocator) permutation(ctx context.Context) (permutation, error) {
	a.keyMu.Lock()
	defer a.keyMu.Unlock()
	if a.perm != nil {
		return *a.perm, nil
	}
	key := client.ObjectKey{Namespace: a.Namespace, Name: a.keySecret()}
	var sec corev1.Secret
	err := a.Reader.Get(ctx, key, &sec)
	if apierrors.IsNotFound(err) {
		return permutation{}, fmt.Errorf("%w: %s (the elected manager creates it when it starts, or the installer provides it)", ErrKeyMissing, key)
	}
	if err != nil {
		return permutation{}, fmt.Errorf("read list id key Secret %s: %w", key, err)
	}
	spec, _ := installsecret.Lookup(installsecret.ListIDKey)
	k, err := spec.Key(sec.Data)
	if err != nil {
		return permutation{}, fmt.Errorf("list id key Secret %s: %w", key, err)
	}
	a.perm = &permutation{key: k}
	return *a.perm, nil
}

// keySecret names the key Secret: KeySecret, else the default.
func (a *Allocator) keySecret() string {
	if a.KeySecret != "" {
		return a.KeySecret
	}
	return installsecret.Config{}.Name(installsecret.ListIDKey)
}
