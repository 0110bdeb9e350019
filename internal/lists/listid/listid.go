// Package listid hands out cluster-unique list numbers.
//
// The counter lives in one ConfigMap. Every allocation is a read followed by
// an update carrying the read's resourceVersion, so the API server rejects
// a concurrent writer with a conflict and that writer tries again: API
// replicas and the controller never hand out the same number. IDs the REST
// API hands out are reserved for the list they are for (see Reserve), so the
// controller can tell them from labels anyone else writes. With Obscure
// (the manager's and the API's), the numbers handed out are a keyed
// permutation of the counter's, so that they do not count other tenants'
// lists (see permute.go).
package listid

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Defaults shared by the manager and the API: the operator's namespace,
// which holds the counter, and the counter ConfigMap's name.
const (
	DefaultNamespace = "emaildata-system"
	DefaultConfigMap = "emaildata-list-ids"
)

// dataKey holds the last number handed out.
const dataKey = "last"

// maxAttempts bounds retries under contention.
const maxAttempts = 50

// Allocator allocates list IDs from a counter ConfigMap.
type Allocator struct {
	// Reader should read from the API server, not a cache: a stale cache
	// only costs conflicts, but a live read costs fewer.
	Reader    client.Reader
	Writer    client.Writer
	Namespace string
	Name      string
	// Obscure hands out PermutedBase + P(n) for counter value n, P the
	// permutation keyed by the Secret KeySecret (see permute.go); false
	// hands out n (tests that count on it).
	Obscure bool
	// KeySecret names the key's Secret in Namespace (default: the
	// installation secret ListIDKey's default name).
	KeySecret string

	keyMu sync.Mutex
	perm  *permutation // the key's, once read
}

// Next returns a new list ID.
func (a *Allocator) Next(ctx context.Context) (int64, error) {
	return a.allocate(ctx, nil)
}

// Reservations. The REST API creates each list with its ID in a label
// (the client is told the ID before the controller sees the list); the
// controller must honour that label for the API's lists and for nothing
// else. So the API allocates with Reserve, which records, in the same
// update as the counter, which list the ID is for: data key reserved.<id>
// holds "<list name> <time>". The controller adopts a labelled ID only
// while a reservation names that list, and releases the reservation once
// the list's status holds the ID: an ID is adopted once, by the list it
// was handed out for, and a label naming any other ID (taken, ahead of
// the counter, someone else's) finds no reservation.
const reservedPrefix = "reserved."

// Reservation is an ID handed out for a list that was to be created.
type Reservation struct {
	ID   int64
	Name string    // the list's name, in the API's namespace
	At   time.Time // when it was handed out
}

// Reserve allocates an ID for the list the caller will create under the
// name name(id), and records the reservation.
func (a *Allocator) Reserve(ctx context.Context, name func(id int64) string) (int64, error) {
	return a.allocate(ctx, func(id int64) (string, string) {
		return reservedPrefix + strconv.FormatInt(id, 10), name(id) + " " + time.Now().UTC().Format(time.RFC3339)
	})
}

// Reserved returns the reservation of id, ok false when there is none.
func (a *Allocator) Reserved(ctx context.Context, id int64) (r Reservation, ok bool, err error) {
	var cm corev1.ConfigMap
	if err := a.Reader.Get(ctx, a.key(), &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return r, false, nil
		}
		return r, false, fmt.Errorf("read list id counter %s: %w", a.key(), err)
	}
	v, ok := cm.Data[reservedPrefix+strconv.FormatInt(id, 10)]
	if !ok {
		return r, false, nil
	}
	r, ok = parseReservation(id, v)
	return r, ok, nil
}

// Release drops id's reservation if it is still name's, and with it every
// reservation stale reports true for (reservations the controller found
// no use for: a list the API never managed to create).
func (a *Allocator) Release(ctx context.Context, id int64, name string, stale func(Reservation) bool) error {
	return a.ReleaseAll(ctx, map[int64]string{id: name}, stale)
}

// ReleaseAll is Release for several reservations (ID: name), in one update.
func (a *Allocator) ReleaseAll(ctx context.Context, names map[int64]string, stale func(Reservation) bool) error {
	return a.update(ctx, func(cm *corev1.ConfigMap) (bool, error) {
		changed := false
		for k, v := range cm.Data {
			rid, err := strconv.ParseInt(strings.TrimPrefix(k, reservedPrefix), 10, 64)
			if !strings.HasPrefix(k, reservedPrefix) || err != nil {
				continue
			}
			r, ok := parseReservation(rid, v)
			name, mine := names[rid]
			if mine && r.Name == name || !ok || !mine && stale != nil && stale(r) {
				delete(cm.Data, k)
				changed = true
			}
		}
		return changed, nil
	})
}

// Releaser batches releases: while one caller writes, the reservations
// others release wait and go in its next write, so a burst of adoptions
// costs a few counter updates rather than one each (each also contends
// with the API's allocations). The zero Releaser is ready.
type Releaser struct {
	mu       sync.Mutex
	pending  map[int64]string
	flushing bool
}

// Release queues id's reservation for name and, unless another call is
// writing already, writes every queued release until none is left. An
// error means the reservations of that write stay (as stale ones, dropped
// by a later release).
func (b *Releaser) Release(ctx context.Context, a *Allocator, id int64, name string, stale func(Reservation) bool) error {
	b.mu.Lock()
	if b.pending == nil {
		b.pending = map[int64]string{}
	}
	b.pending[id] = name
	if b.flushing {
		b.mu.Unlock()
		return nil
	}
	b.flushing = true
	var errs []error
	for len(b.pending) > 0 {
		batch := b.pending
		b.pending = map[int64]string{}
		b.mu.Unlock()
		if err := a.ReleaseAll(ctx, batch, stale); err != nil {
			errs = append(errs, err)
		}
		b.mu.Lock()
	}
	b.flushing = false
	b.mu.Unlock()
	return errors.Join(errs...)
}

// Reservations lists the recorded reservations.
func (a *Allocator) Reservations(ctx context.Context) ([]Reservation, error) {
	var cm corev1.ConfigMap
	if err := a.Reader.Get(ctx, a.key(), &cm); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	var out []Reservation
	for k, v := range cm.Data {
		if id, err := strconv.ParseInt(strings.TrimPrefix(k, reservedPrefix), 10, 64); err == nil && strings.HasPrefix(k, reservedPrefix) {
			if r, ok := parseReservation(id, v); ok {
				out = append(out, r)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func parseReservation(id int64, v string) (Reservation, bool) {
	name, at, ok := strings.Cut(v, " ")
	t, err := time.Parse(time.RFC3339, at)
	if !ok || err != nil || name == "" {
		return Reservation{ID: id}, false
	}
	return Reservation{ID: id, Name: name, At: t}, true
}

func (a *Allocator) key() client.ObjectKey {
	return client.ObjectKey{Namespace: a.Namespace, Name: a.Name}
}

// allocate increments the counter and, with record, writes the data key
// and value record returns for the new ID in the same update.
func (a *Allocator) allocate(ctx context.Context, record func(id int64) (string, string)) (int64, error) {
	var perm *permutation
	if a.Obscure {
		p, err := a.permutation(ctx)
		if err != nil {
			return 0, err
		}
		perm = &p
	}
	var id int64
	err := a.update(ctx, func(cm *corev1.ConfigMap) (bool, error) {
		last := int64(0)
		if v, ok := cm.Data[dataKey]; ok || cm.ResourceVersion != "" {
			var err error
			if last, err = strconv.ParseInt(v, 10, 64); err != nil || last < 0 {
				return false, fmt.Errorf("list id counter %s holds %q, not a number", a.key(), v)
			}
		}
		n := last + 1
		id = n
		if perm != nil {
			if err := a.checkKey(cm, *perm); err != nil {
				return false, err
			}
			var err error
			if id, err = perm.publicID(n); err != nil {
				return false, err
			}
		}
		cm.Data[dataKey] = strconv.FormatInt(n, 10)
		if record != nil {
			k, v := record(id)
			cm.Data[k] = v
		}
		return true, nil
	})
	return id, err
}

// checkKey records in the counter which key its IDs are made with, and
// refuses another: IDs made with a new key could repeat old ones (the
// Secret was deleted or replaced; restore it).
func (a *Allocator) checkKey(cm *corev1.ConfigMap, p permutation) error {
	check := p.keyCheck()
	switch v, ok := cm.Data[keyCheckKey]; {
	case !ok:
		cm.Data[keyCheckKey] = check
	case v != check:
		return fmt.Errorf("list id key Secret %s/%s is not the key the IDs of counter %s were made with: restore it "+
			"(a new key could hand out an ID again); no ID is handed out until then", a.Namespace, a.keySecret(), a.key())
	}
	return nil
}

// update applies change to the counter ConfigMap (created when missing)
// and writes it with the read's resourceVersion, so a concurrent writer's
// update conflicts and is tried again on a fresh read.
func (a *Allocator) update(ctx context.Context, change func(cm *corev1.ConfigMap) (bool, error)) error {
	key := a.key()
	for attempt := 0; attempt < maxAttempts; attempt++ {
		var cm corev1.ConfigMap
		err := a.Reader.Get(ctx, key, &cm)
		missing := apierrors.IsNotFound(err)
		if err != nil && !missing {
			return fmt.Errorf("read list id counter %s: %w", key, err)
		}
		if missing {
			cm = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Namespace: a.Namespace, Name: a.Name,
				Labels: map[string]string{"app.kubernetes.io/name": "emaildata", "app.kubernetes.io/component": "list-id-counter"},
			}}
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		changed, err := change(&cm)
		if err != nil || !changed {
			return err
		}
		if missing {
			err = a.Writer.Create(ctx, &cm)
		} else {
			// Update sends resourceVersion, so a concurrent allocation conflicts.
			err = a.Writer.Update(ctx, &cm)
		}
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("update list id counter %s: %w", key, err)
		}
		return nil
	}
	return fmt.Errorf("list id counter %s: gave up after %d conflicting attempts", key, maxAttempts)
}
