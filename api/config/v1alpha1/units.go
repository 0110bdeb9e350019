package v1alpha1

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written as people write it: 30s, 5m, 24h,
// 1h30m (time.ParseDuration).
type Duration struct{ time.Duration }

// Dur is d as a Duration.
func Dur(d time.Duration) Duration { return Duration{d} }

// MarshalJSON writes d as a string such as "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a string such as "30s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as 30s or 5m, not %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: want a number with a unit such as 30s, 5m or 24h", s)
	}
	d.Duration = v
	return nil
}

// Quantity is an amount written as Kubernetes writes resources: 256Mi,
// 1Gi, 8Mi, 500m (CPU thousandths), 1.5, 100k. It keeps what was written
// and its value in thousandths.
type Quantity struct {
	s     string
	milli *big.Int
}

// suffixes are the multipliers of Quantity, in thousandths.
var suffixes = map[string]*big.Int{
	"m": big.NewInt(1), "": big.NewInt(1000),
	"k": big.NewInt(1000 * 1e3), "M": big.NewInt(1000 * 1e6), "G": big.NewInt(1000 * 1e9),
	"T": new(big.Int).Mul(big.NewInt(1000), big.NewInt(1e12)), "P": new(big.Int).Mul(big.NewInt(1000), big.NewInt(1e15)),
	"E":  new(big.Int).Mul(big.NewInt(1000), big.NewInt(1e18)),
	"Ki": big.NewInt(1000 << 10), "Mi": big.NewInt(1000 << 20), "Gi": big.NewInt(1000 << 30),
	"Ti": new(big.Int).Lsh(big.NewInt(1000), 40), "Pi": new(big.Int).Lsh(big.NewInt(1000), 50),
	"Ei": new(big.Int).Lsh(big.NewInt(1000), 60),
}

// ParseQuantity reads a quantity such as 256Mi, 1.5Gi, 500m or 1024.
func ParseQuantity(s string) (Quantity, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' && r != '-' && r != '+' })
	num, suf := t, ""
	if i >= 0 {
		num, suf = t[:i], t[i:]
	}
	mult, ok := suffixes[suf]
	if num == "" || !ok {
		return Quantity{}, fmt.Errorf("quantity %q: want a number with an optional suffix such as 256Mi, 1Gi, 100k or 500m", s)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return Quantity{}, fmt.Errorf("quantity %q: %q is not a number", s, num)
	}
	r.Mul(r, new(big.Rat).SetInt(mult))
	// Round up to a whole thousandth, as Kubernetes rounds quantities.
	q, rem := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if rem.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return Quantity{s: t, milli: q}, nil
}

// MustParseQuantity is ParseQuantity for literals known to be valid.
func MustParseQuantity(s string) Quantity {
	q, err := ParseQuantity(s)
	if err != nil {
		panic(err)
	}
	return q
}

// Bytes is n bytes as a Quantity, written in the largest binary unit
// that divides it (8Mi, 1Gi).
func Bytes(n int64) Quantity {
	for _, u := range []struct {
		suf   string
		shift uint
	}{{"Ei", 60}, {"Pi", 50}, {"Ti", 40}, {"Gi", 30}, {"Mi", 20}, {"Ki", 10}} {
		if n != 0 && n%(1<<u.shift) == 0 {
			return MustParseQuantity(strconv.FormatInt(n>>u.shift, 10) + u.suf)
		}
	}
	return MustParseQuantity(strconv.FormatInt(n, 10))
}

// String is the quantity as written.
func (q Quantity) String() string { return q.s }

// IsZero reports an unset or zero quantity.
func (q Quantity) IsZero() bool { return q.milli == nil || q.milli.Sign() == 0 }

// Sign is -1, 0 or 1.
func (q Quantity) Sign() int {
	if q.milli == nil {
		return 0
	}
	return q.milli.Sign()
}

// Value is the quantity in whole units (bytes), rounded up; it saturates
// at the bounds of int64.
func (q Quantity) Value() int64 {
	if q.milli == nil {
		return 0
	}
	v, rem := new(big.Int).QuoRem(q.milli, big.NewInt(1000), new(big.Int))
	if rem.Sign() > 0 {
		v.Add(v, big.NewInt(1))
	}
	if !v.IsInt64() {
		if v.Sign() > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return v.Int64()
}

// Cmp compares q with o: -1, 0 or 1.
func (q Quantity) Cmp(o Quantity) int {
	a, b := q.milli, o.milli
	if a == nil {
		a = new(big.Int)
	}
	if b == nil {
		b = new(big.Int)
	}
	return a.Cmp(b)
}

// MarshalJSON writes the quantity as written ("0" when unset).
func (q Quantity) MarshalJSON() ([]byte, error) {
	if q.s == "" {
		return json.Marshal("0")
	}
	return json.Marshal(q.s)
}

// UnmarshalJSON reads a string such as "256Mi", or a plain number.
func (q *Quantity) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n json.Number
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("a quantity is a string such as 256Mi or a number, not %s", b)
		}
		s = n.String()
	}
	v, err := ParseQuantity(s)
	if err != nil {
		return err
	}
	*q = v
	return nil
}
