// Package kubescheme builds the one runtime.Scheme that the manager, the REST
// API and the tests share: client-go's built-in types plus lists.emaildata.io.
// It lives apart from internal/operator so that the API binary does not link
// the controllers to get it.
package kubescheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	listsv1 "github.com/emaildata/emaildata/api/v1alpha1"
)

// New returns a scheme with the built-in types and ours.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(listsv1.AddToScheme(s))
	return s
}
