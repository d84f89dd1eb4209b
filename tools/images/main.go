// Command images builds keyhole's container images without a container
// engine, with go-containerregistry as a library, and writes each as an
// image tarball that `ctr images import`, `docker load` and `crane push`
// take.
//
//	images binary -binary PATH -ref REF -out FILE [-revision R] [-version V] [-created T]
//	images rootfs -rootfs TAR -ref REF -out FILE [-cmd ARG]... [-binary PATH]
//
// `binary` builds a one-binary image: the static binary at
// /usr/local/bin/<name> as the entrypoint, the Mozilla root certificates
// (from golang.org/x/crypto/x509roots/fallback, so the build is offline and
// the same bytes everywhere) at /etc/ssl/certs/ca-certificates.crt, a
// non-root user 65532, and OCI labels naming the source revision and
// version. `rootfs` turns a root filesystem tarball (mmdebstrap's output)
// into a one-layer image, with -binary a second layer holding the binary
// as its entrypoint. Every timestamp is -created, so the same inputs
// give the same image digest.
package main

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// nonroot is the user and group the binary images run as: the distroless
// "nonroot" ID, which keyhole's rendered pods also set.
const nonroot = 65532

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

type strList []string

func (s *strList) String() string     { return strings.Join(*s, " ") }
func (s *strList) Set(v string) error { *s = append(*s, v); return nil }

func run(args []string, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: images binary|rootfs [flags]")
	}
	fs := flag.NewFlagSet("images "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		ref      = fs.String("ref", "", "image `reference` the tarball names (repeat with -tag for more tags)")
		out      = fs.String("out", "", "tarball to write")
		revision = fs.String("revision", "", "source revision for the org.opencontainers.image.revision label")
		version  = fs.String("version", "", "version for the org.opencontainers.image.version label")
		source   = fs.String("source", "https://github.com/keyhole-dev/keyhole", "org.opencontainers.image.source label")
		created  = fs.String("created", "1970-01-01T00:00:00Z", "RFC 3339 time of every timestamp in the image (the commit's time keeps it reproducible)")
		arch     = fs.String("arch", runtime.GOARCH, "image architecture")
		binary   = fs.String("binary", "", "static binary (binary images)")
		rootfs   = fs.String("rootfs", "", "root filesystem tarball (rootfs images)")
		tags     strList
		cmd      strList
	)
	fs.Var(&tags, "tag", "another `reference` for the same image (repeatable)")
	fs.Var(&cmd, "cmd", "an argument of the image's default command (rootfs images; repeatable)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *ref == "" || *out == "" {
		return errors.New("-ref and -out are required")
	}
	when, err := time.Parse(time.RFC3339, *created)
	if err != nil {
		return fmt.Errorf("-created: %w", err)
	}
	var img v1.Image
	switch args[0] {
	case "binary":
		if *binary == "" {
			return errors.New("-binary is required")
		}
		img, err = binaryImage(*binary, when, labels(path.Base(*binary), *source, *revision, *version))
	case "rootfs":
		if *rootfs == "" {
			return errors.New("-rootfs is required")
		}
		img, err = rootfsImage(*rootfs, cmd, labels(path.Base(*ref), *source, *revision, *version))
		if err == nil && *binary != "" {
			img, err = addBinary(img, *binary, when)
		}
	default:
		return fmt.Errorf("unknown image kind %q (want binary or rootfs)", args[0])
	}
	if err != nil {
		return err
	}
	img, err = mutate.CreatedAt(img, v1.Time{Time: when})
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", *arch
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	refs := map[name.Reference]v1.Image{}
	for _, r := range append([]string{*ref}, tags...) {
		t, err := name.NewTag(r)
		if err != nil {
			return fmt.Errorf("-ref %q: %w", r, err)
		}
		refs[t] = img
	}
	tmp := *out + ".tmp"
	if err := tarball.MultiRefWriteToFile(tmp, refs); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, *out); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "images: wrote %s (%s, %s)\n", *out, *ref, digest)
	return nil
}

func labels(title, source, revision, version string) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":    title,
		"org.opencontainers.image.source":   source,
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	if revision != "" {
		l["org.opencontainers.image.revision"] = revision
	}
	if version != "" {
		l["org.opencontainers.image.version"] = version
	}
	return l
}

// binaryImage is one layer: the binary, the roots, /etc/passwd and
// /etc/group naming the non-root user, and writable /tmp.
func binaryImage(bin string, when time.Time, lbls map[string]string) (v1.Image, error) {
	exe, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	roots, err := rootsPEM()
	if err != nil {
		return nil, err
	}
	name := path.Base(bin)
	entry := "/usr/local/bin/" + name
	files := []tarEntry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonroot, nonroot))},
		{name: "etc/group", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonroot))},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: roots},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, dir: true, uid: nonroot},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/local/", mode: 0o755, dir: true},
		{name: "usr/local/bin/", mode: 0o755, dir: true},
		{name: "usr/local/bin/" + name, mode: 0o755, data: exe},
	}
	layer, err := tarLayer(files, when)
	if err != nil {
		return nil, err
	}
	return layerImage(layer, v1.Config{
		Entrypoint: []string{entry},
		User:       fmt.Sprintf("%d:%d", nonroot, nonroot),
		WorkingDir: "/home/nonroot",
		Env: []string{
			"PATH=/usr/local/bin:/usr/bin:/bin",
			"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
		},
		Labels: lbls,
	})
}

// layerImage is an image of layer alone, configured as cfg.
func layerImage(layer v1.Layer, cfg v1.Config) (v1.Image, error) {
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	return mutate.Config(img, cfg)
}

// tarLayer is an image layer holding files, each dated when.
func tarLayer(files []tarEntry, when time.Time) (v1.Layer, error) {
	layerTar, err := buildTar(files, when)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
}

// rootfsImage is the root filesystem as one layer, running cmd.
func rootfsImage(rootfs string, cmd []string, lbls map[string]string) (v1.Image, error) {
	layer, err := tarball.LayerFromFile(rootfs)
	if err != nil {
		return nil, err
	}
	return layerImage(layer, v1.Config{
		Cmd: cmd,
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"LANG=C.UTF-8",
		},
		Labels: lbls,
	})
}

// addBinary adds a static binary at /usr/local/bin/<name> to a root
// filesystem image as its own layer, and makes it the entrypoint: the
// transparent-mode init image is Debian's iptables plus keyhole-proxy.
func addBinary(img v1.Image, bin string, when time.Time) (v1.Image, error) {
	exe, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	name := path.Base(bin)
	layer, err := tarLayer([]tarEntry{
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/local/", mode: 0o755, dir: true},
		{name: "usr/local/bin/", mode: 0o755, dir: true},
		{name: "usr/local/bin/" + name, mode: 0o755, data: exe},
	}, when)
	if err != nil {
		return nil, err
	}
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	c := cf.Config
	c.Entrypoint = []string{"/usr/local/bin/" + name}
	c.Cmd = nil
	return mutate.Config(img, c)
}

// rootsPEM is the Mozilla root store that golang.org/x/crypto ships. A
// root with a constraint (a distrust-after date) cannot be expressed in a
// PEM bundle, so it is left out rather than trusted without its limit.
func rootsPEM() ([]byte, error) {
	var b bytes.Buffer
	n := 0
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		if err := pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, errors.New("no root certificates in golang.org/x/crypto/x509roots/fallback/bundle")
	}
	return b.Bytes(), nil
}

type tarEntry struct {
	name string
	mode int64
	dir  bool
	uid  int
	data []byte
}

func buildTar(entries []tarEntry, when time.Time) ([]byte, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.uid,
			ModTime: when,
			Format:  tar.FormatPAX,
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
