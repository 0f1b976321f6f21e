//! Live progress of a probing run on stderr: on a terminal, a bar that moves every second
//! (targets done, probes sent, replies, elapsed time, an ETA once a target is done);
//! otherwise one status line every 10 s; nothing with `--quiet`.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use vtnt_job::say;
use vtnt_linux::LoopStats;

/// How often the status line is printed when stderr is not a terminal.
const LINE_EVERY: Duration = Duration::from_secs(10);

/// How often the bar's message is redrawn.
const BAR_EVERY: Duration = Duration::from_secs(1);

enum Show {
    Bar(ProgressBar),
    Lines,
    Nothing,
}

/// The progress of one run of `n` targets.
pub struct Progress {
    show: Show,
    what: &'static str,
    n: usize,
    done: usize,
    start: Instant,
    shown: Instant,
    stats: LoopStats,
}

impl Progress {
    /// A display for `n` targets (`what`: "traces", "targets"...), silent when `quiet`.
    pub fn new(n: usize, what: &'static str, quiet: bool) -> Progress {
        let show = if quiet {
            Show::Nothing
        } else if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(n as u64);
            bar.set_style(
                ProgressStyle::with_template("{spinner} {pos}/{len} {msg} {wide_bar}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.enable_steady_tick(BAR_EVERY);
            Show::Bar(bar)
        } else {
            Show::Lines
        };
        let start = Instant::now();
        let p = Progress {
            show,
            what,
            n,
            done: 0,
            start,
            shown: start,
            stats: LoopStats::default(),
        };
        p.redraw();
        p
    }

    /// One target finished.
    pub fn target_done(&mut self) {
        self.done += 1;
        if let Show::Bar(bar) = &self.show {
            bar.inc(1);
        }
    }

    /// The probing loop's counters so far (called on every wake-up).
    pub fn stats(&mut self, stats: &LoopStats) {
        self.stats = *stats;
        let every = match self.show {
            Show::Bar(_) => BAR_EVERY,
            Show::Lines => LINE_EVERY,
            Show::Nothing => return,
        };
        if self.shown.elapsed() >= every {
            self.shown = Instant::now();
            self.redraw();
        }
    }

    /// Runs `f` (which prints a line) without garbling the bar.
    pub fn suspend(&self, f: impl FnOnce()) {
        match &self.show {
            Show::Bar(bar) => bar.suspend(f),
            _ => f(),
        }
    }

    /// Removes the bar.
    pub fn finish(self) {
        if let Show::Bar(bar) = &self.show {
            bar.finish_and_clear();
        }
    }

    fn redraw(&self) {
        let detail = detail(
            self.what,
            self.done,
            self.n,
            &self.stats,
            self.start.elapsed(),
        );
        match &self.show {
            Show::Bar(bar) => bar.set_message(detail),
            Show::Lines if self.start.elapsed() >= LINE_EVERY => {
                say!("vtnt: {}/{} {detail}", self.done, self.n);
            }
            _ => {}
        }
    }
}

/// `targets, 1234 probes sent, 1100 replies, 40 s, ETA 27 min` (after `done/n`).
fn detail(what: &str, done: usize, n: usize, stats: &LoopStats, elapsed: Duration) -> String {
    let eta = if done == 0 || done >= n {
        String::from("ETA ?")
    } else {
        let left = elapsed.as_secs_f64() / done as f64 * (n - done) as f64;
        format!("ETA {}", span(Duration::from_secs_f64(left)))
    };
    let eta = if done >= n {
        String::new()
    } else {
        format!(", {eta}")
    };
    format!(
        "{what}, {} probes sent, {} replies, {}{eta}",
        stats.sent,
        stats.received,
        span(elapsed)
    )
}

/// `40 s`, `27 min`, `3 h 5 min`.
fn span(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_detail_says_targets_probes_replies_time_and_eta() {
        let stats = LoopStats {
            sent: 1234,
            received: 1100,
            ..LoopStats::default()
        };
        let at = Duration::from_secs(40);
        assert_eq!(
            detail("targets", 0, 128, &stats, at),
            "targets, 1234 probes sent, 1100 replies, 40 s, ETA ?"
        );
        assert_eq!(
            detail("targets", 4, 128, &stats, at),
            "targets, 1234 probes sent, 1100 replies, 40 s, ETA 20 min"
        );
        assert_eq!(
            detail("traces", 2, 2, &stats, Duration::from_secs(7300)),
            "traces, 1234 probes sent, 1100 replies, 2 h 1 min"
        );
    }
}
