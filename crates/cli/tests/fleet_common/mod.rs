//! What the fleet's store and serve tests share: a broker of the test's own (`vtnt
//! fleet up`) and a NATS client speaking the raw protocol with an agent's key, publishing
//! results as an agent does.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

pub const VTNT: &str = env!("CARGO_BIN_EXE_vtnt");
/// The image hash the test's records name (`Vtnt-Image-Sha256`).
pub const PROVENANCE_SHA256: &str =
    "9f2c0000000000000000000000000000000000000000000000000000000000aa";

pub fn vtnt(args: &[&str]) -> Output {
    Command::new(VTNT)
        .args(args)
        .output()
        .expect("running vtnt")
}

/// A broker of the test's own, down (and its state removed) on drop.
pub struct Broker {
    pub name: String,
    pub url: String,
}

impl Broker {
    /// A broker named after the process and a count (tests of one binary run side by side).
    pub fn up(tenants: &[&str]) -> Broker {
        static UP: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = UP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("tstore{}n{n}", std::process::id());
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port()
            .to_string();
        let mut args = vec!["fleet", "up", "--name", &name, "--port", &port];
        for t in tenants {
            args.extend(["--tenant", t]);
        }
        let out = vtnt(&args);
        assert!(
            out.status.success(),
            "fleet up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let url = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Broker { name, url }
    }

    pub fn key(&self, role: &str) -> String {
        format!("/run/vtnt/fleet/{}/keys/{role}.nk", self.name)
    }

    /// `vtnt fleet store --fleet NAME ARGS`.
    pub fn store(&self, args: &[&str]) -> Output {
        let mut a = vec!["fleet", "store", "--fleet", &self.name];
        a.extend_from_slice(args);
        vtnt(&a)
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = vtnt(&["fleet", "down", "--name", &self.name]);
    }
}

/// base64url without padding (what NATS takes for an nkey signature).
fn base64url(data: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for c in data.chunks(3) {
        let n = c.iter().fold(0u32, |n, b| n << 8 | u32::from(*b)) << (8 * (3 - c.len()));
        for i in 0..=c.len() {
            out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// A NATS connection speaking the raw protocol.
pub struct Raw {
    w: TcpStream,
    r: BufReader<TcpStream>,
}

impl Raw {
    /// Connects to `url` (`nats://127.0.0.1:PORT`) with the nkey seed in `key`.
    pub fn connect(url: &str, key: &str) -> Raw {
        let addr = url.trim_start_matches("nats://");
        let w = TcpStream::connect(addr).expect("the broker");
        w.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut r = BufReader::new(w.try_clone().unwrap());
        let mut info = String::new();
        r.read_line(&mut info).unwrap();
        let info: Value = serde_json::from_str(info.trim_start_matches("INFO ")).unwrap();
        let seed = std::fs::read_to_string(key).unwrap();
        let kp = nkeys::KeyPair::from_seed(seed.trim()).unwrap();
        let sig = kp.sign(info["nonce"].as_str().unwrap().as_bytes()).unwrap();
        let connect = serde_json::json!({
            "verbose": false, "pedantic": false, "headers": true, "protocol": 1,
            "nkey": kp.public_key(), "sig": base64url(&sig),
        });
        let mut raw = Raw { w, r };
        raw.send(format!("CONNECT {connect}\r\n").as_bytes());
        raw.flush();
        raw
    }

    pub fn send(&mut self, b: &[u8]) {
        self.w.write_all(b).unwrap();
    }

    /// PING, and wait for the PONG: everything before it was taken (an `-ERR` fails).
    pub fn flush(&mut self) {
        self.send(b"PING\r\n");
        loop {
            let mut l = String::new();
            self.r.read_line(&mut l).unwrap();
            assert!(!l.starts_with("-ERR"), "the broker refused: {l}");
            if l.starts_with("PONG") {
                return;
            }
        }
    }

    /// Publishes `payload` on `subject` with `headers`.
    pub fn hpub(&mut self, subject: &str, headers: &[(&str, &str)], payload: &[u8]) {
        let mut h = String::from("NATS/1.0\r\n");
        for (k, v) in headers {
            h.push_str(&format!("{k}: {v}\r\n"));
        }
        h.push_str("\r\n");
        let head = format!("HPUB {subject} {} {}\r\n", h.len(), h.len() + payload.len());
        self.send(head.as_bytes());
        self.send(h.as_bytes());
        self.send(payload);
        self.send(b"\r\n");
    }

    /// The records of `job` as its agent publishes them, message ids `<id_prefix>.<i>`.
    pub fn records(&mut self, tenant: &str, job: &str, id_prefix: &str, records: &[String]) {
        for (i, rec) in records.iter().enumerate() {
            let (id, index) = (format!("{id_prefix}.{i}"), i.to_string());
            self.hpub(
                &format!("vtnt.results.{tenant}.{job}.r"),
                &[
                    ("Nats-Msg-Id", &id),
                    ("Vtnt-Index", &index),
                    ("Vtnt-Node", "node-1"),
                    ("Vtnt-Clock-Sync", "yes"),
                    ("Vtnt-Clock-Offset-Us", "-250"),
                    ("Vtnt-Clock-Error-Us", "40"),
                    ("Vtnt-Image-Sha256", PROVENANCE_SHA256),
                    ("Vtnt-Source", "192.0.2.2"),
                ],
                rec.as_bytes(),
            );
        }
        self.flush();
    }

    /// The job's summary.
    pub fn summary(&mut self, tenant: &str, job: &str, records: usize) {
        let s = serde_json::json!({
            "job": job, "tenant": tenant, "node": "node-1", "location": "fr",
            "runtime": "native", "status": "ok", "code": 0, "records": records,
            "delivery": 1, "clock_sync": "yes",
            "timings": {"queue_ms": 1.0, "deploy_ms": 2.0, "exec_ms": 3.0, "cleanup_ms": 0.5, "total_ms": 6.5},
        });
        self.hpub(
            &format!("vtnt.results.{tenant}.{job}.s"),
            &[("Nats-Msg-Id", &format!("{job}.s"))],
            s.to_string().as_bytes(),
        );
        self.flush();
    }
}
