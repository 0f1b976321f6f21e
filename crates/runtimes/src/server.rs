//! The image server: plain HTTP/1.1 on 127.0.0.1 (an ephemeral port), serving the built
//! images by file name under one shared bandwidth limit (a token bucket in 64 KiB
//! chunks), standing in for the paper's downloads from DockerHub / VagrantCloud / a web
//! server. [`fetch`] is its client. The server thread stops when the [`ImageServer`] is
//! dropped.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Error, IoContext, Result};

use crate::runtime::{ImageInfo, Runtime};

const CHUNK: usize = 64 * 1024;

/// A shared bandwidth limit: bytes may be sent once the bucket holds them.
#[derive(Debug)]
struct Bucket {
    bytes_per_sec: f64,
    /// When the link is next free.
    next_free: Instant,
}

impl Bucket {
    /// Reserves `n` bytes of link time; returns how long to wait before sending them.
    fn reserve(&mut self, n: usize) -> Duration {
        let now = Instant::now();
        let start = self.next_free.max(now);
        self.next_free = start + Duration::from_secs_f64(n as f64 / self.bytes_per_sec);
        self.next_free.saturating_duration_since(now)
    }
}

/// A running image server.
pub struct ImageServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    names: HashMap<Runtime, String>,
}

impl ImageServer {
    /// Serves `images` (by file name) on 127.0.0.1 at `bandwidth_bps` bits per second in
    /// total.
    pub fn start(images: &[&ImageInfo], bandwidth_bps: u64) -> Result<ImageServer> {
        ImageServer::start_on(SocketAddr::from(([127, 0, 0, 1], 0)), images, bandwidth_bps)
    }

    /// The same on `listen` (port 0: an ephemeral one).
    pub fn start_on(
        listen: SocketAddr,
        images: &[&ImageInfo],
        bandwidth_bps: u64,
    ) -> Result<ImageServer> {
        let mut files: HashMap<String, PathBuf> = HashMap::new();
        let mut names = HashMap::new();
        for im in images {
            let name = file_name(im)?;
            files.insert(name.clone(), im.path.clone());
            names.insert(im.runtime, name);
        }
        let listener =
            TcpListener::bind(listen).doing(|| format!("image server: binding {listen}"))?;
        let addr = listener
            .local_addr()
            .doing(|| format!("image server: binding {listen}"))?;
        listener
            .set_nonblocking(true)
            .doing(|| format!("image server: binding {listen}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let bucket = Arc::new(Mutex::new(Bucket {
            bytes_per_sec: (bandwidth_bps.max(8_000) / 8) as f64,
            next_free: Instant::now(),
        }));
        let files = Arc::new(files);
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("vtnt-image-server".into())
            .spawn(move || {
                while !stop2.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((s, _)) => {
                            let (files, bucket, stop3) =
                                (files.clone(), bucket.clone(), stop2.clone());
                            std::thread::spawn(move || {
                                let _ = serve(s, &files, &bucket, &stop3);
                            });
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
            .doing(|| "spawning the image server thread".into())?;
        Ok(ImageServer {
            addr,
            stop,
            thread: Some(thread),
            names,
        })
    }

    /// `http://<address>:<port>/<file>` of a runtime's image.
    pub fn url(&self, rt: Runtime) -> Result<String> {
        let n = self
            .names
            .get(&rt)
            .ok_or_else(|| Error::Image(format!("the image server has no {} image", rt.name())))?;
        Ok(format!("http://{}/{n}", self.addr))
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// The name an image is served by.
pub fn file_name(image: &ImageInfo) -> Result<String> {
    Ok(image
        .path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Error::Image("image without a file name".into()))?
        .to_string())
}

impl Drop for ImageServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(
    s: TcpStream,
    files: &HashMap<String, PathBuf>,
    bucket: &Mutex<Bucket>,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut r = BufReader::new(s.try_clone()?);
    let mut line = String::new();
    r.read_line(&mut line)?;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
    }
    let mut w = s;
    let parts: Vec<&str> = line.split_whitespace().collect();
    let file = match parts.as_slice() {
        ["GET", path, ..] => files.get(path.trim_start_matches('/')),
        _ => None,
    };
    let Some(file) = file else {
        w.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")?;
        return Ok(());
    };
    let mut f = std::fs::File::open(file)?;
    let len = f.metadata()?.len();
    write!(w, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n")?;
    let mut buf = vec![0u8; CHUNK];
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        let wait = bucket.lock().map(|mut b| b.reserve(n)).unwrap_or_default();
        std::thread::sleep(wait);
        w.write_all(&buf[..n])?;
    }
}

/// Downloads `url` (`http://host:port/path`) to `dest`; returns the bytes received.
pub fn fetch(url: &str, dest: &Path) -> Result<u64> {
    let rest = url.strip_prefix("http://").ok_or_else(|| Error::Download {
        url: url.into(),
        why: "not an http:// URL".into(),
    })?;
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_string()), |(h, p)| (h, format!("/{p}")));
    let s = TcpStream::connect(host).doing(|| format!("connecting to the image server {host}"))?;
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .doing(|| format!("connecting to the image server {host}"))?;
    let mut w = s
        .try_clone()
        .doing(|| format!("connecting to the image server {host}"))?;
    write!(
        w,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .doing(|| format!("sending GET {url}"))?;
    let mut r = BufReader::with_capacity(CHUNK, s);
    let mut status = String::new();
    r.read_line(&mut status)
        .doing(|| format!("reading the status of {url}"))?;
    if !status.starts_with("HTTP/1.1 200") {
        return Err(Error::Download {
            url: url.into(),
            why: status.trim().into(),
        });
    }
    let mut len: Option<u64> = None;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h)
            .doing(|| format!("reading the headers of {url}"))?
            == 0
            || h == "\r\n"
        {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().ok();
            }
        }
    }
    let mut out = std::fs::File::create(dest).doing(|| format!("creating {}", dest.display()))?;
    let n = std::io::copy(&mut r, &mut out).doing(|| format!("downloading {url}"))?;
    if let Some(l) = len {
        if l != n {
            return Err(Error::Download {
                url: url.into(),
                why: format!("{n} bytes received, {l} announced"),
            });
        }
    }
    out.sync_all().ok();
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_at_the_configured_rate() {
        let dir = std::env::temp_dir().join(crate::paths::unique("vtnt-srv-test"));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("img.bin");
        std::fs::write(&f, vec![7u8; 1_000_000]).unwrap();
        let info = ImageInfo {
            runtime: Runtime::Native,
            path: f,
            download_bytes: 1_000_000,
            size_bytes: 1_000_000,
            size_note: String::new(),
            pin: None,
        };
        // 40 Mbit/s: 1 MB takes 0.2 s
        let srv = ImageServer::start(&[&info], 40_000_000).unwrap();
        let t = Instant::now();
        let n = fetch(&srv.url(Runtime::Native).unwrap(), &dir.join("got")).unwrap();
        let el = t.elapsed();
        assert_eq!(n, 1_000_000);
        assert!(el >= Duration::from_millis(180), "{el:?}");
        assert!(el < Duration::from_secs(2), "{el:?}");
        assert_eq!(
            std::fs::read(dir.join("got")).unwrap(),
            vec![7u8; 1_000_000]
        );
        assert!(fetch(&format!("http://{}/nope", srv.addr()), &dir.join("x")).is_err());
        drop(srv);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
