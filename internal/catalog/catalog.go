// Package catalog assembles the list services this build offers, so the
// manager (which plans lists) and the worker (which runs them) agree.
package catalog

import (
	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/emaillists"
	"github.com/emaildata/emaildata/internal/evlist"
	"github.com/emaildata/emaildata/internal/listservice"
	"github.com/emaildata/emaildata/internal/typo"
	"github.com/emaildata/emaildata/internal/verify"
)

// Registry returns the list services of this build.
//
// email_append and email_intelligence need the reference data store and
// matcher, which are not part of this build yet; lists asking for them fail
// with a clear "not available" message instead of producing empty results.
//
// A nil engine means an offline one: syntax, corrections and lists.
func Registry(e *verify.Engine) *listservice.Registry {
	if e == nil {
		e = OfflineEngine()
	}
	reg := listservice.NewRegistry()
	reg.Register(string(listsv1.ServiceEmailValidation), evlist.New(evlist.EngineChecker(e)))
	return reg
}

// OfflineEngine verifies without network stages.
func OfflineEngine() *verify.Engine {
	return &verify.Engine{Lists: emaillists.Default, Typos: typo.Default()}
}
