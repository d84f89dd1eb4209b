package helm

import (
	"path/filepath"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"sigs.k8s.io/yaml"

	"keyhole.dev/keyhole/source"
)

// A chart's Chart.yaml may list a dependency of this repository by its
// directory (repository: file://../common, a library chart beside it).
// helm dependency build, which Argo CD's repo server and helm-controller
// run on a chart whose charts/ does not hold its dependencies, copies
// that directory into charts/ as it stands, fetching nothing. keyhole
// reads it so: the chart is rendered with the directory's files as its
// subchart, one level deep, as helm dependency build copies it; a
// directory outside the repository, or without a Chart.yaml, stays a
// missing dependency (HelmDependencyMissing).

// localDependency is a dependency of a chart that a directory of the
// repository holds.
type localDependency struct {
	name string // as Chart.yaml's dependencies name it
	dir  string // absolute
}

// localDependencies lists the dependencies Chart.yaml of the chart in dir
// names by a directory of the repository (file://), whose Chart.yaml is
// there.
func localDependencies(h source.Host, dir string) []localDependency {
	data := h.Sniff(filepath.Join(dir, "Chart.yaml"), []byte("file://"))
	if data == nil {
		return nil
	}
	var meta struct {
		Dependencies []struct {
			Name       string `json:"name"`
			Repository string `json:"repository"`
		} `json:"dependencies"`
	}
	if yaml.Unmarshal(data, &meta) != nil {
		return nil
	}
	root := h.RepoRoot(dir)
	var out []localDependency
	for _, d := range meta.Dependencies {
		rel, ok := strings.CutPrefix(strings.TrimSpace(d.Repository), "file://")
		if !ok || d.Name == "" || strings.ContainsAny(d.Name, `/\`) {
			continue
		}
		dep := filepath.Clean(filepath.Join(dir, filepath.FromSlash(rel)))
		if !source.Within(root, dep) || dep == dir {
			continue
		}
		if fi, err := h.Stat(filepath.Join(dep, "Chart.yaml")); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		out = append(out, localDependency{name: d.Name, dir: dep})
	}
	return out
}

// withLocalDependencies adds to files, the chart ch loaded from them (in
// dir), the files of each dependency it lacks that a directory of the
// repository holds, under charts/NAME/, as helm dependency build copies
// them; read gets the files read. It reports whether it added any.
func withLocalDependencies(h source.Host, dir string, ch *chart.Chart, files *[]*archive.BufferedFile, read map[string][]byte) bool {
	added := false
	for _, d := range localDependencies(h, dir) {
		if slices.ContainsFunc(ch.Dependencies(), func(c *chart.Chart) bool { return c.Name() == d.name }) {
			continue // charts/ holds it
		}
		dfiles, dread, err := chartFiles(h, d.dir)
		if err != nil || len(*files)+len(dfiles) > helmMaxFiles {
			continue // as if absent: said as a missing dependency
		}
		for _, f := range dfiles {
			*files = append(*files, &archive.BufferedFile{Name: "charts/" + d.name + "/" + f.Name, Data: f.Data})
		}
		for k, v := range dread {
			read[k] = v
		}
		added = true
	}
	return added
}
