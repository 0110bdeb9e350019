package pipeline

import (
	"context"
	"fmt"
	"testing"

	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/listservice"
)

// pacedService's processors say they were paced by a host named after
// the rows they processed, for as many seconds as those rows.
type pacedService struct{ upperService }

func (pacedService) NewProcessor(ctx context.Context, in listservice.Input) (listservice.Processor, error) {
	return &pacedProc{upperProc: upperProc{col: in.EmailIndex, report: listservice.Reporting{}}}, nil
}

type pacedProc struct {
	upperProc
	rows int
}

func (p *pacedProc) ProcessBatch(ctx context.Context, rows []listservice.Row, out [][]string) error {
	p.rows += len(rows)
	return p.upperProc.ProcessBatch(ctx, rows, out)
}

func (p *pacedProc) Pace() (listservice.Pace, bool) {
	if p.rows == 0 {
		return listservice.Pace{}, false
	}
	return listservice.Pace{Host: fmt.Sprintf("h%d", p.rows), SpanSeconds: float64(p.rows), FloorSeconds: 1, Reason: "greylisting"}, true
}

// Each shard's summary keeps what paced it, and the outcome the slowest
// shard's; a service that says nothing leaves it nil.
func TestPaceSummaries(t *testing.T) {
	d := listfile.Dialect{Delimiter: ',', Header: true, EmailColumn: 2}
	data := genList(500)
	for _, tc := range []struct {
		name  string
		svc   listservice.Service
		paced bool
	}{{"paced", pacedService{}, true}, {"silent", upperService{}, false}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.ShardBytes = int64(len(data)/5 + 1)
			s := memStore(t)
			r := processWith(t, s, upperName, tc.svc, "u", "l.csv", data, d, cfg)
			if len(r.plan.Shards) < 3 {
				t.Fatalf("%d shards", len(r.plan.Shards))
			}
			var most int64
			for _, sh := range r.plan.Shards {
				most = max(most, sh.Rows)
			}
			got := r.out.Pace
			if !tc.paced {
				if got != nil {
					t.Fatalf("pace %+v from a service that says none", got)
				}
				return
			}
			if got == nil || got.SpanSeconds != float64(most) || got.Host != fmt.Sprintf("h%d", most) {
				t.Fatalf("pace %+v: want the slowest shard's (%d rows)", got, most)
			}
		})
	}
}
