//! `vtnt bench fw`'s request/response, latency and connection-rate drivers, from the
//! sender's namespace to servers in the receiver's through whatever filters the bump
//! holds ([`crate::fw_nf`]): Debian's sockperf (TCP and UDP ping-pong), hping3 (TCP SYN
//! round trips) and ping (ICMP echo), and a connection-rate client of ours.

use std::io::{ErrorKind, Read};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use vtnt_netns::Bump;

/// How many figures [`measure`] gives: TCP transactions/s, mean, p99 and least round
/// trip (µs); the same for UDP; TCP SYN and ICMP echo round trips (µs); TCP
/// connections/s.
pub const COLUMNS: usize = 11;

/// The programs the drivers run, with their Debian packages.
pub const TOOLS: [(&str, &str); 4] = [
    ("iperf3", "iperf3"),
    ("sockperf", "sockperf"),
    ("hping3", "hping3"),
    ("ping", "iputils-ping"),
];

/// The receiver's address in the bench's bump.
const SERVER: Ipv4Addr = Ipv4Addr::new(100, 64, 5, 2);

/// Concurrent connections of the connection-rate client (the machine has few cores).
const CONNECTORS: usize = 2;

/// Probes per second of hping3 and ping (`-i u10000`, `-i 0.01`).
const PROBES_PER_SECOND: u32 = 100;

/// Where the drivers go: sockperf's server port (TCP and UDP), the listener's (the
/// connection rate and hping3's SYNs), the client ports the rules accept (inclusive;
/// hping3's source ports count up from the first) and whether the rules pass ICMP echo
/// both ways.
#[derive(Debug, Clone, Copy)]
pub struct Targets {
    pub sockperf: u16,
    pub listener: u16,
    pub clients: (u16, u16),
    pub icmp: bool,
}

/// Moves the calling thread into namespace `ns` (its sockets are made there).
pub(crate) fn enter(ns: &str) -> anyhow::Result<()> {
    let f = std::fs::File::open(format!("/run/netns/{ns}"))
        .with_context(|| format!("opening namespace {ns}"))?;
    nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)
        .with_context(|| format!("entering namespace {ns}"))
}

/// A server process killed and reaped however its measurement ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Every figure over `seconds` per test (sockperf TCP, sockperf UDP, hping3 and ping
/// side by side at 100 probes/s each, the connection rate), in [`COLUMNS`]' order; ICMP
/// NaN when the rules drop echo.
pub fn measure(b: &Bump, seconds: u32, t: &Targets) -> anyhow::Result<[f64; COLUMNS]> {
    let [tcp_tps, tcp_us, tcp_p99, tcp_min] = sockperf(b, seconds, t.sockperf, true)?;
    let [udp_tps, udp_us, udp_p99, udp_min] = sockperf(b, seconds, t.sockperf, false)?;
    let stop = Arc::new(AtomicBool::new(false));
    let listener = listen(b, t.listener, stop.clone())?;
    let m = latency(b, seconds, t).and_then(|l| Ok((l, connection_rate(b, seconds, t.listener)?)));
    stop.store(true, Ordering::Relaxed);
    let _ = listener.join();
    let ([syn_us, icmp_us], conn) = m?;
    Ok([
        tcp_tps, tcp_us, tcp_p99, tcp_min, udp_tps, udp_us, udp_p99, udp_min, syn_us, icmp_us, conn,
    ])
}

/// Waits (5 s at most) until `pid` has a socket bound to `port` in its namespace (TCP
/// listening, or UDP), so that the client does not race its server.
fn bound(server: &mut Child, port: u16, tcp: bool) -> anyhow::Result<()> {
    let (table, state) = if tcp { ("tcp", "0A") } else { ("udp", "07") };
    let path = format!("/proc/{}/net/{table}", server.id());
    let local = format!(":{port:04X}");
    for _ in 0..100 {
        if let Some(status) = server.try_wait()? {
            bail!("the server exited ({status}) before listening on port {port}");
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let found = text.lines().skip(1).any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.len() > 3 && w[1].ends_with(&local) && w[3] == state
        });
        if found {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("no {table} socket on port {port} after 5 s")
}

/// The text after `key` in `out` up to the next of `ends`, as a number.
fn after(out: &str, key: &str) -> Option<f64> {
    let rest = &out[out.find(key)? + key.len()..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ' '))
        .unwrap_or(rest.len());
    rest[..end].trim().parse().ok()
}

/// Debian's sockperf ping-pong (`sockperf pp`, `--full-rtt`) to a `sockperf sr` in the
/// receiver's namespace: [`sockperf_figures`].
fn sockperf(b: &Bump, seconds: u32, port: u16, tcp: bool) -> anyhow::Result<[f64; 4]> {
    let (port, secs) = (port.to_string(), seconds.to_string());
    let proto: &[&str] = if tcp { &["--tcp"] } else { &[] };
    let name = if tcp { "sockperf --tcp" } else { "sockperf" };
    let spawn = |mut c: Command| c.stdout(Stdio::null()).stderr(Stdio::null()).spawn();
    let mut server = b.receiver.command("sockperf");
    server
        .arg("sr")
        .args(proto)
        .args(["-i", "100.64.5.2", "-p", &port]);
    let mut server =
        Server(spawn(server).context("starting sockperf sr (Debian package sockperf)")?);
    bound(&mut server.0, port.parse()?, tcp).with_context(|| format!("{name} sr"))?;
    let out = b
        .sender
        .command("sockperf")
        .arg("pp")
        .args(proto)
        .args(["-i", "100.64.5.2", "-p", &port, "-t", &secs, "--full-rtt"])
        .output()
        .context("running sockperf pp")?;
    drop(server);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    match sockperf_figures(&text).filter(|_| out.status.success()) {
        Some([0.0, ..]) => bail!("{name} pp: no answer through the filter"),
        Some(f) => Ok(f),
        None => bail!("{name} pp: no figures ({}): {}", out.status, text.trim()),
    }
}

/// From `sockperf pp --full-rtt`'s output: transactions/s over its valid duration, the
/// mean, p99 and least round trip (µs; NaN when not printed); None without a valid
/// duration. The least is the transaction's floor: what the path itself costs, without
/// the host's scheduling (docs/fw.md).
fn sockperf_figures(text: &str) -> Option<[f64; 4]> {
    let valid = &text[text.find("[Valid Duration]")?..];
    let (run, got) = (
        after(valid, "RunTime=")?,
        after(valid, "ReceivedMessages=")?,
    );
    if run <= 0.0 {
        return None;
    }
    let mean = after(text, "Summary: Round trip is").unwrap_or(f64::NAN);
    let p99 = after(text, "percentile 99.000 =").unwrap_or(f64::NAN);
    let least = after(text, "<MIN> observation =").unwrap_or(f64::NAN);
    Some([got / run, mean, p99, least])
}

/// The mean of hping3's per-answer `rtt=` (ms); None without an answer.
fn hping3_mean_ms(text: &str) -> Option<f64> {
    let rtts: Vec<f64> = (text.lines()).filter_map(|l| after(l, "rtt=")).collect();
    (!rtts.is_empty()).then(|| rtts.iter().sum::<f64>() / rtts.len() as f64)
}

/// ping's average round trip (ms) from its summary line; None without an answer.
fn ping_avg_ms(text: &str) -> Option<f64> {
    // rtt min/avg/max/mdev = 0.003/0.014/0.031/0.005 ms
    (text.lines())
        .find_map(|l| l.strip_prefix("rtt min/avg/max/mdev = "))
        .and_then(|v| v.split('/').nth(1)?.parse().ok())
}

/// hping3's TCP SYNs to the listener and ping's ICMP echoes, side by side for
/// `seconds` at [`PROBES_PER_SECOND`] each: mean round trips in µs (ICMP NaN when the
/// rules drop echo). hping3 tells its answers apart by their port, one source port a
/// probe: no more probes than the rules accept client ports.
fn latency(b: &Bump, seconds: u32, t: &Targets) -> anyhow::Result<[f64; 2]> {
    let (lo, hi) = t.clients;
    let n = (seconds * PROBES_PER_SECOND).min(u32::from(hi - lo) + 1);
    let n = n.to_string();
    let ping = if t.icmp {
        let mut c = b.sender.command("ping");
        c.args(["-q", "-n", "-c", &n, "-i", "0.01", "100.64.5.2"]);
        let c = c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
        Some(c.context("starting ping (Debian package iputils-ping)")?)
    } else {
        None
    };
    let (port, client) = (t.listener.to_string(), lo.to_string());
    let wait = format!("u{}", 1_000_000 / PROBES_PER_SECOND);
    let hping = || {
        b.sender
            .command("hping3")
            .args(["-S", "-p", &port, "-s", &client, "-c", &n, "-i", &wait])
            .arg("100.64.5.2")
            .output()
            .context("running hping3 (Debian package hping3)")
    };
    let first = hping();
    let ping = ping.map(|p| p.wait_with_output()).transpose()?;
    // hping3 once heard none of its 200 answers at a million rules where every other run
    // through the same NF and rules was answered (not explained): a silent run is tried
    // once more before the repetition fails
    let mut out = first?;
    let mut syn_ms = hping3_mean_ms(&String::from_utf8_lossy(&out.stdout));
    if syn_ms.is_none() {
        out = hping()?;
        syn_ms = hping3_mean_ms(&String::from_utf8_lossy(&out.stdout));
    }
    let Some(syn_ms) = syn_ms else {
        bail!(
            "hping3 -S -p {port}: no answer through the filter, twice: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    };
    let syn_us = 1e3 * syn_ms;
    let icmp_us = match ping {
        None => f64::NAN,
        Some(out) => {
            let text = String::from_utf8_lossy(&out.stdout);
            let Some(avg) = ping_avg_ms(&text) else {
                bail!(
                    "ping: no echo answered though the rules pass it: {} {}",
                    text.trim(),
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            };
            1e3 * avg
        }
    };
    Ok([syn_us, icmp_us])
}

/// A listener on `port` in the receiver's namespace that accepts and closes until
/// `stop` (it checks every 50 ms).
fn listen(
    b: &Bump,
    port: u16,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<std::thread::JoinHandle<()>> {
    let ns = b.receiver.name().to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        let l = enter(&ns).and_then(|()| {
            let l = TcpListener::bind(SocketAddrV4::new(SERVER, port))
                .with_context(|| format!("listening on {SERVER}:{port}"))?;
            let t = nix::sys::time::TimeVal::new(0, 50_000);
            nix::sys::socket::setsockopt(&l, nix::sys::socket::sockopt::ReceiveTimeout, &t)?;
            Ok(l)
        });
        let l = match l {
            Ok(l) => {
                let _ = tx.send(Ok(()));
                l
            }
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        };
        while !stop.load(Ordering::Relaxed) {
            // a timeout (EAGAIN) or a connection reset before it was taken: go on
            drop(l.accept());
        }
    });
    rx.recv().context("the listener thread")??;
    Ok(h)
}

/// Our connection-rate client: [`CONNECTORS`] threads in the sender's namespace each
/// connect to the listener, wait for it to close (so TIME_WAIT stays on the server's
/// side, not holding the few client ports the rules accept) and close, as fast as they
/// can for `seconds`; completed connections per second.
fn connection_rate(b: &Bump, seconds: u32, port: u16) -> anyhow::Result<f64> {
    let to = SocketAddr::V4(SocketAddrV4::new(SERVER, port));
    let threads: Vec<_> = (0..CONNECTORS)
        .map(|_| {
            let ns = b.sender.name().to_string();
            std::thread::spawn(move || -> anyhow::Result<(u64, Duration)> {
                enter(&ns)?;
                let (t, mut n) = (Instant::now(), 0u64);
                let end = t + Duration::from_secs(seconds.into());
                while Instant::now() < end {
                    // a lost SYN is sent again after 1 s (Linux): give it that once
                    let s = match TcpStream::connect_timeout(&to, Duration::from_millis(2500)) {
                        Ok(s) => s,
                        // no client port free this instant: try again
                        Err(e) if e.kind() == ErrorKind::AddrNotAvailable => continue,
                        Err(e) => {
                            return Err(e).with_context(|| {
                                format!("the connection-rate client connecting to {to}")
                            })
                        }
                    };
                    // the listener closes first: its FIN (EOF here) ends the exchange
                    s.set_read_timeout(Some(Duration::from_millis(2500)))?;
                    (&s).read(&mut [0u8; 1]).with_context(|| {
                        format!("the connection-rate client waiting for {to} to close")
                    })?;
                    n += 1;
                }
                Ok((n, t.elapsed()))
            })
        })
        .collect();
    let (mut n, mut took) = (0, Duration::ZERO);
    for h in threads {
        let (k, t) = (h.join()).map_err(|_| anyhow::anyhow!("a connector thread panicked"))??;
        n += k;
        took = took.max(t);
    }
    Ok(n as f64 / took.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tools_figures_are_read_from_their_own_output() {
        // sockperf 3.7 pp --full-rtt (colour escapes as it prints them)
        let pp = "sockperf: [Total Run] RunTime=1.000 sec; Warm up time=400 msec; \
                  SentMessages=92961; ReceivedMessages=92960\n\
                  sockperf: [Valid Duration] RunTime=0.550 sec; SentMessages=57303; \
                  ReceivedMessages=57303\n\
                  sockperf: \x1b[2;35m====> avg-rtt=9.573 (std-dev=6.401)\x1b[0m\n\
                  sockperf: Summary: Round trip is 9.573 usec\n\
                  sockperf: ---> percentile 99.900 =   49.126\n\
                  sockperf: ---> percentile 99.000 =   20.978\n\
                  sockperf: ---> percentile 50.000 =    8.036\n\
                  sockperf: ---> <MIN> observation =    6.652\n";
        let [tps, mean, p99, least] = sockperf_figures(pp).unwrap();
        assert_eq!(
            (tps, mean, p99, least),
            (57303.0 / 0.55, 9.573, 20.978, 6.652)
        );
        // no percentiles (too few observations): NaN, the rest kept
        let short = &pp[..pp.find("sockperf: ---> percentile 99.900").unwrap()];
        assert!(sockperf_figures(short).unwrap()[2].is_nan());
        assert_eq!(sockperf_figures("sockperf: ERROR: connect"), None);
        let hping = "HPING 100.64.5.2 (s0 100.64.5.2): S set, 40 headers + 0 data bytes\n\
                     len=44 ip=100.64.5.2 ttl=64 DF id=0 sport=5203 flags=SA seq=0 win=64240 rtt=0.8 ms\n\
                     len=44 ip=100.64.5.2 ttl=64 DF id=0 sport=5203 flags=SA seq=1 win=64240 rtt=0.4 ms\n";
        assert!((hping3_mean_ms(hping).unwrap() - 0.6).abs() < 1e-12);
        assert_eq!(hping3_mean_ms("HPING 100.64.5.2\n"), None);
        let ping = "--- 100.64.5.2 ping statistics ---\n\
                    100 packets transmitted, 100 received, 0% packet loss, time 198ms\n\
                    rtt min/avg/max/mdev = 0.003/0.014/0.031/0.005 ms\n";
        assert_eq!(ping_avg_ms(ping), Some(0.014));
        assert_eq!(ping_avg_ms("100 packets transmitted, 0 received\n"), None);
    }
}
