// Package archtest keeps keyhole's imports pointing down. Its test ranks
// every package of the module in a layer (docs/architecture.md, "Layers")
// and fails on an import of a higher layer, naming the arrow; the proxy's
// tree is checked apart, so keyhole-proxy stays free of the compiler's
// dependencies. The package holds no code of its own.
package archtest
