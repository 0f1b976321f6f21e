//! An image fetched for a deploy (from an image server, the fleet's object store, any
//! fetcher) is checked against what this host's manifest pins before it is installed:
//! an altered copy is refused, naming the runtime and the file. Uses the installed static
//! `vtnt` (`cargo xtask dist`); needs no root (its cache and work directories are its own).

use std::path::Path;

use vtnt_runtimes::net::Network;
use vtnt_runtimes::{instance, BoxError, BuildOptions, Error, Runtime};

#[test]
fn a_fetched_image_that_differs_from_its_pin_is_refused() {
    let dir = std::env::temp_dir().join(format!("vtnt-pins-{}", std::process::id()));
    // the only test of this binary: no other thread reads the environment
    std::env::set_var("VTNT_CACHE_DIR", dir.join("cache"));
    std::env::set_var("VTNT_DEPLOY_WORK_DIR", dir.join("work"));
    let image = match Runtime::Native.build_image(&BuildOptions::default()) {
        Ok(i) => i,
        Err(e) => {
            vtnt_testkit::skip_or_fail(
                vtnt_testkit::test_name!(),
                &format!("{:#}", anyhow::Error::new(e)),
                None,
            );
            return;
        }
    };
    assert!(image.pin.is_some(), "the static vtnt is pinned");
    let fetch_altered = |dst: &Path| -> Result<u64, BoxError> {
        let mut bytes = std::fs::read(&image.path)?;
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xff;
        std::fs::write(dst, &bytes)?;
        Ok(bytes.len() as u64)
    };
    let err = instance::deploy_from(
        Runtime::Native,
        &image,
        &fetch_altered,
        None,
        &Network::Host,
    )
    .err()
    .expect("an altered image is refused");
    assert!(
        matches!(
            &err,
            Error::Pinned {
                runtime: "native",
                ..
            }
        ),
        "{err:?}"
    );
    let err = format!("{:#}", anyhow::Error::new(err));
    assert!(
        err.starts_with(
            "the native image as fetched differs from what this host's artifacts.toml pins: "
        ) && err.contains("/vtnt-static is refused: sha256 "),
        "{err}"
    );
    let fetch = |dst: &Path| -> Result<u64, BoxError> { Ok(std::fs::copy(&image.path, dst)?) };
    let deployed = instance::deploy_from(Runtime::Native, &image, &fetch, None, &Network::Host);
    assert!(deployed.is_ok(), "{:?}", deployed.err().unwrap());
    drop(deployed);
    let _ = std::fs::remove_dir_all(&dir);
}
