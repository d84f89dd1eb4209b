// Command cert-manager-controller runs the part of cert-manager's
// controller that issues and renews what keyhole renders: a self-signed
// Issuer and a CA Certificate. It is built only for keyhole's real-cluster
// end-to-end test (scripts/cert-manager.sh), from the published module
// github.com/cert-manager/cert-manager, whose own main
// (github.com/cert-manager/cert-manager/controller-binary, cmd/controller)
// the Go module proxy does not serve.
//
// It follows upstream's cmd/controller/app/controller.go (Run and
// buildControllerContextFactory, release-1.21): the same ContextFactory,
// the same registered constructors from controller.Known(), each run with
// its workers, and the same shared informer factories started after them.
// What it leaves out: leader election (one replica, as with
// --leader-elect=false), the metrics and profiling servers, the
// configuration file (upstream's defaults are written here), and every
// controller but those enabled names. The healthz server is
// upstream's, on --healthz-addr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/healthz"
	logf "github.com/cert-manager/cert-manager/pkg/logs"

	// Each import registers its controller with controller.Register, as
	// upstream's cmd/controller/app/start.go and its defaults do.
	"github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"

	// The Issuer types the issuers controller can set up: self-signed and
	// CA only.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// enabled names the controllers a self-signed Issuer and a CA Certificate
// need: the Issuer's readiness, the Certificate's lifecycle (trigger,
// key-manager, request-manager, issuing, readiness, revision-manager),
// and the CertificateRequest's approval and signing.
func enabled() []string {
	return []string{
		issuers.ControllerName,
		trigger.ControllerName,
		keymanager.ControllerName,
		requestmanager.ControllerName,
		issuing.ControllerName,
		readiness.ControllerName,
		revisionmanager.ControllerName,
		approver.ControllerName,
		crselfsigned.CRControllerName,
		crca.CRControllerName,
	}
}

// Upstream's defaults (internal/apis/config/controller/v1alpha1/defaults.go).
const (
	defaultKubernetesAPIQPS   = 20
	defaultKubernetesAPIBurst = 50
	defaultWorkers            = 5
	defaultMinBackoff         = time.Hour
	defaultMaxBackoff         = 32 * time.Hour
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logf.InitLogs()
	defer logf.FlushLogs()
	ctx = logf.NewContext(ctx, logf.Log, "controller")
	if err := run(ctx, os.Args[1:]); err != nil {
		logf.Log.Error(err, "error executing command")
		logf.FlushLogs()
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("cert-manager-controller", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "path to a kubeconfig")
	namespace := fs.String("namespace", "", "the one namespace to watch (all when empty)")
	healthzAddr := fs.String("healthz-addr", "127.0.0.1:9403", "where /livez is served")
	klog.InitFlags(fs) // -v, as upstream's logging flags
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	log := logf.FromContext(ctx)
	g, ctx := errgroup.WithContext(ctx)

	ctxFactory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         *kubeconfig,
		KubernetesAPIQPS:   defaultKubernetesAPIQPS,
		KubernetesAPIBurst: defaultKubernetesAPIBurst,
		Namespace:          *namespace,
		CertificateOptions: controller.CertificateOptions{
			CertificateRequestMinimumBackoffDuration: defaultMinBackoff,
			CertificateRequestMaximumBackoffDuration: defaultMaxBackoff,
		},
	})
	if err != nil {
		return err
	}
	cctx, err := ctxFactory.Build()
	if err != nil {
		return err
	}

	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", *healthzAddr)
	if err != nil {
		return fmt.Errorf("failed to listen on healthz address %s: %v", *healthzAddr, err)
	}
	healthzServer := healthz.NewServer(20 * time.Second)
	g.Go(func() error { return healthzServer.Start(ctx, ln) })

	known := controller.Known()
	names := enabled()
	log.Info(fmt.Sprintf("enabled controllers: %v", names))
	for _, n := range names {
		fn, ok := known[n]
		if !ok {
			cancel()
			return errors.Join(fmt.Errorf("controller %s is not registered", n), g.Wait())
		}
		iface, err := fn(ctxFactory)
		if err != nil {
			cancel()
			return errors.Join(fmt.Errorf("error starting controller: %v", err), g.Wait())
		}
		g.Go(func() error {
			log.WithValues("controller", n).Info("starting controller")
			return iface.Run(defaultWorkers, ctx)
		})
	}
	for n := range known {
		if !slices.Contains(names, n) {
			log.WithValues("controller", n).Info("skipping disabled controller")
		}
	}

	cctx.SharedInformerFactory.Start(ctx.Done())
	cctx.KubeSharedInformerFactory.Start(ctx.Done())
	cctx.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())

	if err := g.Wait(); err != nil {
		return fmt.Errorf("error starting controller: %v", err)
	}
	log.Info("control loops exited")
	cctx.HTTP01ResourceMetadataInformersFactory.Shutdown()
	cctx.KubeSharedInformerFactory.Shutdown()
	cctx.SharedInformerFactory.Shutdown()
	return nil
}
