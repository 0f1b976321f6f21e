//! Every runtime returns what the native run returns for the same job (scamper JSON
//! lines, run-dependent fields aside: `vtnt_runtimes::job::normalize`), each against a lab
//! of its own. Needs root; a test whose components are missing skips through vtnt-testkit
//! (failing under `VTNT_REQUIRE_ALL=1`: scripts/setup.sh installs them all).

mod common;

use std::time::Duration;

use vtnt_measure::proc::retry_once_on_timeout;
use vtnt_runtimes::job::normalize;
use vtnt_runtimes::{RunOptions, Runtime};

/// A fixed seed: every runtime probes the native run's flows, so takes its paths.
fn job() -> vtnt_job::JobSpec {
    let words = ["trace", "-P", "icmp-paris", "--seed", "1", "203.0.113.10"].map(String::from);
    vtnt_job::parse_words(&words, vtnt_job::Vantage::Lab)
        .expect("a valid job")
        .spec
}

fn check(test: &str, runtimes: &[Runtime], dhcp: bool) {
    if !common::basics_ready(test) {
        return;
    }
    for &rt in runtimes {
        if let Some(why) = common::runtime_missing(rt) {
            vtnt_testkit::skip_or_fail(test, &why, None);
            return;
        }
    }
    // a lab per test, named after its first letters (tests run in parallel)
    let lab = common::LabGuard::up(&test.chars().take(3).collect::<String>()).expect("vtnt lab up");
    let opts = RunOptions {
        lab: lab.name.clone(),
        bandwidth_bps: 1_000_000_000,
        timeout: Duration::from_secs(600),
        ..Default::default()
    };
    let native = Runtime::Native.run(&job(), &opts).expect("native run");
    assert!(native.ok(), "native run failed: {}", native.stderr);
    let want = normalize(&native.stdout);
    assert!(
        want.iter().any(|l| l.contains("\"type\":\"trace\"")),
        "native output has no trace: {}",
        native.stdout
    );
    for &rt in runtimes {
        let run = || {
            rt.run(
                &job(),
                &RunOptions {
                    dhcp,
                    ..opts.clone()
                },
            )
        };
        // As `vtnt bench deploy` does: a run that outlived its timeout (a TCG guest that
        // never finished, a `docker run` that never returned) is retried once, loudly.
        let out = retry_once_on_timeout(run, |e| {
            eprintln!("{test}: {} timed out, retrying once: {e:#}", rt.name())
        })
        .unwrap_or_else(|e| panic!("{} run: {e:#}", rt.name()));
        assert!(
            out.ok(),
            "{} run exited with {:?}: {}",
            rt.name(),
            out.code,
            out.stderr
        );
        if dhcp {
            // the lab leases hosts .130-.229 of the vantage LAN (docs/lab.md)
            let leased = |l: &str| {
                l.split("\"src\":\"192.0.2.")
                    .nth(1)
                    .and_then(|r| r.split('"').next())
                    .and_then(|h| h.parse::<u8>().ok())
                    .is_some_and(|h| (130..230).contains(&h))
            };
            assert!(
                out.stdout.lines().any(leased),
                "{} with DHCP: no leased source address in {}",
                rt.name(),
                out.stdout
            );
        }
        assert_eq!(
            normalize(&out.stdout),
            want,
            "{} output differs from native",
            rt.name()
        );
        eprintln!(
            "{test}: {} deploy {:.2} s, execution {:.2} s",
            rt.name(),
            out.deploy_time.as_secs_f64(),
            out.exec_time.as_secs_f64()
        );
    }
}

#[test]
fn runc_matches_native() {
    check("runc_matches_native", &[Runtime::Runc], false);
}

#[test]
fn docker_images_match_native() {
    check(
        "docker_images_match_native",
        &[Runtime::DockerScratch, Runtime::Docker],
        false,
    );
}

#[test]
fn vm_matches_native() {
    check("vm_matches_native", &[Runtime::Vm], false);
}

#[test]
fn microvm_matches_native() {
    check("microvm_matches_native", &[Runtime::Microvm], false);
}

#[test]
fn dhcp_microvm_matches_native() {
    check("dhcp_microvm_matches_native", &[Runtime::Microvm], true);
}
