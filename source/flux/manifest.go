package flux

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	fluxkustomize "github.com/fluxcd/pkg/kustomize"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/konfig"

	"keyhole.dev/keyhole/internal/kustbuild"
	"keyhole.dev/keyhole/source"
)

// Manifest is the kustomization Flux builds u's path with, and the path
// it stands at: the path's own, with the Kustomization's fields applied,
// or one Flux generates.
func (Engine) Manifest(h source.Host, u *source.Unit) (data []byte, kfile string, err error) {
	defer func() {
		if r := recover(); r != nil {
			data, kfile, err = nil, "", errors.New("the Flux generator failed on this input")
		}
	}()
	root, dir := u.Flux.SourceRoot, u.Root
	if !h.OnDisk() {
		// Flux's generator reads the disk: a commit's files are laid
		// out for it in a directory of their own.
		tmp, err := os.MkdirTemp("", "keyhole-flux-")
		if err != nil {
			return nil, "", err
		}
		defer os.RemoveAll(tmp)
		rel, _ := filepath.Rel(root, dir)
		if err := copyForFlux(h, u, root, dir, tmp, filepath.Join(tmp, rel), h.MaxFileSize()); err != nil {
			return nil, "", err
		}
		data, kfile, _, err := fluxkustomize.NewGenerator(tmp, u.Flux.Object).GenerateManifest(filepath.Join(tmp, rel))
		if err != nil {
			return nil, "", err
		}
		return data, filepath.Join(dir, filepath.Base(kfile)), nil
	}
	data, kfile, _, err = fluxkustomize.NewGenerator(root, u.Flux.Object).GenerateManifest(dir)
	return data, kfile, err
}

// copyForFlux lays out at dst what Flux's generator reads of u's path
// dir, tmp standing for the source's root. The generator reads the path's
// kustomization file when it has one and nothing else; without one, it
// lists every YAML file under the path as a resource, except under a
// directory with a kustomization file, which it lists whole without
// looking inside. So only those files are copied, unless the
// Kustomization asks whether its components exist
// (ignoreMissingComponents): then the path is copied whole, and each
// component in the source outside the path is made to exist in the
// layout as it does in the source (the generator only asks whether it
// exists; kustomize reads it from the source itself).
func copyForFlux(h source.Host, u *source.Unit, root, dir, tmp, dst string, maxSize int64) error {
	components, _, _ := unstructured.NestedStringSlice(u.Flux.Object.Object, "spec", "components")
	ignoreMissing, _, _ := unstructured.NestedBool(u.Flux.Object.Object, "spec", "ignoreMissingComponents")
	if len(components) > 0 && ignoreMissing {
		if err := copyTree(h, dir, dst, maxSize, false, new(int)); err != nil {
			return err
		}
		for _, c := range components {
			src := filepath.Join(dir, filepath.FromSlash(c))
			rel, err := filepath.Rel(root, src)
			if err != nil || !filepath.IsLocal(rel) {
				continue // outside the source: not in Flux's artifact either
			}
			fi, err := h.Stat(src)
			if err != nil {
				continue // missing: the generator leaves it out
			}
			at := filepath.Join(tmp, rel)
			if fi.IsDir() {
				err = os.MkdirAll(at, 0o700)
			} else if err = os.MkdirAll(filepath.Dir(at), 0o700); err == nil {
				if _, statErr := os.Stat(at); statErr != nil {
					err = os.WriteFile(at, nil, 0o600)
				}
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	if done, err := copyKustomization(h, dir, dst, maxSize); done || err != nil {
		return err
	}
	return copyTree(h, dir, dst, maxSize, true, new(int))
}

// copyKustomization copies the kustomization file of src, the first of
// the names kustomize recognizes that copyTree would copy, to dst; false
// when src has none.
func copyKustomization(h source.Host, src, dst string, maxSize int64) (bool, error) {
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		p := filepath.Join(src, name)
		fi, err := h.Stat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxSize {
			continue // copyTree would not copy it either
		}
		data, err := h.ReadFile(p)
		if err != nil {
			return true, err
		}
		if err := os.MkdirAll(dst, 0o700); err != nil {
			return true, err
		}
		return true, os.WriteFile(filepath.Join(dst, name), data, 0o600)
	}
	return false, nil
}

// maxFluxCopy bounds the files copyTree lays out on disk for one build:
// a commit's files are objects, and a few kilobytes of them can name
// millions of files (gitfs.MaxListedEntries), each written and removed.
const maxFluxCopy = 1 << 13

// errFluxCopy is copyTree's error past maxFluxCopy files.
var errFluxCopy = fmt.Errorf("the path holds more than %d files, more than keyhole lays out to build a commit's Flux path", maxFluxCopy)

// copyTree copies the YAML files (and kustomization files) under src, read
// through h, to dst on disk; with scanned, of a directory below src
// that has a kustomization file it copies only that file. copied counts
// the files copied, up to maxFluxCopy.
func copyTree(h source.Host, src, dst string, maxSize int64, scanned bool, copied *int) error {
	entries, err := h.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	for _, e := range entries {
		s, d := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		fi, err := h.Stat(s)
		if err != nil {
			continue
		}
		if fi.IsDir() {
			if scanned {
				done, err := copyKustomization(h, s, d, maxSize)
				if err != nil {
					return err
				}
				if done {
					continue
				}
			}
			if err := copyTree(h, s, d, maxSize, scanned, copied); err != nil {
				return err
			}
			continue
		}
		if !fi.Mode().IsRegular() || fi.Size() > maxSize || !(source.InputName(e.Name()) || kustbuild.IsKustomizationName(e.Name())) {
			continue
		}
		if *copied++; *copied > maxFluxCopy {
			return errFluxCopy
		}
		data, err := h.ReadFile(s)
		if err != nil {
			return err
		}
		if err := os.WriteFile(d, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}
