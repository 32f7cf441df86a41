// Command cert-manager runs cert-manager's certificate controllers and its CA injector in one process against the
// local cluster, from the published module github.com/cert-manager/cert-manager (go.mod pins the version).
//
// Why a main of our own: upstream's main packages (cmd/controller, cmd/cainjector) are modules of their own
// (controller-binary, cainjector-binary) that the Go module proxy does not serve, and they configure themselves
// through the module's internal packages, which only code under github.com/cert-manager/cert-manager may import.
// What follows does what their Run functions do with the exported packages: the same controllers
// (controller.Known(), registered by the imports below), the same context factory and the same injector setup
// (cainjector.RegisterAllInjectors), with upstream's defaults. Left out: the ACME, Vault and Venafi issuers and
// the ingress and Gateway shims (nothing here uses them; the cloud SDKs would lengthen the cold build), metrics,
// profiling and leader election (one instance).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	apireg "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"

	// The controllers a Certificate from a selfSigned or ca Issuer (or ClusterIssuer) goes through; each registers
	// itself in controller.Known(). Upstream's DefaultEnabledControllers, less ACME, Vault, Venafi and the shims.
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// Upstream's defaults (internal/apis/config/controller/v1alpha1/defaults.go).
var copiedAnnotationPrefixes = []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"}

const (
	workers                = 5
	minimumBackoff         = time.Hour
	maximumBackoff         = 32 * time.Hour
	kubeAPIQPS     float32 = 20
	kubeAPIBurst           = 50
	// The controller and the CA injector: /healthz answers ok once both have started.
	halves = 2
)

func main() {
	// A flag set of its own: controller-runtime registers --kubeconfig on the default one.
	flags := flag.NewFlagSet("cert-manager", flag.ExitOnError)
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig of the cluster to run against")
	clusterResourceNamespace := flags.String("cluster-resource-namespace", "kube-system",
		"namespace where ClusterIssuers find their Secrets")
	healthz := flags.String("healthz-listen-address", "127.0.0.1:0",
		"host:port of /healthz, which answers ok once every controller has started")
	logf.InitLogs()
	_ = flags.Parse(os.Args[1:])
	defer logf.FlushLogs()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log)
	if err := run(ctx, *kubeconfig, *clusterResourceNamespace, *healthz); err != nil && !errors.Is(err, context.Canceled) {
		logf.Log.Error(err, "cert-manager stopped")
		logf.FlushLogs()
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, clusterResourceNamespace, healthzAddress string) error {
	var started atomic.Int32
	listener, err := (&net.ListenConfig{}).Listen(ctx, "tcp", healthzAddress)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", healthzAddress, err)
	}
	server := &http.Server{ReadHeaderTimeout: 30 * time.Second, Handler: http.HandlerFunc(
		func(w http.ResponseWriter, _ *http.Request) {
			if started.Load() < halves {
				http.Error(w, "starting", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok"))
		})}
	logf.FromContext(ctx).Info("healthz", "address", "http://"+listener.Addr().String()+"/healthz")

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := server.Serve(listener); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		return server.Close()
	})
	g.Go(func() error { return runController(ctx, kubeconfig, clusterResourceNamespace, &started) })
	g.Go(func() error { return runCAInjector(ctx, kubeconfig, &started) })
	return g.Wait()
}

// runController does what cmd/controller/app.Run does for the controllers imported above.
func runController(ctx context.Context, kubeconfig, clusterResourceNamespace string, started *atomic.Int32) error {
	log := logf.FromContext(ctx, "controller")
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   kubeAPIQPS,
		KubernetesAPIBurst: kubeAPIBurst,
		IssuerOptions:      controller.IssuerOptions{ClusterResourceNamespace: clusterResourceNamespace},
		CertificateOptions: controller.CertificateOptions{
			CopiedAnnotationPrefixes:                 copiedAnnotationPrefixes,
			CertificateRequestMinimumBackoffDuration: minimumBackoff,
			CertificateRequestMaximumBackoffDuration: maximumBackoff,
		},
	})
	if err != nil {
		return err
	}
	base, err := factory.Build()
	if err != nil {
		return err
	}
	known := controller.Known()
	names := make([]string, 0, len(known))
	for name := range known {
		names = append(names, name)
	}
	sort.Strings(names)
	log.Info("starting controllers", "version", util.VersionInfo().GitVersion, "controllers", names)
	g, gctx := errgroup.WithContext(ctx)
	for _, name := range names {
		loop, err := known[name](factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		g.Go(func() error { return loop.Run(workers, gctx) })
	}
	base.SharedInformerFactory.Start(gctx.Done())
	base.KubeSharedInformerFactory.Start(gctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(gctx.Done())
	started.Add(1)
	err = g.Wait()
	base.HTTP01ResourceMetadataInformersFactory.Shutdown()
	base.KubeSharedInformerFactory.Shutdown()
	base.SharedInformerFactory.Shutdown()
	return err
}

// runCAInjector does what cmd/cainjector/app.Run does with its defaults: every injectable kind (mutating and
// validating webhook configurations, APIServices, CRDs), Certificates as a data source, Secrets read uncached.
func runCAInjector(ctx context.Context, kubeconfig string, started *atomic.Int32) error {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	config = util.RestConfigWithUserAgent(config, "cainjector")
	scheme := runtime.NewScheme()
	utilruntime.Must(kscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	utilruntime.Must(apiext.AddToScheme(scheme))
	utilruntime.Must(apireg.AddToScheme(scheme))
	ctrl.SetLogger(logf.FromContext(ctx, "cainjector"))
	mgr, err := ctrl.NewManager(config, ctrl.Options{
		Scheme:  scheme,
		Cache:   cache.Options{ReaderFailOnMissingInformer: true},
		Client:  client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		return fmt.Errorf("cainjector manager: %w", err)
	}
	err = cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
			cainjector.APIServiceName:                     true,
			cainjector.CustomResourceDefinitionName:       true,
		},
	})
	if err != nil {
		return fmt.Errorf("cainjector: %w", err)
	}
	started.Add(1)
	return mgr.Start(ctx)
}
