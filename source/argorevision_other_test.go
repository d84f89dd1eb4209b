package source

import (
	"testing"

	"github.com/go-git/go-git/v5/config"
)

// TestRevisionOfAnotherRepository: an Application that builds another
// repository (a URL none of this repository's remotes has) at a tag this
// repository does not hold is out of reach: said once, as skipped, not
// as a revision to fetch, and no directory here is taken for its path
// ("." always has that name): the repository's own files stay loose
// files, read as such. A tag missing from this repository's own URL is
// still the warning that says to fetch the tags, and its path is not read.
func TestRevisionOfAnotherRepository(t *testing.T) {
	dir, r := gitRepo(t)
	if _, err := r.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{"git@git.example.com:acme/agents.git"}}); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"gh.yaml": argoConn("gh")})
	commitAll(t, r, "first")
	app := func(url, rev string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: operator, namespace: argocd}\n" +
			"spec:\n  project: default\n  source: {repoURL: '" + url + "', path: ., targetRevision: '" + rev + "'}\n  destination: {name: in-cluster, namespace: operator}\n"
	}
	for _, c := range []struct{ name, url, read, code, said string }{
		{"another repository", "https://github.com/minio/operator", "gh", "InputSkipped",
			"info InputSkipped: Argo CD Application argocd/operator builds the repository's root at v7.1.1 from https://github.com/minio/operator, which is none of this repository's remotes and names a revision it does not hold: another repository, out of reach, skipped"},
		{"this repository", "https://git.example.com/acme/agents.git", "", "ArgoCDRevision",
			"warning ArgoCDRevision: Argo CD Application argocd/operator builds its path at targetRevision v7.1.1, other than the one keyhole reads, and no tag, branch or commit of the repository is v7.1.1; fetch the tags"},
	} {
		t.Run(c.name, func(t *testing.T) {
			assertPinRead(t, dir, "argo/app.yaml", app(c.url, "v7.1.1"), c.code, c.read, c.said)
		})
	}
}
