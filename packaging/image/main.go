// Command image builds the core's container image as an OCI image layout
// (docs/operations.md, "Container image"), without a Docker daemon, with
// google/go-containerregistry (a well-kept library that writes OCI layouts
// and registries' formats, rather than hand-written tar and JSON).
//
// The image holds the muster binary (statically linked: `make image`
// builds it so) as /usr/bin/muster, the CA certificates of the build
// machine, an /etc/passwd and /etc/group naming the muster user (uid and
// gid 65532, so that its files and logs show a name), and the empty
// directories /etc/muster (the configuration, mounted) and
// /var/lib/muster (the state, a volume, owned by muster). Nothing else:
// no shell, no package manager. It runs as muster, never as root,
// `muster core --config /etc/muster/core.yaml`.
//
// One manifest per -binary ARCH=PATH, in one index tagged with -version.
// Every file's time and the image's creation time are fixed (-time, by
// default SOURCE_DATE_EPOCH or the Unix epoch), so the same binaries make
// the same digests.
//
//	go run ./packaging/image -binary amd64=dist/muster-static-linux-amd64 -version v1.2.0 -out dist/image
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user the image runs as.
const (
	UID  = 65532
	User = "muster"
)

// Paths in the image.
const (
	BinaryPath = "/usr/bin/muster"
	CAPath     = "/etc/ssl/certs/ca-certificates.crt"
	ConfigDir  = "/etc/muster"
	StateDir   = "/var/lib/muster"
)

// Options are what an image is made of.
type Options struct {
	// Binaries maps an architecture (amd64, arm64) to the muster binary
	// built for it.
	Binaries map[string]string
	// CABundle is the PEM file of CA certificates to ship.
	CABundle string
	Version  string
	// Time is every file's modification time and the image's creation.
	Time time.Time
}

func main() {
	var o Options
	var bins multiFlag
	var epoch int64
	flag.Var(&bins, "binary", "ARCH=PATH of a static muster binary (repeat per architecture)")
	flag.StringVar(&o.CABundle, "ca-bundle", CAPath, "the CA certificates to ship (PEM)")
	flag.StringVar(&o.Version, "version", "dev", "the image's version (its tag in the layout)")
	flag.Int64Var(&epoch, "time", sourceDateEpoch(), "the time of every file and of the image, in Unix seconds")
	out := flag.String("out", "dist/image", "the OCI layout directory to write (replaced)")
	flag.Parse()
	o.Time = time.Unix(epoch, 0).UTC()
	o.Binaries = map[string]string{}
	for _, b := range bins {
		arch, path, ok := strings.Cut(b, "=")
		if !ok || arch == "" || path == "" {
			fail(fmt.Errorf("-binary %q: want ARCH=PATH", b))
		}
		o.Binaries[arch] = path
	}
	if len(o.Binaries) == 0 {
		fail(errors.New("-binary ARCH=PATH is required"))
	}
	digest, err := Write(*out, o)
	if err != nil {
		fail(err)
	}
	fmt.Printf("%s %s\n", *out, digest)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "image:", err)
	os.Exit(1)
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func sourceDateEpoch() int64 {
	n, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// Write writes the image index of o as an OCI layout in dir (replacing
// what dir held) and returns the index's digest.
func Write(dir string, o Options) (v1.Hash, error) {
	idx, err := Index(o)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return v1.Hash{}, err
	}
	if _, err := layout.Write(dir, empty.Index); err != nil {
		return v1.Hash{}, err
	}
	p := layout.Path(dir)
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": o.Version,
	})); err != nil {
		return v1.Hash{}, err
	}
	return idx.Digest()
}

// Index returns the index of o's images, one per architecture.
func Index(o Options) (v1.ImageIndex, error) {
	ca, err := os.ReadFile(o.CABundle)
	if err != nil {
		return nil, fmt.Errorf("the CA bundle: %w", err)
	}
	archs := make([]string, 0, len(o.Binaries))
	for a := range o.Binaries {
		archs = append(archs, a)
	}
	sort.Strings(archs)
	var idx v1.ImageIndex = empty.Index
	idx = mutate.IndexMediaType(idx, types.OCIImageIndex)
	for _, arch := range archs {
		bin, err := os.ReadFile(o.Binaries[arch])
		if err != nil {
			return nil, fmt.Errorf("the %s binary: %w", arch, err)
		}
		if err := checkBinary(arch, bin); err != nil {
			return nil, fmt.Errorf("the %s binary %s: %w", arch, o.Binaries[arch], err)
		}
		img, err := Image(arch, bin, ca, o)
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	return idx, nil
}

// machines are the ELF machines of the architectures an image may have.
var machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkBinary refuses what cannot run alone in the image: a file that is
// not an ELF executable for arch, or one that needs a dynamic loader (the
// image has no C library).
func checkBinary(arch string, bin []byte) error {
	want, ok := machines[arch]
	if !ok {
		return fmt.Errorf("unknown architecture %q (amd64 or arm64)", arch)
	}
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("not an ELF executable: %w", err)
	}
	defer f.Close()
	if f.Machine != want {
		return fmt.Errorf("built for %s, not %s", f.Machine, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("dynamically linked (it names a program interpreter): the image has no C library; build it static, as make image does")
		}
	}
	return nil
}

// Image returns the image of one architecture.
func Image(arch string, binary, ca []byte, o Options) (v1.Image, error) {
	tb, err := rootfs(binary, ca, o.Time)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tb)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: o.Time}, CreatedBy: "muster packaging/image", Comment: "the muster binary and CA certificates"}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: o.Time}
	cf.Config = v1.Config{
		User:         fmt.Sprintf("%d:%d", UID, UID),
		Entrypoint:   []string{BinaryPath},
		Cmd:          []string{"core", "--config", ConfigDir + "/core.yaml"},
		WorkingDir:   StateDir,
		Env:          []string{"PATH=/usr/bin", "SSL_CERT_FILE=" + CAPath},
		ExposedPorts: map[string]struct{}{"7410/tcp": {}},
		Volumes:      map[string]struct{}{StateDir: {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":   "muster",
			"org.opencontainers.image.version": o.Version,
			"org.opencontainers.image.source":  "https://github.com/musterhq/muster",
		},
		StopSignal: "SIGTERM",
	}
	return mutate.ConfigFile(img, cf)
}

// rootfs is the image's one layer, as a tar archive.
func rootfs(binary, ca []byte, t time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64, uid int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: uid, ModTime: t, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, body []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body)), ModTime: t, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:%s:/sbin/nologin\n", User, UID, UID, User, StateDir)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", User, UID)
	steps := []error{
		dir("etc", 0o755, 0), dir("etc/muster", 0o755, 0), dir("etc/ssl", 0o755, 0), dir("etc/ssl/certs", 0o755, 0),
		file("etc/passwd", 0o644, []byte(passwd)), file("etc/group", 0o644, []byte(group)),
		file(strings.TrimPrefix(CAPath, "/"), 0o644, ca),
		dir("tmp", 0o1777, 0),
		dir("usr", 0o755, 0), dir("usr/bin", 0o755, 0), file(strings.TrimPrefix(BinaryPath, "/"), 0o755, binary),
		dir("var", 0o755, 0), dir("var/lib", 0o755, 0), dir(strings.TrimPrefix(StateDir, "/"), 0o700, UID),
	}
	if err := errors.Join(steps...); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
