//! Tenant isolation against a hostile user who speaks NATS itself: a broker of its own
//! (`vtnt_fleet::broker::up`, tenants `a` and `b`), then raw async-nats requests with
//! each role's own key, as an attacker would send them: streams with another tenant's
//! subjects, mirrors and sources of its results, consumers and message reads on them,
//! subscriptions to its inboxes and requests, JetStream's answers and deliveries steered
//! into its results stream through reply and deliver subjects. Every one must be refused
//! (the server's permission violation, or an API error) and the victim's stream must hold
//! exactly what the agent stored for it; the same for a tenant's measurements'
//! definitions, and a tenant's quota, which it reads and cannot change. Needs root (the broker's state under /run) and
//! Debian's nats-server; missing, it skips through vtnt-testkit.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use vtnt_fleet::auth::{key_file, Role};
use vtnt_fleet::broker;
use vtnt_fleet::measurement::{self, Definition, Selection, State};
use vtnt_fleet::Connect;

/// How long an attack may go unanswered before it counts as refused in silence (a
/// subscription's violation comes asynchronously; a request's within milliseconds).
const WAIT: Duration = Duration::from_secs(2);

/// The broker, down on drop.
struct Up(broker::Broker);

impl Drop for Up {
    fn drop(&mut self) {
        let _ = broker::down(&self.0.name);
    }
}

impl Up {
    /// `vtnt fleet up` on a free port with tenants `a` and `b`, named after `tag`.
    fn tenants_a_and_b(tag: &str) -> Up {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        Up(broker::up(&broker::UpOptions {
            tenants: vec!["a".into(), "b".into()],
            ..broker::UpOptions::new(&format!("{tag}{}", std::process::id()), port)
        })
        .expect("vtnt fleet up"))
    }
}

/// One connection as one user, with the server's refusals it received.
struct Peer {
    who: String,
    client: async_nats::Client,
    errors: Arc<Mutex<Vec<String>>>,
}

impl Peer {
    async fn connect(url: &str, seed: &str, inbox: &str, who: &str) -> Peer {
        let errors = Arc::new(Mutex::new(Vec::new()));
        let seen = errors.clone();
        let client = async_nats::ConnectOptions::new()
            .nkey(seed.to_string())
            .custom_inbox_prefix(inbox)
            .event_callback(move |e| {
                let seen = seen.clone();
                async move {
                    if let async_nats::Event::ServerError(e) = e {
                        seen.lock().unwrap().push(e.to_string());
                    }
                }
            })
            .connect(url)
            .await
            .unwrap_or_else(|e| panic!("{who} connecting: {e}"));
        Peer {
            who: who.to_string(),
            client,
            errors,
        }
    }

    /// Whether the server refused something naming `subject` (a permission violation).
    fn violation(&self, subject: &str) -> bool {
        self.errors
            .lock()
            .unwrap()
            .iter()
            .any(|e| e.contains("Permissions Violation") && e.contains(subject))
    }

    /// Sends `body` to `subject` as a request; `Err` with how it was refused (a
    /// violation, an API error, no responder, silence), or the answer when something did
    /// it.
    async fn ask(&self, subject: &str, body: &str) -> Result<String, &'static str> {
        let req = self
            .client
            .request(subject.to_string(), body.to_string().into());
        tokio::pin!(req);
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            tokio::select! {
                r = &mut req => {
                    let Ok(m) = r else { return Err("no responder") };
                    let text = String::from_utf8_lossy(&m.payload).into_owned();
                    let refused = serde_json::from_str::<serde_json::Value>(&text)
                        .is_ok_and(|v| v.get("error").is_some());
                    return if refused { Err("an API error") } else { Ok(text) };
                }
                () = tokio::time::sleep(Duration::from_millis(10)) => {
                    if self.violation(subject) {
                        return Err("a permission violation");
                    }
                    if tokio::time::Instant::now() > deadline {
                        return Err("silence");
                    }
                }
            }
        }
    }

    /// Publishes `body` to `subject` with `reply` as its reply subject (JetStream's
    /// answer, or a responder's, goes there).
    async fn steer(&self, subject: &str, reply: &str, body: &str) {
        let _ = self
            .client
            .publish_with_reply(
                subject.to_string(),
                reply.to_string(),
                body.to_string().into(),
            )
            .await;
        let _ = self.client.flush().await;
    }

    /// Subscribes to `subject`; the subscription if the server did not refuse it.
    async fn listen(&self, subject: &str) -> Option<async_nats::Subscriber> {
        let sub = self.client.subscribe(subject.to_string()).await.ok()?;
        let _ = self.client.flush().await;
        let until = tokio::time::Instant::now() + WAIT;
        while tokio::time::Instant::now() < until {
            if self.violation(subject) {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Some(sub)
    }
}

/// The seeds in a role's key file: the user's, then (a tenant's) its requests' user.
fn seeds(dir: &std::path::Path, role: &Role) -> Vec<String> {
    std::fs::read_to_string(key_file(dir, role))
        .expect("a role's key file")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// The number of messages in tenant `t`'s results stream, as `t` sees it.
async fn stored(t: &Peer, tenant: &str) -> u64 {
    let info = t
        .ask(&format!("$JS.API.STREAM.INFO.VTNT_RESULTS_{tenant}"), "")
        .await
        .expect("the tenant reads its own stream's info");
    let v: serde_json::Value = serde_json::from_str(&info).unwrap();
    v["state"]["messages"].as_u64().unwrap()
}

#[test]
fn no_role_reaches_another_tenants_results_inboxes_or_requests() {
    vtnt_testkit::require_root!();
    vtnt_testkit::require_tools!("nats-server");
    let up = Up::tenants_a_and_b("iso");
    let (url, dir, name) = (up.0.url.clone(), up.0.dir.clone(), up.0.name.clone());
    let failures = vtnt_fleet::block_on(async move {
        let mut failures: Vec<String> = Vec::new();
        // what a fleet in use has: the work queue, a's results stream, one record of a's
        let (_, agent_fleet) = Connect::local(&name, Role::Agent)?
            .fleet("isolation agent")
            .await?;
        agent_fleet.jobs().await?;
        Connect::local(&name, Role::Tenant("a".into()))?
            .fleet("isolation a")
            .await?
            .1
            .results("a")
            .await?;
        agent_fleet
            .js
            .publish("vtnt.results.a.j0.r", "a's secret record".into())
            .await?
            .await?;
        let role = |r: Role| {
            let (url, dir) = (url.clone(), dir.clone());
            async move {
                let s = seeds(&dir, &r);
                Peer::connect(&url, &s[0], &r.inbox_prefix(), &r.key_name()).await
            }
        };
        let a = role(Role::Tenant("a".into())).await;
        let b = role(Role::Tenant("b".into())).await;
        let agent = role(Role::Agent).await;
        let operator = role(Role::Operator).await;
        let a_before = stored(&a, "a").await;
        assert_eq!(a_before, 1);

        // b makes JetStream objects that would capture or copy a's
        let steal = [
            r#"{"name":"VTNT_RESULTS_b","subjects":["vtnt.results.a.>"]}"#,
            r#"{"name":"VTNT_RESULTS_b","mirror":{"name":"VTNT_RESULTS_a"}}"#,
            r#"{"name":"VTNT_RESULTS_b","sources":[{"name":"VTNT_RESULTS_a"}]}"#,
            r#"{"name":"VTNT_RESULTS_b","subjects":["_INBOX_T.a.>","vtnt.deploy.a.>"]}"#,
        ];
        let mut attacks: Vec<(&Peer, String, String)> = Vec::new();
        for body in steal {
            for verb in ["CREATE", "UPDATE"] {
                attacks.push((&b, format!("$JS.API.STREAM.{verb}.VTNT_RESULTS_b"), body.into()));
            }
            attacks.push((&b, "$JS.API.STREAM.CREATE.EVIL".into(), body.replace("VTNT_RESULTS_b", "EVIL")));
        }
        let all = r#"{"stream_name":"VTNT_RESULTS_a","config":{"deliver_policy":"all","ack_policy":"none"}}"#;
        let mut reads = vec![
            ("$JS.API.CONSUMER.CREATE.VTNT_RESULTS_a", all),
            ("$JS.API.CONSUMER.CREATE.VTNT_RESULTS_a.evil.vtnt.results.a.>", all),
            ("$JS.API.CONSUMER.DURABLE.CREATE.VTNT_RESULTS_a.evil", all),
            ("$JS.API.STREAM.MSG.GET.VTNT_RESULTS_a", r#"{"seq":1}"#),
            ("$JS.API.DIRECT.GET.VTNT_RESULTS_a", r#"{"seq":1}"#),
            ("$JS.API.STREAM.INFO.VTNT_RESULTS_a", ""),
            ("$JS.API.CONSUMER.CREATE.VTNT_JOBS", r#"{"stream_name":"VTNT_JOBS","config":{"ack_policy":"none"}}"#),
            ("$JS.API.STREAM.MSG.GET.VTNT_JOBS", r#"{"seq":1}"#),
        ];
        for p in [&b, &agent, &operator] {
            for (s, body) in &reads {
                attacks.push((p, s.to_string(), body.to_string()));
            }
        }
        reads.clear();
        for (s, body) in [
            ("$JS.API.INFO", ""),
            ("$JS.API.STREAM.LIST", "{}"),
            ("$JS.API.STREAM.NAMES", "{}"),
            ("$JS.API.STREAM.DELETE.VTNT_RESULTS_a", ""),
            ("$JS.API.STREAM.PURGE.VTNT_RESULTS_a", ""),
            ("$JS.API.STREAM.MSG.DELETE.VTNT_RESULTS_a", r#"{"seq":1}"#),
            ("$JS.API.STREAM.DELETE.VTNT_RESULTS_b", ""),
            ("$JS.API.STREAM.PURGE.VTNT_RESULTS_b", ""),
            ("$JS.API.STREAM.CREATE.KV_evil", r#"{"name":"KV_evil","subjects":["$KV.evil.>"]}"#),
            ("$JS.API.STREAM.CREATE.OBJ_evil", r#"{"name":"OBJ_evil","subjects":["$O.evil.C.>","$O.evil.M.>"]}"#),
            ("vtnt.wq.a.fr", "{}"),
            ("vtnt.deploy.a.fr", "{}"),
            ("vtnt.results.a.forged.r", "a forged record"),
        ] {
            attacks.push((&b, s.into(), body.into()));
        }
        // the agents and the operator create no stream: they could choose its subjects
        for p in [&agent, &operator] {
            for (s, body) in [
                ("$JS.API.STREAM.CREATE.EVIL", r#"{"name":"EVIL","subjects":["vtnt.deploy.>","_INBOX_T.>"]}"#),
                ("$JS.API.STREAM.CREATE.VTNT_NODES", r#"{"name":"VTNT_NODES","subjects":["vtnt.nodes.*","vtnt.deploy.>"]}"#),
                ("$JS.API.STREAM.UPDATE.VTNT_JOBS", r#"{"name":"VTNT_JOBS","subjects":["vtnt.wq.>","_INBOX_T.>"],"retention":"workqueue"}"#),
                ("$JS.API.STREAM.CREATE.OBJ_vtnt-images", r#"{"name":"OBJ_vtnt-images","subjects":["$O.vtnt-images.C.>","$O.vtnt-images.M.>","vtnt.deploy.>"]}"#),
            ] {
                attacks.push((p, s.into(), body.into()));
            }
        }
        let mut how = std::collections::BTreeMap::new();
        for (p, subject, body) in &attacks {
            match p.ask(subject, body).await {
                Ok(answer) => failures.push(format!(
                    "{} was answered on {subject} {body}: {}",
                    p.who,
                    &answer[..answer.len().min(200)]
                )),
                Err(why) => *how.entry(why).or_insert(0) += 1,
            }
        }
        eprintln!("{} requests refused: {how:?}", attacks.len());
        // inboxes, requests and results in flight: no role listens where it has no business
        let mut subs = Vec::new();
        for (p, subjects) in [
            (&b, &["_INBOX_T.a.>", "_INBOX_AGENT.>", "vtnt.results.>", "vtnt.deploy.>", "vtnt.wq.>", ">"][..]),
            (&agent, &["_INBOX_T.>", "vtnt.results.>", "vtnt.wq.>"][..]),
            (&operator, &["_INBOX_T.>", "vtnt.results.>", "vtnt.deploy.>"][..]),
        ] {
            for s in subjects {
                if let Some(sub) = p.listen(s).await {
                    failures.push(format!("{} may subscribe to {s}", p.who));
                    subs.push(sub);
                }
            }
        }
        // b steers JetStream's answers and deliveries into a's results subjects
        b.steer("$JS.API.STREAM.INFO.VTNT_RESULTS_b", "vtnt.results.a.forged1.s", "").await;
        b.steer("vtnt.wq.b.fr", "vtnt.results.a.forged2.s", "{}").await;
        b.steer(
            "$JS.API.CONSUMER.CREATE.VTNT_RESULTS_b",
            "_INBOX_T.b.push",
            r#"{"stream_name":"VTNT_RESULTS_b","config":{"deliver_subject":"vtnt.results.a.forged3.r","deliver_policy":"all","ack_policy":"none"}}"#,
        )
        .await;
        // b's second identity, for discard-mode requests (when its key holds one)
        let b_seeds = seeds(&dir, &Role::Tenant("b".into()));
        if let Some(seed) = b_seeds.get(1) {
            let req = Peer::connect(&url, seed, "_INBOX_T.b", "tenant-b's requests").await;
            req.steer("vtnt.deploy.b.fr", "vtnt.results.a.forged4.s", "{}").await;
            for (s, body) in [
                ("vtnt.deploy.a.fr", "{}"),
                ("vtnt.wq.b.fr", "{}"),
                ("$JS.API.INFO", ""),
                ("$JS.API.STREAM.CREATE.EVIL", r#"{"name":"EVIL","subjects":["vtnt.deploy.>"]}"#),
            ] {
                if let Ok(answer) = req.ask(s, body).await {
                    failures.push(format!("{} was answered on {s}: {answer}", req.who));
                }
            }
            for s in ["_INBOX_T.a.>", "vtnt.deploy.>", "vtnt.results.>"] {
                if req.listen(s).await.is_some() {
                    failures.push(format!("{} may subscribe to {s}", req.who));
                }
            }
        } else {
            failures.push("tenant b's key holds no identity of its own for discard-mode requests".into());
        }
        // one more record of a's, with every subscription above in place
        agent_fleet
            .js
            .publish("vtnt.results.a.j1.r", "a's second secret".into())
            .await?
            .await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        // a's stream holds what the agent stored, nothing steered in
        let a_after = stored(&a, "a").await;
        if a_after != a_before + 1 {
            failures.push(format!(
                "a's results stream holds {a_after} messages, {} stored by the agent",
                a_before + 1
            ));
        }
        // and what got past a refusal received nothing of a's
        for mut sub in subs {
            if let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(100), sub.next()).await {
                failures.push(format!("a subscription received {}", m.subject));
            }
        }
        Ok::<_, vtnt_fleet::Error>(failures)
    })
    .expect("the fleet's own steps");
    drop(up);
    assert!(
        failures.is_empty(),
        "{} attacks got through:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Tenant b, speaking raw NATS with its own key, neither reads, lists, changes nor
/// cancels tenant a's measurements: every request on a's definitions' subjects and stream
/// is refused, JetStream's answers steered there land nowhere, a's definition stays as
/// a stored it.
#[test]
fn no_tenant_reads_lists_or_cancels_another_tenants_measurements() {
    vtnt_testkit::require_root!();
    vtnt_testkit::require_tools!("nats-server");
    let up = Up::tenants_a_and_b("isom");
    let (url, dir, name) = (up.0.url.clone(), up.0.dir.clone(), up.0.name.clone());
    let a_key = Connect::local(&name, Role::Tenant("a".into())).unwrap();
    let (failures, stored) = vtnt_fleet::block_on(async move {
        let mut failures: Vec<String> = Vec::new();
        let (_, a_fleet) = a_key.fleet("isolation a").await?;
        let def = Definition {
            id: "m1".into(),
            tenant: "a".into(),
            runtime: "native".into(),
            selection: Selection {
                locations: vec!["fr".into()],
                tags: Vec::new(),
                asns: Vec::new(),
                countries: Vec::new(),
                count: None,
            },
            words: vec!["trace".into(), "203.0.113.10".into()],
            line: "trace 203.0.113.10".into(),
            every_s: Some(60),
            start_us: vtnt_fleet::now_us(),
            until_us: None,
            max_cycles: None,
            state: State::Scheduled,
            started: 0,
            placed: 0,
            split: None,
            cycle_jobs: Vec::new(),
        };
        measurement::write(&a_fleet, &def, 0).await?;
        let s = seeds(&dir, &Role::Tenant("b".into()));
        let b = Peer::connect(
            &url,
            &s[0],
            &Role::Tenant("b".into()).inbox_prefix(),
            "tenant-b",
        )
        .await;
        let mut cancelled = def.clone();
        cancelled.state = State::Cancelled;
        let cancel = serde_json::to_string(&cancelled)?;
        for (subject, body) in [
            ("vtnt.meas.a.m1", cancel.as_str()),
            ("vtnt.meas.a.m2", cancel.as_str()),
            ("$JS.API.STREAM.INFO.VTNT_MEAS_a", ""),
            (
                "$JS.API.STREAM.MSG.GET.VTNT_MEAS_a",
                r#"{"last_by_subj":"vtnt.meas.a.m1"}"#,
            ),
            ("$JS.API.DIRECT.GET.VTNT_MEAS_a", r#"{"seq":1}"#),
            (
                "$JS.API.CONSUMER.CREATE.VTNT_MEAS_a",
                r#"{"stream_name":"VTNT_MEAS_a","config":{"ack_policy":"none"}}"#,
            ),
            ("$JS.API.STREAM.PURGE.VTNT_MEAS_a", ""),
            ("$JS.API.STREAM.MSG.DELETE.VTNT_MEAS_a", r#"{"seq":1}"#),
            (
                "$JS.API.STREAM.CREATE.VTNT_MEAS_b",
                r#"{"name":"VTNT_MEAS_b","subjects":["vtnt.meas.a.*"]}"#,
            ),
            (
                "$JS.API.STREAM.UPDATE.VTNT_MEAS_b",
                r#"{"name":"VTNT_MEAS_b","mirror":{"name":"VTNT_MEAS_a"}}"#,
            ),
        ] {
            if let Ok(answer) = b.ask(subject, body).await {
                failures.push(format!("b was answered on {subject}: {answer}"));
            }
        }
        if b.listen("vtnt.meas.>").await.is_some() {
            failures.push("b may subscribe to vtnt.meas.>".into());
        }
        // JetStream's answer to b's own stream's info, steered onto a's definition
        b.steer("$JS.API.STREAM.INFO.VTNT_MEAS_b", "vtnt.meas.a.m1", "")
            .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let stored = measurement::all(&a_fleet, "a").await?;
        Ok::<_, anyhow::Error>((failures, stored))
    })
    .expect("the fleet's own steps");
    // a's definition is the one a wrote, once, unchanged
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(
        (stored[0].0.state, stored[0].1),
        (State::Scheduled, 1),
        "{stored:?}"
    );
    drop(up);
    assert!(
        failures.is_empty(),
        "{} attacks got through:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Tenant a reads its own quota and nothing else of the quotas: raising its limits,
/// rewriting its use (as itself or as its requests' user, in the fleet's account),
/// purging or deleting from its quota stream, reading b's, steering JetStream's answers
/// onto the quota's subjects: each refused, and the limits stay the operator's.
#[test]
fn a_tenant_cannot_raise_or_reset_its_quota_nor_read_anothers() {
    vtnt_testkit::require_root!();
    vtnt_testkit::require_tools!("nats-server");
    let up = Up::tenants_a_and_b("isoq");
    let (url, dir, name) = (up.0.url.clone(), up.0.dir.clone(), up.0.name.clone());
    let operator = Connect::local(&name, Role::Operator).unwrap();
    vtnt_fleet::quota::set(&operator, "a", Some(Some(1)), Some(Some(100))).expect("quota set");
    vtnt_fleet::quota::set(&operator, "b", Some(Some(7)), None).expect("quota set");
    let failures = vtnt_fleet::block_on(async move {
        let mut failures: Vec<String> = Vec::new();
        let a = Role::Tenant("a".into());
        let s = seeds(&dir, &a);
        let tenant = Peer::connect(&url, &s[0], &a.inbox_prefix(), "tenant-a").await;
        let requests = Peer::connect(&url, &s[1], &a.inbox_prefix(), "tenant-a requests").await;
        // what a may do: read its own limits
        let own = tenant
            .ask(
                "$JS.FLEET.API.STREAM.MSG.GET.VTNT_QUOTA_a",
                r#"{"last_by_subj":"vtnt.quota.a.limit"}"#,
            )
            .await;
        if own.is_err() {
            failures.push(format!("a cannot read its own quota: {own:?}"));
        }
        let raise = r#"{"concurrent_jobs":null,"probes_per_day":null}"#;
        let reset = r#"{"day":0,"probes":0,"jobs":{}}"#;
        for peer in [&tenant, &requests] {
            for (subject, body) in [
                ("vtnt.quota.a.limit", raise),
                ("vtnt.quota.a.use", reset),
                ("$JS.API.STREAM.PURGE.VTNT_QUOTA_a", ""),
                ("$JS.API.STREAM.MSG.DELETE.VTNT_QUOTA_a", r#"{"seq":1}"#),
                ("$JS.API.STREAM.DELETE.VTNT_QUOTA_a", ""),
                ("$JS.FLEET.API.STREAM.PURGE.VTNT_QUOTA_a", ""),
                (
                    "$JS.FLEET.API.STREAM.MSG.DELETE.VTNT_QUOTA_a",
                    r#"{"seq":1}"#,
                ),
                (
                    "$JS.FLEET.API.STREAM.MSG.GET.VTNT_QUOTA_b",
                    r#"{"last_by_subj":"vtnt.quota.b.limit"}"#,
                ),
                ("$JS.FLEET.API.STREAM.INFO.VTNT_QUOTA_b", ""),
                // its long target lists are read-only to it, another's out of reach
                ("$JS.FLEET.API.STREAM.PURGE.VTNT_DATA_a", ""),
                (
                    "$JS.FLEET.API.STREAM.MSG.DELETE.VTNT_DATA_a",
                    r#"{"seq":1}"#,
                ),
                (
                    "$JS.FLEET.API.STREAM.MSG.GET.VTNT_DATA_b",
                    r#"{"last_by_subj":"vtnt.data.b.j.0"}"#,
                ),
                ("$JS.FLEET.API.STREAM.INFO.VTNT_DATA_b", ""),
                (
                    "$JS.API.STREAM.UPDATE.VTNT_QUOTA_a",
                    r#"{"name":"VTNT_QUOTA_a","subjects":["vtnt.quota.a.*"],"deny_delete":false}"#,
                ),
            ] {
                if let Ok(answer) = peer.ask(subject, body).await {
                    failures.push(format!("{} was answered on {subject}: {answer}", peer.who));
                }
            }
            // JetStream's answers steered onto the quota's subjects
            peer.steer(
                "$JS.FLEET.API.STREAM.INFO.VTNT_QUOTA_a",
                "vtnt.quota.a.limit",
                "",
            )
            .await;
            peer.steer("vtnt.wq.a.fr", "vtnt.quota.a.use", "{}").await;
        }
        // its own stream's message for another tenant's subject holds nothing of b's
        if let Ok(answer) = tenant
            .ask(
                "$JS.FLEET.API.STREAM.MSG.GET.VTNT_QUOTA_a",
                r#"{"last_by_subj":"vtnt.quota.b.limit"}"#,
            )
            .await
        {
            failures.push(format!(
                "a read b's limits through its own stream: {answer}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok::<_, anyhow::Error>(failures)
    })
    .expect("the fleet's own steps");
    let operator = Connect::local(&up.0.name, Role::Operator).unwrap();
    let q = vtnt_fleet::quota::show(&operator, "a").expect("quota show");
    assert_eq!(
        (
            q.limits.concurrent_jobs,
            q.limits.probes_per_day,
            q.jobs_running,
            q.probes_today
        ),
        (Some(1), Some(100), 0, 0),
        "{q:?}"
    );
    // a reads its own as itself, as `vtnt fleet quota show` does
    let own = vtnt_fleet::quota::show(
        &Connect::local(&up.0.name, Role::Tenant("a".into())).unwrap(),
        "a",
    )
    .expect("a reads its own quota");
    assert_eq!(own, q);
    drop(up);
    assert!(
        failures.is_empty(),
        "{} attacks got through:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The nodes' heartbeats, exported to every tenant: tenant b hears an agent's heartbeat
/// on `vtnt.nodes.<node>`, but publishes none (a forged node is refused and reaches
/// neither the nodes' stream nor another tenant), and a wider subscription is refused.
#[test]
fn tenants_hear_heartbeats_but_forge_no_node() {
    vtnt_testkit::require_root!();
    vtnt_testkit::require_tools!("nats-server");
    let up = Up::tenants_a_and_b("hb");
    let (url, dir, name) = (up.0.url.clone(), up.0.dir.clone(), up.0.name.clone());
    let failures = vtnt_fleet::block_on(async move {
        let mut failures: Vec<String> = Vec::new();
        let (_, agent_fleet) = Connect::local(&name, Role::Agent)?
            .fleet("heartbeats agent")
            .await?;
        let peer = |r: Role| {
            let (url, dir) = (url.clone(), dir.clone());
            async move {
                let s = seeds(&dir, &r);
                Peer::connect(&url, &s[0], &r.inbox_prefix(), &r.key_name()).await
            }
        };
        let a = peer(Role::Tenant("a".into())).await;
        let b = peer(Role::Tenant("b".into())).await;
        let Some(mut heard) = b.listen(vtnt_fleet::HEARTBEATS).await else {
            return Ok(vec!["b may not subscribe to the heartbeats".to_string()]);
        };
        let mut a_heard = a.listen(vtnt_fleet::HEARTBEATS).await;
        for s in ["vtnt.>", "vtnt.*.*", ">"] {
            if b.listen(s).await.is_some() {
                failures.push(format!("b may subscribe to {s}"));
            }
        }
        // b forges a node, plainly, and deletes one from the nodes' stream
        for s in [
            "vtnt.nodes.forged",
            "$JS.FLEET.API.STREAM.MSG.DELETE.VTNT_NODES",
        ] {
            if let Ok(answer) = b.ask(s, r#"{"node":"forged"}"#).await {
                failures.push(format!("b was answered on {s}: {answer}"));
            }
        }
        if !b.violation("vtnt.nodes.forged") {
            failures.push("b's heartbeat was not refused".into());
        }
        agent_fleet
            .js
            .publish(vtnt_fleet::node_subject("n1"), r#"{"node":"n1"}"#.into())
            .await?
            .await?;
        match tokio::time::timeout(Duration::from_secs(5), heard.next()).await {
            Ok(Some(m)) if m.subject.as_str() == "vtnt.nodes.n1" => {}
            other => failures.push(format!("b did not hear n1's heartbeat: {other:?}")),
        }
        if let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(300), heard.next()).await {
            failures.push(format!("b heard {} besides n1's heartbeat", m.subject));
        }
        if let Some(sub) = a_heard.as_mut() {
            while let Ok(Some(m)) =
                tokio::time::timeout(Duration::from_millis(300), sub.next()).await
            {
                if m.subject.as_str() != "vtnt.nodes.n1" {
                    failures.push(format!("a heard {}", m.subject));
                }
            }
        } else {
            failures.push("a may not subscribe to the heartbeats".into());
        }
        // the nodes' stream holds the agent's one heartbeat
        let info = a
            .ask("$JS.FLEET.API.STREAM.INFO.VTNT_NODES", "")
            .await
            .expect("a tenant reads the nodes' stream's info");
        let v: serde_json::Value = serde_json::from_str(&info).unwrap();
        if v["state"]["messages"] != 1 {
            failures.push(format!("the nodes' stream holds {}", v["state"]));
        }
        Ok::<_, vtnt_fleet::Error>(failures)
    })
    .expect("the fleet's own steps");
    drop(up);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Tenant b, speaking raw NATS with both its identities, learns nothing of tenant a's
/// queued jobs: the work queue's info with a subject filter of its choosing, its
/// messages, a consumer on it, a's backlog subject, are all refused; b's own backlog
/// comes back empty, and `vtnt fleet status` shows a its own backlog, counted by the
/// agents' backlog service ([`vtnt_fleet::backlog`]).
#[test]
fn no_tenant_learns_another_tenants_backlog() {
    vtnt_testkit::require_root!();
    vtnt_testkit::require_tools!("nats-server");
    let up = Up::tenants_a_and_b("bl");
    let (url, dir, name) = (up.0.url.clone(), up.0.dir.clone(), up.0.name.clone());
    // an agent's backlog service, on a thread and runtime of its own (status blocks)
    let agent = Connect::local(&name, Role::Agent).unwrap();
    let (ready_tx, ready) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        vtnt_fleet::block_on(async move {
            let (client, fleet) = agent.fleet("backlog agent").await?;
            let jobs = fleet.jobs().await?;
            fleet.nodes().await?;
            let info = vtnt_fleet::NodeInfo {
                node: "n1".into(),
                location: "fr".into(),
                slots: 1,
                busy: 0,
                runtimes: vec!["native".into()],
                heartbeat_ms: 1000,
                deadline_ms: 3_600_000,
                state: vtnt_fleet::proto::NodeState::Up,
                clock_sync: "unknown".into(),
                jobs_done: 0,
                jobs_failed: 0,
                reconnects: 0,
                tags: Vec::new(),
                asn: None,
                country: None,
                opt_out: Default::default(),
                clock: None,
            };
            fleet
                .js
                .publish(
                    vtnt_fleet::node_subject("n1"),
                    serde_json::to_vec(&info).unwrap().into(),
                )
                .await?
                .await?;
            let serving = tokio::spawn(vtnt_fleet::agent::serve_backlogs(client, jobs));
            let _ = ready_tx.send(());
            serving.await.unwrap()
        })
    });
    ready
        .recv_timeout(Duration::from_secs(10))
        .expect("the agent's backlog service");
    let failures = vtnt_fleet::block_on(async move {
        let mut failures: Vec<String> = Vec::new();
        let peer = |r: Role, i: usize, who: &'static str| {
            let (url, dir) = (url.clone(), dir.clone());
            async move {
                let s = seeds(&dir, &r);
                Peer::connect(&url, &s[i], &r.inbox_prefix(), who).await
            }
        };
        let a = peer(Role::Tenant("a".into()), 0, "tenant-a").await;
        let b = peer(Role::Tenant("b".into()), 0, "tenant-b").await;
        let b_req = peer(Role::Tenant("b".into()), 1, "tenant-b's requests").await;
        // a queues two jobs, which no agent pulls
        for _ in 0..2 {
            a.ask("vtnt.wq.a.fr", "{}").await.expect("a queues a job");
        }
        let filter = |f: &str| format!(r#"{{"subjects_filter":"{f}"}}"#);
        let consumer = r#"{"stream_name":"VTNT_JOBS","config":{"ack_policy":"none","filter_subject":"vtnt.wq.a.>"}}"#;
        let mut attacks: Vec<(&Peer, String, String)> = Vec::new();
        for p in [&b, &b_req] {
            for api in ["$JS.FLEET.API", "$JS.API"] {
                for (verb, body) in [
                    ("STREAM.INFO.VTNT_JOBS", filter("vtnt.wq.>")),
                    ("STREAM.INFO.VTNT_JOBS", filter("vtnt.wq.a.*")),
                    ("STREAM.INFO.VTNT_JOBS", String::new()),
                    ("STREAM.MSG.GET.VTNT_JOBS", r#"{"last_by_subj":"vtnt.wq.a.fr"}"#.into()),
                    ("STREAM.MSG.GET.VTNT_JOBS", r#"{"seq":1}"#.into()),
                    ("DIRECT.GET.VTNT_JOBS", r#"{"seq":1}"#.into()),
                    ("CONSUMER.CREATE.VTNT_JOBS", consumer.into()),
                    ("CONSUMER.CREATE.VTNT_JOBS.evil.vtnt.wq.a.>", consumer.into()),
                    ("CONSUMER.DURABLE.CREATE.VTNT_JOBS.evil", consumer.into()),
                    ("CONSUMER.INFO.VTNT_JOBS.wq-fr", String::new()),
                    ("CONSUMER.MSG.NEXT.VTNT_JOBS.wq-fr", r#"{"batch":1}"#.into()),
                ] {
                    attacks.push((p, format!("{api}.{verb}"), body));
                }
            }
            for s in ["vtnt.backlog.a", "vtnt.backlog.*", "vtnt.backlog.>"] {
                attacks.push((p, s.into(), String::new()));
            }
        }
        // the nodes' stream, which b may read, holds no job's subject
        attacks.push((
            &b,
            "$JS.FLEET.API.STREAM.MSG.GET.VTNT_NODES".into(),
            r#"{"last_by_subj":"vtnt.wq.a.fr"}"#.into(),
        ));
        for (p, subject, body) in &attacks {
            if let Ok(answer) = p.ask(subject, body).await {
                failures.push(format!(
                    "{} was answered on {subject} {body}: {}",
                    p.who,
                    &answer[..answer.len().min(300)]
                ));
            }
        }
        // b's own backlog: empty, nothing of a's
        match b.ask("vtnt.backlog.b", "").await {
            Ok(answer) if answer == "{}" => {}
            other => failures.push(format!("b's own backlog: {other:?}")),
        }
        // the nodes' info b may read names no job's subject
        let nodes = b
            .ask("$JS.FLEET.API.STREAM.INFO.VTNT_NODES", &filter(">"))
            .await
            .unwrap_or_default();
        if nodes.contains("vtnt.wq") {
            failures.push(format!("the nodes' stream info shows jobs: {nodes}"));
        }
        Ok::<_, vtnt_fleet::Error>(failures)
    })
    .expect("the fleet's own steps");
    // `vtnt fleet status` still shows each tenant its own backlog
    let status = |t: &str| {
        vtnt_fleet::controller::status(&Connect::local(&name, Role::Tenant(t.into())).unwrap(), t)
            .map(|s| s.backlog)
    };
    let a = status("a");
    let b = status("b");
    drop(up);
    assert!(
        failures.is_empty(),
        "{} attacks got through:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(
        a.expect("a's status"),
        Some([("vtnt.wq.a.fr".to_string(), 2)].into_iter().collect())
    );
    assert_eq!(b.expect("b's status"), Some(Default::default()));
}

/// Only the operator writes the fleet's opt-out list ([`vtnt_fleet::optout`]): a tenant
/// (both its users) and an agent, speaking raw NATS, neither publish a list, nor delete,
/// purge or rewrite the operator's; the list afterwards is the operator's, byte for byte.
#[test]
fn only_the_operator_writes_the_opt_out_list() {
    vtnt_testkit::require_root!();
    vtnt_testkit::require_tools!("nats-server");
    let up = Up::tenants_a_and_b("oo");
    let (url, dir, name) = (up.0.url.clone(), up.0.dir.clone(), up.0.name.clone());
    let operator = Connect::local(&name, Role::Operator).unwrap();
    let list = vtnt_fleet::optout::parse("192.0.2.0/24\n").unwrap();
    let written =
        vtnt_fleet::optout::update(&operator, &vtnt_fleet::optout::Change::Add(list.clone()))
            .expect("the operator writes the list");
    let failures = vtnt_fleet::block_on(async move {
        let mut failures: Vec<String> = Vec::new();
        let s = |r: &Role| seeds(&dir, r);
        let b = Role::Tenant("b".into());
        let peers = [
            Peer::connect(&url, &s(&b)[0], &b.inbox_prefix(), "b").await,
            Peer::connect(&url, &s(&b)[1], &b.inbox_prefix(), "b's requests").await,
            Peer::connect(
                &url,
                &s(&Role::Agent)[0],
                &Role::Agent.inbox_prefix(),
                "agent",
            )
            .await,
        ];
        let api = "$JS.API.STREAM";
        for p in &peers {
            for (subject, body) in [
                ("vtnt.optout", ""),
                (&format!("{api}.PURGE.VTNT_OPTOUT") as &str, ""),
                (&format!("{api}.MSG.DELETE.VTNT_OPTOUT"), r#"{"seq":1}"#),
                (&format!("{api}.DELETE.VTNT_OPTOUT"), ""),
                (
                    &format!("{api}.UPDATE.VTNT_OPTOUT"),
                    r#"{"name":"VTNT_OPTOUT"}"#,
                ),
            ] {
                if let Ok(answer) = p.ask(subject, body).await {
                    failures.push(format!("{} was answered on {subject}: {answer}", p.who));
                }
            }
        }
        let (_, fleet) = Connect::local(&name, Role::Agent)?
            .fleet("opt-out agent")
            .await?;
        let read = vtnt_fleet::optout::read(&fleet).await?;
        if read != written {
            failures.push(format!(
                "the agent reads {read:?}, not the operator's {written:?}"
            ));
        }
        Ok::<_, vtnt_fleet::Error>(failures)
    })
    .expect("the fleet's own steps");
    drop(up);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Only the operator sets the fleet's rate limits and only agents write the leases
/// ([`vtnt_fleet::rate`]): a tenant (both its users) neither sets a limit nor writes a
/// lease, an agent sets no limit, and none of them deletes, purges or rewrites the
/// stream; the limits afterwards are the operator's.
#[test]
fn only_the_operator_sets_the_rate_limit_and_only_agents_lease() {
    vtnt_testkit::require_root!();
    vtnt_testkit::require_tools!("nats-server");
    let up = Up::tenants_a_and_b("rl");
    let (url, dir, name) = (up.0.url.clone(), up.0.dir.clone(), up.0.name.clone());
    let operator = Connect::local(&name, Role::Operator).unwrap();
    let set = vtnt_fleet::rate::set(&operator, Some(Some(100)), Some(None))
        .expect("the operator sets the limit");
    let failures = vtnt_fleet::block_on(async move {
        let mut failures: Vec<String> = Vec::new();
        let s = |r: &Role| seeds(&dir, r);
        let b = Role::Tenant("b".into());
        let peers = [
            Peer::connect(&url, &s(&b)[0], &b.inbox_prefix(), "b").await,
            Peer::connect(&url, &s(&b)[1], &b.inbox_prefix(), "b's requests").await,
            Peer::connect(
                &url,
                &s(&Role::Agent)[0],
                &Role::Agent.inbox_prefix(),
                "agent",
            )
            .await,
        ];
        let api = "$JS.API.STREAM";
        let raise = r#"{"per_prefix":1000000,"per_destination":null}"#;
        for p in &peers {
            let mut asked = vec![
                ("vtnt.rate.limit".to_string(), raise),
                (format!("{api}.PURGE.VTNT_RATE"), ""),
                (format!("{api}.MSG.DELETE.VTNT_RATE"), r#"{"seq":1}"#),
                (format!("{api}.DELETE.VTNT_RATE"), ""),
                (format!("{api}.UPDATE.VTNT_RATE"), r#"{"name":"VTNT_RATE"}"#),
            ];
            if p.who != "agent" {
                asked.push(("vtnt.rate.lease.p4-192-0-2-0".into(), r#"{"jobs":{}}"#));
            }
            for (subject, body) in asked {
                if let Ok(answer) = p.ask(&subject, body).await {
                    failures.push(format!("{} was answered on {subject}: {answer}", p.who));
                }
            }
        }
        let (_, fleet) = Connect::local(&name, Role::Agent)?
            .fleet("rate agent")
            .await?;
        let read = vtnt_fleet::rate::limits(&fleet).await?;
        if read != set {
            failures.push(format!(
                "the agent reads {read:?}, not the operator's {set:?}"
            ));
        }
        Ok::<_, vtnt_fleet::Error>(failures)
    })
    .expect("the fleet's own steps");
    drop(up);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
