package main

import (
	"debug/elf"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// glibc are the libraries of the GNU C library a binary may link (Debian's
// libc6, the glibc package of rpm distributions), by their ELF names: the
// dynamic loaders of amd64 and arm64 among them.
var glibc = map[string]bool{
	"libc.so.6":              true,
	"libm.so.6":              true,
	"libpthread.so.0":        true,
	"libdl.so.2":             true,
	"librt.so.1":             true,
	"libresolv.so.2":         true,
	"libutil.so.1":           true,
	"ld-linux-x86-64.so.2":   true,
	"ld-linux-aarch64.so.1":  true,
	"libnss_files.so.2":      true,
	"libanl.so.1":            true,
	"libBrokenLocale.so.1":   true,
	"libnsl.so.1":            true,
	"libthread_db.so.1":      true,
	"libmvec.so.1":           true,
	"libc_malloc_debug.so.0": true,
}

// A linkage is what a binary needs of the system: the shared libraries it
// names (ELF DT_NEEDED), and, per library, the highest GLIBC_x.y symbol
// version it imports from it.
type linkage struct {
	libraries []string
	glibc     map[string][]int // library → the highest GLIBC_ version, as numbers
}

// readLinkage reads the linkage of the ELF binary at path: a statically
// linked one needs nothing. A file that is no ELF binary is an error: the
// packages hold the binaries `make release` built.
func readLinkage(path string) (linkage, error) {
	f, err := elf.Open(path)
	if err != nil {
		return linkage{}, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	l := linkage{glibc: map[string][]int{}}
	if l.libraries, err = f.ImportedLibraries(); err != nil {
		return linkage{}, fmt.Errorf("%s: %w", path, err)
	}
	syms, err := f.ImportedSymbols()
	if err != nil && len(l.libraries) > 0 {
		return linkage{}, fmt.Errorf("%s: %w", path, err)
	}
	for _, s := range syms {
		v, ok := glibcVersion(s.Version)
		if !ok {
			continue
		}
		if slices.Compare(v, l.glibc[s.Library]) > 0 {
			l.glibc[s.Library] = v
		}
	}
	return l, nil
}

// glibcVersion is the version of a symbol version GLIBC_x.y[.z]
// (GLIBC_PRIVATE and GLIBC_ABI_* are none).
func glibcVersion(s string) ([]int, bool) {
	rest, ok := strings.CutPrefix(s, "GLIBC_")
	if !ok {
		return nil, false
	}
	var v []int
	for _, part := range strings.Split(rest, ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			return nil, false
		}
		v = append(v, n)
	}
	return v, true
}

func dotted(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ".")
}

// debDepends is the Depends: of a .deb holding a binary of linkage l:
// libc6 at least at the highest GLIBC_ version it needs, none for a
// static binary. A library outside glibc is an error, not a silent
// omission: its package is named here when the binaries link it.
func debDepends(l linkage) ([]string, error) {
	var highest []int
	for _, lib := range l.libraries {
		if !glibc[lib] {
			return nil, fmt.Errorf("the binary links %s: name its Debian and rpm packages in packaging/depends.go", lib)
		}
		if v := l.glibc[lib]; slices.Compare(v, highest) > 0 {
			highest = v
		}
	}
	switch {
	case len(l.libraries) == 0:
		return nil, nil
	case highest == nil:
		return []string{"libc6"}, nil
	}
	return []string{"libc6 (>= " + dotted(highest) + ")"}, nil
}

// rpmRequires is the Requires: of an .rpm holding a binary of linkage l,
// as rpmbuild's own dependency generator writes them for a 64-bit binary:
// each library's soname, and the highest GLIBC_ version it needs from it
// (rpm's libc.so.6(GLIBC_2.34)(64bit)), which every rpm distribution's
// glibc package provides.
func rpmRequires(l linkage) ([]string, error) {
	if _, err := debDepends(l); err != nil {
		return nil, err
	}
	var req []string
	for _, lib := range l.libraries {
		req = append(req, lib+"()(64bit)")
		if v := l.glibc[lib]; v != nil {
			req = append(req, lib+"(GLIBC_"+dotted(v)+")(64bit)")
		}
	}
	return req, nil
}
