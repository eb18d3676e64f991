// Command apiserver runs a real etcd (embedded) and a real kube-apiserver (built from the
// k8s.io/kubernetes module) on loopback ports, for the informer's tests and benchmarks.
//
// It generates a CA, a serving certificate for 127.0.0.1, a client certificate in the
// system:masters group (real x509 authentication; authorization is AlwaysAllow) and a
// service-account signing key, writes a kubeconfig, and prints one JSON line on stdout once
// /readyz answers 200:
//
//	{"url":"https://127.0.0.1:PORT","kubeconfig":"DIR/kubeconfig","etcd":"http://127.0.0.1:PORT","dir":"DIR","pid":N}
//
// SIGTERM or SIGINT stops the apiserver, then etcd, and exits 0. The apiserver's own log goes
// to stderr.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	"k8s.io/kubernetes/cmd/kube-apiserver/app/options"
)

// reserved are the kube-apiserver flags this program sets itself: --apiserver-arg may not
// override them (the readiness probe, the kubeconfig and etcd depend on them).
var reserved = []string{
	"bind-address", "advertise-address", "secure-port", "cert-dir", "tls-cert-file",
	"tls-private-key-file", "client-ca-file", "etcd-servers", "service-account-key-file",
	"service-account-signing-key-file", "service-account-issuer", "authorization-mode",
	"etcd-compaction-interval", "watch-cache", "feature-gates",
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	dir := flag.String("dir", "", "state directory (certificates, kubeconfig, etcd data); a new temporary directory when empty, removed at exit")
	compaction := flag.Duration("etcd-compaction-interval", 5*time.Minute, "how often the apiserver compacts etcd (kube-apiserver --etcd-compaction-interval); short values make 410 Gone happen for real; 0 disables")
	watchCache := flag.Bool("watch-cache", true, "serve lists and watches from the apiserver's watch cache (kube-apiserver --watch-cache)")
	featureGates := flag.String("feature-gates", "", "kube-apiserver --feature-gates, e.g. WatchList=false")
	var extra stringList
	flag.Var(&extra, "apiserver-arg", "an extra kube-apiserver flag, e.g. --apiserver-arg=--max-requests-inflight=800 (repeatable)")
	stdinEOF := flag.Bool("stop-on-stdin-eof", false, "also stop when stdin reaches end of file (a test harness keeps the pipe open; when its process dies, the pipe closes and this server stops too)")
	timeout := flag.Duration("ready-timeout", 3*time.Minute, "give up when the apiserver is not ready within this time")
	flag.Parse()

	if *stdinEOF {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
		}()
	}
	if err := run(*dir, *compaction, *watchCache, *featureGates, extra, *timeout); err != nil {
		fmt.Fprintf(os.Stderr, "apiserver: %v\n", err)
		os.Exit(1)
	}
}

func run(dir string, compaction time.Duration, watchCache bool, featureGates string, extra []string, readyTimeout time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	if dir == "" {
		tmp, err := os.MkdirTemp("", "informer-apiserver-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for _, a := range extra {
		name := strings.SplitN(strings.TrimLeft(a, "-"), "=", 2)[0]
		for _, r := range reserved {
			if name == r {
				return fmt.Errorf("--apiserver-arg=%s: --%s is set by this program (see -h for its own flags)", a, r)
			}
		}
	}
	// One server per directory: a second one would overwrite the first one's certificates.
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("%s is in use by another apiserver (%v)", dir, err)
	}

	creds, err := writeCredentials(dir)
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}

	// All three at once: a port picked after another was released can be that same port
	// (etcd then took the API server's port and the API server failed to bind it).
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	port, etcdClient, etcdPeer := ports[0], ports[1], ports[2]
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	args := []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + filepath.Join(dir, "apiserver-certs"),
		"--tls-cert-file=" + creds.serverCert,
		"--tls-private-key-file=" + creds.serverKey,
		"--client-ca-file=" + creds.caCert,
		"--etcd-servers=" + etcdURL,
		fmt.Sprintf("--etcd-compaction-interval=%s", compaction),
		fmt.Sprintf("--watch-cache=%t", watchCache),
		"--service-account-key-file=" + creds.saKey,
		"--service-account-signing-key-file=" + creds.saKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--api-audiences=https://kubernetes.default.svc.cluster.local",
		"--authorization-mode=AlwaysAllow",
		"--service-cluster-ip-range=10.0.0.0/24",
		// No controller-manager runs, so no token controller creates the default
		// ServiceAccount that this admission plugin would require of every Pod.
		"--disable-admission-plugins=ServiceAccount",
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	}
	if featureGates != "" {
		args = append(args, "--feature-gates="+featureGates)
	}
	args = append(args, extra...)

	s := options.NewServerRunOptions()
	all := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, f := range s.Flags().FlagSets {
		all.AddFlagSet(f)
	}
	if err := all.Parse(args); err != nil {
		return fmt.Errorf("kube-apiserver flags: %w", err)
	}
	if err := s.GenericServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
		return fmt.Errorf("feature gates: %w", err)
	}
	completed, err := s.Complete(ctx)
	if err != nil {
		return fmt.Errorf("kube-apiserver options: %w", err)
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return fmt.Errorf("kube-apiserver options: %v", errors.Join(errs...))
	}

	// etcd starts once the apiserver's flags are known to be good.
	etcd, err := startEtcd(ctx, filepath.Join(dir, "etcd"), etcdClient, etcdPeer)
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	defer etcd.Close()

	serverURL := fmt.Sprintf("https://127.0.0.1:%d", port)
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, completed) }()

	if err := waitReady(ctx, serverURL, creds, readyTimeout, done); err != nil {
		// Let the apiserver stop before its directory goes.
		stop()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, serverURL, creds); err != nil {
		return err
	}
	line, _ := json.Marshal(map[string]any{
		"url":        serverURL,
		"kubeconfig": kubeconfig,
		"etcd":       etcdURL,
		"dir":        dir,
		"pid":        os.Getpid(),
	})
	fmt.Println(string(line))

	select {
	case err := <-done:
		if ctx.Err() == nil {
			return fmt.Errorf("kube-apiserver stopped: %v", err)
		}
	case <-ctx.Done():
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			return errors.New("kube-apiserver did not stop within 30 s of the signal")
		}
	}
	return nil
}

// startEtcd starts an embedded etcd on 127.0.0.1:clientPort (peers on peerPort) with its data
// in dir, and waits until it serves (at most 60 s, or until ctx is done).
func startEtcd(ctx context.Context, dir string, clientPort, peerPort int) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.Name = "informer-test"
	clientURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", clientPort)}
	peerURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", peerPort)}
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	// A test server: losing the last writes on a machine crash does not matter, and fsync per
	// write would make the 10 000-object tests disk-bound.
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case <-ctx.Done():
		e.Close()
		return nil, errors.New("signalled while etcd was starting")
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, errors.New("not ready within 60 s")
	}
}

// freePorts returns n distinct free ports on 127.0.0.1: all n are held open until every one
// is picked, so none can be handed out twice. (Another process may still take one before its
// user binds it.)
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func waitReady(ctx context.Context, serverURL string, creds credentials, timeout time.Duration, done <-chan error) error {
	cert, err := tls.LoadX509KeyPair(creds.clientCert, creds.clientKey)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(creds.caPEM)
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}},
	}
	deadline := time.Now().Add(timeout)
	last := "no answer yet"
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			return fmt.Errorf("kube-apiserver stopped before it was ready: %v", err)
		case <-ctx.Done():
			return errors.New("signalled before the apiserver was ready")
		case <-time.After(200 * time.Millisecond):
		}
		resp, err := client.Get(serverURL + "/readyz")
		if err != nil {
			last = err.Error()
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
		last = resp.Status
	}
	return fmt.Errorf("kube-apiserver not ready within %s (last: %s)", timeout, last)
}

type credentials struct {
	caCert, serverCert, serverKey, clientCert, clientKey, saKey string
	caPEM, clientCertPEM, clientKeyPEM                          []byte
}

// writeCredentials makes a CA valid for a year, a serving certificate for 127.0.0.1 and
// localhost, a client certificate for user "informer-admin" in group "system:masters", and an
// RSA service-account key, as PEM files in dir.
func writeCredentials(dir string) (credentials, error) {
	var c credentials
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return c, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "informer-test-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return c, err
	}
	caParsed, _ := x509.ParseCertificate(caDER)
	c.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	c.caCert = filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(c.caCert, c.caPEM, 0o600); err != nil {
		return c, err
	}

	issue := func(serial int64, tmpl *x509.Certificate, name string) (string, string, []byte, []byte, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return "", "", nil, nil, err
		}
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore = now.Add(-time.Hour)
		tmpl.NotAfter = now.Add(365 * 24 * time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caParsed, &key.PublicKey, caKey)
		if err != nil {
			return "", "", nil, nil, err
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return "", "", nil, nil, err
		}
		certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
		certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
		if err := os.WriteFile(certPath, certPEM, 0o600); err != nil {
			return "", "", nil, nil, err
		}
		if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
			return "", "", nil, nil, err
		}
		return certPath, keyPath, certPEM, keyPEM, nil
	}
	c.serverCert, c.serverKey, _, _, err = issue(2, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, "server")
	if err != nil {
		return c, err
	}
	c.clientCert, c.clientKey, c.clientCertPEM, c.clientKeyPEM, err = issue(3, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "informer-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, "client")
	if err != nil {
		return c, err
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return c, err
	}
	c.saKey = filepath.Join(dir, "sa.key")
	saPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)})
	if err := os.WriteFile(c.saKey, saPEM, 0o600); err != nil {
		return c, err
	}
	return c, nil
}

func writeKubeconfig(path, serverURL string, c credentials) error {
	b64 := base64.StdEncoding.EncodeToString
	text := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: informer-test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: informer-admin
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: informer-test
  context:
    cluster: informer-test
    user: informer-admin
    namespace: default
current-context: informer-test
`, serverURL, b64(c.caPEM), b64(c.clientCertPEM), b64(c.clientKeyPEM))
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
