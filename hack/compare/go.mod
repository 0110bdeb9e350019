module github.com/emaildata/emaildata/hack/compare

go 1.26.0

require (
	github.com/AfterShip/email-verifier v1.4.1
	github.com/emaildata/emaildata v0.0.0
)

require (
	github.com/hbollon/go-edlib v1.6.0 // indirect
	github.com/miekg/dns v1.1.73 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	golang.org/x/time v0.16.0 // indirect
)

replace github.com/emaildata/emaildata => ../..
