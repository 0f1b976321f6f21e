//! Images in a NATS object store (bucket [`IMAGES_BUCKET`](crate::IMAGES_BUCKET)), the
//! other way agents fetch them besides an image server: `vtnt fleet images put` (the
//! operator's key) builds the images of the runtimes asked for and stores each under its
//! file name; an agent started with `--images-from nats` fetches a job's image from the
//! bucket over its own broker connection, inside the job's deploy time. Chunks are
//! JetStream messages, so the store is replicated like the fleet's streams and reaches
//! agents wherever the broker does (leaf nodes, clusters).
//!
//! An image that is an installed artifact (the static vtnt, the unikernel's) is stored
//! with the SHA-256 its manifest pins (object metadata `sha256`, shown by `list`); an
//! agent checks what it fetched against its own manifest's pin before it installs it
//! (`vtnt_runtimes::instance::deploy_from`), so it boots only images its package ships.

use std::path::Path;
use std::sync::Arc;

use crate::error::ResultExt;
use crate::Error;
use async_nats::jetstream::object_store::{self, ObjectStore};
use futures::StreamExt;
use serde::Serialize;
use vtnt_runtimes::{BuildOptions, FetchImage, Runtime};

use crate::{Connect, IMAGES_BUCKET};

/// An image in the bucket.
#[derive(Debug, Clone, Serialize)]
pub struct StoredImage {
    pub name: String,
    pub bytes: usize,
    pub chunks: usize,
    /// The SHA-256 the putter's manifest pins it to (`None`: an image built on a host).
    pub sha256: Option<String>,
}

/// The object metadata key of an image's pinned SHA-256.
const SHA256: &str = "sha256";

/// The bucket, created unless it exists (`vtnt fleet up`; the operator on a server of
/// one's own).
pub(crate) async fn create(fleet: &crate::Fleet) -> crate::Result<ObjectStore> {
    match fleet.js.get_object_store(IMAGES_BUCKET).await {
        Ok(s) => Ok(s),
        Err(_) => fleet
            .js
            .create_object_store(object_store::Config {
                bucket: IMAGES_BUCKET.into(),
                description: Some("vtnt's runtime images, by file name".into()),
                num_replicas: fleet.num_replicas,
                ..Default::default()
            })
            .await
            .nats("creating the images' object store"),
    }
}

/// The bucket as an agent sees it: there, or a clear error.
pub async fn open(fleet: &crate::Fleet) -> crate::Result<ObjectStore> {
    fleet.js.get_object_store(IMAGES_BUCKET).await.map_err(|e| {
        Error::Invalid(format!(
            "the fleet has no images' object store ({e}): `vtnt fleet images put` first"
        ))
    })
}

/// Checks that `store` holds each of `images` (an agent's, by runtime), or says which
/// is missing and how to put it.
pub async fn check(store: &ObjectStore, images: &[vtnt_runtimes::ImageInfo]) -> crate::Result<()> {
    for im in images {
        let name = vtnt_runtimes::server::file_name(im)?;
        store.info(name.as_str()).await.map_err(|e| {
            Error::Invalid(format!(
                "the fleet's images' object store has no `{name}` ({e}): `vtnt fleet images put --runtimes {}` first",
                im.runtime.name()
            ))
        })?;
    }
    Ok(())
}

/// Builds the images of `runtimes` and stores each under its file name (replacing an
/// object of that name).
pub fn put(c: &Connect, runtimes: &[Runtime]) -> crate::Result<Vec<StoredImage>> {
    let images = runtimes
        .iter()
        .map(|rt| rt.build_image(&BuildOptions::default()))
        .collect::<vtnt_runtimes::Result<Vec<_>>>()?;
    crate::block_on(async {
        let (_client, fleet) = c.fleet("vtnt fleet images").await?;
        let store = create(&fleet).await?;
        let mut out = Vec::new();
        for im in &images {
            let name = vtnt_runtimes::server::file_name(im)?;
            let mut file = tokio::fs::File::open(&im.path)
                .await
                .io(|| format!("{}", im.path.display()))?;
            let sha256 = im.pin.as_ref().map(|p| p.sha256.clone());
            let meta = object_store::ObjectMetadata {
                name: name.clone(),
                metadata: sha256.iter().map(|h| (SHA256.into(), h.clone())).collect(),
                ..Default::default()
            };
            let info = store
                .put(meta, &mut file)
                .await
                .nats(|| format!("storing {name}"))?;
            out.push(StoredImage {
                name,
                bytes: info.size,
                chunks: info.chunks,
                sha256,
            });
        }
        Ok(out)
    })
}

/// The images in the bucket.
pub fn list(c: &Connect) -> crate::Result<Vec<StoredImage>> {
    crate::block_on(async {
        let (_client, fleet) = c.fleet("vtnt fleet images").await?;
        let store = open(&fleet).await?;
        let mut all = store.list().await.nats("listing the images")?;
        let mut out = Vec::new();
        while let Some(i) = all.next().await {
            let i = i.nats("listing the images")?;
            out.push(StoredImage {
                sha256: i.metadata.get(SHA256).cloned(),
                name: i.name,
                bytes: i.size,
                chunks: i.chunks,
            });
        }
        Ok(out)
    })
}

/// A fetcher for [`vtnt_runtimes::ImageSource::Fetch`] reading `store` on the runtime of
/// `handle` (the agent's, whose main thread drives it; jobs call it from their blocking
/// threads).
pub fn fetcher(store: ObjectStore, handle: tokio::runtime::Handle) -> Arc<FetchImage> {
    Arc::new(move |name: &str, dest: &Path| {
        let fetched: crate::Result<u64> = handle.block_on(async {
            let mut obj = store
                .get(name)
                .await
                .nats(|| format!("image `{name}` from the fleet's object store"))?;
            let mut file = tokio::fs::File::create(dest)
                .await
                .io(|| format!("{}", dest.display()))?;
            let n = tokio::io::copy(&mut obj, &mut file)
                .await
                .io(|| format!("image `{name}` from the fleet's object store"))?;
            tokio::io::AsyncWriteExt::flush(&mut file)
                .await
                .io(|| format!("{}", dest.display()))?;
            Ok(n)
        });
        // the store's error, its chain kept, under vtnt-runtimes' "fetching the ... image"
        fetched.map_err(Into::into)
    })
}
