package kustbuild

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"go.yaml.in/yaml/v3"
)

// kustomize's build time grows with the square of some input sizes: the
// objects of one build (each added object is checked against all the
// others), the keys of one mapping (kyaml's anchor handling), the lines of
// one env file. A few hundred kilobytes, far under the file size limit,
// would keep a check busy for minutes or hours. Every file a build reads
// is measured before kustomize sees it, against these limits, chosen so
// that a build at the limit takes seconds (docs/inputs.md gives the
// figures), and a build past them is refused with a KustomizeBuildFailed
// that says which limit and why. The limits are fixed, so the same input
// gets the same answer on every machine.
const (
	// MaxKustomizeObjects bounds the objects (YAML documents, and the
	// items of a List) in all the files one kustomize build reads.
	MaxKustomizeObjects = 3000
	// MaxKustomizeMappingKeys bounds the keys of any one mapping in a file
	// a kustomize build reads.
	MaxKustomizeMappingKeys = 20000
	// MaxKustomizeTextLines bounds the lines of a file a kustomize build
	// reads that is not YAML objects: an env file, a literal source.
	MaxKustomizeTextLines = 20000
	// MaxKustomizeReadBytes bounds the bytes one build reads, each read
	// of a file counted: what kustomize generates (a ConfigMapGenerator's
	// files and literals, a base's objects under each prefix that
	// includes it) is made of what it read, so a generator naming one
	// large file a thousand times, or a base included along a thousand
	// paths, is refused before kustomize holds it all.
	MaxKustomizeReadBytes = 64 << 20
)

// Budget counts what one build has read so far; its zero value is a
// build that has read nothing.
type Budget struct{ objects, bytes int }

// Spend measures a file a build reads and charges its objects to the
// build (a kustomization file is not charged: it holds no objects); it
// returns an error saying which limit is passed.
func (b *Budget) Spend(path string, data []byte) error {
	b.bytes += len(data)
	if b.bytes > MaxKustomizeReadBytes {
		return fmt.Errorf("'%s': the build has read %d MiB, each read of a file counted; keyhole hands one kustomize build at most %d MiB, since what it generates is made of what it reads; split the kustomization", path, b.bytes>>20, MaxKustomizeReadBytes>>20)
	}
	objects, keys, ok := measureYAML(data)
	if !ok {
		if lines := countLines(data); lines > MaxKustomizeTextLines {
			return fmt.Errorf("'%s': %d lines; keyhole hands kustomize at most %d lines of a file that is not YAML objects, since kustomize's time on one grows with the square of its lines; split it", path, lines, MaxKustomizeTextLines)
		}
		return nil
	}
	if keys > MaxKustomizeMappingKeys {
		return fmt.Errorf("'%s': a mapping with %d keys; keyhole hands kustomize at most %d keys in one mapping, since kustomize's time grows with the square of their number; split it", path, keys, MaxKustomizeMappingKeys)
	}
	if IsKustomizationName(filepath.Base(path)) {
		return nil
	}
	b.objects += objects
	if b.objects > MaxKustomizeObjects {
		return fmt.Errorf("'%s': the build has read %d objects; keyhole builds at most %d objects in one kustomization, since kustomize's time grows with the square of their number; split the kustomization", path, b.objects, MaxKustomizeObjects)
	}
	return nil
}

// countLines counts lines, the last one whether or not a newline ends it.
func countLines(data []byte) int {
	n := bytes.Count(data, []byte("\n"))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		n++
	}
	return n
}

// measureYAML counts the objects of data (documents whose root is a
// mapping, plus the items of a List) and the keys of its largest mapping.
// ok is false when data is not YAML or holds no collection at all (an env
// file reads as one plain scalar). Aliases are not followed, so the walk
// is linear in the text; the alias bound is checked apart.
func measureYAML(data []byte) (objects, maxKeys int, ok bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		err := DecodeYAML(dec, &doc)
		if errors.Is(err, io.EOF) {
			return objects, maxKeys, ok
		}
		if err != nil {
			return 0, 0, false
		}
		if len(doc.Content) == 0 {
			continue
		}
		root := doc.Content[0]
		switch root.Kind {
		case yaml.MappingNode:
			ok = true
			objects++
			if items := Lookup(root, "items"); items != nil && items.Kind == yaml.SequenceNode {
				objects += len(items.Content)
			}
		case yaml.SequenceNode:
			ok = true
			objects += len(root.Content)
		}
		maxKeys = max(maxKeys, largestMapping(root))
	}
}

// largestMapping returns the key count of the largest mapping under n,
// without following aliases.
func largestMapping(n *yaml.Node) int {
	most := 0
	stack := []*yaml.Node{n}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n.Kind == yaml.MappingNode {
			most = max(most, len(n.Content)/2)
		}
		if n.Kind != yaml.AliasNode {
			stack = append(stack, n.Content...)
		}
	}
	return most
}
