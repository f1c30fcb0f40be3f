//! Which network addresses the `http` skill may connect to: the public internet by default, and the rest
//! (loopback, private, link-local, multicast, unspecified and the other special ranges, in IPv4 and IPv6,
//! including IPv6 forms that carry an IPv4 address) only through an explicit grant in the agent's policy.

use agentry::policy::Policy;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The special range an address falls in, or `None` for a public address.
pub fn restricted(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => restricted_v4(v4),
        IpAddr::V6(v6) => restricted_v6(v6),
    }
}

fn restricted_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (0, _, _) => "unspecified (0.0.0.0/8)",
        (10, _, _) => "private (10.0.0.0/8)",
        (100, 64..=127, _) => "shared address space (100.64.0.0/10)",
        (127, _, _) => "loopback (127.0.0.0/8)",
        (169, 254, _) => "link-local (169.254.0.0/16, cloud metadata)",
        (172, 16..=31, _) => "private (172.16.0.0/12)",
        (192, 0, 0) => "IETF protocol assignments (192.0.0.0/24)",
        (192, 168, _) => "private (192.168.0.0/16)",
        (198, 18..=19, _) => "benchmarking (198.18.0.0/15)",
        (224..=239, _, _) => "multicast (224.0.0.0/4)",
        (240..=255, _, _) => "reserved or broadcast (240.0.0.0/4)",
        _ => return None,
    })
}

fn restricted_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if ip.is_unspecified() {
        return Some("unspecified (::)");
    }
    if ip.is_loopback() {
        return Some("loopback (::1)");
    }
    let segments = ip.segments();
    // IPv6 forms that carry an IPv4 address are judged by that address.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return restricted_v4(v4).map(|_| "an IPv4-mapped address (::ffff:0:0/96) of a restricted IPv4 address");
    }
    if segments[..6] == [0, 0, 0, 0, 0, 0] {
        return Some("IPv4-compatible (::/96, deprecated)");
    }
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let v4 =
            Ipv4Addr::new((segments[6] >> 8) as u8, segments[6] as u8, (segments[7] >> 8) as u8, segments[7] as u8);
        return restricted_v4(v4).map(|_| "a NAT64 address (64:ff9b::/96) of a restricted IPv4 address");
    }
    if segments[0] == 0x2002 {
        let v4 =
            Ipv4Addr::new((segments[1] >> 8) as u8, segments[1] as u8, (segments[2] >> 8) as u8, segments[2] as u8);
        return restricted_v4(v4).map(|_| "a 6to4 address (2002::/16) of a restricted IPv4 address");
    }
    Some(match segments[0] {
        0xfc00..=0xfdff => "unique-local (fc00::/7)",
        0xfe80..=0xfebf => "link-local (fe80::/10)",
        0xfec0..=0xfeff => "site-local (fec0::/10)",
        0xff00..=0xffff => "multicast (ff00::/8)",
        _ => return None,
    })
}

/// Whether the agent's policy lets the `http` skill connect to `ip`: any public address, and a restricted one
/// only when the policy sets `allow_private_network` or lists the address itself in `allow_hosts` (an
/// explicit address grant; a wildcard does not count). `Err` says which range refused it.
pub fn allowed(ip: IpAddr, policy: &Policy) -> Result<(), &'static str> {
    match restricted(ip) {
        None => Ok(()),
        Some(_) if policy.allow_private_network => Ok(()),
        Some(_) if policy.allow_hosts.contains(&ip.to_string()) => Ok(()),
        Some(range) => Err(range),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn special_ranges_are_restricted_and_public_addresses_are_not() {
        for special in [
            "127.0.0.1",
            "127.255.0.9",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
        ] {
            assert!(restricted(ip(special)).is_some(), "{special} should be restricted");
        }
        for public in ["93.184.216.34", "8.8.8.8", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "::ffff:8.8.8.8"] {
            assert_eq!(restricted(ip(public)), None, "{public} is public");
        }
    }

    #[test]
    fn restricted_addresses_need_an_explicit_grant() {
        let policy = Policy::default().allow_host("*");
        assert!(allowed(ip("127.0.0.1"), &policy).is_err(), "a wildcard is not a grant for loopback");
        assert!(allowed(ip("127.0.0.1"), &Policy::default().allow_host("127.0.0.1")).is_ok());
        assert!(allowed(ip("127.0.0.2"), &Policy::default().allow_host("127.0.0.1")).is_err());
        let open = Policy::default().allow_private_network(true);
        assert!(allowed(ip("10.0.0.1"), &open).is_ok());
        assert!(allowed(ip("8.8.8.8"), &Policy::default()).is_ok());
    }
}
