//! [`ServerStats`]: the counters of one HTTP server.

use std::sync::atomic::AtomicU64;

/// Counters of one HTTP server (monotonic except `watches_open`).
#[derive(Debug, Default)]
pub struct ServerStats {
    /// Requests received.
    pub requests: AtomicU64,
    /// List requests answered (pages).
    pub lists: AtomicU64,
    /// Watches opened.
    pub watches: AtomicU64,
    /// Watches open now (gauge).
    pub watches_open: AtomicU64,
    /// Bytes of watch streams sent.
    pub watch_bytes: AtomicU64,
    /// Error responses (4xx/5xx) sent.
    pub errors: AtomicU64,
}
