package mxdns

import "time"

// lru is a size-bounded least-recently-used map with per-entry expiry. It is
// not safe for concurrent use; Resolver guards it with its mutex.
type lru[V any] struct {
	cap       int
	m         map[string]*lruNode[V]
	root      lruNode[V] // sentinel: root.next is the most recently used
	evictions uint64
}

type lruNode[V any] struct {
	key        string
	val        V
	exp        time.Time
	prev, next *lruNode[V]
}

func newLRU[V any](capacity int) *lru[V] {
	l := &lru[V]{cap: capacity, m: make(map[string]*lruNode[V], min(capacity, 1024))}
	l.root.prev, l.root.next = &l.root, &l.root
	return l
}

func (l *lru[V]) len() int { return len(l.m) }

func (l *lru[V]) clear() {
	clear(l.m)
	l.root.prev, l.root.next = &l.root, &l.root
}

func (l *lru[V]) unlink(n *lruNode[V]) {
	n.prev.next = n.next
	n.next.prev = n.prev
}

func (l *lru[V]) pushFront(n *lruNode[V]) {
	n.prev = &l.root
	n.next = l.root.next
	l.root.next.prev = n
	l.root.next = n
}

// get returns the live entry for key and marks it recently used; expired
// entries are removed.
func (l *lru[V]) get(key string, now time.Time) (v V, exp time.Time, ok bool) {
	n := l.m[key]
	if n == nil {
		return v, exp, false
	}
	if !now.Before(n.exp) {
		l.unlink(n)
		delete(l.m, key)
		return v, exp, false
	}
	if l.root.next != n {
		l.unlink(n)
		l.pushFront(n)
	}
	return n.val, n.exp, true
}

func (l *lru[V]) put(key string, v V, exp time.Time) {
	if n := l.m[key]; n != nil {
		n.val, n.exp = v, exp
		l.unlink(n)
		l.pushFront(n)
		return
	}
	var n *lruNode[V]
	if len(l.m) >= l.cap {
		// Reuse the least recently used node.
		n = l.root.prev
		l.unlink(n)
		delete(l.m, n.key)
		l.evictions++
	} else {
		n = new(lruNode[V])
	}
	n.key, n.val, n.exp = key, v, exp
	l.m[key] = n
	l.pushFront(n)
}
