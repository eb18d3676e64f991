package main

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
)

// view is one event handler's own picture of the cache: key → resourceVersion, kept from
// the notifications it is handed (client-go calls each handler from its own goroutine, in
// order).
type view struct {
	name string

	mu      sync.Mutex
	objects map[string]string

	size                                                 atomic.Int64
	adds, updates, deletes, tombstones, initial, unknown atomic.Uint64

	// With the peer protocol: the newest resourceVersion handled, and whether reach has
	// counted this view at its target.
	reach   *reach
	maxRV   atomic.Uint64
	reached atomic.Bool
}

func newView(name string) *view {
	return &view{name: name, objects: make(map[string]string)}
}

// keyAndRV reads the cache key and resourceVersion of a notified object.
func keyAndRV(obj any) (string, string, bool) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return "", "", false
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", "", false
	}
	return key, m.GetResourceVersion(), true
}

func (v *view) set(obj any) {
	key, rv, ok := keyAndRV(obj)
	if !ok {
		v.unknown.Add(1)
		return
	}
	v.mu.Lock()
	v.objects[key] = rv
	v.size.Store(int64(len(v.objects)))
	v.mu.Unlock()
	v.saw(rv)
}

// saw records that a notification at resourceVersion rv was handled (peer protocol only).
func (v *view) saw(rv string) {
	if v.reach == nil {
		return
	}
	if n, err := strconv.ParseUint(rv, 10, 64); err == nil {
		for {
			old := v.maxRV.Load()
			if n <= old || v.maxRV.CompareAndSwap(old, n) {
				break
			}
		}
	}
	v.reach.check(v)
}

// OnAdd records an added object.
func (v *view) OnAdd(obj any, isInInitialList bool) {
	v.adds.Add(1)
	if isInInitialList {
		v.initial.Add(1)
	}
	v.set(obj)
}

// OnUpdate records the new state of an updated object.
func (v *view) OnUpdate(_, newObj any) {
	v.updates.Add(1)
	v.set(newObj)
}

// OnDelete forgets a deleted object, whether it comes whole or as the tombstone of a
// deletion the informer learnt of by relisting.
func (v *view) OnDelete(obj any) {
	v.deletes.Add(1)
	var key, rv string
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		v.tombstones.Add(1)
		key = t.Key
		if _, r, ok := keyAndRV(t.Obj); ok {
			rv = r
		}
	} else {
		k, r, ok := keyAndRV(obj)
		if !ok {
			v.unknown.Add(1)
			return
		}
		key, rv = k, r
	}
	v.mu.Lock()
	delete(v.objects, key)
	v.size.Store(int64(len(v.objects)))
	v.mu.Unlock()
	v.saw(rv)
}

func (v *view) len() int { return int(v.size.Load()) }

func (v *view) notifications() uint64 {
	return v.adds.Load() + v.updates.Load() + v.deletes.Load()
}

// equals says whether the view holds exactly `want`.
func (v *view) equals(want map[string]string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.objects) != len(want) {
		return false
	}
	for k, rv := range v.objects {
		if w, ok := want[k]; !ok || w != rv {
			return false
		}
	}
	return true
}

func (v *view) copyVersions() map[string]string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(map[string]string, len(v.objects))
	for k, rv := range v.objects {
		out[k] = rv
	}
	return out
}

// cacheVersions reads key → resourceVersion of every object in the informer's cache.
func cacheVersions(store cache.Store) map[string]string {
	out := make(map[string]string)
	for _, obj := range store.List() {
		if key, rv, ok := keyAndRV(obj); ok {
			out[key] = rv
		}
	}
	return out
}

// digest is the stable hash of a key → resourceVersion map: SHA-256 over the lines
// "KEY RV\n", sorted by key, as lowercase hex.
func digest(versions map[string]string) string {
	keys := make([]string, 0, len(versions))
	for k := range versions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{' '})
		h.Write([]byte(versions[k]))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}
