//! `vtnt bench rtt`'s background load: a paced stream of UDP datagrams sent from a
//! thread of its own in the lab's namespace to a lab address, so that they cross the
//! same devices as the pings (the lab's TUN and its daemon) and come back as the lab's
//! port unreachables. iperf3 cannot be the load here: nothing in the emulated lab runs an
//! iperf3 server, and iperf3's client needs one (its control connection).

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use nix::sched::{setns, CloneFlags};

/// The stream's destination port (the lab answers port unreachable).
const PORT: u16 = 9;

/// A load running until [`Load::stop`] (or until dropped).
pub struct Load {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Load {
    /// Sends `rate` datagrams a second of `size` bytes to `target` from the namespace at
    /// `netns`, paced in 1 ms ticks; returns once the socket is open.
    pub fn start(netns: &Path, target: Ipv4Addr, rate: u32, size: usize) -> anyhow::Result<Load> {
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
        Ok(Load {
            stop,
            sent,
            thread: Some(thread),
        })
    }

    /// Stops the stream; returns how many datagrams it sent.
    pub fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.sent.load(Ordering::Acquire)
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}
