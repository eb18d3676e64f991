package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"k8s.io/client-go/tools/cache"
)

// keysInline is the cache size up to which the report lists every key without --dump-keys.
const keysInline = 1000

// usage is this process's CPU time and peak resident set, from getrusage(RUSAGE_SELF).
type usage struct {
	user, system float64
	maxRSS       uint64
}

func resourceUsage() usage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return usage{}
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	// Linux reports ru_maxrss in kilobytes.
	return usage{user: tv(ru.Utime), system: tv(ru.Stime), maxRSS: uint64(ru.Maxrss) * 1024}
}

// digestReport is a key → resourceVersion map as the report gives it.
type digestReport struct {
	Objects int               `json:"objects"`
	SHA256  string            `json:"sha256"`
	Keys    map[string]string `json:"keys,omitempty"`
}

// handlerReport is one handler's counts and view.
type handlerReport struct {
	Name          string `json:"name"`
	Notifications uint64 `json:"notifications"`
	Adds          uint64 `json:"adds"`
	InitialAdds   uint64 `json:"initial_adds"`
	Updates       uint64 `json:"updates"`
	Deletes       uint64 `json:"deletes"`
	Tombstones    uint64 `json:"tombstones"`
	Unreadable    uint64 `json:"unreadable"`
	digestReport
	MatchesCache bool `json:"matches_cache"`
}

// report is what the program prints at the end; field names follow `informer flood --json`
// where the two measure the same thing.
type report struct {
	Client               string          `json:"client"`
	Server               string          `json:"server"`
	Resource             string          `json:"resource"`
	GroupVersion         string          `json:"group_version"`
	Namespace            string          `json:"namespace"`
	Format               string          `json:"format"`
	WatchList            bool            `json:"watch_list"`
	StoppedBy            string          `json:"stopped_by"`
	Synced               bool            `json:"synced"`
	Seconds              float64         `json:"seconds"`
	SyncSeconds          *float64        `json:"sync_seconds"`
	Events               uint64          `json:"events"`
	EventsPerSecond      float64         `json:"events_per_second"`
	Notifications        uint64          `json:"notifications"`
	CPUSeconds           float64         `json:"cpu_seconds"`
	CPUUserSeconds       float64         `json:"cpu_user_seconds"`
	CPUSystemSeconds     float64         `json:"cpu_system_seconds"`
	PeakRSSBytes         uint64          `json:"peak_rss_bytes"`
	HeapInuseBytes       uint64          `json:"heap_inuse_bytes"`
	Objects              int             `json:"objects"`
	Namespaces           int             `json:"namespaces"`
	IndexConsistent      bool            `json:"index_consistent"`
	ResourceVersion      string          `json:"resource_version"`
	StoreResourceVersion string          `json:"store_resource_version"`
	Requests             uint64          `json:"requests"`
	Lists                uint64          `json:"lists"`
	Watches              uint64          `json:"watches"`
	HTTPErrors           uint64          `json:"http_errors"`
	BytesReceived        uint64          `json:"bytes_received"`
	WatchErrors          uint64          `json:"watch_errors"`
	WatchErrorSamples    []string        `json:"watch_error_samples"`
	Handlers             int             `json:"handlers"`
	PerHandler           []handlerReport `json:"per_handler"`
	ViewsMatchCache      bool            `json:"views_match_cache"`
	Cache                digestReport    `json:"cache"`
}

type reportInputs struct {
	elapsed, synced time.Duration
	reason          string
	usage           usage
	received        uint64
	counts          *counting
	watchErrors     *errorLog
}

func (l *errorLog) snapshotCount() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count
}

func clientGoVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "k8s.io/client-go" {
				return "client-go " + d.Version
			}
		}
	}
	return "client-go"
}

func buildReport(o *options, p *peer, views []*view, in reportInputs) *report {
	idx := p.informer.GetIndexer()
	cached := cacheVersions(idx)
	secs := in.elapsed.Seconds()
	r := &report{
		Client:               clientGoVersion(),
		Server:               p.host,
		Resource:             p.gvr.Resource,
		GroupVersion:         p.gvr.GroupVersion().String(),
		Namespace:            o.namespace,
		Format:               p.format,
		WatchList:            o.watchList,
		StoppedBy:            in.reason,
		Synced:               p.informer.HasSynced(),
		Seconds:              secs,
		Events:               in.received,
		CPUUserSeconds:       in.usage.user,
		CPUSystemSeconds:     in.usage.system,
		CPUSeconds:           in.usage.user + in.usage.system,
		PeakRSSBytes:         in.usage.maxRSS,
		Objects:              len(cached),
		ResourceVersion:      p.informer.LastSyncResourceVersion(),
		StoreResourceVersion: idx.LastStoreSyncResourceVersion(),
		Requests:             in.counts.requests.Load(),
		Lists:                in.counts.lists.Load(),
		Watches:              in.counts.watches.Load(),
		HTTPErrors:           in.counts.httpErrors.Load(),
		BytesReceived:        in.counts.bytes.Load(),
		Handlers:             len(views),
		ViewsMatchCache:      true,
	}
	if secs > 0 {
		r.EventsPerSecond = float64(in.received) / secs
	}
	if in.synced > 0 {
		s := in.synced.Seconds()
		r.SyncSeconds = &s
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.HeapInuseBytes = ms.HeapInuse

	// The namespace index: every namespace's objects, counted through the index, add up to
	// the cache.
	inIndex := 0
	values := idx.ListIndexFuncValues(cache.NamespaceIndex)
	for _, ns := range values {
		keys, err := idx.IndexKeys(cache.NamespaceIndex, ns)
		if err == nil {
			inIndex += len(keys)
		}
	}
	r.Namespaces = len(values)
	r.IndexConsistent = inIndex == len(cached)

	in.watchErrors.mu.Lock()
	r.WatchErrors = in.watchErrors.count
	r.WatchErrorSamples = append([]string{}, in.watchErrors.first...)
	in.watchErrors.mu.Unlock()

	r.Cache = digestReport{Objects: len(cached), SHA256: digest(cached)}
	if o.dumpKeys || len(cached) <= keysInline {
		r.Cache.Keys = cached
	}
	for _, v := range views {
		got := v.copyVersions()
		h := handlerReport{
			Name:          v.name,
			Notifications: v.notifications(),
			Adds:          v.adds.Load(),
			InitialAdds:   v.initial.Load(),
			Updates:       v.updates.Load(),
			Deletes:       v.deletes.Load(),
			Tombstones:    v.tombstones.Load(),
			Unreadable:    v.unknown.Load(),
			digestReport:  digestReport{Objects: len(got), SHA256: digest(got)},
		}
		h.MatchesCache = h.SHA256 == r.Cache.SHA256
		if o.dumpKeys {
			h.Keys = got
		}
		r.ViewsMatchCache = r.ViewsMatchCache && h.MatchesCache
		r.Notifications += h.Notifications
		r.PerHandler = append(r.PerHandler, h)
	}
	return r
}

func (r *report) printText(w io.Writer) {
	fmt.Fprintf(w, "%s: %s %s after %.1f s (stopped by %s)\n", r.Client, r.GroupVersion, r.Resource, r.Seconds, r.StoppedBy)
	sync := "not synced"
	if r.SyncSeconds != nil {
		sync = fmt.Sprintf("synced in %.2f s", *r.SyncSeconds)
	}
	fmt.Fprintf(w, "  format:            %s (watch-list %v), %s\n", r.Format, r.WatchList, sync)
	fmt.Fprintf(w, "  resourceVersion:   %s (store %s)\n", r.ResourceVersion, r.StoreResourceVersion)
	fmt.Fprintf(w, "  objects:           %d in %d namespaces (index consistent: %v)\n", r.Objects, r.Namespaces, r.IndexConsistent)
	fmt.Fprintf(w, "  events:            %d (%.0f/s), %d notifications to %d handlers\n", r.Events, r.EventsPerSecond, r.Notifications, r.Handlers)
	fmt.Fprintf(w, "  cpu:               %.2f s (user %.2f, system %.2f)\n", r.CPUSeconds, r.CPUUserSeconds, r.CPUSystemSeconds)
	fmt.Fprintf(w, "  peak RSS:          %.1f MB (heap in use %.1f MB)\n", float64(r.PeakRSSBytes)/1e6, float64(r.HeapInuseBytes)/1e6)
	fmt.Fprintf(w, "  requests:          %d (%d lists, %d watches, %d errors), %.1f MB received\n", r.Requests, r.Lists, r.Watches, r.HTTPErrors, float64(r.BytesReceived)/1e6)
	fmt.Fprintf(w, "  watch errors:      %d\n", r.WatchErrors)
	for _, e := range r.WatchErrorSamples {
		fmt.Fprintf(w, "    %s\n", e)
	}
	fmt.Fprintf(w, "  cache digest:      %s\n", r.Cache.SHA256)
	for _, h := range r.PerHandler {
		fmt.Fprintf(w, "  %-18s %d notifications (%d adds, %d updates, %d deletes, %d tombstones), %d objects, matches cache: %v\n",
			h.Name+":", h.Notifications, h.Adds, h.Updates, h.Deletes, h.Tombstones, h.Objects, h.MatchesCache)
	}
}
