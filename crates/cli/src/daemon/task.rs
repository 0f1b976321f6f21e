//! A command of the daemon while it probes: its own sans-IO prober (an engine with the
//! command's one measurement, or TNT's runner), driven with all the others by the
//! daemon's one loop on one set of raw sockets. Each prober takes from the packets it is
//! handed only the replies to its own probes (every run's probes carry their own tag).

use vtnt_engine::{Engine, Event, Instant, Prober};
use vtnt_formats::Record;
use vtnt_job::{Job, JobKind};
use vtnt_tnt::{TntResult, TntRunner};

use crate::{probe, tnt};

/// One result of a command.
pub enum Outcome {
    Record(Record),
    Tnt(Box<TntResult>),
}

enum Run {
    Probe(Box<Engine>),
    Tnt(Box<TntRunner>),
}

/// A started command.
pub struct Task {
    /// Its id in its client's session.
    pub id: u32,
    /// Its traces wait for their hops' names (`-O ptr`).
    pub names: bool,
    run: Run,
    /// What a halted TNT task had finished, to hand out (last first).
    halted: Vec<TntResult>,
}

impl Task {
    /// Builds the prober of `job`, its measurement started at `now`.
    pub fn start(id: u32, job: &Job, now: Instant) -> anyhow::Result<Task> {
        let run = match job.spec.kind {
            JobKind::Tnt(_) => {
                let (runner, _, _) = tnt::runner(job, tnt::ReadBack::default(), false)?;
                Run::Tnt(Box::new(runner))
            }
            _ => Run::Probe(Box::new(probe::engine(job, now)?)),
        };
        Ok(Task {
            id,
            names: job.names,
            run,
            halted: Vec::new(),
        })
    }

    /// `halt`: the task stops probing now; what it measured so far is its output (a
    /// trace ends HALTED, a ping with the replies it has, a TNT target's finished traces
    /// and pings marked incomplete), as scamper's tasks do.
    pub fn halt(&mut self, now: Instant) {
        match &mut self.run {
            Run::Probe(p) => p.halt(now),
            Run::Tnt(p) => {
                self.halted = p.take_unfinished();
                self.halted.reverse();
            }
        }
    }
}

impl Prober for Task {
    type Output = Outcome;
    fn handle_packet(&mut self, now: Instant, packet: &[u8]) {
        match &mut self.run {
            Run::Probe(p) => p.handle_packet(now, packet),
            Run::Tnt(p) => p.handle_packet(now, packet),
        }
    }
    fn handle_transmitted(&mut self, at: Instant, packet: &[u8]) {
        match &mut self.run {
            Run::Probe(p) => p.handle_transmitted(at, packet),
            Run::Tnt(p) => p.handle_transmitted(at, packet),
        }
    }
    fn handle_send_error(&mut self, now: Instant, packet: &[u8], errno: i32) {
        match &mut self.run {
            Run::Probe(p) => p.handle_send_error(now, packet, errno),
            Run::Tnt(p) => p.handle_send_error(now, packet, errno),
        }
    }
    fn handle_timeout(&mut self, now: Instant) {
        match &mut self.run {
            Run::Probe(p) => p.handle_timeout(now),
            Run::Tnt(p) => p.handle_timeout(now),
        }
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        match &mut self.run {
            Run::Probe(p) => Prober::poll_transmit(p.as_mut(), now, buf),
            Run::Tnt(p) => Prober::poll_transmit(p.as_mut(), now, buf),
        }
    }
    fn poll_timeout(&self) -> Option<Instant> {
        match &self.run {
            Run::Probe(p) => p.poll_timeout(),
            Run::Tnt(p) => p.poll_timeout(),
        }
    }
    fn poll_output(&mut self) -> Option<Outcome> {
        match &mut self.run {
            Run::Probe(p) => p
                .poll_event()
                .map(|Event::Finished { record, .. }| Outcome::Record(record)),
            Run::Tnt(p) => p
                .poll_output()
                .or_else(|| self.halted.pop())
                .map(|r| Outcome::Tnt(Box::new(r))),
        }
    }
    fn is_idle(&self) -> bool {
        match &self.run {
            Run::Probe(p) => p.is_idle(),
            Run::Tnt(p) => p.is_idle(),
        }
    }
}
