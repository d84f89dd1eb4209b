package source

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/internal/kustbuild"
)

// The codes the loader reports. They are stable: users search for them.
const (
	CodeYAMLInvalid    = "YAMLInvalid"
	CodeInputInvalid   = "InputInvalid"
	CodeYAMLAliasLimit = "YAMLAliasLimit"
	CodeKindMissing    = "KindMissing"
	CodeInputSkipped   = "InputSkipped"
)

// Rules describes the loader's codes for SARIF output and the generated
// docs page; the compiler appends them to its own table.
func Rules() []diag.Rule {
	return []diag.Rule{
		{
			Code:     CodeInputInvalid,
			Severity: diag.Error,
			Purpose:  "An input file is not text keyhole can read (bytes that are not valid UTF-8, or not valid in the UTF-16 or UTF-32 its byte order mark declares; NUL bytes or control characters), is larger than the size limit, is a symbolic link whose target is outside the repository, or holds a document that is not a mapping; or two deploy units have one name; or one file (or an app of apps' chart as rendered) declares more than 1,000 deploy units, past which it is not read.",
			Help:     "Save the file as UTF-8 (or UTF-16 or UTF-32 with a byte order mark) YAML or JSON without NUL bytes or control characters, keep it under the size limit, commit a file where a link leads out of the repository, and make each document one object (a mapping), not a list or a scalar.",
		},
		{
			Code:     CodeKindMissing,
			Severity: diag.Error,
			Purpose:  "A document has no apiVersion or kind, so keyhole cannot tell what it is.",
			Help:     "Add apiVersion and kind (for example omnia.altairalabs.ai/v1alpha1 and Connection), or name an agent file agent.yaml.",
		},
		{
			Code:     CodeInputSkipped,
			Severity: diag.Info,
			Purpose:  "Something a walk found is not keyhole's business and is skipped: a document with neither apiVersion nor kind (package.json, docker-compose.yml); a file that cannot be read as objects and names none of keyhole's kinds (templated YAML, a JSON array, a docs snippet); a Helm chart none of whose files names keyhole's kinds or declares a Secret, said once; a kustomization that does not build and holds no keyhole object; a Secret no Connection reads, whose own findings are then not reported; a file the .gitignore files ignore that names keyhole's kinds or declares a Secret, which git, and so CI and the cluster, do not hold.",
			Help:     "Nothing to fix. Name the file or directory explicitly to have it checked; exclude it (keyhole.yaml's exclude, --exclude) to have it not read at all.",
		},
		{
			Code:     CodeInputNotDeployed,
			Severity: diag.Warning,
			Purpose:  "A file names keyhole's kinds and lies under the path of a deploy unit whose kustomization does not list it (a Flux Kustomization's spec.path, an Argo CD Application's source path, or a kustomization root, which is built and not walked): the unit never applies it, so keyhole does not check it as deployed. An agent.yaml at the top of a Helm chart or in its templates is in no render, and is said so too; one in templates/ that writes an object (apiVersion and kind) is a template like any other, rendered and checked.",
			Help:     "List the file, or a directory holding it, in the nearest kustomization above it that the build reads (the message names it; an engine may generate the path's own), or move it out of the path if it is not meant to be deployed. An agent.yaml is no Kubernetes object, and a kustomization that lists it does not build: put it beside the kustomization.yaml of that path, or of a base it reads, where the build reads it into the deploy unit; out of a Helm chart, beside the kustomization.yaml of the unit that deploys the chart.",
		},
		{
			Code:     CodeInputHidden,
			Severity: diag.Warning,
			Purpose:  "A file names keyhole's kinds in a directory whose name begins with a dot (or is such a file), which a walk does not enter (.github, .devcontainer and the like hold other tools' YAML): git holds it, and kubectl apply or an engine may deploy it, but keyhole does not check it. Said once per file, and not where a build keyhole runs reads the file (a kustomization listing the directory, a Flux Kustomization or Argo CD Application whose path it is). Each such directory is looked into only so far (2,000 entries, 200 files' heads).",
			Help:     "Name the directory to have it checked (keyhole check .generated/agents), or keep keyhole's files in a directory whose name does not begin with a dot; exclude it (keyhole.yaml's exclude, --exclude) if it is not deployed.",
		},
		{
			Code:     CodeFluxSourceUnmapped,
			Severity: diag.Warning,
			Purpose:  "A Flux Kustomization builds from a source that is not this repository's git root as it stands (an OCIRepository, Bucket or ExternalArtifact, whose artifact was made from some directory, or another GitRepository) and keyhole.yaml does not say which directory of this repository is that source's root: its spec.path is relative to that root, so keyhole does not read the unit. The summary counts it among the units not read.",
			Help:     "Map the source in keyhole.yaml's flux.sources (kind, namespace, name, and path: the directory of this repository its artifact is made from, as flux push artifact --path or an ArtifactGenerator's copy says); a source made elsewhere stays unread: another project's artifact or repository is out of reach, and a GitRepository of another branch of this repository is checked by running keyhole on a checkout of that branch (or by mapping a directory holding its tree).",
		},
		{
			Code:     CodeHelmRenderFailed,
			Severity: diag.Error,
			Purpose:  "A Helm chart keyhole renders (an Argo CD Application's Helm source, or a chart holding keyhole's objects that a walk found) does not render as helm template renders it: a template error, a fail or required, values its schema refuses, output that is not objects, a file linked out of the repository, or rendering that takes over a minute. Nothing of the chart is checked.",
			Help:     "Run helm template on the chart with the same values to see the error, and fix the template or the values; the message names the template and line.",
		},
		{
			Code:     CodeUnitNotBuilt,
			Severity: diag.Warning,
			Purpose:  "A deploy unit that a GitOps engine declares, or a Helm chart keyhole renders, does not build or render (kustomize's or Helm's own error, a duplicate mapping key that kustomize reads but cannot write out, a value file that is not there), and none of its files names keyhole's kinds or declares a Secret a Connection reads that no other unit holds: the engine fails on it too, but that is not keyhole's to report, so the unit is not read and nothing it deploys is checked. Where the unit holds something keyhole checks, the failure is an error (KustomizeBuildFailed, HelmRenderFailed, YAMLInvalid).",
			Help:     "Fix the unit as the message says (kustomize build DIR, or helm template with the same values, shows the same error) to have it checked; nothing of keyhole's depends on it.",
		},
		{
			Code:     CodeHelmDependencyMissing,
			Severity: diag.Warning,
			Purpose:  "A Helm chart's Chart.yaml lists a dependency its charts/ directory does not hold, from a chart repository or a directory outside this repository (one of this repository, file://, is rendered from that directory, as helm dependency build copies it). The engine fetches it; keyhole fetches nothing, so it renders the chart without it and checks nothing the dependency would deploy.",
			Help:     "Run helm dependency build and commit charts/ to have the dependency checked too.",
		},
		{
			Code:     CodeHelmValuesUnread,
			Severity: diag.Warning,
			Purpose:  "An engine gives a chart values keyhole does not read (a Flux HelmRelease's valuesFrom Secret, whose values keyhole never reads, or a ConfigMap the repository does not hold; an Argo CD value file Helm fetches or a plugin such as helm-secrets decrypts), or post-renders it: keyhole renders the chart without them, so what they would change is not checked.",
			Help:     "Keep the values that shape keyhole's objects in spec.values, a values file or a ConfigMap in the repository; mark a source that may be absent optional.",
		},
		{
			Code:     CodeArgoCDUnread,
			Severity: diag.Warning,
			Purpose:  "Argo CD makes Applications keyhole cannot know: an ApplicationSet's clusters generator whose cluster Secrets the repository makes in a way keyhole does not read (an ExternalSecret, a SealedSecret, SOPS) or does not declare (its selector matches none), a template calling a function whose value changes on every run (now, randAlpha, uuidv4), or a generator keyhole does not read (one that reads a service: scmProvider, pullRequest, clusterDecisionResource, plugin; a merge generator, a matrix inside a matrix, a generator's own template), where the directories its template deploys hold keyhole's kinds or a Secret, or its template's paths are all parameters (for a generator keyhole does not read, keyhole's kinds: one whose template's paths name only directories that declare Secrets, or none the repository holds, is an info). Its Applications are not checked, and the directories its template names are not read as anything else. Also a Helm chart whose values give Applications or ApplicationSets to a dependency that charts/ does not hold, other than argo-helm's argocd-apps (whose values keyhole reads as the objects it writes): those are not read, and the files under the paths they deploy are read on their own, not in the namespaces Argo CD deploys them into.",
			Help:     "Declare the cluster Secrets' name and server in plain Secrets of the repository (their config may stay in a Secret of its own), or fill the value from a generator's parameter. Check the directories a generator keyhole does not read deploys on their own (`keyhole check DIR`; the message names them). Vendor such a dependency unpacked in the chart's charts/ directory.",
		},
		{
			Code:     CodeArgoCDRevision,
			Severity: diag.Warning,
			Purpose:  "An Argo CD Application's source is pinned (targetRevision) to a tag, commit or branch other than the one keyhole reads. keyhole reads its path at that revision from git, and says so in a note; a revision the repository does not hold (a shallow clone, a tag not fetched, a semver range) is a warning, and nothing is read for that unit, as the working tree is not what it deploys.",
			Help:     "Fetch what the warning names (git fetch --tags, git fetch origin BRANCH; in CI, actions/checkout with fetch-depth: 0 and fetch-tags: true), or pin a tag rather than a range. A branch a Kargo Stage renders to (the Application's kargo.akuity.io/authorized-stage annotation names it) needs no fetch: it holds the last promotion, and the overlays the Stage renders from are checked as a walk finds them.",
		},
		{
			Code:     CodeFluxRevision,
			Severity: diag.Warning,
			Purpose:  "A Flux Kustomization builds from this repository's own GitRepository, whose spec.ref pins a tag, commit, branch or semver range other than the revision keyhole reads. keyhole reads the unit's path at that revision from git, and says so in a note; a revision the repository does not hold (a shallow clone, a tag not fetched, a semver range) is a warning, and nothing is read for that unit, as the working tree is not what it deploys.",
			Help:     "Fetch what the warning names (git fetch --tags, git fetch origin BRANCH; in CI, actions/checkout with fetch-depth: 0 and fetch-tags: true), or pin a tag rather than a range.",
		},
		{
			Code:     CodeArgoCDUnrendered,
			Severity: diag.Warning,
			Purpose:  "An Argo CD Application's source builds keyhole's inputs (Connections, SandboxClasses, AgentRuntimes) without keyhole's config management plugin: Argo CD applies them as written, not keyhole's render of them, so unless the cluster runs the omnia operator (which serves these kinds itself) nothing makes their sandboxes and egress proxy.",
			Help:     "Name keyhole's plugin in the source (plugin.name keyhole-VERSION, as examples/argocd does), so the repo server runs keyhole render on the path; or commit keyhole render's output, name its directory in keyhole.yaml's argocd.rendered, and point the Application at the unit's directory there (examples/argocd-committed).",
		},
		{
			Code:     CodeArgoCDRenderedPath,
			Severity: diag.Error,
			Purpose:  "An Argo CD Application's path lies in a directory keyhole.yaml's argocd.rendered names (where CI commits keyhole render's output), but keyhole render writes no deploy unit there: render writes each unit to the unit's directory relative to keyhole.yaml's (apps/prod for the overlay apps/prod), so after the render Argo CD finds no such directory and does not sync.",
			Help:     "Point the Application at a directory the message lists (rendered/apps/prod for argocd.rendered [rendered] and the overlay apps/prod), or add the deploy unit it names.",
		},
		{
			Code:     CodeArgoCDRenderOmits,
			Severity: diag.Warning,
			Purpose:  "An Argo CD Application's source that keyhole's config management plugin renders builds objects other than keyhole's inputs (a Secret, an ExternalSecret, a ConfigMap): the plugin's render holds only the objects keyhole makes, never a Secret, so Argo CD never applies them, and a Secret a Connection reads from there is missing in the cluster.",
			Help:     "Apply those objects from a source of their own: a second source of the same Application (as examples/argocd-repo does with its ExternalSecrets), or another Application.",
		},
		{
			Code:     CodeGeneratorMatchesNothing,
			Severity: diag.Warning,
			Purpose:  "A path of an Argo CD ApplicationSet's git generator matches no directory or file of the repository its repoURL names, which is this one (another Application builds from it): Argo CD makes no Application of it.",
			Help:     "Correct the path (a typo), or commit the directories it names.",
		},
		{
			Code:     CodeKustomizeHelmNotRun,
			Severity: diag.Warning,
			Purpose:  "A kustomization inflates Helm charts (helmCharts), which only a build with helm enabled does, and the repository configures Argo CD's kustomize builds with --enable-helm (an argocd-cm ConfigMap, or the argo-cd chart's values configs.cm): Argo CD builds it, but keyhole runs no helm, so nothing the kustomization builds is read or checked. A Flux Kustomization's build stays an error (KustomizeBuildFailed): kustomize-controller runs no helm.",
			Help:     "Check what the build makes with kustomize build --enable-helm DIR | keyhole check -, or keep keyhole's objects and their Secrets in a kustomization without helmCharts.",
		},
		{
			Code:     CodeJsonnetNotEvaluated,
			Severity: diag.Warning,
			Purpose:  "A Jsonnet file of an Argo CD directory application names keyhole's kinds or declares a Secret: Argo CD evaluates it and applies what it declares, but keyhole does not evaluate Jsonnet, so those objects are not checked.",
			Help:     "Write keyhole's objects and their Secrets in YAML (or JSON) beside the Jsonnet, or check what it declares with jsonnet FILE | keyhole check -.",
		},
		{
			Code:     CodeYAMLAliasLimit,
			Severity: diag.Error,
			Purpose:  "A document's aliases expand to too many nodes (a \"billion laughs\" document).",
			Help:     "Write the repeated values out, or use fewer, smaller anchors: keyhole expands at most 10000 nodes through aliases in one document.",
		},
		{
			Code:     CodeYAMLInvalid,
			Severity: diag.Error,
			Purpose:  "A file is not valid YAML: a syntax error, a duplicate mapping key, an alias to its own anchor or a bad merge key.",
			Help:     "Fix the YAML at the reported line; a syntax error stops the reading of the rest of that file, and until it is fixed, keyhole does not report Connections, SandboxClasses and Secrets as missing from the input, since the file may declare them.",
		},
	}
}

// maxAliasNodes bounds how many nodes one document may reach through
// aliases. Beyond it the document is refused instead of expanded, which
// bounds memory and time whatever the input. No separate bound on nesting
// is needed: YAML defines an anchor before any alias to it and the
// resolver resolves anchors first, so a copy never holds another alias and
// deep chains of aliases spend the same budget.
const maxAliasNodes = 10000

// Parse splits data, the contents of file, into documents. It never reads
// past data and never panics; what it cannot accept it reports as
// diagnostics, and such documents are not returned. Callers that read
// inputs another way than Load (for example blobs of a git tree) use it
// directly; file is used as given for positions. The documents are
// returned as Load returns them: pointers, here into one array.
func Parse(file string, data []byte) ([]*Document, diag.List) {
	docs, diags := parse(file, data, false, nil)
	return refs(docs), diags
}

// refs points at each of docs.
func refs(docs []Document) []*Document {
	if docs == nil {
		return nil
	}
	out := make([]*Document, len(docs))
	for i := range docs {
		out[i] = &docs[i]
	}
	return out
}

// parse is Parse; walked says the file was found by walking a directory
// rather than named, so a document that is plainly not an object is
// skipped at info rather than reported as an error.
//
// A file found by a walk that cannot be read as objects (a template, a
// document that is a list or a scalar, invalid YAML, a missing kind) and
// that names none of keyhole's kinds is skipped with one InputSkipped note
// (see skipUnreadable and docs/inputs.md).
//
// A file in UTF-16 or UTF-32 is decoded first (see decodeText), so it is
// read, and sniffed, as its text.
func parse(file string, data []byte, walked bool, each func(*Document)) ([]Document, diag.List) {
	text, bad := decodeText(file, data)
	var (
		docs  []Document
		diags diag.List
	)
	if bad != nil {
		diags = diag.List{*bad}
	} else {
		docs, diags = parseAll(file, text, walked, each)
	}
	if walked {
		return skipUnreadable(file, text, docs, diags)
	}
	return docs, diags
}

func parseAll(file string, data []byte, walked bool, each func(*Document)) ([]Document, diag.List) {
	if d, bad := checkBytes(file, data); bad {
		return nil, diag.List{d}
	}
	var (
		docs  []Document
		diags diag.List
	)
	src, shifts := jsonSlashes(neutralizeSuffixes(data))
	dec := yaml.NewDecoder(bytes.NewReader(src))
	for index := 0; ; index++ {
		var n yaml.Node
		err := decode(dec, &n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			diags = append(diags, syntaxError(file, data, index, err))
			break
		}
		shifts.restore(&n)
		ds, errs := document(file, index, &n, walked)
		diags = append(diags, errs...)
		if each != nil {
			// Each document as soon as it is parsed: its tree can then be
			// dropped before the next one is built, rather than a whole
			// file's trees being held at once.
			for i := range ds {
				each(&ds[i])
			}
		}
		docs = append(docs, ds...)
	}
	if cap(docs) > len(docs)+len(docs)/8 {
		// Every file's documents are held until the walk ends: to size,
		// not with the slack of the doubling that grew them (a fifth of
		// the documents' memory at the end of a walk of small files).
		docs = slices.Clone(docs)
	}
	return docs, diags
}

// decode runs the YAML decoder, turning a panic inside the library into an
// error: the loader promises callers no panic on any input.
func decode(dec *yaml.Decoder, n *yaml.Node) error { return kustbuild.DecodeYAML(dec, n) }

// syntaxError turns a yaml.v3 error into a YAMLInvalid diagnostic at the
// line the library reports in its "yaml: line N: " prefix, counted from 1
// (see errorLine; it reports no column; we say column 1). For an unknown anchor, which it reports
// without a line, the position is that of the first alias of that name.
func syntaxError(file string, data []byte, index int, err error) diag.Diagnostic {
	msg := err.Error()
	line, col := 1, 1
	if name, ok := unknownAnchor(msg); ok {
		if off := bytes.Index(data, []byte("*"+name)); off >= 0 {
			line, col = position(data, off)
		}
		// The library's message repeats the name, which is input text;
		// diagnostics never quote what might be a value.
		msg = "alias to an anchor that is not defined: define &name before any *name refers to it"
	}
	msg, _ = strings.CutPrefix(msg, "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, text, ok := strings.Cut(rest, ": "); ok {
			if l, convErr := strconv.Atoi(n); convErr == nil {
				if l = errorLine(data, l, text); l >= 1 {
					line, msg = l, text
					if strings.HasPrefix(text, "did not find expected '-' indicator") || strings.HasPrefix(text, "did not find expected key") {
						line = breakLine(data, line)
					}
				}
			}
		}
	}
	where := ""
	if index > 0 {
		where = fmt.Sprintf(" in document %d", index+1)
	}
	if strings.HasPrefix(msg, "did not find expected ',' or") && flowVariableNear(data, line) {
		msg += "; a ${VAR} inside a flow sequence or mapping ([...] or {...}) must be quoted, as in [\"${VAR}\"]: YAML reads its { as the start of a mapping"
	}
	return diag.Diagnostic{
		Code:     CodeYAMLInvalid,
		Severity: diag.Error,
		Pos:      diag.Pos{File: file, Line: line, Column: col},
		Message:  fmt.Sprintf("invalid YAML%s: %s; %s", where, msg, restNotRead),
	}
}

// restNotRead ends the message of a syntax error, after which the file is
// not read (see Unparsed).
const restNotRead = "the rest of the file was not read, since after a syntax error it cannot be trusted"

// Unparsed returns the files of ds (the loader's diagnostics) whose
// reading stopped at a syntax error, in order. What they declare after it
// is not in the input: a message saying something is missing would
// follow from the syntax error, which says it already.
func Unparsed(ds diag.List) []string {
	var files []string
	for _, d := range ds {
		if d.Code == CodeYAMLInvalid && strings.HasSuffix(d.Message, restNotRead) && !slices.Contains(files, d.Pos.File) {
			files = append(files, d.Pos.File)
		}
	}
	return files
}

// flowVariable is a line that opens a flow sequence or mapping and holds
// an unquoted ${...} after it.
var flowVariable = regexp.MustCompile(`[\[{,][^"'\n]*\$\{`)

// flowVariableNear reports whether one of the lines of data up to line
// (from 1), and the three before it, holds a flowVariable: what a parser
// error about a flow collection most often means in a repository whose
// variables a GitOps engine substitutes.
func flowVariableNear(data []byte, line int) bool {
	lines := bytes.Split(data, []byte("\n"))
	for l := max(line-4, 0); l < min(line, len(lines)); l++ {
		if flowVariable.Match(lines[l]) {
			return true
		}
	}
	return false
}

// parserProblems are the problems yaml.v3's parser (not its scanner)
// reports, whose "line N" counts from 0 (decode.go's fail adds 1 only for
// scanner errors).
var parserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// errorLine is the line (from 1) of a yaml.v3 error "line n: problem" in
// data. The parser's marks count lines from 0, and the library adds 1 only
// to the scanner's: without this, the line before the construct would be
// named. At the end of the file, the parser's mark is past its last line.
// The problem may be followed by more text, as a wrapping error adds.
func errorLine(data []byte, n int, problem string) int {
	for p := range parserProblems {
		if strings.HasPrefix(problem, p) {
			return min(n+1, max(lineCount(data), 1))
		}
	}
	return n
}

// lineCount is the number of lines of data, a last line without a line
// break included.
func lineCount(data []byte) int {
	n := bytes.Count(data, []byte("\n"))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		n++
	}
	return n
}

// unknownAnchor recognises yaml.v3's "unknown anchor 'NAME' referenced".
func unknownAnchor(msg string) (string, bool) {
	rest, ok := strings.CutPrefix(msg, "yaml: unknown anchor '")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "' referenced")
}

// checkBytes refuses what the YAML parser should never see: binary data,
// invalid UTF-8 and control characters YAML does not allow. It
// points at the first offending byte, counting columns in characters as
// yaml.v3 does.
func checkBytes(file string, data []byte) (diag.Diagnostic, bool) {
	bad := func(line, col int, format string, args ...any) (diag.Diagnostic, bool) {
		return diag.Diagnostic{
			Code:     CodeInputInvalid,
			Severity: diag.Error,
			Pos:      diag.Pos{File: file, Line: line, Column: col},
			Message:  fmt.Sprintf(format, args...),
		}, true
	}
	line, col := 1, 1
	for off := 0; off < len(data); {
		r, size := utf8.DecodeRune(data[off:])
		switch {
		case r == 0:
			return bad(line, col, "binary file: NUL byte at line %d, column %d; keyhole reads only UTF-8 YAML and JSON text", line, col)
		case r == utf8.RuneError && size <= 1:
			return bad(line, col, "invalid UTF-8: byte 0x%02X at line %d, column %d is not valid UTF-8; save the file as UTF-8", data[off], line, col)
		case !printable(r) && !(r == 0xFEFF && off == 0):
			return bad(line, col, "control character %U at line %d, column %d is not allowed in YAML; remove it or write it as an escape in a double-quoted string", r, line, col)
		}
		if isBreak(data, off, r) {
			line, col = line+1, 1
		} else if r != '\r' {
			col++
		}
		off += size
	}
	return diag.Diagnostic{}, false
}

// position returns the 1-based line and column (in characters) of the
// byte at offset in data.
func position(data []byte, offset int) (line, col int) {
	line, col = 1, 1
	for off := 0; off < offset && off < len(data); {
		r, size := utf8.DecodeRune(data[off:])
		if isBreak(data, off, r) {
			line, col = line+1, 1
		} else if r != '\r' {
			col++
		}
		off += size
	}
	return line, col
}

// isBreak reports whether the rune r at data[off] ends a line the way
// yaml.v3 counts lines: LF, CR not followed by LF, NEL, and the Unicode
// line and paragraph separators. (A CR before an LF is not counted, and
// adds no column.)
func isBreak(data []byte, off int, r rune) bool {
	switch r {
	case '\n', 0x85, 0x2028, 0x2029:
		return true
	case '\r':
		return off+1 >= len(data) || data[off+1] != '\n'
	}
	return false
}

// printable reports whether YAML 1.2 allows r in a stream (its c-printable
// production, plus the line breaks).
func printable(r rune) bool {
	switch {
	case r == '\t' || r == '\n' || r == '\r':
		return true
	case r >= 0x20 && r <= 0x7E:
		return true
	case r == 0x85:
		return true
	case r >= 0xA0 && r <= 0xD7FF:
		return true
	case r >= 0xE000 && r <= 0xFFFD:
		return true
	case r >= 0x10000 && r <= 0x10FFFF:
		return true
	}
	return false
}

// document checks one decoded document and returns it ready for callers:
// one Document, or the items of a List (v1 List, or any kind ending in
// List with an items field, as kubectl and kustomize read them), each a
// Document of its own; none when it is empty or the loader reported an
// error for it.
func document(file string, index int, n *yaml.Node, walked bool) ([]Document, diag.List) {
	root := n
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil, nil
		}
		root = n.Content[0]
	}
	pos := func(m *yaml.Node) diag.Pos {
		return diag.Pos{File: file, Line: max(m.Line, 1), Column: max(m.Column, 1)}
	}
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" && root.Value == "" {
		return nil, nil // an empty document: "---" alone, or only comments
	}
	if root.Kind != yaml.MappingNode {
		return nil, diag.List{notMapping(pos(root), fmt.Sprintf("document %d", index+1), root)}
	}
	if ds := duplicateKeys(file, root); len(ds) > 0 {
		return nil, ds
	}
	r := resolver{budget: maxAliasNodes, onPath: map[*yaml.Node]bool{}}
	resolved, err := r.resolve(root, false)
	if err == nil {
		err = applyMerges(resolved)
	}
	if err != nil {
		var pe *posError
		p := pos(root)
		if errors.As(err, &pe) {
			p = pos(pe.node)
		}
		code := CodeYAMLInvalid
		if errors.Is(err, errAliasLimit) {
			code = CodeYAMLAliasLimit
		}
		return nil, diag.List{{Code: code, Severity: diag.Error, Pos: p, Message: err.Error()}}
	}
	var (
		docs  []Document
		diags diag.List
	)
	var add func(n *yaml.Node, what string, depth int)
	add = func(n *yaml.Node, what string, depth int) {
		doc := &Document{File: file, Index: index, Node: n, Pos: pos(n)}
		if items, isList := listItems(n); isList && !doc.IsAgent() && depth < maxListDepth {
			if items != nil && items.Kind != yaml.SequenceNode {
				diags = append(diags, diag.Diagnostic{
					Code:     CodeInputInvalid,
					Severity: diag.Error,
					Pos:      pos(items),
					Message:  fmt.Sprintf("the items of the %s in %s are not a list: a List holds its objects as a list under items", stringField(n, "kind"), what),
				})
				return
			}
			if items == nil {
				return // an empty List
			}
			for i, it := range items.Content {
				itWhat := fmt.Sprintf("item %d of the %s in %s", i+1, stringField(n, "kind"), what)
				if it.Kind != yaml.MappingNode {
					diags = append(diags, notMapping(pos(it), itWhat, it))
					continue
				}
				add(it, itWhat, depth+1)
			}
			return
		}
		if field, at := actionField(n); walked && at != nil && !keyholeAPI(stringField(n, "apiVersion")) {
			diags = append(diags, diag.Diagnostic{Code: CodeInputInvalid, Severity: diag.Error, Pos: pos(at),
				Message: fmt.Sprintf("%s of %s is %s", field, what, templateFieldMessage)})
			return
		}
		if d, ok := checkKind(doc, what, walked); !ok {
			diags = append(diags, d)
			return
		}
		docs = append(docs, *doc)
	}
	add(resolved, fmt.Sprintf("document %d", index+1), 0)
	return docs, diags
}

// maxListDepth bounds Lists nested in Lists; deeper ones are read as
// objects (and fail their kind's checks) rather than expanded.
const maxListDepth = 8

// listItems returns a List's items node (nil for an empty List) and
// whether n is a List at all: a kind ending in List with an items field,
// as kustomize expands them. A KRM function's ResourceList is its
// input, not a List of objects, and is read as one object.
func listItems(n *yaml.Node) (*yaml.Node, bool) {
	if kind := stringField(n, "kind"); !strings.HasSuffix(kind, "List") || kind == "ResourceList" {
		return nil, false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == "items" {
			items := n.Content[i+1]
			if items.Kind == yaml.ScalarNode && items.ShortTag() == "!!null" {
				return nil, true
			}
			return items, true
		}
	}
	return nil, false
}

// notMapping reports a document (or List item) that is not an object.
func notMapping(pos diag.Pos, what string, n *yaml.Node) diag.Diagnostic {
	kind := map[yaml.Kind]string{
		yaml.SequenceNode: "a list",
		yaml.ScalarNode:   "a scalar",
		yaml.AliasNode:    "an alias",
	}[n.Kind]
	if kind == "" {
		kind = "not a mapping"
	}
	return diag.Diagnostic{
		Code:     CodeInputInvalid,
		Severity: diag.Error,
		Pos:      pos,
		Message:  fmt.Sprintf("%s is %s, not a mapping: each document must be one object with apiVersion and kind (split a list into documents separated by ---)", what, kind),
	}
}

// checkKind reports a document (other than an agent file) without
// apiVersion or kind; ok is false when it is not an object to return.
func checkKind(doc *Document, what string, walked bool) (diag.Diagnostic, bool) {
	if doc.IsAgent() {
		// Other tools name their files agent.yaml too (an OpAMP bridge's,
		// Grafana Agent's): one that a walk found and that has none of an
		// agent's fields is theirs.
		if walked && !slices.ContainsFunc(agentFields, func(f string) bool { return Lookup(doc.Node, f) != nil }) {
			return skipped(doc.Pos, fmt.Sprintf("%s is named like an agent file but has none of an agent's fields (%s), so it is another tool's; skipped (name the file explicitly to check it as an agent)",
				what, strings.Join(agentFields, ", "))), false
		}
		return diag.Diagnostic{}, true
	}
	var missing []string
	for _, k := range []string{"apiVersion", "kind"} {
		if stringField(doc.Node, k) == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return diag.Diagnostic{}, true
	}
	miss := missing[0]
	if len(missing) == 2 {
		miss = "apiVersion and no kind"
		if walked {
			return skipped(doc.Pos, fmt.Sprintf("%s has neither apiVersion nor kind, so it is not an object; skipped (name the file explicitly to check it as one)", what)), false
		}
	}
	return diag.Diagnostic{
		Code:     CodeKindMissing,
		Severity: diag.Error,
		Pos:      doc.Pos,
		Object:   doc.Object(),
		Message:  fmt.Sprintf("%s has no %s: every object needs both as non-empty strings, e.g. apiVersion: omnia.altairalabs.ai/v1alpha1 and kind: Connection (an agent file must be named agent.yaml)", what, miss),
	}, false
}

// agentFields are the top-level fields of an agent file (docs/spec.md,
// section 8); compiler's TestAgentFieldsAreTheSchemas keeps them the
// schema's.
var agentFields = []string{"name", "mode", "llm", "description", "instructions", "connectors", "allowed_domains", "sandbox", "sandbox_options"}

// AgentFields returns the top-level fields of an agent file, by which a
// walk tells an agent.yaml of keyhole's from another tool's.
func AgentFields() []string { return slices.Clone(agentFields) }

// dupKeyMessage starts the message of a duplicate mapping key.
const dupKeyMessage = "duplicate key"

// keyID identifies a scalar mapping key the way YAML compares keys: by
// resolved tag and value, so that a and "a" collide but 1 and "1" do not.
type keyID struct{ tag, value string }

func keyOf(k *yaml.Node) (keyID, bool) {
	if k.Kind != yaml.ScalarNode {
		return keyID{}, false
	}
	return keyID{k.ShortTag(), k.Value}, true
}

// duplicateKeys reports every mapping key that repeats an earlier key of
// the same mapping, at the repeat. yaml.v3 reports these only when decoding
// into Go values, not into nodes, so the loader checks itself. Aliases are
// not followed: their targets are checked where they are defined.
func duplicateKeys(file string, n *yaml.Node) diag.List {
	var out diag.List
	seen := map[keyID]*yaml.Node{} // reused: one mapping is checked at a time
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			clear(seen)
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				id, ok := keyOf(k)
				if !ok || k.ShortTag() == "!!merge" {
					continue
				}
				if first, dup := seen[id]; dup {
					out = append(out, diag.Diagnostic{
						Code:     CodeYAMLInvalid,
						Severity: diag.Error,
						Pos:      diag.Pos{File: file, Line: max(k.Line, 1), Column: max(k.Column, 1)},
						Message:  fmt.Sprintf(dupKeyMessage+": this key is already defined at line %d, column %d of the same mapping; remove or rename one, as keys of a mapping must be unique", first.Line, first.Column),
					})
					continue
				}
				seen[id] = k
			}
		}
		if n.Kind == yaml.AliasNode {
			return
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	return out
}

// errAliasLimit marks a refusal to expand aliases any further.
var errAliasLimit = errors.New("alias limit")

// posError is an error about a particular node.
type posError struct {
	node *yaml.Node
	msg  string
	kind error
}

func (e *posError) Error() string { return e.msg }
func (e *posError) Unwrap() error { return e.kind }

// resolver replaces alias nodes with copies of their anchors' nodes,
// counting every node it copies against a budget so that the work and the
// memory stay bounded whatever the document.
type resolver struct {
	budget int
	// onPath holds the nodes being resolved, to catch an alias to an
	// enclosing anchor, which would expand forever.
	onPath map[*yaml.Node]bool
}

// resolve returns n with its aliases resolved. Nodes reached through an
// alias (copy is true) are copied, since the same anchor may be expanded
// in several places; the document's own nodes are updated in place.
func (r *resolver) resolve(n *yaml.Node, copy bool) (*yaml.Node, error) {
	if n.Kind == yaml.AliasNode {
		target := n.Alias
		switch {
		case target == nil:
			return nil, &posError{node: n, msg: fmt.Sprintf("alias *%s has no anchor", n.Value)}
		case r.onPath[target]:
			return nil, &posError{node: n, msg: fmt.Sprintf("alias *%s refers to an anchor that contains it, which would expand forever", n.Value)}
		}
		out, err := r.resolve(target, true)
		var pe *posError
		if !copy && errors.As(err, &pe) && errors.Is(err, errAliasLimit) {
			pe.node = n // point at the alias in the document, not inside its anchor
		}
		return out, err
	}
	out := n
	if copy {
		r.budget--
		if r.budget < 0 {
			return nil, &posError{node: n, kind: errAliasLimit, msg: fmt.Sprintf("aliases expand to more than %d nodes (a \"billion laughs\" document?); keyhole refuses to expand them: write the values out or use smaller anchors", maxAliasNodes)}
		}
		c := *n
		c.Content = make([]*yaml.Node, len(n.Content))
		out = &c
	}
	if len(n.Content) == 0 {
		return out, nil
	}
	if n.Anchor != "" { // only an anchored node can be an alias's target
		r.onPath[n] = true
		defer delete(r.onPath, n)
	}
	for i, child := range n.Content {
		rc, err := r.resolve(child, copy)
		if err != nil {
			return nil, err
		}
		out.Content[i] = rc
	}
	return out, nil
}

// applyMerges applies YAML merge keys (<<: *base, or a list of them) the
// way yaml.v3 does when decoding into values: a mapping gains the merged
// mappings' keys it does not define itself, earlier merged mappings taking
// precedence over later ones. The merged pairs take the place of the <<
// entry, so callers walking nodes see every key once.
func applyMerges(n *yaml.Node) error {
	for _, c := range n.Content {
		if err := applyMerges(c); err != nil {
			return err
		}
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	hasMerge := false
	for i := 0; i+1 < len(n.Content) && !hasMerge; i += 2 {
		k := n.Content[i]
		hasMerge = k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge"
	}
	if !hasMerge {
		return nil
	}
	defined := map[keyID]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			continue
		}
		if id, ok := keyOf(k); ok {
			defined[id] = true
		}
	}
	content := make([]*yaml.Node, 0, len(n.Content))
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !(k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge") {
			content = append(content, k, v)
			continue
		}
		sources := []*yaml.Node{v}
		if v.Kind == yaml.SequenceNode {
			sources = v.Content
		}
		for _, src := range sources {
			if src.Kind != yaml.MappingNode {
				return &posError{node: src, msg: "the merge key << needs a mapping or a list of mappings"}
			}
			for j := 0; j+1 < len(src.Content); j += 2 {
				id, ok := keyOf(src.Content[j])
				if ok && defined[id] {
					continue
				}
				if ok {
					defined[id] = true
				}
				content = append(content, src.Content[j], src.Content[j+1])
			}
		}
	}
	n.Content = content
	return nil
}

// neutralizeSuffixes turns into comments the document end markers ("...")
// that yaml.v3 rejects although YAML allows them: one that opens the
// stream, and one that follows another with no document between. It
// rewrites "..." as "#..", in a copy, so that every line and column stays
// where it was.
func neutralizeSuffixes(data []byte) []byte {
	out := data
	afterEnd := true // the start of the stream counts as the end of a document
	for off := 0; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		if end < 0 {
			end = len(data)
		} else {
			end += off
		}
		line := bytes.TrimSuffix(data[off:end], []byte("\r"))
		start := off
		if off == 0 && bytes.HasPrefix(line, []byte("\uFEFF")) {
			line = line[len("\uFEFF"):]
			start += len("\uFEFF")
		}
		trimmed := bytes.TrimLeft(line, " \t")
		switch {
		case len(trimmed) == 0 || trimmed[0] == '#':
			// blank or comment: changes nothing
		case isDocumentEnd(line):
			if afterEnd {
				if &out[0] == &data[0] {
					out = bytes.Clone(data)
				}
				out[start] = '#'
			}
			afterEnd = true
		default:
			afterEnd = false
		}
		off = end + 1
	}
	return out
}

// isDocumentEnd reports whether line is a "..." document end marker.
func isDocumentEnd(line []byte) bool {
	return bytes.HasPrefix(line, []byte("...")) && (len(line) == 3 || line[3] == ' ' || line[3] == '\t')
}
