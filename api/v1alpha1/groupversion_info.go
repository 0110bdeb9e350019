// Package v1alpha1 contains the API types of the lists.emaildata.io group.
// +kubebuilder:object:generate=true
// +groupName=lists.emaildata.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of these types.
	GroupVersion = schema.GroupVersion{Group: "lists.emaildata.io", Version: "v1alpha1"}

	// SchemeBuilder registers these types with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds these types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
