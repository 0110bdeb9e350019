package evlist_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/evlist"
	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listservice"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
)

// TestDuplicatesAcrossShards: an address repeated in a later shard is
// flagged, because each shard first observes the rows before it.
func TestDuplicatesAcrossShards(t *testing.T) {
	ctx := context.Background()
	store, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&b, "user%d@example.com\n", i)
	}
	b.WriteString("USER7@example.com\n")     // repeats row 7, in the last shard
	b.WriteString("  user299@example.com\n") // repeats the row just before
	if err := store.WriteAll(ctx, "in", []byte(b.String()), nil); err != nil {
		t.Fatal(err)
	}
	svc := evlist.New(evlist.SyntaxOnly)
	reg := listservice.NewRegistry()
	reg.Register("email_validation", svc)
	keys := blobstore.ListKeys{UID: "dups"}
	cfg := pipeline.DefaultConfig()
	cfg.ShardBytes = 1024
	plan, err := pipeline.Prepare(ctx, store, keys, pipeline.Request{
		Source:  pipeline.Source{Key: "in", Name: "l.txt"},
		Dialect: listfile.Dialect{Delimiter: ',', EmailColumn: 1},
		Service: "email_validation",
	}, svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Shards) < 4 {
		t.Fatalf("want several shards, got %d", len(plan.Shards))
	}
	for i := range plan.Shards {
		if _, err := pipeline.RunShard(ctx, store, keys, i, reg, cfg.Limits); err != nil {
			t.Fatal(err)
		}
	}
	out, err := pipeline.Merge(ctx, store, keys, plan, "l-1-results.txt")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := store.ReadAll(ctx, out.Key)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	dupCol := 6 // email + ev_status, ev_status_code, ev_domain_type, ev_role_account, ev_correction, ev_duplicate
	var dups []int
	for i, l := range lines[1:] {
		if strings.Split(l, ",")[dupCol] == "true" {
			dups = append(dups, i)
		}
	}
	if fmt.Sprint(dups) != "[300 301]" {
		t.Fatalf("duplicate rows %v, want [300 301]", dups)
	}
}
