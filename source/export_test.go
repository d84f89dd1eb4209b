package source

import "keyhole.dev/keyhole/diag"

// testEngines are the engines' packages the tests of package source load
// with (TestMain, in engines_test.go).
var testEngines Engines

// SetTestEngines sets the engines the tests of package source load with.
func SetTestEngines(e Engines) { testEngines = e }

// testLoad is Load with the engines' packages, unless opts names its own.
func testLoad(paths []string, opts Options) ([]*Document, diag.List, error) {
	if opts.Engines.Helm == nil {
		opts.Engines = testEngines
	}
	return Load(paths, opts)
}
