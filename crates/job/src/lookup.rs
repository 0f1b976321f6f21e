//! Blocking look-ups (a host name's address, an address's reverse name) on a pool of
//! threads, so that a caller waits for answers only as long as it chooses: a look-up
//! still running when its caller stops waiting is left to its thread, and its answer is
//! dropped. The resolver's own timeouts (seconds per server and try) then never decide
//! how long a run takes.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A pool of `threads` threads answering keys `K` with `look`.
#[derive(Debug)]
pub struct Lookups<K, V> {
    work: Sender<K>,
    answers: Receiver<(K, V)>,
}

impl<K: Send + 'static, V: Send + 'static> Lookups<K, V> {
    /// Starts `threads` threads (at least one). They end once the pool is dropped, each
    /// after the look-up it is in.
    pub fn new(threads: usize, look: fn(&K) -> V) -> Self {
        let (work, queue) = mpsc::channel::<K>();
        let queue = Arc::new(Mutex::new(queue));
        let (tx, answers) = mpsc::channel();
        for _ in 0..threads.max(1) {
            let (queue, tx) = (Arc::clone(&queue), tx.clone());
            std::thread::spawn(move || loop {
                let next = queue.lock().ok().and_then(|q| q.recv().ok());
                let Some(k) = next else { return };
                let v = look(&k);
                if tx.send((k, v)).is_err() {
                    return;
                }
            });
        }
        Lookups { work, answers }
    }

    /// Queues a look-up of `k`.
    pub fn ask(&self, k: K) {
        // The threads hold the queue's receiver until the pool is dropped.
        let _ = self.work.send(k);
    }

    /// The next answer, waiting for it until `deadline` at most (`None`: none by then).
    pub fn answer_by(&self, deadline: Instant) -> Option<(K, V)> {
        let wait = deadline.saturating_duration_since(Instant::now());
        self.answers.recv_timeout(wait).ok()
    }

    /// An answer that has come, without waiting.
    pub fn answer_now(&self) -> Option<(K, V)> {
        self.answers.try_recv().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn answers_come_back_and_slow_ones_are_left_behind() {
        let pool = Lookups::new(2, |k: &u64| {
            std::thread::sleep(Duration::from_millis(*k));
            k * 2
        });
        pool.ask(1);
        pool.ask(5_000);
        let start = Instant::now();
        let deadline = start + Duration::from_millis(500);
        assert_eq!(pool.answer_by(deadline), Some((1, 2)));
        assert_eq!(pool.answer_by(deadline), None);
        assert!(start.elapsed() < Duration::from_secs(2));
        assert_eq!(pool.answer_now(), None);
    }
}
