// Package redistest gives tests a key space of their own on the Redis that
// every machine of the project runs (127.0.0.1:6379, as in CI). It holds
// the project's rule for tests that need a real server in one place: under
// CI=true a Redis that does not answer fails the test; elsewhere the test
// is skipped and says why.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Addr is the Redis the tests use.
const Addr = "127.0.0.1:6379"

// DB is the database the tests use on it: not 0, where benchmarks and
// local stacks leave their keys (hundreds of thousands at times), which
// every cleanup's SCAN would walk, holding the one-threaded Redis.
const DB = 15

// Need returns a client of the test Redis, closed when the test ends; it
// fails the test under CI=true, and skips it otherwise, when Redis does
// not answer within 2 s.
func Need(t testing.TB) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: Addr, DB: DB})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		if os.Getenv("CI") == "true" {
			t.Fatalf("Redis not reachable at %s (required under CI=true): %v", Addr, err)
		}
		t.Skipf("Redis not reachable at %s: %v", Addr, err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Prefix returns a fresh key prefix, name:<random>:, whose keys are deleted
// when the test ends (registered after Need's close, so it runs first).
func Prefix(t testing.TB, rdb *redis.Client, name string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := name + ":" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() { DeletePrefix(rdb, prefix) })
	return prefix
}

// URL returns redis://Addr/DB?prefix=<a fresh Prefix>: what --fleet-url
// and --history-url take, on a key space of the test's own.
func URL(t testing.TB, name string) string {
	t.Helper()
	rdb := Need(t)
	return URLOf(Prefix(t, rdb, name))
}

// URLOf is the URL of prefix's key space on the tests' database.
func URLOf(prefix string) string {
	return "redis://" + Addr + "/" + strconv.Itoa(DB) + "?prefix=" + prefix
}

// DeletePrefix deletes every key of prefix, and the rate keys redis_rate
// puts before it: what a Redis restart without persistence does to them.
func DeletePrefix(rdb *redis.Client, prefix string) {
	ctx := context.Background()
	for _, pat := range []string{prefix + "*", "rate:" + prefix + "*"} {
		// A large COUNT: the test Redis is shared, and may hold hundreds
		// of thousands of other keys (benchmarks'); SCAN walks them all
		// whatever the pattern, in 1/COUNT as many round trips. Each call
		// holds Redis for about 7 ms a 10,000 keys walked.
		iter := rdb.Scan(ctx, 0, pat, 10_000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
	}
}
