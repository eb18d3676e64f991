package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/cache"
)

// The peer protocol of the informer project's peer benchmark (benches/peers), spoken with
// --peer-protocol instead of the stop conditions and the report above:
//
//  1. list and watch; once the informer and every handler have synced, print
//     "synced <objects>" on stdout;
//  2. read one command line from stdin: "until-rv <R> <E>" (wait until every handler has
//     seen resourceVersion R or later; E, the events the driver made, is not needed here) or
//     "report";
//  3. print one JSON line (peerReport) and exit 0.

// peerReport is the benchmark's report: the same fields as the Rust consumers print.
type peerReport struct {
	Objects         int     `json:"objects"`
	SyncSeconds     float64 `json:"sync_seconds"`
	SyncCPUSeconds  float64 `json:"sync_cpu_seconds"`
	RSSStartBytes   uint64  `json:"rss_start_bytes"`
	RSSBytes        uint64  `json:"rss_bytes"`
	PeakRSSBytes    uint64  `json:"peak_rss_bytes"`
	Events          uint64  `json:"events"`
	WatchSeconds    float64 `json:"watch_seconds"`
	WatchCPUSeconds float64 `json:"watch_cpu_seconds"`
}

// processStart is taken before the first request (and the RSS then with it).
type processStart struct {
	at       time.Time
	cpu      float64
	rssBytes uint64
}

func newProcessStart() processStart {
	u := resourceUsage()
	return processStart{at: time.Now(), cpu: u.user + u.system, rssBytes: statusBytes("VmRSS:")}
}

// statusBytes reads a "kB" field of /proc/self/status, in bytes (0 when unreadable).
func statusBytes(field string) uint64 {
	text, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(text), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}

func cpuNow() float64 {
	u := resourceUsage()
	return u.user + u.system
}

// reach tells when every handler has seen a target resourceVersion: each handler records the
// newest version it handled; the one that brings the last handler to the target closes done.
type reach struct {
	target    atomic.Uint64
	remaining atomic.Int64
	done      chan struct{}
}

func newReach(handlers int) *reach {
	r := &reach{done: make(chan struct{})}
	r.target.Store(^uint64(0))
	r.remaining.Store(int64(handlers))
	return r
}

// check counts v once, when its newest version is at or past the target.
func (r *reach) check(v *view) {
	if v.maxRV.Load() >= r.target.Load() && v.reached.CompareAndSwap(false, true) {
		if r.remaining.Add(-1) == 0 {
			close(r.done)
		}
	}
}

// runPeer speaks the peer protocol on stdin/stdout; returns the exit code.
func runPeer(ctx context.Context, start processStart, inf cache.SharedIndexInformer,
	regs []cache.ResourceEventHandlerRegistration, views []*view, r *reach) int {
	poll := time.NewTicker(time.Millisecond)
	synced := func() bool {
		if !inf.HasSynced() {
			return false
		}
		for _, reg := range regs {
			if !reg.HasSynced() {
				return false
			}
		}
		return true
	}
	for !synced() {
		select {
		case <-ctx.Done():
			return 1
		case <-poll.C:
		}
	}
	poll.Stop()
	rep := peerReport{
		Objects:        len(inf.GetIndexer().ListKeys()),
		SyncSeconds:    time.Since(start.at).Seconds(),
		SyncCPUSeconds: cpuNow() - start.cpu,
		RSSStartBytes:  start.rssBytes,
	}
	fmt.Printf("synced %d\n", rep.Objects)
	before := views[0].notifications()

	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(os.Stderr, "client-go: no command on stdin:", err)
		return 2
	}
	words := strings.Fields(line)
	switch {
	case len(words) == 1 && words[0] == "report":
	case len(words) == 3 && words[0] == "until-rv":
		target, err := strconv.ParseUint(words[1], 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "client-go: until-rv %q: not a resourceVersion\n", words[1])
			return 2
		}
		t1, c1 := time.Now(), cpuNow()
		r.target.Store(target)
		// Handlers already past the target before it was set.
		for _, v := range views {
			r.check(v)
		}
		select {
		case <-r.done:
		case <-ctx.Done():
			return 1
		}
		rep.WatchSeconds = time.Since(t1).Seconds()
		rep.WatchCPUSeconds = cpuNow() - c1
		rep.Events = views[0].notifications() - before
	default:
		fmt.Fprintf(os.Stderr, "client-go: unknown command %q (until-rv R E, or report)\n", strings.TrimSpace(line))
		return 2
	}
	rep.Objects = len(inf.GetIndexer().ListKeys())
	rep.RSSBytes = statusBytes("VmRSS:")
	rep.PeakRSSBytes = statusBytes("VmHWM:")
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		fmt.Fprintln(os.Stderr, "client-go:", err)
		return 2
	}
	return 0
}
