// Command client-go is a user program of the real client-go informer machinery, run as the
// informer project's peer: a SharedInformerFactory's SharedIndexInformer (protobuf on the
// wire by default, the namespace index, N event handlers that each keep their own view of
// key → resourceVersion) against any API server, then a report in the shape of
// `informer flood --json` where the two overlap.
//
//	client-go --server http://127.0.0.1:PORT --resource pods --handlers 4 --until-rv - --json
//
// The server is --server URL alone (no credentials), or a kubeconfig (--kubeconfig PATH,
// else $KUBECONFIG or ~/.kube/config, else in-cluster), whose server --server replaces.
//
// It runs until the first of: --duration SECS; --until-rv RV (the store holds resourceVersion
// RV or later and every handler's view equals the cache; "-" reads RV from the first line of
// standard input, so a driver can start the watch before it knows where its stream ends);
// --until-objects N (the cache holds at least N objects and every handler's view equals the
// cache); SIGINT or SIGTERM; end of standard input with --stop-on-stdin-eof. Then it prints the
// report (text, or one JSON object with --json) on stdout and exits 0; 1 when a stop
// condition was given but the run stopped another way (a deadline or a signal) or a view
// differs from the cache at a condition's stop; 2 for a usage or setup error. On stderr: one
// "synced: N objects at resourceVersion RV after S s" line when the informer has synced, a
// progress line every --interval ("[ T s] objects N  resourceVersion RV (store RV)  ..."), and
// client-go's own log (--v N for more of it).
//
// --peer-protocol replaces the stop conditions and the report with the peer benchmark's
// stdin/stdout protocol (see peer.go).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

const (
	seenMark     = "counted"
	protobufType = "application/vnd.kubernetes.protobuf"
	jsonType     = "application/json"
)

// options are the command-line flags.
type options struct {
	server        string
	kubeconfig    string
	context       string
	resource      string
	namespace     string
	selector      string
	fieldSelector string
	format        string
	watchList     bool
	dynamic       bool
	handlers      int
	duration      float64
	untilRV       string
	untilObjects  int
	stdinEOF      bool
	interval      float64
	json          bool
	dumpKeys      bool
	peerProtocol  bool
	qps           float64
	burst         int
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("client-go", flag.ContinueOnError)
	fs.StringVar(&o.server, "server", "", "API server URL (with a kubeconfig: replaces its server; alone: no credentials, plain http is fine)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)")
	fs.StringVar(&o.context, "context", "", "kubeconfig context (default: the current one)")
	fs.StringVar(&o.resource, "resource", "pods", "resource as kubectl names it: pods, po, configmaps, deployments.apps, deployments.v1.apps, widgets.example.com (built-in kinds through the factory's typed informers, anything else through a dynamic informer, JSON)")
	fs.StringVar(&o.namespace, "namespace", "", "namespace (default: all namespaces)")
	fs.StringVar(&o.namespace, "n", "", "shorthand for --namespace")
	fs.StringVar(&o.selector, "selector", "", "label selector, e.g. app=web,tier!=db")
	fs.StringVar(&o.selector, "l", "", "shorthand for --selector")
	fs.StringVar(&o.fieldSelector, "field-selector", "", "field selector, e.g. spec.nodeName=node-1")
	fs.StringVar(&o.format, "format", "protobuf", "wire format of built-in kinds: protobuf (Accept protobuf, then JSON) or json")
	fs.BoolVar(&o.dynamic, "dynamic", false, "use the dynamic informer (unstructured JSON, the resource found through discovery) even for a built-in kind")
	fs.BoolVar(&o.watchList, "watch-list", true, "client-go's WatchListClient gate (streaming initial list; on by default since client-go 1.35)")
	fs.IntVar(&o.handlers, "handlers", 4, "event handlers, each keeping its own view")
	fs.Float64Var(&o.duration, "duration", 0, "stop after this many seconds (0: no limit)")
	fs.StringVar(&o.untilRV, "until-rv", "", "stop once the store holds this resourceVersion or later and every handler's view equals the cache; - reads it from the first line of stdin")
	fs.IntVar(&o.untilObjects, "until-objects", 0, "stop once the cache holds at least this many objects and every handler's view equals the cache")
	fs.BoolVar(&o.stdinEOF, "stop-on-stdin-eof", false, "also stop when stdin reaches end of file (a driver that dies closes the pipe)")
	fs.Float64Var(&o.interval, "interval", 2, "seconds between progress lines on stderr (0: none)")
	fs.BoolVar(&o.json, "json", false, "print the report as one JSON object")
	fs.BoolVar(&o.dumpKeys, "dump-keys", false, "put every key → resourceVersion of the cache and of each handler in the report (the cache's are there anyway up to 1000 objects)")
	fs.BoolVar(&o.peerProtocol, "peer-protocol", false, "speak the peer benchmark's protocol (benches/peers): \"synced N\" on stdout, one command on stdin (until-rv R E, or report), one JSON line; implies --watch-list=false and --interval 0 unless given")
	fs.Float64Var(&o.qps, "qps", 0, "client-side requests per second (0: client-go's default, 5)")
	fs.IntVar(&o.burst, "burst", 0, "client-side request burst (0: client-go's default, 10)")
	logFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(logFlags)
	fs.Var(logFlags.Lookup("v").Value, "v", "client-go's log verbosity on stderr (klog; 4 shows every watch ending and relist)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.peerProtocol {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		for _, f := range []string{"until-rv", "until-objects", "json", "dump-keys", "stop-on-stdin-eof"} {
			if given[f] {
				return nil, fmt.Errorf("--%s does not go with --peer-protocol", f)
			}
		}
		// The benchmark's consumers list, then watch; the driver holds the watch while it
		// makes its backlog, which a streaming list would wait on.
		if !given["watch-list"] {
			o.watchList = false
		}
		if !given["interval"] {
			o.interval = 0
		}
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.format != "protobuf" && o.format != "json" {
		return nil, fmt.Errorf("--format %q: protobuf or json", o.format)
	}
	if o.handlers < 1 {
		return nil, fmt.Errorf("--handlers %d: at least 1", o.handlers)
	}
	if o.duration < 0 || o.interval < 0 || o.untilObjects < 0 {
		return nil, errors.New("--duration, --interval and --until-objects are not negative")
	}
	if o.untilRV != "" && o.untilRV != "-" {
		if _, err := strconv.ParseUint(o.untilRV, 10, 64); err != nil {
			return nil, fmt.Errorf("--until-rv %q: a resourceVersion (a number) or -", o.untilRV)
		}
	}
	return o, nil
}

// restConfig builds the client configuration: --server alone, or a kubeconfig.
func restConfig(o *options) (*rest.Config, error) {
	var cfg *rest.Config
	if o.server != "" && o.kubeconfig == "" && o.context == "" {
		cfg = &rest.Config{Host: o.server}
	} else {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if o.kubeconfig != "" {
			rules.ExplicitPath = o.kubeconfig
		}
		overrides := &clientcmd.ConfigOverrides{CurrentContext: o.context}
		overrides.ClusterInfo.Server = o.server
		c, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
		if err != nil {
			return nil, err
		}
		cfg = c
	}
	if o.format == "protobuf" {
		cfg.ContentType = protobufType
		cfg.AcceptContentTypes = protobufType + "," + jsonType
	} else {
		cfg.ContentType = jsonType
		cfg.AcceptContentTypes = jsonType
	}
	if o.qps > 0 {
		cfg.QPS = float32(o.qps)
	}
	if o.burst > 0 {
		cfg.Burst = o.burst
	}
	cfg.UserAgent = "informer-interop-client-go"
	return cfg, nil
}

// typed is a built-in resource served by the factory's typed informers.
type typed struct {
	gvr     schema.GroupVersionResource
	aliases []string
	open    func(informers.SharedInformerFactory) cache.SharedIndexInformer
}

var typedResources = []typed{
	{schema.GroupVersionResource{Version: "v1", Resource: "pods"}, []string{"po", "pod"},
		func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Core().V1().Pods().Informer()
		}},
	{schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, []string{"cm", "configmap"},
		func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Core().V1().ConfigMaps().Informer()
		}},
	{schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, []string{"secret"},
		func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Core().V1().Secrets().Informer()
		}},
	{schema.GroupVersionResource{Version: "v1", Resource: "services"}, []string{"svc", "service"},
		func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Core().V1().Services().Informer()
		}},
	{schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, []string{"ns", "namespace"},
		func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Core().V1().Namespaces().Informer()
		}},
	{schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, []string{"no", "node"},
		func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Core().V1().Nodes().Informer()
		}},
	{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, []string{"deploy", "deployment"},
		func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Apps().V1().Deployments().Informer()
		}},
	{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}, []string{"rs", "replicaset"},
		func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Apps().V1().ReplicaSets().Informer()
		}},
	{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}, []string{"sts", "statefulset"},
		func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Apps().V1().StatefulSets().Informer()
		}},
	{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}, []string{"ds", "daemonset"},
		func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Apps().V1().DaemonSets().Informer()
		}},
	{schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, []string{"job"},
		func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Batch().V1().Jobs().Informer()
		}},
}

// findTyped matches a kubectl-style name (resource, alias, resource.group or
// resource.version.group) against the typed resources.
func findTyped(name string) *typed {
	name = strings.ToLower(name)
	for i := range typedResources {
		t := &typedResources[i]
		for _, n := range append([]string{t.gvr.Resource}, t.aliases...) {
			group := t.gvr.Group
			if group == "" {
				group = "core"
			}
			forms := []string{n, n + "." + group, n + "." + t.gvr.Version + "." + group}
			if t.gvr.Group == "" {
				forms = append(forms, n+"."+t.gvr.Version)
			}
			for _, f := range forms {
				if f == name {
					return t
				}
			}
		}
	}
	return nil
}

// peer is the informer under test and what it is watching.
type peer struct {
	informer cache.SharedIndexInformer
	host     string
	gvr      schema.GroupVersionResource
	format   string
	start    func(stop <-chan struct{})
	shutdown func()
}

func newPeer(o *options, cfg *rest.Config) (*peer, error) {
	tweak := func(lo *metav1.ListOptions) {
		lo.LabelSelector = o.selector
		lo.FieldSelector = o.fieldSelector
	}
	if t := findTyped(o.resource); t != nil && !o.dynamic {
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
			informers.WithNamespace(o.namespace), informers.WithTweakListOptions(tweak))
		inf := t.open(factory)
		return &peer{informer: inf, host: cfg.Host, gvr: t.gvr, format: o.format,
			start: factory.Start, shutdown: factory.Shutdown}, nil
	}
	// Anything else (a custom resource): found through discovery, watched as unstructured
	// JSON by the dynamic factory (custom resources have no protobuf form).
	jcfg := rest.CopyConfig(cfg)
	jcfg.ContentType = jsonType
	jcfg.AcceptContentTypes = jsonType
	dc, err := discovery.NewDiscoveryClientForConfig(jcfg)
	if err != nil {
		return nil, err
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	gvr, gr := schema.ParseResourceArg(o.resource)
	var found schema.GroupVersionResource
	if gvr != nil {
		found, err = mapper.ResourceFor(*gvr)
	}
	if gvr == nil || err != nil {
		found, err = mapper.ResourceFor(gr.WithVersion(""))
	}
	if err != nil {
		return nil, fmt.Errorf("resource %q: %w", o.resource, err)
	}
	dyn, err := dynamic.NewForConfig(jcfg)
	if err != nil {
		return nil, err
	}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, o.namespace, tweak)
	inf := factory.ForResource(found).Informer()
	return &peer{informer: inf, host: cfg.Host, gvr: found, format: "json",
		start: factory.Start, shutdown: factory.Shutdown}, nil
}

// counting is what the clients' transports saw: requests, lists, watches, error answers and
// bytes received (client-go's reflector keeps no such metrics of its own any more).
type counting struct {
	requests, lists, watches, httpErrors atomic.Uint64
	bytes                                atomic.Uint64
}

// countingTransport wraps one client's transport, counting into the shared counters.
type countingTransport struct {
	next http.RoundTripper
	c    *counting
}

func (c *counting) reset() {
	for _, n := range []*atomic.Uint64{&c.requests, &c.lists, &c.watches, &c.httpErrors, &c.bytes} {
		n.Store(0)
	}
}

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c := t.c
	c.requests.Add(1)
	if r.Method == http.MethodGet {
		if r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1" {
			c.watches.Add(1)
		} else {
			c.lists.Add(1)
		}
	}
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		c.httpErrors.Add(1)
		return resp, err
	}
	if resp.StatusCode >= 400 {
		c.httpErrors.Add(1)
	}
	resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.bytes}
	return resp, nil
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Uint64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(uint64(n))
	return n, err
}

// errorLog keeps the watch errors client-go reports: a count and the first few.
type errorLog struct {
	mu    sync.Mutex
	count uint64
	first []string
}

func (l *errorLog) add(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.count++
	if len(l.first) < 10 {
		l.first = append(l.first, err.Error())
	}
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	start := newProcessStart()
	o, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "client-go:", err)
		return 2
	}
	if !o.watchList {
		// client-go reads its feature gates from the environment on first use.
		os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	}
	cfg, err := restConfig(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client-go:", err)
		return 2
	}
	counts := &counting{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &countingTransport{next: rt, c: counts} })
	p, err := newPeer(o, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client-go:", err)
		return 2
	}
	// Count only the informer's own requests, not discovery's.
	counts.reset()
	inf := p.informer
	if _, ok := inf.GetIndexer().GetIndexers()[cache.NamespaceIndex]; !ok {
		if err := inf.AddIndexers(cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}); err != nil {
			fmt.Fprintln(os.Stderr, "client-go:", err)
			return 2
		}
	}
	// Objects received from the server (list items and watch events): the transform sees each
	// one as it enters the informer's queue, and the objects of a streaming list a second
	// time when the list is handed over as a whole; the mark (selfLink, which servers no
	// longer set) tells the second time from the first.
	var received atomic.Uint64
	if err := inf.SetTransform(func(obj any) (any, error) {
		if m, err := meta.Accessor(obj); err == nil {
			if m.GetSelfLink() == seenMark {
				return obj, nil
			}
			m.SetSelfLink(seenMark)
		}
		received.Add(1)
		return obj, nil
	}); err != nil {
		fmt.Fprintln(os.Stderr, "client-go:", err)
		return 2
	}
	watchErrors := &errorLog{}
	if err := inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		watchErrors.add(err)
	}); err != nil {
		fmt.Fprintln(os.Stderr, "client-go:", err)
		return 2
	}
	views := make([]*view, o.handlers)
	regs := make([]cache.ResourceEventHandlerRegistration, o.handlers)
	var peerReach *reach
	if o.peerProtocol {
		peerReach = newReach(o.handlers)
	}
	for i := range views {
		views[i] = newView(fmt.Sprintf("handler-%d", i))
		views[i].reach = peerReach
		if regs[i], err = inf.AddEventHandler(views[i]); err != nil {
			fmt.Fprintln(os.Stderr, "client-go:", err)
			return 2
		}
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	stopReason := make(chan string, 4)
	target := newTarget(o.untilRV)
	if o.untilRV == "-" || o.stdinEOF {
		go readStdin(o, target, stopReason)
	}
	started := time.Now()
	stop := make(chan struct{})
	p.start(stop)
	if o.peerProtocol {
		// The report is out: the process ends without tearing the informer down.
		return runPeer(ctx, start, inf, regs, views, peerReach)
	}

	var deadline <-chan time.Time
	if o.duration > 0 {
		deadline = time.After(time.Duration(o.duration * float64(time.Second)))
	}
	var tick <-chan time.Time
	if o.interval > 0 {
		t := time.NewTicker(time.Duration(o.interval * float64(time.Second)))
		defer t.Stop()
		tick = t.C
	}
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	var syncedAt time.Duration
	reason := ""
	for reason == "" {
		select {
		case <-ctx.Done():
			reason = "signal"
		case <-deadline:
			reason = "duration"
		case r := <-stopReason:
			reason = r
		case <-tick:
			fmt.Fprintf(os.Stderr, "[%7.1fs] objects %d  resourceVersion %s (store %s)  events %d  watch errors %d\n",
				time.Since(started).Seconds(), views[0].len(), inf.LastSyncResourceVersion(),
				inf.GetIndexer().LastStoreSyncResourceVersion(), received.Load(), watchErrors.snapshotCount())
		case <-poll.C:
			if syncedAt == 0 && inf.HasSynced() {
				syncedAt = time.Since(started)
				fmt.Fprintf(os.Stderr, "synced: %d objects at resourceVersion %s after %.3f s\n",
					len(inf.GetIndexer().ListKeys()), inf.GetIndexer().LastStoreSyncResourceVersion(), syncedAt.Seconds())
			}
			if syncedAt != 0 && conditionMet(o, target, inf, views) {
				reason = "until"
			}
		}
	}
	elapsed := time.Since(started)
	usage := resourceUsage()
	close(stop)
	p.shutdown()

	r := buildReport(o, p, views, reportInputs{
		elapsed: elapsed, synced: syncedAt, reason: reason, usage: usage,
		received: received.Load(), counts: counts, watchErrors: watchErrors,
	})
	if o.json {
		enc := json.NewEncoder(os.Stdout)
		if err := enc.Encode(r); err != nil {
			fmt.Fprintln(os.Stderr, "client-go:", err)
			return 2
		}
	} else {
		r.printText(os.Stdout)
	}
	conditional := o.untilRV != "" || o.untilObjects > 0
	if conditional && (reason != "until" || !r.ViewsMatchCache) {
		return 1
	}
	return 0
}

// target is the resourceVersion of --until-rv, known at start or read from stdin later.
type target struct {
	mu    sync.Mutex
	want  bool
	known bool
	rv    uint64
}

func newTarget(flag string) *target {
	t := &target{want: flag != ""}
	if flag != "" && flag != "-" {
		t.rv, _ = strconv.ParseUint(flag, 10, 64)
		t.known = true
	}
	return t
}

func (t *target) get() (rv uint64, wanted, known bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rv, t.want, t.known
}

func (t *target) set(rv uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rv, t.known = rv, true
}

// readStdin takes --until-rv's value from the first line of stdin (when it is -), then
// waits for end of file (a stop with --stop-on-stdin-eof).
func readStdin(o *options, t *target, stop chan<- string) {
	in := bufio.NewScanner(os.Stdin)
	if o.untilRV == "-" {
		if !in.Scan() {
			if o.stdinEOF {
				stop <- "stdin-eof"
			}
			return
		}
		line := strings.TrimSpace(in.Text())
		rv, err := strconv.ParseUint(line, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "client-go: stdin: %q is not a resourceVersion\n", line)
			stop <- "bad-stdin"
			return
		}
		t.set(rv)
	}
	for in.Scan() {
	}
	if o.stdinEOF {
		stop <- "stdin-eof"
	}
}

// conditionMet says whether the --until-* condition holds: first the cheap checks (the
// store's resourceVersion, the views' sizes), then the full comparison of every view with the
// cache.
func conditionMet(o *options, t *target, inf cache.SharedIndexInformer, views []*view) bool {
	rv, wanted, known := t.get()
	if !wanted && o.untilObjects == 0 {
		return false
	}
	if wanted {
		if !known {
			return false
		}
		have, err := strconv.ParseUint(inf.GetIndexer().LastStoreSyncResourceVersion(), 10, 64)
		if err != nil || have < rv {
			return false
		}
	}
	for _, v := range views {
		if v.len() < o.untilObjects {
			return false
		}
	}
	cached := cacheVersions(inf.GetIndexer())
	if len(cached) < o.untilObjects {
		return false
	}
	for _, v := range views {
		if !v.equals(cached) {
			return false
		}
	}
	return true
}
