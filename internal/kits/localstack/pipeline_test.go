package localstack

import (
	"testing"

	"github.com/emaildata/emaildata/internal/lists/listfile"
	"github.com/emaildata/emaildata/internal/lists/pipeline"
)

// The manager of the local stack shards as Options say, by domain unless
// told otherwise (the manager's default), with the manager's other defaults.
func TestPipelineConfig(t *testing.T) {
	def := pipeline.DefaultConfig()
	for _, tc := range []struct {
		name       string
		o          Options
		by         string
		shardBytes int64
	}{
		{"defaults", Options{}, pipeline.ShardByMX, def.ShardBytes},
		{"by rows", Options{ShardBy: pipeline.ShardByRows, ShardBytes: 1000}, pipeline.ShardByRows, 1000},
		{"by domain", Options{ShardBy: pipeline.ShardByDomain}, pipeline.ShardByDomain, def.ShardBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := pipelineConfig(tc.o)
			if c.ShardBy != tc.by || c.ShardBytes != tc.shardBytes || c.DistributeMemory != def.DistributeMemory {
				t.Errorf("config %+v, want shard-by %q and %d shard bytes", c, tc.by, tc.shardBytes)
			}
		})
	}
}

// make run's API and manager apply one Limits: the manager's pipeline gets
// the limits the API checks uploads with, the defaults when none are set.
func TestOneLimits(t *testing.T) {
	custom := listfile.Limits{MaxExpandedBytes: 3 << 30, MaxRecordBytes: 1 << 16, MaxExpansionRatio: 50}
	for _, tc := range []struct {
		o    Options
		want listfile.Limits
	}{{Options{}, listfile.DefaultLimits()}, {Options{Limits: custom}, custom}} {
		if api, mgr := tc.o.limits(), pipelineConfig(tc.o).Limits; api != tc.want || mgr != tc.want {
			t.Errorf("Limits %+v: the API applies %+v, the manager %+v; want %+v", tc.o.Limits, api, mgr, tc.want)
		}
	}
}
