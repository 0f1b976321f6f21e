//! `vtnt bench rtt`'s background load, two streams of UDP datagrams at one rate, one
//! through each kind of device a runtime's probes cross:
//! - a paced stream sent from a thread of its own in the lab's namespace to a lab
//!   address: it crosses the lab's TUN and its daemon, as native's and the containers'
//!   pings do, and comes back as the lab's port unreachables (iperf3 cannot be this one:
//!   nothing in the emulated lab runs an iperf3 server, and iperf3's client needs one);
//! - iperf3 (`-u`, the same rate and size) between a client and a server on the host's
//!   loopback, the device every VM's, microVM's and spt guest's frames cross to the lab's
//!   VM front as UDP datagrams.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use std::process::Command;

use anyhow::{anyhow, Context};
use nix::sched::{setns, CloneFlags};
use vtnt_measure::proc::Supervised;

/// The stream's destination port (the lab answers port unreachable).
const PORT: u16 = 9;

/// A load running until [`Load::stop`] (or until dropped).
pub struct Load {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
    iperf3: Option<Iperf3>,
}

/// iperf3's client and server on the loopback (killed with their groups when dropped).
struct Iperf3 {
    server: Supervised,
    client: Supervised,
}

impl Iperf3 {
    fn start(rate: u32, size: usize) -> anyhow::Result<Iperf3> {
        let port = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .context("a free port for iperf3")?
            .port()
            .to_string();
        let iperf3 = vtnt_runtimes::paths::need("iperf3", "iperf3")?;
        let mut server = Command::new(&iperf3);
        server.args(["-s", "-1", "-B", "127.0.0.1", "-p", &port]);
        let server = Supervised::spawn(server, "iperf3 -s")
            .context("starting iperf3 -s (Debian's iperf3)")?;
        let bps = (u64::from(rate) * size as u64 * 8).to_string();
        let client = || {
            let mut c = Command::new(&iperf3);
            c.args(["-c", "127.0.0.1", "-p", &port, "-u", "-b", &bps])
                .args(["-l", &size.to_string(), "-t", "0", "-J"]);
            Supervised::spawn(c, "iperf3 -c").context("starting iperf3 -c")
        };
        // the server listens once it has started; a client that came too early (and
        // ended at once) is started again
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let mut c = client()?;
            std::thread::sleep(Duration::from_millis(200));
            match c.try_status() {
                None => return Ok(Iperf3 { server, client: c }),
                Some(st) if Instant::now() > deadline => {
                    anyhow::bail!("iperf3 -c on the loopback ended at once ({st})")
                }
                Some(_) => {}
            }
        }
    }

    /// Stops the client (its summary on SIGINT); the datagrams it sent.
    fn stop(self) -> u64 {
        vtnt_measure::proc::kill_pid(self.client.pid(), nix::sys::signal::Signal::SIGINT as i32);
        let life = self.client.started().elapsed() + Duration::from_secs(10);
        let sent = self.client.wait(life).ok().and_then(|f| {
            let v: serde_json::Value = serde_json::from_str(&f.stdout).ok()?;
            v["end"]["sum"]["packets"].as_u64()
        });
        drop(self.server);
        sent.unwrap_or(0)
    }
}

impl Load {
    /// Sends `rate` datagrams a second of `size` bytes to `target` from the namespace at
    /// `netns`, paced in 1 ms ticks, and as many with iperf3 on the loopback; returns
    /// once both run.
    pub fn start(netns: &Path, target: Ipv4Addr, rate: u32, size: usize) -> anyhow::Result<Load> {
        // iperf3 first: it kills its processes if anything after it fails, where a thread
        // already sending would be left behind
        let iperf3 = Iperf3::start(rate, size)?;
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let (ready, opened) = mpsc::channel();
        let shown = netns.display().to_string();
        let (stopped, counted, netns) = (stop.clone(), sent.clone(), netns.to_path_buf());
        let thread = std::thread::spawn(move || {
            let socket = std::fs::File::open(&netns)
                .and_then(|f| setns(&f, CloneFlags::CLONE_NEWNET).map_err(Into::into))
                .and_then(|()| UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)));
            let socket = match socket {
                Ok(s) => {
                    let _ = ready.send(Ok(()));
                    s
                }
                Err(e) => {
                    let _ = ready.send(Err(e));
                    return;
                }
            };
            let to = SocketAddr::from((target, PORT));
            let payload = vec![0x5a; size];
            let start = Instant::now();
            let mut n = 0u64;
            while !stopped.load(Ordering::Acquire) {
                // as many as are due by now, then sleep to the next millisecond
                let due = (start.elapsed().as_secs_f64() * f64::from(rate)) as u64;
                while n < due {
                    // errors (an unreachable reported back on the socket) are not the load's
                    let _ = socket.send_to(&payload, to);
                    n += 1;
                }
                counted.store(n, Ordering::Release);
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        opened
            .recv()
            .map_err(|_| anyhow!("the load's thread ended"))?
            .with_context(|| format!("a UDP load in {shown}"))?;
        let load = Load {
            stop,
            sent,
            thread: Some(thread),
            iperf3: Some(iperf3),
        };
        Ok(load)
    }

    /// Stops both streams; returns how many datagrams each sent (the lab's, iperf3's).
    pub fn stop(mut self) -> (u64, u64) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let sent = self.sent.load(Ordering::Acquire);
        (sent, self.iperf3.take().map_or(0, Iperf3::stop))
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}
