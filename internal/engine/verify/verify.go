// Package verify classifies email addresses with SafeToSend-style status
// codes. Verification runs in stages: CheckSyntax first (no I/O), then
// optional stages such as corrections, DNS, lists and SMTP, each refining
// the same Result.
package verify

import "context"

// Stage is one verification step after syntax checking. It refines r in
// place and returns true when the verdict is final and later stages must
// not run. A stage must leave alone results it has nothing to say about;
// for example a DNS stage ignores r unless r.Code is CodeValidSyntax, while
// a corrections stage may act on invalid codes such as CodeInvalidTLD.
type Stage func(ctx context.Context, r *Result) (final bool)

// Verify checks the syntax of address and then runs stages in order until
// one reports a final verdict or ctx is done. Stages are responsible for
// mapping their own timeouts to CodeTimeout.
func Verify(ctx context.Context, address string, stages ...Stage) Result {
	r := CheckSyntax(address)
	for _, s := range stages {
		if ctx.Err() != nil || s(ctx, &r) {
			break
		}
	}
	return r
}
