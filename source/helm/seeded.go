package helm

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"text/template"
	"time"

	chart "helm.sh/helm/v4/pkg/chart/v2"

	"keyhole.dev/keyhole/source"
)

// A chart's templates may call Sprig's functions whose result changes on
// every render: random strings, numbers and bytes, a UUID, a shuffle, the
// time (a test pod named release-name-web-test-x7u6m, a rollout
// annotation stamped with now). helm and Argo CD draw new ones each time;
// keyhole draws them from a generator seeded by the chart and the
// release, so that the same inputs give the same bytes on every run and
// on every machine: what check names, render writes and diff compares of
// a chart changes only where its inputs do. See docs/inputs.md, "Helm
// charts".

// seedTime is what now gives a chart's templates: a fixed instant, not
// the render's.
var seedTime = time.Unix(0, 0).UTC()

// Sprig's alphabets for its random strings.
const (
	alphaNum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	alpha    = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	numeric  = "0123456789"
)

// seededFuncs are the functions that replace Sprig's changing ones for
// one render of ch for the release o: each draws, in the order Helm runs
// the templates (sorted, one at a time), from a generator whose seed is
// the chart's name and version and the release's name and namespace.
func seededFuncs(ch *chart.Chart, o *source.HelmOverlay) template.FuncMap {
	var version string
	if ch.Metadata != nil {
		version = ch.Metadata.Version
	}
	seed := sha256.Sum256([]byte(ch.Name() + "\x00" + version + "\x00" + o.ReleaseName + "\x00" + o.Namespace))
	r := rand.New(rand.NewChaCha8(seed))
	pick := func(n int, from string) string {
		if n <= 0 {
			return ""
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = from[r.IntN(len(from))]
		}
		return string(b)
	}
	draw := func(n int) []byte {
		b := make([]byte, max(n, 0))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	return template.FuncMap{
		"randAlphaNum": func(n int) string { return pick(n, alphaNum) },
		"randAlpha":    func(n int) string { return pick(n, alpha) },
		"randNumeric":  func(n int) string { return pick(n, numeric) },
		"randAscii": func(n int) string {
			if n <= 0 {
				return ""
			}
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(' ' + r.IntN('~'-' '+1)) // printable ASCII, as Sprig's
			}
			return string(b)
		},
		"randBytes": func(n int) (string, error) { return base64.StdEncoding.EncodeToString(draw(n)), nil },
		"randInt": func(lo, hi int) (int, error) {
			if hi <= lo {
				return 0, fmt.Errorf("randInt: max %d is not above min %d", hi, lo)
			}
			return lo + r.IntN(hi-lo), nil
		},
		"uuidv4": func() string {
			b := draw(16)
			b[6] = b[6]&0x0f | 0x40 // version 4
			b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
			return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
		},
		"shuffle": func(s string) string {
			rs := []rune(s)
			r.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
			return string(rs)
		},
		"now": func() time.Time { return seedTime },
	}
}
