package localstack

import (
	"testing"

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
		{"defaults", Options{}, pipeline.ShardByDomain, def.ShardBytes},
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
