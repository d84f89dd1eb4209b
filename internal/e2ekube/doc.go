// Package e2ekube holds what the end-to-end tests that run a real
// kube-apiserver share (e2e/apiserver, e2e/cluster): the servers they
// start and wait for, the service account key and tokens they make, the
// kubeconfig and the kubectl they run. It builds only with the e2e build
// tag, as those tests do.
package e2ekube
