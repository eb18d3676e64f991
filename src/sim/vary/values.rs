//! The varied values themselves: shapes kept from the template's (digits, hex runs, names,
//! addresses, image tags); a pooled value is a function of its pool index.

use super::{ENV_VALUES, SimRng};
use crate::sim::rng::mix;

/// A random generator that depends only on `value` and `index`: the pool's `index`-th value.
pub(super) fn pool_rng(value: &str, index: u64) -> SimRng {
    let mut h = mix(index ^ 0x706f_6f6c);
    for chunk in value.as_bytes().chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h = mix(h ^ u64::from_le_bytes(w));
    }
    SimRng::new(h)
}

/// `s` with the same shape: runs of 8 or more hex digits get random hex digits, other digits
/// random digits (a leading non-zero digit stays non-zero); everything else is kept.
pub(super) fn reshape(s: &str, rng: &mut SimRng) -> String {
    reshape_runs(s, rng, true)
}

/// `s` with every run of 8 or more hex digits replaced by random hex digits (a digest, a
/// container ID); everything else kept (`sha256:` stays).
pub(super) fn reshape_hex(s: &str, rng: &mut SimRng) -> String {
    reshape_runs(s, rng, false)
}

/// [`reshape`] (`digits`: other digits random too) or [`reshape_hex`].
fn reshape_runs(s: &str, rng: &mut SimRng, digits: bool) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let run = b[i..]
            .iter()
            .take_while(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
            .count();
        if run >= 8 {
            out.extend((0..run).map(|_| HEX[rng.below(16) as usize]));
            i += run;
            continue;
        }
        let c = b[i];
        if digits && c.is_ascii_digit() {
            let leading = i == 0 || !b[i - 1].is_ascii_digit();
            let lo =
                u64::from(leading && c != b'0' && b.get(i + 1).is_some_and(u8::is_ascii_digit));
            out.push(b'0' + rng.range_inclusive(lo, 9) as u8);
        } else {
            out.push(c);
        }
        i += 1;
    }
    // Only ASCII bytes were replaced by ASCII bytes.
    String::from_utf8(out).unwrap_or_else(|_| s.to_owned())
}

/// A name (a node's): [`reshape`]d when it has digits; else its last `-` segment gets random
/// lower-case letters and digits (`kubernetes-minion-group-vlql` → `...-group-x7qf`), or, with
/// no `-`, a random five-character suffix is added (as generated names have).
pub(super) fn vary_name(name: &str, rng: &mut SimRng) -> String {
    const ALNUM: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    if name.bytes().any(|c| c.is_ascii_digit()) {
        return reshape(name, rng);
    }
    let mut random = |n: usize| -> String {
        (0..n)
            .map(|_| char::from(ALNUM[rng.below(36) as usize]))
            .collect()
    };
    match name.rsplit_once('-') {
        Some((head, last)) if !last.is_empty() => format!("{head}-{}", random(last.len())),
        _ => format!("{name}-{}", random(5)),
    }
}

/// An identifier (a container ID): [`reshape`]d, or through [`vary_name`] when it has no digit
/// to change (a placeholder such as the HEAD fixture's).
pub(super) fn vary_id(id: &str, rng: &mut SimRng) -> String {
    let v = reshape_hex(id, rng);
    if v == id { vary_name(id, rng) } else { v }
}

/// The host IP of node `node` made from the template's `ip`: its first two octets, the third
/// the node's number (so no two nodes of one template share an IP), the fourth fixed per
/// template. Not IPv4: [`vary_name`] from the node's pool.
pub(super) fn node_ip(ip: &str, node: u64) -> String {
    match ip.parse::<std::net::Ipv4Addr>() {
        Ok(a) => {
            let [x, y, _, _] = a.octets();
            let fourth = 2 + pool_rng(ip, u64::MAX).below(250);
            format!("{x}.{y}.{}.{fourth}", node % 256)
        }
        Err(_) => vary_name(ip, &mut pool_rng(ip, node)),
    }
}

/// The name of node `node` made from the template's `name`: an AWS-style `ip-A-B-C-D...` name
/// spells `host_ip`; otherwise the last digits of the first DNS label become the node's number
/// (same width, at least 3), or, without digits, the last `-` segment its number in base 36 (the
/// same length). Distinct nodes get distinct names.
pub(super) fn node_name(name: &str, node: u64, host_ip: Option<&str>) -> String {
    let (label, domain) = name.split_once('.').map_or((name, ""), |(l, d)| (l, d));
    let dot = if domain.is_empty() { "" } else { "." };
    if let (Some(rest), Some(ip)) = (label.strip_prefix("ip-"), host_ip)
        && rest.split('-').count() == 4
        && rest.split('-').all(|p| p.parse::<u8>().is_ok())
        && ip.parse::<std::net::Ipv4Addr>().is_ok()
    {
        return format!("ip-{}{dot}{domain}", ip.replace('.', "-"));
    }
    if let Some(end) = label.rfind(|c: char| c.is_ascii_digit()) {
        let start = label[..=end]
            .rfind(|c: char| !c.is_ascii_digit())
            .map_or(0, |i| i + 1);
        let width = (end + 1 - start).max(3);
        return format!(
            "{}{node:0width$}{}{dot}{domain}",
            &label[..start],
            &label[end + 1..]
        );
    }
    const B36: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let (head, last) = label.rsplit_once('-').unwrap_or((label, ""));
    let len = last.len().max(2);
    let mut n = node;
    let mut digits = vec![b'0'; len];
    for d in digits.iter_mut().rev() {
        *d = B36[(n % 36) as usize];
        n /= 36;
    }
    let suffix = String::from_utf8(digits).unwrap_or_default();
    let sep = if last.is_empty() { "-" } else { "" };
    let head = if last.is_empty() {
        label
    } else {
        &label[..head.len() + 1]
    };
    format!("{head}{sep}{suffix}{dot}{domain}")
}

/// An IPv4 address keeps its first two octets (the cluster's network) and gets random last two;
/// anything else (an IPv6 address, a placeholder) goes through [`vary_name`].
pub(super) fn vary_ip(ip: &str, rng: &mut SimRng) -> String {
    match ip.parse::<std::net::Ipv4Addr>() {
        Ok(a) => {
            let [x, y, _, _] = a.octets();
            format!("{x}.{y}.{}.{}", rng.below(256), 1 + rng.below(254))
        }
        Err(_) => vary_name(ip, rng),
    }
}

/// The pool's `index`-th image made from `image`: index 0 is the template's own; others keep
/// the repository and get another tag (the template's tag reshaped, or `v<major>.<minor>`).
pub(super) fn pooled_image(image: &str, index: u64) -> String {
    if index == 0 {
        return image.to_owned();
    }
    let mut rng = pool_rng(image, index);
    let (repo, tag) = match image.rsplit_once(':') {
        Some((r, t)) if !t.contains('/') => (r, Some(t)),
        _ => (image, None),
    };
    match tag {
        Some(t) if t.bytes().any(|c| c.is_ascii_digit()) => {
            format!("{repo}:{}", reshape(t, &mut rng))
        }
        _ => format!("{repo}:v{}.{}", 1 + rng.below(9), rng.below(40)),
    }
}

/// The image ID of the pool's image `index` (the template's ID, reshaped unless index 0).
pub(super) fn pooled_image_id(image_id: &str, index: u64) -> String {
    if index == 0 {
        image_id.to_owned()
    } else {
        reshape_hex(image_id, &mut pool_rng(image_id, index))
    }
}

/// An environment value: three in four from the variable's pool, the rest random.
pub(super) fn env_value(value: &str, rng: &mut SimRng) -> String {
    if rng.below(4) < 3 {
        reshape(value, &mut pool_rng(value, rng.below(ENV_VALUES)))
    } else {
        reshape(value, rng)
    }
}

/// A restart count: mostly 0, sometimes a few.
pub(super) fn restarts(rng: &mut SimRng) -> i32 {
    if rng.below(8) == 0 {
        1 + rng.below(5) as i32
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_keep_their_shape() {
        let mut rng = SimRng::new(7);
        let id = "docker://ef1d307d0a12f232b88037c61f577411b618f52975a2143801e5e49c4d0b0117";
        let v = reshape(id, &mut rng);
        assert_eq!(v.len(), id.len());
        assert!(v.starts_with("docker://") && v != id);
        assert!(v[9..].bytes().all(|c| c.is_ascii_hexdigit()));
        let ip = vary_ip("10.244.2.8", &mut rng);
        assert!(ip.starts_with("10.244."), "{ip}");
        assert!(ip.parse::<std::net::Ipv4Addr>().is_ok());
        assert_eq!(pooled_image("perl", 0), "perl");
        let other = pooled_image("perl", 3);
        assert!(other.starts_with("perl:v"), "{other}");
        assert_eq!(
            other,
            pooled_image("perl", 3),
            "a pool value depends on its index only"
        );
        assert_eq!(
            reshape("node-7", &mut pool_rng("node-7", 5)),
            reshape("node-7", &mut pool_rng("node-7", 5))
        );
    }
}
