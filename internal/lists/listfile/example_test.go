package listfile_test

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"sync"

	"github.com/emaildata/emaildata/internal/lists/listfile"
)

// The whole pipeline: prepare (Scan), process shards independently, merge.
func Example() {
	file := []byte("\xEF\xBB\xBFName,Email\r\n\"Doe, Jane\",jane@example.com\r\nBob,bob@example.org,extra\r\n\r\nAl,AL@EXAMPLE.NET\r\n")
	d := listfile.Dialect{Delimiter: ',', Header: true, EmailColumn: 2}

	plan, err := listfile.Scan(bytes.NewReader(file), d, listfile.Limits{}, 30, 8)
	if err != nil {
		log.Fatal(err)
	}
	width := plan.MaxFields

	// Workers: one output buffer per shard.
	outs := make([]bytes.Buffer, len(plan.Shards))
	var wg sync.WaitGroup
	for i, sh := range plan.Shards {
		wg.Go(func() {
			r := listfile.NewShardReader(bytes.NewReader(file), d, listfile.Limits{}, sh)
			w := listfile.NewWriter(&outs[i], d.Delimiter, plan.CRLF)
			for {
				rec, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					log.Fatal(err)
				}
				email := strings.ToLower(rec.Field(d.EmailColumn.Index()))
				if err := w.WriteRaw(rec.Raw, rec.NumFields(), width, []string{email, "ok"}); err != nil {
					log.Fatal(err)
				}
			}
			if err := w.Flush(); err != nil {
				log.Fatal(err)
			}
		})
	}
	wg.Wait()

	// Merge: header, then the shards in order.
	var out bytes.Buffer
	w := listfile.NewWriter(&out, d.Delimiter, plan.CRLF)
	w.WriteFields(append(listfile.PadHeader(plan.Header, width), "normalized_email", "status"))
	w.Flush()
	for i := range outs {
		out.Write(outs[i].Bytes())
	}
	fmt.Printf("%d records in %d shards\n", plan.Records, len(plan.Shards))
	os.Stdout.WriteString(strings.ReplaceAll(out.String(), "\r\n", "\n"))
	// Output:
	// 3 records in 3 shards
	// Name,Email,column_3,normalized_email,status
	// "Doe, Jane",jane@example.com,,jane@example.com,ok
	// Bob,bob@example.org,extra,bob@example.org,ok
	// Al,AL@EXAMPLE.NET,,al@example.net,ok
}
