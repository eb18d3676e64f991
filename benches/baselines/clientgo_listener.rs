//! Baseline for `benches/distributor.rs`: a Rust port of client-go's listener design
//! (`tools/cache/shared_informer.go`: `sharedProcessor.distribute`, `processorListener.add`,
//! `pop`, `run`; `k8s.io/utils/buffer.RingGrowing`), written from its behaviour:
//!
//! - the processor keeps its listeners behind a reader-writer lock; `distribute` takes the
//!   read lock and hands every notification to every listener, one at a time;
//! - `add` sends the notification on the listener's unbuffered `addCh`;
//! - a `pop` thread per listener selects between receiving from `addCh` (parking the
//!   notification in a ring buffer that doubles when full and never shrinks) and sending the
//!   oldest parked one on the unbuffered `nextCh`;
//! - a `run` thread per listener receives from `nextCh` and calls the handler.
//!
//! Goroutines become OS threads and unbuffered Go channels become zero-capacity crossbeam
//! channels (rendezvous), `select` becomes `crossbeam::channel::Select`.

use std::sync::RwLock;
use std::thread::JoinHandle;

use crossbeam::channel::{Receiver, Select, Sender, bounded};

/// `buffer.RingGrowing`: a FIFO ring that doubles its storage when full and never shrinks.
struct RingGrowing<T> {
    data: Vec<Option<T>>,
    /// Index of the first readable slot.
    beg: usize,
    /// Readable slots.
    readable: usize,
}

impl<T> RingGrowing<T> {
    fn new(initial: usize) -> Self {
        RingGrowing {
            data: (0..initial.max(1)).map(|_| None).collect(),
            beg: 0,
            readable: 0,
        }
    }

    fn read_one(&mut self) -> Option<T> {
        if self.readable == 0 {
            return None;
        }
        let v = self.data[self.beg].take();
        self.beg = (self.beg + 1) % self.data.len();
        self.readable -= 1;
        if self.readable == 0 {
            self.beg = 0;
        }
        v
    }

    fn write_one(&mut self, v: T) {
        let n = self.data.len();
        if self.readable == n {
            // Full: copy into a ring twice as large, oldest first.
            let mut grown: Vec<Option<T>> = (0..2 * n).map(|_| None).collect();
            for (i, slot) in grown.iter_mut().take(n).enumerate() {
                *slot = self.data[(self.beg + i) % n].take();
            }
            self.data = grown;
            self.beg = 0;
        }
        let n = self.data.len();
        self.data[(self.beg + self.readable) % n] = Some(v);
        self.readable += 1;
    }
}

struct ListenerPort<T> {
    add_tx: Sender<T>,
    threads: Vec<JoinHandle<()>>,
}

/// The port: `distribute` to every listener under the read lock.
pub(crate) struct ClientGoProcessor<T: Send + 'static> {
    listeners: RwLock<Vec<ListenerPort<T>>>,
}

impl<T: Clone + Send + 'static> ClientGoProcessor<T> {
    pub(crate) fn new() -> Self {
        ClientGoProcessor {
            listeners: RwLock::new(Vec::new()),
        }
    }

    /// `AddEventHandler`: a listener with its pop and run threads (client-go's initial ring
    /// size is 1024).
    pub(crate) fn add_listener(&self, mut handler: impl FnMut(T) + Send + 'static) {
        let (add_tx, add_rx) = bounded::<T>(0);
        let (next_tx, next_rx) = bounded::<T>(0);
        let pop = std::thread::spawn(move || pop(&add_rx, next_tx));
        let run = std::thread::spawn(move || {
            while let Ok(n) = next_rx.recv() {
                handler(n);
            }
        });
        self.listeners.write().unwrap().push(ListenerPort {
            add_tx,
            threads: vec![pop, run],
        });
    }

    /// `sharedProcessor.distribute`: every listener gets `n`, under the read lock.
    pub(crate) fn distribute(&self, n: &T) {
        let listeners = self.listeners.read().unwrap();
        for l in listeners.iter() {
            let _ = l.add_tx.send(n.clone());
        }
    }

    /// Closes every `addCh` and joins the threads.
    pub(crate) fn stop(&self) {
        let listeners = std::mem::take(&mut *self.listeners.write().unwrap());
        let mut threads = Vec::new();
        for l in listeners {
            drop(l.add_tx);
            threads.extend(l.threads);
        }
        for t in threads {
            let _ = t.join();
        }
    }
}

/// `processorListener.pop`: park what arrives, offer the oldest parked notification.
fn pop<T>(add_rx: &Receiver<T>, next_tx: Sender<T>) {
    let mut pending = RingGrowing::new(1024);
    let mut notification: Option<T> = None;
    loop {
        let mut sel = Select::new();
        let recv = sel.recv(add_rx);
        let send = notification.as_ref().map(|_| sel.send(&next_tx));
        let op = sel.select();
        if Some(op.index()) == send {
            let n = notification
                .take()
                .expect("send selected only with a notification");
            if op.send(&next_tx, n).is_err() {
                return;
            }
            notification = pending.read_one();
        } else {
            debug_assert_eq!(op.index(), recv);
            match op.recv(add_rx) {
                Ok(n) => {
                    if notification.is_none() {
                        notification = Some(n);
                    } else {
                        pending.write_one(n);
                    }
                }
                // addCh closed: client-go's pop returns (closing nextCh).
                Err(_) => return,
            }
        }
    }
}

/// Checks the ring against its contract (FIFO across growth); run at bench start, since a
/// `harness = false` bench has no test runner.
pub(crate) fn self_check() {
    let mut r = RingGrowing::new(2);
    for i in 0..5 {
        r.write_one(i);
    }
    assert_eq!(r.read_one(), Some(0));
    r.write_one(5);
    let got: Vec<i32> = std::iter::from_fn(|| r.read_one()).collect();
    assert_eq!(got, vec![1, 2, 3, 4, 5]);
    assert_eq!(r.data.len(), 8, "doubled twice, never shrunk");
}
