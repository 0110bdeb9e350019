package listid

import (
	"bytes"
	"testing"
)

// The permutation maps the counter's values into [PermutedBase, 2^41)
// one to one (it inverts), differently under another key, and consecutive
// values to IDs whose order and gaps say nothing: about half of the next
// IDs are smaller, and the gaps spread over the range.
func TestPermutation(t *testing.T) {
	p := permutation{key: bytes.Repeat([]byte{7}, 32)}
	q := permutation{key: bytes.Repeat([]byte{8}, 32)}
	const n = 20_000
	seen := make(map[int64]bool, n)
	down, same, near := 0, 0, 0
	var prev int64
	for c := int64(1); c <= n; c++ {
		id, err := p.publicID(c)
		if err != nil {
			t.Fatal(err)
		}
		if id < PermutedBase || id >= 2*PermutedBase || id > 1<<53 {
			t.Fatalf("counter %d: ID %d outside [2^40, 2^41)", c, id)
		}
		if seen[id] {
			t.Fatalf("counter %d: ID %d handed out twice", c, id)
		}
		seen[id] = true
		if back := int64(p.invert(uint64(id - PermutedBase))); back != c {
			t.Fatalf("ID %d inverts to %d, want %d", id, back, c)
		}
		if other, _ := q.publicID(c); other == id {
			same++
		}
		if c > 1 {
			if id < prev {
				down++
			}
			if d := id - prev; d > -1000 && d < 1000 {
				near++
			}
		}
		prev = id
	}
	if down < n*45/100 || down > n*55/100 {
		t.Errorf("%d of %d next IDs are smaller: the order shows", down, n-1)
	}
	if near > 5 {
		t.Errorf("%d of %d next IDs lie within 1000 of the one before", near, n-1)
	}
	if same > 5 {
		t.Errorf("another key gives %d of the same IDs", same)
	}
	if _, err := p.publicID(PermutedBase); err == nil {
		t.Error("a counter value of 2^40 got an ID")
	}
	if p.keyCheck() == q.keyCheck() || p.keyCheck() != (permutation{key: bytes.Repeat([]byte{7}, 32)}).keyCheck() {
		t.Error("key checks do not tell keys apart")
	}
}

// Distinct values have distinct images (the Feistel structure makes it a
// permutation of the whole domain; this walks two slices of it).
func TestPermutationIsABijection(t *testing.T) {
	p := permutation{key: bytes.Repeat([]byte{9}, 32)}
	// 2^16 values of the low half (the high one 0), and as many of the
	// high half (the low one 0): every image distinct, and each inverts.
	const walk = 1 << 16
	seen := map[uint64]bool{}
	for x := uint64(0); x < walk; x++ {
		for _, v := range []uint64{x, x << halfBits} {
			y := p.apply(v)
			if y>>permuteBits != 0 || p.invert(y) != v {
				t.Fatalf("apply(%d) = %d, inverted %d", v, y, p.invert(y))
			}
			seen[y] = true
		}
	}
	if len(seen) != 2*walk-1 { // 0 is in both walks
		t.Errorf("%d distinct images of %d values", len(seen), 2*walk-1)
	}
}
