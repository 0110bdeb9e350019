module github.com/emaildata/emaildata/hack/compare

go 1.26.0

require (
	github.com/AfterShip/email-verifier v1.4.1
	github.com/emaildata/emaildata v0.0.0
	go.yaml.in/yaml/v3 v3.0.5
)

require (
	github.com/bsm/redislock v0.9.4 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-redis/redis_rate/v10 v10.0.1 // indirect
	github.com/hbollon/go-edlib v1.6.0 // indirect
	github.com/miekg/dns v1.1.73 // indirect
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	golang.org/x/time v0.16.0 // indirect
)

replace github.com/emaildata/emaildata => ../..
