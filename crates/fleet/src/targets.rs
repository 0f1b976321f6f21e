//! A job's long target list, which travels apart from its request: past
//! [`INLINE_TARGETS`](crate::INLINE_TARGETS) targets the controller stores the list in its
//! tenant's data stream ([`crate::data_stream`]) in chunks of
//! [`DATA_CHUNK_BYTES`](crate::DATA_CHUNK_BYTES), under NATS's largest message, and the
//! request says where ([`TargetList`]); the agent fetches it before the job starts and
//! removes it once the job's results are stored. Jobs of up to
//! [`MAX_TARGETS`](crate::MAX_TARGETS) targets so cross the fleet with requests of a few
//! hundred bytes.

use async_nats::jetstream;
use async_nats::jetstream::stream::LastRawMessageErrorKind;

use crate::error::{bail, ResultExt};
use crate::proto::{JobRequest, TargetList};
use crate::{Error, Fleet};

/// Stores job `job`'s target list `list` (one address a line) in `tenant`'s data stream;
/// each chunk's message id is the chunk's, so a retry stores it once. What the request
/// says of it.
pub async fn store(
    fleet: &Fleet,
    tenant: &str,
    job: &str,
    list: &str,
) -> crate::Result<TargetList> {
    if !fleet.own_account() {
        // a server of one's own: made by the first client to need it
        fleet.data(tenant).await?;
    }
    let room = format!(
        "tenant {tenant}'s target lists hold {} MiB at most",
        crate::DATA_STREAM_BYTES >> 20
    );
    let subject = |i| crate::data_subject(tenant, job, Some(i));
    store_chunks(&fleet.js, subject, job, list, &room).await
}

/// Stores `list` in chunks of [`DATA_CHUNK_BYTES`](crate::DATA_CHUNK_BYTES), chunk `i` on
/// `subject(i)` with the message id `<id>.d<i>`; `room` says how much the stream holds
/// (in an error). What a request says of the list.
pub(crate) async fn store_chunks(
    js: &jetstream::Context,
    subject: impl Fn(u32) -> String,
    id: &str,
    list: &str,
    room: &str,
) -> crate::Result<TargetList> {
    let chunks: Vec<&[u8]> = list.as_bytes().chunks(crate::DATA_CHUNK_BYTES).collect();
    let mut acks = Vec::with_capacity(chunks.len());
    for (i, c) in chunks.iter().enumerate() {
        let mut h = async_nats::HeaderMap::new();
        h.insert("Nats-Msg-Id", format!("{id}.d{i}").as_str());
        acks.push(
            js.publish_with_headers(subject(i as u32), h, bytes::Bytes::copy_from_slice(c))
                .await?,
        );
    }
    for a in acks {
        a.await
            .nats(|| format!("storing the target list ({room})"))?;
    }
    Ok(TargetList {
        count: list.lines().count() as u64,
        bytes: list.len() as u64,
        chunks: chunks.len() as u32,
    })
}

/// The target list of `req` (`None` when its targets are in its line), checked against
/// what the request says of it; errors say what is wrong with it ([`Error::Invalid`]) or
/// which read the broker did not answer.
pub async fn fetch(fleet: &Fleet, req: &JobRequest) -> crate::Result<Option<String>> {
    let Some(t) = req.targets else {
        return Ok(None);
    };
    let stream = fleet
        .shared
        .get_stream(crate::data_stream(&req.tenant))
        .await
        .nats(|| format!("its target list: tenant {}'s stream", req.tenant))?;
    let subject = |i| crate::data_subject(&req.tenant, &req.id, Some(i));
    fetch_chunks(&stream, subject, t).await.map(Some)
}

/// The list whose chunks are on `subject(i)` of `stream` ([`store_chunks`]), checked
/// against `t`, what its storer said of it.
pub(crate) async fn fetch_chunks(
    stream: &jetstream::stream::Stream,
    subject: impl Fn(u32) -> String,
    t: TargetList,
) -> crate::Result<String> {
    let most_chunks = crate::MAX_TARGET_BYTES.div_ceil(crate::DATA_CHUNK_BYTES) as u32;
    if t.bytes > crate::MAX_TARGET_BYTES as u64 || t.chunks > most_chunks {
        bail!(
            Invalid,
            "refused: its target list ({} bytes in {} chunks) is longer than a fleet job's ({} bytes)",
            t.bytes,
            t.chunks,
            crate::MAX_TARGET_BYTES
        );
    }
    let mut text = Vec::with_capacity(t.bytes as usize);
    for i in 0..t.chunks {
        let what = || format!("its target list, chunk {} of {}", i + 1, t.chunks);
        let m = match stream.get_last_raw_message_by_subject(&subject(i)).await {
            Ok(m) => m,
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => {
                bail!(
                    Invalid,
                    "{}: not in the stream (expired or removed)",
                    what()
                )
            }
            Err(e) => return Err(e).nats(what),
        };
        text.extend_from_slice(&m.payload);
        if text.len() as u64 > t.bytes {
            break;
        }
    }
    if text.len() as u64 != t.bytes {
        bail!(
            Invalid,
            "its target list holds {} bytes, its request says {}",
            text.len(),
            t.bytes
        );
    }
    String::from_utf8(text).map_err(|_| Error::Invalid("its target list is not UTF-8".into()))
}

/// Removes `req`'s target list, if it had one: its job is done, its results stored.
pub async fn remove(fleet: &Fleet, req: &JobRequest) -> crate::Result<()> {
    if req.targets.is_none() {
        return Ok(());
    }
    fleet
        .shared
        .get_stream(crate::data_stream(&req.tenant))
        .await?
        .purge()
        .filter(crate::data_subject(&req.tenant, &req.id, None))
        .await
        .nats(|| format!("removing job {}'s target list", req.id))?;
    Ok(())
}
