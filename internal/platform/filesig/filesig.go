// Package filesig tells whether a set of files changed: mounted ConfigMaps
// are swapped through symlinks, so identity, size and mtime are compared.
package filesig

import "os"

// Sig is the identity of some files; a nil entry is a missing file.
type Sig []os.FileInfo

// Stat reads the signature of paths.
func Stat(paths []string) Sig {
	sig := make(Sig, len(paths))
	for i, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			sig[i] = fi
		}
	}
	return sig
}

// Same reports whether a and b describe the same file contents.
func (a Sig) Same(b Sig) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		switch {
		case a[i] == nil && b[i] == nil:
		case a[i] == nil || b[i] == nil:
			return false
		case !os.SameFile(a[i], b[i]) || !a[i].ModTime().Equal(b[i].ModTime()) || a[i].Size() != b[i].Size():
			return false
		}
	}
	return true
}
