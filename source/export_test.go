package source

import "keyhole.dev/keyhole/diag"

// testLoad is Load as the tests of package source call it.
func testLoad(paths []string, opts Options) ([]*Document, diag.List, error) {
	return Load(paths, opts)
}
