//! Compare-and-set on a subject whose last message is a value (a tenant's quota use, a
//! key's rate leases, the opt-out list, a measurement's definition): the value read with
//! its sequence ([`last`]), a write that lands only while the subject is still at that
//! sequence (`Nats-Expected-Last-Subject-Sequence`, [`write_if`]), and both in a loop
//! ([`update`]): read, change, write, again from a fresh read while another writer comes
//! first. Of two writers at once one wins; the other applies its change to the winner's.

use std::time::Duration;

use async_nats::jetstream;
use bytes::Bytes;

use crate::error::{bail, ResultExt};

/// How often [`update`] writes again after another writer came first.
const TRIES: u32 = 64;

/// The last message on `subject` of `st` and its sequence; `None` when there is none.
pub async fn last(
    st: &jetstream::stream::Stream,
    subject: &str,
) -> crate::Result<Option<(Bytes, u64)>> {
    use jetstream::stream::LastRawMessageErrorKind;
    match st.get_last_raw_message_by_subject(subject).await {
        Ok(m) => Ok(Some((m.payload, m.sequence))),
        Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
        Err(e) => Err(e).nats(|| format!("reading {subject}")),
    }
}

/// The last message on `subject` of `st` as JSON, and its sequence (0: none).
pub async fn last_json<T: serde::de::DeserializeOwned>(
    st: &jetstream::stream::Stream,
    subject: &str,
) -> crate::Result<(Option<T>, u64)> {
    match last(st, subject).await? {
        Some((body, seq)) => Ok((
            Some(serde_json::from_slice(&body).parse(|| format!("the message on {subject}"))?),
            seq,
        )),
        None => Ok((None, 0)),
    }
}

/// Publishes `body` on `subject` if its last message is still sequence `seq` (0: it has
/// none): the new sequence, or `None` when another writer came first. `what` names the
/// value in an error.
pub async fn write_if(
    js: &jetstream::Context,
    subject: &str,
    seq: u64,
    body: Vec<u8>,
    what: &str,
) -> crate::Result<Option<u64>> {
    let mut h = async_nats::HeaderMap::new();
    h.insert(
        "Nats-Expected-Last-Subject-Sequence",
        seq.to_string().as_str(),
    );
    let ack = js
        .publish_with_headers(subject.to_string(), h, body.into())
        .await
        .nats(|| format!("storing {what}"))?
        .await;
    match ack {
        Ok(a) => Ok(Some(a.sequence)),
        Err(e) if e.kind() == jetstream::context::PublishErrorKind::WrongLastSequence => Ok(None),
        Err(e) => Err(e).nats(|| format!("storing {what}")),
    }
}

/// What a change of [`update`] makes of the value it was given.
pub enum Step<R> {
    /// Write this in its place; `R` is handed back once it landed.
    Write(Vec<u8>, R),
    /// Leave it as it is (nothing changed, or a refusal).
    Keep(R),
}

/// Reads `subject`'s last message (`None`: none yet), hands it to `change`, writes what
/// that makes of it against the sequence read, and again from a fresh read, after a
/// moment of its own, while another writer comes first (at most [`TRIES`] times). What
/// `change` handed back, and the subject's sequence after it.
pub async fn update<R>(
    js: &jetstream::Context,
    st: &jetstream::stream::Stream,
    subject: &str,
    what: &str,
    mut change: impl FnMut(Option<&[u8]>) -> crate::Result<Step<R>>,
) -> crate::Result<(R, u64)> {
    for _ in 0..TRIES {
        let read = last(st, subject).await?;
        let seq = read.as_ref().map_or(0, |(_, s)| *s);
        match change(read.as_ref().map(|(b, _)| b.as_ref()))? {
            Step::Keep(out) => return Ok((out, seq)),
            Step::Write(body, out) => {
                if let Some(written) = write_if(js, subject, seq, body, what).await? {
                    return Ok((out, written));
                }
            }
        }
        let pause = 1 + crate::now_us() % 20;
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
    bail!(
        Invalid,
        "{what} kept changing: {TRIES} writes in a row lost to other writers; try again"
    )
}
