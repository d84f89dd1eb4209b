//go:build e2e

package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeAPI stands in for api.github.com: it answers only requests that carry
// the current real token as a Bearer credential, so a 200 through the proxy
// is itself proof that the proxy injected it.
type fakeAPI struct {
	token atomic.Pointer[string]
	// graphql records the GraphQL documents POST /graphql received.
	graphqlMu sync.Mutex
	graphql   []string
}

func (a *fakeAPI) setToken(tok string) { a.token.Store(&tok) }

func (a *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	// GitHub takes a token as "Bearer" or "token"; gh sends the latter.
	if auth := r.Header.Get("Authorization"); auth != "Bearer "+*a.token.Load() && auth != "token "+*a.token.Load() {
		w.WriteHeader(http.StatusUnauthorized)
		json.NewEncoder(w).Encode(map[string]string{"message": "Bad credentials"})
		return
	}
	switch {
	case r.URL.Path == "/repos/acme/widgets/slow":
		// Long enough for a test to stop the proxy mid-request.
		time.Sleep(1500 * time.Millisecond)
	case r.URL.Path == "/repos/acme/widgets/redirect":
		// A proxy that followed this would leak the credential's effect
		// to another host; it must pass back untouched.
		w.Header().Set("Location", "https://evil.example/steal")
		w.WriteHeader(http.StatusFound)
		return
	case r.URL.Path == "/repos/acme/widgets/echo":
		// What echoing upstreams do: request-id middleware, CORS, debug
		// endpoints and auth challenges hand request headers back, in a
		// 103, the final header and trailers.
		auth := r.Header.Get("Authorization")
		h := w.Header()
		h.Set("X-Echo-Authorization", auth)
		h.Set("Link", "</a.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		clear(h)
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("Trailer", "X-Echo-Trailer")
		h.Set("X-Request-Id", r.Header.Get("X-Request-Id"))
		h.Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
		h.Set("X-Echo-Authorization", auth)
		h.Set("Www-Authenticate", `Bearer realm="`+auth+`"`)
		h.Set(refusal, "host-not-allowed")
		json.NewEncoder(w).Encode(map[string]string{"echo": "headers"})
		h.Set("X-Echo-Trailer", auth)
		return
	case r.URL.Path == "/repos/acme/widgets/spoof":
		// An upstream must not be able to fake a proxy refusal.
		w.Header().Set(refusal, "host-not-allowed")
	case r.Method == http.MethodPost && r.URL.Path == "/repos/acme/widgets/pulls/overrun":
		// More bytes than the response frames, echoing the
		// credential: the proxy's HTTP client finds them on an idle
		// connection.
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		brw.WriteString("HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}HTTP/1.1 200 OK\r\nX-Echo: " + r.Header.Get("Authorization") + "\r\n\r\n")
		brw.Flush()
		time.Sleep(200 * time.Millisecond)
		return
	case r.Method == http.MethodPost && r.URL.Path == "/repos/acme/widgets/pulls":
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"number": 1, "state": "open"})
		return
	case r.Method == http.MethodPost && r.URL.Path == "/graphql":
		a.serveGraphQL(w, r)
		return
	case r.URL.Path == "/user":
		json.NewEncoder(w).Encode(map[string]string{"login": "acme-bot"})
		return
	}
	json.NewEncoder(w).Encode(map[string]any{
		"id":        1296269,
		"full_name": strings.TrimPrefix(r.URL.Path, "/repos/"),
		"private":   true,
	})
}

// gitServer is github.com's smart-HTTP git: the real git http-backend run
// through net/http/cgi, behind the Basic auth GitHub asks git for.
type gitServer struct {
	root  string
	token atomic.Pointer[string]
	cgi   *cgi.Handler
	lfs   lfsStore
}

// lfsStore is github.com's Git LFS, as small as git-lfs can use: the batch
// API behind the same Basic auth as git, and objects under /lfs-objects/,
// which stand in for the pre-signed URLs of GitHub's object storage (no
// credential needed, as there).
type lfsStore struct {
	mu      sync.Mutex
	objects map[string][]byte // by sha256 oid
	batches map[string]int    // batch requests received, by operation
}

// put stores an object and returns its oid.
func (s *lfsStore) put(data []byte) string {
	sum := sha256.Sum256(data)
	oid := hex.EncodeToString(sum[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.objects == nil {
		s.objects = map[string][]byte{}
	}
	s.objects[oid] = data
	return oid
}

// stored reports how many objects the store holds, and how many batch
// requests of an operation it received.
func (s *lfsStore) counts(operation string) (objects, batches int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.objects), s.batches[operation]
}

// serveBatch answers a batch request: each object to download gets a
// download action if stored, each to upload an upload action.
func (s *lfsStore) serveBatch(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Operation string `json:"operation"`
		Objects   []struct {
			Oid  string `json:"oid"`
			Size int64  `json:"size"`
		} `json:"objects"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad batch request", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	if s.batches == nil {
		s.batches = map[string]int{}
	}
	s.batches[req.Operation]++
	type action struct {
		Href string `json:"href"`
	}
	var objects []map[string]any
	for _, o := range req.Objects {
		href := map[string]action{}
		switch _, ok := s.objects[o.Oid]; {
		case req.Operation == "download" && ok:
			href["download"] = action{Href: "https://github.com/lfs-objects/" + o.Oid}
		case req.Operation == "upload" && !ok:
			href["upload"] = action{Href: "https://github.com/lfs-objects/" + o.Oid}
		}
		objects = append(objects, map[string]any{"oid": o.Oid, "size": o.Size, "actions": href})
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/vnd.git-lfs+json")
	json.NewEncoder(w).Encode(map[string]any{"transfer": "basic", "objects": objects})
}

// serveObject serves GET and stores PUT of /lfs-objects/<oid>.
func (s *lfsStore) serveObject(w http.ResponseWriter, r *http.Request) {
	oid := strings.TrimPrefix(r.URL.Path, "/lfs-objects/")
	switch r.Method {
	case http.MethodGet:
		s.mu.Lock()
		data, ok := s.objects[oid]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(data)
	case http.MethodPut:
		data, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		if s.objects == nil {
			s.objects = map[string][]byte{}
		}
		s.objects[oid] = data
		s.mu.Unlock()
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// newGitServer creates the bare repository acme/widgets.git under root with
// one commit, using the real git.
func newGitServer(t testing.TB, root string) *gitServer {
	t.Helper()
	gitBin := requireTool(t, "git")
	if _, err := os.Stat(gitHTTPBackend); err != nil {
		t.Fatalf("%s is missing: run apt-get install -y git", gitHTTPBackend)
	}
	home := t.TempDir()
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Acme", "GIT_AUTHOR_EMAIL=dev@acme.invalid",
		"GIT_COMMITTER_NAME=Acme", "GIT_COMMITTER_EMAIL=dev@acme.invalid",
	}
	bare := filepath.Join(root, "acme", "widgets.git")
	work := filepath.Join(t.TempDir(), "widgets")
	writeFile(t, filepath.Join(work, "README.md"), []byte("widgets\n"))
	for _, step := range []struct {
		dir  string
		args []string
	}{
		{dir: root, args: []string{"init", "--quiet", "--bare", "-b", "main", bare}},
		{dir: bare, args: []string{"config", "http.receivepack", "true"}},
		{dir: work, args: []string{"init", "--quiet", "-b", "main"}},
		{dir: work, args: []string{"add", "README.md"}},
		{dir: work, args: []string{"commit", "--quiet", "-m", "Initial commit"}},
		{dir: work, args: []string{"push", "--quiet", bare, "main"}},
	} {
		if err := os.MkdirAll(step.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(gitBin, step.args...)
		cmd.Dir = step.dir
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(step.args, " "), err, out)
		}
	}
	return &gitServer{
		root: root,
		cgi: &cgi.Handler{
			Path: gitHTTPBackend,
			Dir:  root,
			// http-backend explains a 404 (such as an LFS path) on
			// stderr; the status already says it.
			Stderr: io.Discard,
			Env: []string{
				"GIT_PROJECT_ROOT=" + root,
				"GIT_HTTP_EXPORT_ALL=1",
				"GIT_CONFIG_NOSYSTEM=1",
				"HOME=" + home,
				// Only reached after the Basic check below; with a
				// user set, http-backend serves receive-pack, so a
				// refused push is the proxy's doing.
				"REMOTE_USER=x-access-token",
			},
		},
	}
}

func (g *gitServer) setToken(tok string) { g.token.Store(&tok) }

func (g *gitServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/lfs-objects/") {
		g.lfs.serveObject(w, r)
		return
	}
	user, pass, ok := r.BasicAuth()
	if !ok || user != "x-access-token" || pass != *g.token.Load() {
		w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
		http.Error(w, "Authentication required", http.StatusUnauthorized)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/info/lfs/objects/batch") && r.Method == http.MethodPost {
		g.lfs.serveBatch(w, r)
		return
	}
	g.cgi.ServeHTTP(w, r)
}

// head returns the commit main points at in the bare repository.
func (g *gitServer) head(t testing.TB) string {
	t.Helper()
	cmd := exec.Command(requireTool(t, "git"), "rev-parse", "refs/heads/main")
	cmd.Dir = filepath.Join(g.root, "acme", "widgets.git")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "GIT_CONFIG_NOSYSTEM=1", "HOME=" + t.TempDir()}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git rev-parse: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// serveGraphQL answers the GraphQL reads gh issue list, gh pr view and gh
// api graphql send, by operation, with just what gh prints from them;
// and, like GitHub, anything else (a mutation reaching it, which the
// proxy should have refused) with data, so a test sees it got through.
func (a *fakeAPI) serveGraphQL(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Query         string         `json:"query"`
		OperationName string         `json:"operationName"`
		Variables     map[string]any `json:"variables"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]string{"message": "Problems parsing JSON"})
		return
	}
	a.graphqlMu.Lock()
	a.graphql = append(a.graphql, req.Query)
	a.graphqlMu.Unlock()
	issue := map[string]any{
		"id": "I_1", "number": 7, "title": "Widgets wobble", "url": "https://github.com/acme/widgets/issues/7",
		"state": "OPEN", "body": "", "createdAt": "2026-01-02T03:04:05Z", "updatedAt": "2026-01-02T03:04:05Z",
		"closedAt": nil, "author": map[string]any{"login": "octocat"},
		"labels":    map[string]any{"nodes": []any{}, "totalCount": 0},
		"assignees": map[string]any{"nodes": []any{}, "totalCount": 0},
		"comments":  map[string]any{"totalCount": 0},
	}
	pr := map[string]any{
		"id": "PR_1", "number": 3, "title": "Steady the widgets", "url": "https://github.com/acme/widgets/pull/3",
		"state": "OPEN", "body": "Adds a damper.", "isDraft": false, "author": map[string]any{"login": "octocat"},
		"baseRefName": "main", "headRefName": "damper", "headRepositoryOwner": map[string]any{"login": "acme"},
		"headRepository": map[string]any{"name": "widgets"}, "isCrossRepository": false,
		"createdAt": "2026-01-02T03:04:05Z", "updatedAt": "2026-01-02T03:04:05Z", "closedAt": nil, "mergedAt": nil,
		"additions": 10, "deletions": 2, "changedFiles": 1, "mergeable": "MERGEABLE",
		"reviewRequests":    map[string]any{"nodes": []any{}, "totalCount": 0},
		"reviews":           map[string]any{"nodes": []any{}, "totalCount": 0},
		"latestReviews":     map[string]any{"nodes": []any{}, "totalCount": 0},
		"assignees":         map[string]any{"nodes": []any{}, "totalCount": 0},
		"labels":            map[string]any{"nodes": []any{}, "totalCount": 0},
		"projectCards":      map[string]any{"nodes": []any{}, "totalCount": 0},
		"projectItems":      map[string]any{"nodes": []any{}, "totalCount": 0},
		"milestone":         nil,
		"comments":          map[string]any{"nodes": []any{}, "totalCount": 0},
		"reactionGroups":    []any{},
		"statusCheckRollup": map[string]any{"nodes": []any{}},
	}
	repo := map[string]any{
		"id": "R_1", "name": "widgets", "owner": map[string]any{"login": "acme"}, "hasIssuesEnabled": true,
		"viewerPermission": "READ", "defaultBranchRef": map[string]any{"name": "main"}, "isPrivate": true,
		"issues":      map[string]any{"totalCount": 1, "nodes": []any{issue}, "pageInfo": map[string]any{"hasNextPage": false, "endCursor": ""}},
		"pullRequest": pr,
	}
	data := map[string]any{"repository": repo, "viewer": map[string]any{"login": "acme-bot"}}
	json.NewEncoder(w).Encode(map[string]any{"data": data})
}

// graphQLSeen returns the documents POST /graphql has received.
func (a *fakeAPI) graphQLSeen() []string {
	a.graphqlMu.Lock()
	defer a.graphqlMu.Unlock()
	return append([]string(nil), a.graphql...)
}
