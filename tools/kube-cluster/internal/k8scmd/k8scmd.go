// Package k8scmd runs an upstream Kubernetes command as the main packages
// of k8s.io/kubernetes/cmd/* do: the JSON log format and the client-go and
// version metrics registered (the blank imports each of those mains
// has), then component-base's cli.Run, its result the exit code.
package k8scmd

import (
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // for JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // for client metric registration
	_ "k8s.io/component-base/metrics/prometheus/version"  // for version metric registration
)

// Run runs command and exits with its code.
func Run(command *cobra.Command) {
	os.Exit(cli.Run(command))
}
