//! [`default_identity`]: a candidate name when the caller has none.

/// A name for this process in an election or a shard group: `<hostname>-<pid>`.
///
/// The hostname is `$HOSTNAME` when set (a Pod's name inside Kubernetes), else the kernel's
/// (`/proc/sys/kernel/hostname`), else `fallback`. Two processes on one host differ by pid; a
/// restarted process gets a new name, so it campaigns as a newcomer, as client-go's examples
/// do with a hostname plus a random suffix. Pass a stable name instead (e.g. the Pod name
/// alone) when a restart should keep its Lease.
///
/// # Examples
/// ```
/// let id = informer::election::default_identity("informer");
/// assert!(id.ends_with(&format!("-{}", std::process::id())));
/// ```
pub fn default_identity(fallback: &str) -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| fallback.to_owned());
    format!("{host}-{}", std::process::id())
}
