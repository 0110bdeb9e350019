package pipeline

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/emaildata/emaildata/internal/lists/blobstore"
	"github.com/emaildata/emaildata/internal/lists/listfile"
)

// TestWriteResultUndigested: `worker run`'s result (no SHA-256, parts
// copied into a plain file, through a bufio.Writer as worker run does) is
// byte for byte Merge's, on a file store (the in-kernel copy) and in
// memory, in one shard and in several.
func TestWriteResultUndigested(t *testing.T) {
	ctx := context.Background()
	data := genList(3000)
	d := listfile.Dialect{Delimiter: ',', Header: true, EmailColumn: 2}
	for _, tc := range []struct {
		name       string
		file       bool
		shardBytes int64
	}{
		{"file store, one shard", true, 1 << 20},
		{"file store, many shards", true, int64(len(data)/5 + 1)},
		{"mem store, many shards", false, int64(len(data)/5 + 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := memStore(t)
			if tc.file {
				var err error
				if s, err = blobstore.Open(ctx, "file://"+filepath.ToSlash(t.TempDir())); err != nil {
					t.Fatal(err)
				}
				defer s.Close()
			}
			cfg := testConfig()
			cfg.ShardBytes = tc.shardBytes
			want := process(t, s, "u", "list.csv", data, d, cfg)
			path := filepath.Join(t.TempDir(), "out.csv")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			bw := bufio.NewWriterSize(f, 1<<20)
			got, err := WriteResultUndigested(ctx, s, blobstore.ListKeys{UID: "u"}, want.plan, "out.csv", bw, nil)
			if err == nil {
				err = bw.Flush()
			}
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(path)
			if string(b) != string(want.data) || got.Bytes != want.out.Bytes || got.Rows != want.out.Rows || got.SHA256 != "" {
				t.Errorf("%d bytes (Outcome %d, %d rows, sha256 %q); Merge's %d bytes, %d rows; equal %v",
					len(b), got.Bytes, got.Rows, got.SHA256, len(want.data), want.out.Rows, string(b) == string(want.data))
			}
			if len(want.plan.Shards) < 2 && tc.shardBytes < 1<<20 {
				t.Errorf("%d shards: want several", len(want.plan.Shards))
			}
		})
	}
}
