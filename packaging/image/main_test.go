package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// fixture writes a made-up binary per architecture and a CA bundle.
func fixture(t *testing.T) Options {
	t.Helper()
	dir := t.TempDir()
	o := Options{Binaries: map[string]string{}, Version: "v1.2.3", Time: time.Unix(1700000000, 0).UTC(),
		CABundle: filepath.Join(dir, "ca.pem")}
	if err := os.WriteFile(o.CABundle, []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		o.Binaries[arch] = staticBinary(t, arch)
	}
	return o
}

// staticBinary writes the headers of a static ELF executable for arch (all
// the image looks at), as make image builds muster.
func staticBinary(t *testing.T, arch string) string {
	t.Helper()
	return writeELF(t, machines[arch], false)
}

// writeELF writes an ELF executable's headers for machine, with a program
// interpreter (dynamically linked) when interp, and a body after them.
func writeELF(t *testing.T, machine elf.Machine, interp bool) string {
	t.Helper()
	progs := []elf.Prog64{{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X), Filesz: 64, Memsz: 64, Align: 4096}}
	if interp {
		progs = append([]elf.Prog64{{Type: uint32(elf.PT_INTERP), Flags: uint32(elf.PF_R), Filesz: 28, Memsz: 28, Align: 1}}, progs...)
	}
	h := elf.Header64{Type: uint16(elf.ET_EXEC), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
		Phoff: 64, Ehsize: 64, Phentsize: 56, Phnum: uint16(len(progs)), Shentsize: 64}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	var b bytes.Buffer
	if err := errors.Join(binary.Write(&b, binary.LittleEndian, h), binary.Write(&b, binary.LittleEndian, progs)); err != nil {
		t.Fatal(err)
	}
	b.WriteString("the program of " + machine.String())
	path := filepath.Join(t.TempDir(), "muster-"+machine.String())
	if err := os.WriteFile(path, b.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestImageRefusesWhatCannotRunAlone: a dynamically linked binary (the
// image has no C library), one of another architecture, and a file that is
// not an executable are refused, naming why.
func TestImageRefusesWhatCannotRunAlone(t *testing.T) {
	t.Parallel()
	dynamic := writeELF(t, elf.EM_X86_64, true)
	text := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ arch, path, want string }{
		"dynamic":      {"amd64", dynamic, "dynamically linked"},
		"another arch": {"arm64", staticBinary(t, "amd64"), "not arm64"},
		"a script":     {"amd64", text, "not an ELF executable"},
	} {
		o := fixture(t)
		o.Binaries[c.arch] = c.path
		dir := filepath.Join(t.TempDir(), "image")
		if _, err := Write(dir, o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: a layout was written", name)
		}
	}
}

// TestImageReadBackFromTheLayout: the layout written holds one image per
// architecture, tagged with the version, each running muster core as the
// muster user (never root), with the binary and the CA certificates and
// nothing else that runs, read back without a Docker daemon.
func TestImageReadBackFromTheLayout(t *testing.T) {
	t.Parallel()
	o := fixture(t)
	dir := filepath.Join(t.TempDir(), "image")
	if _, err := Write(dir, o); err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	outer, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	om, err := outer.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(om.Manifests) != 1 || om.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v1.2.3" {
		t.Fatalf("the layout's index: %+v, want one index tagged v1.2.3", om.Manifests)
	}
	idx, err := outer.ImageIndex(om.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var archs []string
	for _, d := range im.Manifests {
		if d.Platform == nil || d.Platform.OS != "linux" {
			t.Fatalf("manifest %s has platform %+v", d.Digest, d.Platform)
		}
		archs = append(archs, d.Platform.Architecture)
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		if c.User != "65532:65532" {
			t.Errorf("%s: user %q, want 65532:65532 (never root)", d.Platform.Architecture, c.User)
		}
		if !slices.Equal(c.Entrypoint, []string{"/usr/bin/muster"}) || !slices.Equal(c.Cmd, []string{"core", "--config", "/etc/muster/core.yaml"}) {
			t.Errorf("%s: entrypoint %q, cmd %q", d.Platform.Architecture, c.Entrypoint, c.Cmd)
		}
		if cf.Architecture != d.Platform.Architecture || cf.OS != "linux" || !cf.Created.Time.Equal(o.Time) {
			t.Errorf("config says %s/%s created %v", cf.OS, cf.Architecture, cf.Created)
		}
		if c.Labels["org.opencontainers.image.version"] != "v1.2.3" {
			t.Errorf("labels %v", c.Labels)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("%d layers (%v), want one", len(layers), err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		files := readTar(t, rc)
		want, err := os.ReadFile(o.Binaries[d.Platform.Architecture])
		if err != nil {
			t.Fatal(err)
		}
		if bin := files["usr/bin/muster"]; bin.body != string(want) || bin.mode != 0o755 || bin.uid != 0 {
			t.Errorf("%s: /usr/bin/muster is not the %s binary (%d bytes), or mode %o uid %d", d.Platform.Architecture,
				d.Platform.Architecture, len(bin.body), bin.mode, bin.uid)
		}
		if ca := files["etc/ssl/certs/ca-certificates.crt"]; ca.mode != 0o644 || ca.body == "" {
			t.Errorf("the CA certificates: %+v", ca)
		}
		if st := files["var/lib/muster/"]; st.uid != 65532 || st.mode != 0o700 {
			t.Errorf("the state directory: uid %d mode %o, want 65532 0700", st.uid, st.mode)
		}
		for name, f := range files {
			if f.mode&0o111 != 0 && !f.dir && name != "usr/bin/muster" {
				t.Errorf("%s is executable: the image holds one program", name)
			}
			if f.mode&(0o4000|0o2000) != 0 {
				t.Errorf("%s is setuid or setgid", name)
			}
		}
	}
	slices.Sort(archs)
	if !slices.Equal(archs, []string{"amd64", "arm64"}) {
		t.Fatalf("architectures %v", archs)
	}
}

// TestImageIsReproducible: the same binaries and time make the same
// digest; another binary makes another.
func TestImageIsReproducible(t *testing.T) {
	t.Parallel()
	o := fixture(t)
	a, err := Write(filepath.Join(t.TempDir(), "a"), o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Write(filepath.Join(t.TempDir(), "b"), o)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatalf("two builds of the same binaries: %s and %s", a, b)
	}
	if f, err := os.OpenFile(o.Binaries["arm64"], os.O_APPEND|os.O_WRONLY, 0); err != nil {
		t.Fatal(err)
	} else {
		_, _ = f.Write([]byte("another build"))
		f.Close()
	}
	c, err := Write(filepath.Join(t.TempDir(), "c"), o)
	if err != nil {
		t.Fatal(err)
	}
	if c == a {
		t.Fatal("another binary made the same digest")
	}
}

// TestImageRefusesAMissingBinary: a binary that is not there is an error
// naming its architecture, and nothing is written.
func TestImageRefusesAMissingBinary(t *testing.T) {
	t.Parallel()
	o := fixture(t)
	o.Binaries["arm64"] = filepath.Join(t.TempDir(), "absent")
	dir := filepath.Join(t.TempDir(), "image")
	_, err := Write(dir, o)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing binary: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a layout was written: %v", err)
	}
}

type tarFile struct {
	body string
	mode int64
	uid  int
	dir  bool
}

func readTar(t *testing.T, r io.ReadCloser) map[string]tarFile {
	t.Helper()
	defer r.Close()
	out := map[string]tarFile{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = tarFile{body: string(b), mode: h.Mode, uid: h.Uid, dir: h.Typeflag == tar.TypeDir}
	}
}
