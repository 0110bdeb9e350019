// Package catalog assembles the list services this build offers, so the
// manager (which plans lists) and the worker (which runs them) agree.
package catalog

import (
	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
	"github.com/emaildata/emaildata/internal/evlist"
	"github.com/emaildata/emaildata/internal/listservice"
)

// Registry returns the list services of this build.
//
// email_append and email_intelligence need the reference data store and
// matcher, which are not part of this build yet; lists asking for them fail
// with a clear "not available" message instead of producing empty results.
func Registry() *listservice.Registry {
	reg := listservice.NewRegistry()
	reg.Register(string(listsv1.ServiceEmailValidation), evlist.New(evlist.SyntaxOnly))
	return reg
}
