package render

import (
	"os"
	"regexp"
	"testing"
)

// TestDefaultProxyImageIsBuilt: the default proxy image is the one `make
// images` tags, so a render with no --proxy-image names an image this
// repository builds (scripts/images.sh).
func TestDefaultProxyImageIsBuilt(t *testing.T) {
	sources := map[string]struct {
		file             string
		registry, tagRef *regexp.Regexp
	}{
		"Makefile": {
			file:     "../Makefile",
			registry: regexp.MustCompile(`(?m)^IMAGE_REGISTRY \?= (\S+)$`),
			tagRef:   regexp.MustCompile(`(?m)^IMAGE_TAG \?= (\S+)$`),
		},
		"scripts/images.sh": {
			file:     "../scripts/images.sh",
			registry: regexp.MustCompile(`(?m)^registry=\$\{IMAGE_REGISTRY:-(\S+)\}$`),
			tagRef:   regexp.MustCompile(`(?m)^tag=\$\{IMAGE_TAG:-(\S+)\}$`),
		},
	}
	for name, src := range sources {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(src.file)
			if err != nil {
				t.Fatal(err)
			}
			reg, tag := src.registry.FindSubmatch(b), src.tagRef.FindSubmatch(b)
			if reg == nil || tag == nil {
				t.Fatalf("%s sets no default registry or tag", src.file)
			}
			if got := string(reg[1]) + "/keyhole-proxy:" + string(tag[1]); got != DefaultProxyImage {
				t.Errorf("%s builds %s; DefaultProxyImage is %s", src.file, got, DefaultProxyImage)
			}
		})
	}
}
