//! The network function (feature `fw`): the firewall of seed 002 as the unikernel, the
//! same `vtnt_fw::Bridge` that `vtnt fw run` drives on Linux, between the platform's two
//! networks. Its rules are the boot module (iptables-save or nft syntax), read and
//! compiled whole before the first frame moves; the job words name the two sides for the
//! rules' `-i`/`-o` (`fw IF_A IF_B [max-conns=N]`). It runs until it is stopped, and says
//! on its console when its rules hold (`{"type":"nf",...}`) and, each second in which
//! they changed, what it counted (`{"type":"nf-counters",...}`). On a process its idle
//! wait ends with a frame; in a VM (virtio without interrupts) it polls.

use alloc::vec::Vec;

use vtnt_abi::exit::Status;
use vtnt_fw::{parse, Bridge, BridgeStats, CtConfig, Firewall, FirewallStats, BRIDGE_BATCH};
use vtnt_record::Instant;

use crate::cmdline::Cmdline;
use crate::platform::{self, Link};
use crate::{fail, println};

/// The longest wait while no connection is due to expire.
const IDLE_US: u64 = 100_000;
/// How often the NF says what it counted, when that changed (µs).
const REPORT_US: u64 = 1_000_000;
/// The longest frame a side takes (a TAP's MTU of 1500 and its Ethernet header, with room).
const FRAME: usize = vtnt_abi::hvt::FRAME_MAX;

/// The job words: the two sides' names and the connection table's size.
fn sides<'a>(cmdline: &Cmdline<'a>) -> ([&'a str; 2], usize) {
    let words: Vec<&str> = cmdline.job_words().collect();
    let (a, b, rest) = match words.as_slice() {
        ["fw", a, b, rest @ ..] if a != b => (*a, *b, rest),
        _ => fail!(
            Status::BadCmdline,
            "a network function's job is `fw IF_A IF_B [max-conns=N]` (two different names)"
        ),
    };
    let mut max_conns = CtConfig::default().max;
    for w in rest {
        match w
            .strip_prefix("max-conns=")
            .and_then(crate::cmdline::parse_u64)
        {
            Some(n) if n > 0 => max_conns = n as usize,
            _ => fail!(Status::BadCmdline, "`{w}`: expected max-conns=N (N > 0)"),
        }
    }
    ([a, b], max_conns)
}

/// Reads and compiles the rules of the boot module, all or nothing.
fn firewall(max_conns: usize) -> Firewall {
    let Some(bytes) = platform::module(0) else {
        fail!(
            Status::BadCmdline,
            "a network function needs its rules as its boot module"
        );
    };
    let name = "the rules module";
    let text = match parse::text(name, bytes) {
        Ok(t) => t,
        Err(e) => fail!(Status::BadCmdline, "{e}"),
    };
    let rules = match parse::parse(name, text, parse::Format::detect(text), usize::MAX) {
        Ok(r) => r,
        Err(e) => fail!(Status::BadCmdline, "{e}"),
    };
    let config = vtnt_fw::Config {
        conntrack: CtConfig {
            max: max_conns,
            ..CtConfig::default()
        },
        ..vtnt_fw::Config::default()
    };
    match Firewall::new(&rules, config) {
        Ok(fw) => fw,
        Err(e) => fail!(Status::BadCmdline, "compiling the rules: {e}"),
    }
}

/// Runs the network function; never returns.
pub fn run(cmdline: &Cmdline) -> ! {
    let (names, max_conns) = sides(cmdline);
    let t0 = platform::now();
    let fw = firewall(max_conns);
    let s = fw.classifier().stats();
    let mac = cmdline.mac.unwrap_or([0x52, 0x54, 0, 0x66, 0x77, 0]);
    let mut links = [
        platform::open_net(Some(mac), cmdline.mmio()),
        platform::open_second_net(mac, cmdline.mmio()),
    ];
    let mut bridge = Bridge::new(fw, names);
    println!(
        "{{\"type\":\"nf\",\"rules\":{},\"compiled_bytes\":{},\"load_us\":{},\"sides\":[\"{}\",\"{}\"]}}",
        s.rules,
        s.bytes,
        (platform::now().as_micros() - t0.as_micros()),
        names[0],
        names[1]
    );
    let (mut next_report, mut reported) = (0, BridgeStats::default());
    let mut batch: Vec<u8> = alloc::vec![0; BRIDGE_BATCH * FRAME];
    let mut lens = [0usize; BRIDGE_BATCH];
    loop {
        let mut moved = false;
        for side in 0..2 {
            // up to a batch of frames, copied out so that the link has its buffer back
            let mut n = 0;
            while n < BRIDGE_BATCH {
                let Some(r) = links[side].next_frame() else {
                    break;
                };
                let (at, len) = r.at;
                let len = len.min(FRAME);
                if let Some(f) = r.buf.get(at..at + len) {
                    batch[n * FRAME..n * FRAME + len].copy_from_slice(f);
                    lens[n] = len;
                    n += 1;
                }
                links[side].frame_done(r.buf);
            }
            if n == 0 {
                continue;
            }
            moved = true;
            let frames: Vec<&[u8]> = (0..n)
                .map(|i| &batch[i * FRAME..i * FRAME + lens[i]])
                .collect();
            bridge.forward(platform::now(), side, &frames, |to, f| {
                f.iter().filter(|f| !send(&mut *links[to], f)).count()
            });
        }
        let now = platform::now();
        if now.as_micros() >= next_report {
            next_report = now.as_micros() + REPORT_US;
            let c = bridge.stats();
            if c != reported {
                reported = c;
                report(&c, &bridge.firewall().stats());
            }
        }
        if let Some(due) = bridge.poll_timeout() {
            if due <= now {
                bridge.handle_timeout(now);
                continue;
            }
        }
        // a platform whose wait ends when a frame arrives (a process) waits; a VM's
        // devices raise no interrupt, so it polls, as a packet-processing NF does
        if !moved && platform::wakes_on_frames() {
            let idle = Instant::from_micros(now.as_micros() + IDLE_US);
            platform::wait_until(bridge.poll_timeout().map_or(idle, |d| d.min(idle)));
        } else if !moved {
            core::hint::spin_loop();
        }
    }
}

/// Sends `frame` (at most [`FRAME`] bytes) on `link`; whether the link took it (a full
/// queue drops it: a bridge under load drops, as a switch does, and counts it).
fn send(link: &mut dyn Link, frame: &[u8]) -> bool {
    let Ok((mut buf, at)) = link.tx_take() else {
        return false;
    };
    let len = frame.len().min(buf.len().saturating_sub(at));
    buf[at..at + len].copy_from_slice(&frame[..len]);
    link.tx_give(buf, at + len).is_ok()
}

/// Says on the console what the NF counted (`{"type":"nf-counters",...}`): the bridge's
/// and the driver's [`BridgeStats`] and the firewall's verdicts and connections, the
/// fields `vtnt fw run` prints when it stops the guest.
fn report(c: &BridgeStats, f: &FirewallStats) {
    println!(
        "{{\"type\":\"nf-counters\",\"received\":[{},{}],\"forwarded\":{},\"arp\":{},\"other\":{},\"malformed\":{},\"send_errors\":{},\"accepted\":{},\"dropped\":{},\"rejected\":{},\"ip_malformed\":{},\"conns_live\":{},\"conns_created\":{},\"conns_evicted\":{}}}",
        c.received[0],
        c.received[1],
        c.forwarded,
        c.arp,
        c.other,
        c.malformed,
        c.send_errors,
        f.accepted,
        f.dropped,
        f.rejected,
        f.malformed,
        f.conntrack.live,
        f.conntrack.created,
        f.conntrack.evicted
    );
}
