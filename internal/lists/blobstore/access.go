package blobstore

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"sort"
	"strings"
)

// Who may read what in the operator's store. Users never name keys of the
// store's internal folders: lists/ and datasets/ belong to the objects whose
// UID names them, uploads/<tenant>/ to the REST API's tenant, config/ to
// the operator. An administrator may grant a namespace one more prefix,
// read-only, for list files it drops there (Grants).

// Reserved top-level folders of the store.
const (
	ListsFolder    = "lists/"
	DatasetsFolder = "datasets/"
	UploadsFolder  = "uploads/"
	// ConfigFolder holds what the manager publishes for its workers.
	ConfigFolder = "config/"
)

var reservedFolders = []string{ListsFolder, DatasetsFolder, UploadsFolder, ConfigFolder}

// UploadPrefix is the folder of the REST API's uploads for one tenant,
// named by the tenant's label digest.
func UploadPrefix(tenantLabel string) string { return UploadsFolder + tenantLabel + "/" }

// CheckStrictKey accepts only clean keys: relative, no empty, "." or ".."
// elements, no backslash, NUL or control characters, no trailing slash.
// Keys users name must pass it, so a prefix check cannot be escaped.
func CheckStrictKey(key string) error {
	if err := ValidKey(key); err != nil {
		return err
	}
	if len(key) > 1024 {
		return errors.New("blob key is longer than 1024 bytes")
	}
	if path.Clean(key) != key || strings.HasSuffix(key, "/") {
		return fmt.Errorf("blob key %q is not a clean path (no empty elements or trailing slash)", key)
	}
	for _, c := range key {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("blob key %q contains a control character", key)
		}
	}
	return nil
}

// CheckUploadKey accepts key when it is a clean key inside the tenant's
// upload folder.
func CheckUploadKey(key, tenantLabel string) error {
	if tenantLabel == "" || strings.ContainsAny(tenantLabel, "/\\.") {
		return errors.New("the list has no valid tenant label")
	}
	if err := CheckStrictKey(key); err != nil {
		return err
	}
	prefix := UploadPrefix(tenantLabel)
	if !strings.HasPrefix(key, prefix) || len(key) == len(prefix) {
		return fmt.Errorf("upload key %q is not under the tenant's upload folder %s", key, prefix)
	}
	return nil
}

// Grants maps a namespace to the prefix of the operator's store that an
// administrator lets its lists read through source.blobURL.
type Grants map[string]string

// ParseGrants reads "ns=prefix/,ns2=other/" (the --namespace-store-prefixes
// flag). Prefixes must be clean, end in "/", stay out of the reserved
// folders, and not overlap each other, so no grant reaches another's data.
func ParseGrants(s string) (Grants, error) {
	g := Grants{}
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		ns, prefix, ok := strings.Cut(entry, "=")
		if !ok || ns == "" || prefix == "" {
			return nil, fmt.Errorf("store grant %q must be namespace=prefix/", entry)
		}
		if _, dup := g[ns]; dup {
			return nil, fmt.Errorf("store grant: namespace %q is named twice", ns)
		}
		if err := checkGrantPrefix(prefix); err != nil {
			return nil, fmt.Errorf("store grant for %s: %w", ns, err)
		}
		g[ns] = prefix
	}
	return g, g.checkOverlap()
}

func checkGrantPrefix(prefix string) error {
	if !strings.HasSuffix(prefix, "/") {
		return fmt.Errorf("prefix %q must end in /", prefix)
	}
	if err := CheckStrictKey(strings.TrimSuffix(prefix, "/")); err != nil {
		return err
	}
	for _, r := range reservedFolders {
		if strings.HasPrefix(prefix, r) {
			return fmt.Errorf("prefix %q lies in the operator's reserved folder %s", prefix, r)
		}
	}
	return nil
}

func (g Grants) checkOverlap() error {
	nss := make([]string, 0, len(g))
	for ns := range g {
		nss = append(nss, ns)
	}
	sort.Strings(nss)
	for i, a := range nss {
		for _, b := range nss[i+1:] {
			if strings.HasPrefix(g[a], g[b]) || strings.HasPrefix(g[b], g[a]) {
				return fmt.Errorf("store grants of %s (%s) and %s (%s) overlap", a, g[a], b, g[b])
			}
		}
	}
	return nil
}

// String renders the grants in flag form, sorted.
func (g Grants) String() string {
	parts := make([]string, 0, len(g))
	for ns, p := range g {
		parts = append(parts, ns+"="+p)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// GrantedKey maps a blob URL of this store to its key when the key lies
// under prefix (a namespace's grant).
func (s *Store) GrantedKey(rawURL, prefix string) (string, error) {
	if prefix == "" {
		return "", errors.New("no prefix of the store is granted")
	}
	if u, err := url.Parse(rawURL); err == nil && (u.RawQuery != "" || u.Fragment != "" || u.User != nil) {
		return "", errors.New("a blob URL of the operator's store takes no query, fragment or user info")
	}
	key, err := s.KeyFromURL(rawURL)
	if err != nil {
		return "", err
	}
	if err := CheckStrictKey(key); err != nil {
		return "", err
	}
	if !strings.HasPrefix(key, prefix) || len(key) == len(prefix) {
		return "", fmt.Errorf("blob key %q is not under the granted prefix %s", key, prefix)
	}
	return key, nil
}
