//! The pages' markup: one layout, tables whose numbers carry `data-k` names (what the
//! browser tests read), SVG drawn here (a path's hops and tunnels, bar charts), and the
//! two assets the binary serves (a style sheet, the live pages' small script).

use std::collections::BTreeMap;
use std::fmt::Write;

use axum::http::StatusCode;
use vtnt_store::diff::Diff;
use vtnt_store::query::RunRow;
use vtnt_store::views::{Campaign, PathView};
use vtnt_store::Tenant;

use crate::views::{Answer, FleetView, Listing, QuestionView, TracesView, QUESTIONS};

const CSS: &str = "body{font:14px/1.4 sans-serif;margin:0;color:#222}\
nav{background:#234;padding:6px 12px}nav a{color:#fff;margin-right:14px;text-decoration:none}\
main{padding:12px 16px}table{border-collapse:collapse;margin:8px 0}\
td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}td.n{text-align:right}\
th{background:#eef}.err{color:#a00}code{background:#f4f4f4}.revealed{color:#a40}\
#live tr.new{background:#ffd}";

const JS: &str = r#"// live events of the fleet page (server-sent events, no polling)
(function(){
  var t=document.body.dataset.tenant; if(!t||!window.EventSource)return;
  var es=new EventSource('/t/'+t+'/events');
  var tb=document.querySelector('#live tbody');
  function row(cells){var tr=document.createElement('tr');tr.className='new';
    cells.forEach(function(c){var td=document.createElement('td');td.textContent=c;tr.appendChild(td);});
    if(tb){tb.insertBefore(tr,tb.firstChild);while(tb.rows.length>100)tb.deleteRow(-1);}}
  es.addEventListener('job',function(m){var j=JSON.parse(m.data);
    row(['job',j.job,j.node,j.location,j.runtime,j.status,j.mode||'',j.delivery,
      j.timings.queue_ms.toFixed(1),j.timings.exec_ms.toFixed(1),j.timings.total_ms.toFixed(1)]);});
  es.addEventListener('result',function(m){var r=JSON.parse(m.data);
    row(['result',r.job,r.node||'','','',r.record||'','','',r.dst||'','','']);
    var c=document.querySelector('[data-k=live-results]');if(c)c.textContent=(+c.textContent)+1;});
  es.addEventListener('stored',function(m){var s=JSON.parse(m.data);
    var c=document.querySelector('[data-k=live-stored]');if(c)c.textContent=s.traces+s.pings;});
  // nodes: a heartbeat updates or inserts its node's row; a node silent past its
  // deadline turns down here, as the server computes it (a local timer, no request)
  var nb=document.querySelector('#nodes tbody'),heard={};
  function td(tr,v,k){var c=document.createElement('td');c.textContent=v;
    if(k){c.className='n';c.dataset.k=k;}tr.appendChild(c);}
  es.addEventListener('node',function(m){var n=JSON.parse(m.data);if(!nb)return;
    var old=nb.querySelector('[data-k="state-'+CSS.escape(n.node)+'"]'),tr=document.createElement('tr');
    td(tr,n.node);td(tr,n.location);td(tr,n.status,'state-'+n.node);td(tr,n.busy,'busy-'+n.node);
    td(tr,n.slots,'slots-'+n.node);td(tr,n.runtimes.join(', '));td(tr,n.jobs_done);td(tr,0,'age-'+n.node);
    if(old)nb.replaceChild(tr,old.parentNode);else nb.appendChild(tr);
    heard[n.node]={at:Date.now(),deadline:n.deadline_ms,stopped:n.state=='stopped'};});
  setInterval(function(){var now=Date.now();Object.keys(heard).forEach(function(k){var h=heard[k],age=now-h.at;
    var a=document.querySelector('[data-k="age-'+CSS.escape(k)+'"]');if(a)a.textContent=age;
    var s=document.querySelector('[data-k="state-'+CSS.escape(k)+'"]');
    if(s&&!h.stopped&&age>h.deadline)s.textContent='down';});},250);
})();
"#;

/// A static asset by name: its type and bytes.
pub fn asset(name: &str) -> Option<(&'static str, &'static str)> {
    match name {
        "vtnt.css" => Some(("text/css; charset=utf-8", CSS)),
        "vtnt.js" => Some(("text/javascript; charset=utf-8", JS)),
        _ => None,
    }
}

/// `s` safe in HTML text and attributes.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// `s` as one component of a URL path or query.
fn url(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            b => format!("%{b:02X}"),
        })
        .collect()
}

fn layout(title: &str, tenant: Option<&Tenant>, body: &str) -> String {
    let nav = match tenant {
        Some(t) => format!(
            "<a href=\"/t/{t}/\">fleet</a><a href=\"/t/{t}/campaigns\">campaigns</a>\
             <a href=\"/t/{t}/traces\">traces</a><a href=\"/t/{t}/questions\">questions</a>\
             <a href=\"/reports/\">reports</a><a href=\"/logout\">log out ({t})</a>"
        ),
        None => "<a href=\"/login\">log in</a>".into(),
    };
    let data = tenant.map_or(String::new(), |t| format!(" data-tenant=\"{t}\""));
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{} · vtnt</title>\
         <link rel=\"stylesheet\" href=\"/static/vtnt.css\"></head><body{data}><nav>{nav}</nav>\
         <main><h1>{}</h1>{body}</main></body></html>",
        esc(title),
        esc(title)
    )
}

fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or("–".into(), |v| esc(&v.to_string()))
}

fn ms(v: &Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.1}"))
}

pub fn error(status: StatusCode, msg: &str) -> String {
    layout(
        &status.to_string(),
        None,
        &format!("<p class=\"err\" data-k=\"error\">{}</p>", esc(msg)),
    )
}

pub fn login(why: Option<&str>) -> String {
    let why = why.map_or(String::new(), |w| {
        format!("<p class=\"err\">{}</p>", esc(w))
    });
    layout(
        "Log in",
        None,
        &format!(
            "{why}<form method=\"post\" action=\"/login\"><p>A tenant's token (<code>vtnt serve \
             token --tenant T --key FILE</code>):</p><input name=\"token\" size=\"80\" \
             autocomplete=\"off\"> <button>log in</button></form>"
        ),
    )
}

/// A table: header cells, then rows of (cell, `data-k` name or "").
fn table(head: &[&str], rows: impl IntoIterator<Item = Vec<(String, String)>>, id: &str) -> String {
    let mut s = format!("<table id=\"{id}\"><thead><tr>");
    for h in head {
        let _ = write!(s, "<th>{h}</th>");
    }
    s.push_str("</tr></thead><tbody>");
    for r in rows {
        s.push_str("<tr>");
        for (cell, k) in r {
            match k.is_empty() {
                true => {
                    let _ = write!(s, "<td>{cell}</td>");
                }
                false => {
                    let _ = write!(s, "<td class=\"n\" data-k=\"{k}\">{cell}</td>");
                }
            }
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    s
}

fn c(v: impl std::fmt::Display) -> (String, String) {
    (esc(&v.to_string()), String::new())
}

fn k(v: impl std::fmt::Display, key: &str) -> (String, String) {
    (esc(&v.to_string()), key.to_string())
}

fn counts(m: &BTreeMap<String, u64>, prefix: &str) -> String {
    let rows = m
        .iter()
        .map(|(n, v)| vec![c(n), k(v, &format!("{prefix}{n}"))]);
    table(&["", "count"], rows, &format!("{prefix}counts"))
}

pub fn fleet(v: &FleetView) -> String {
    let t = &v.tenant;
    let mut b = String::from("<h2>The store</h2>");
    b.push_str(&counts(&v.counts, ""));
    b.push_str("<h2>Nodes</h2>");
    match &v.nodes {
        None => b.push_str("<p>This server follows no fleet (<code>--fleet</code>).</p>"),
        Some(nodes) => {
            if let Some(e) = &v.nodes_error {
                let _ = write!(b, "<p class=\"err\">{}</p>", esc(e));
            }
            let rows = nodes.iter().map(|n| {
                vec![
                    c(&n.info.node),
                    c(&n.info.location),
                    k(n.status, &format!("state-{}", n.info.node)),
                    k(n.info.busy, &format!("busy-{}", n.info.node)),
                    k(n.info.slots, &format!("slots-{}", n.info.node)),
                    c(n.info.runtimes.join(", ")),
                    k(n.info.jobs_done, ""),
                    k(n.age_ms, &format!("age-{}", n.info.node)),
                ]
            });
            b.push_str(&table(
                &[
                    "node",
                    "location",
                    "state",
                    "slots in use",
                    "slots",
                    "runtimes",
                    "jobs done",
                    "heartbeat age ms",
                ],
                rows,
                "nodes",
            ));
        }
    }
    b.push_str(
        "<h2>Live</h2><p>results since this page opened: <span data-k=\"live-results\">0</span>; \
         stored by this server: <span data-k=\"live-stored\">–</span></p>",
    );
    b.push_str(&table(
        &[
            "event",
            "job",
            "node",
            "location",
            "runtime",
            "status",
            "mode",
            "delivery",
            "queue ms / target",
            "exec ms",
            "total ms",
        ],
        Vec::<Vec<(String, String)>>::new(),
        "live",
    ));
    b.push_str("<h2>Newest jobs</h2>");
    let rows = v.jobs.iter().map(|j| {
        vec![
            c(&j.job),
            (
                format!(
                    "<a href=\"/t/{t}/campaigns/{}\">{}</a>",
                    url(&j.run),
                    esc(&j.run)
                ),
                String::new(),
            ),
            c(&j.node),
            (opt(&j.location), String::new()),
            (opt(&j.runtime), String::new()),
            (opt(&j.status), String::new()),
            (opt(&j.delivery), String::new()),
            (ms(&j.queue_ms), String::new()),
            (ms(&j.exec_ms), String::new()),
            (ms(&j.total_ms), String::new()),
        ]
    });
    b.push_str(&table(
        &[
            "job", "run", "node", "location", "runtime", "status", "delivery", "queue ms",
            "exec ms", "total ms",
        ],
        rows,
        "jobs",
    ));
    b.push_str("<script src=\"/static/vtnt.js\"></script>");
    layout("Fleet", Some(t), &b)
}

pub fn campaigns(t: &Tenant, runs: &[RunRow]) -> String {
    let rows = runs.iter().map(|r| {
        vec![
            (
                format!(
                    "<a href=\"/t/{t}/campaigns/{}\">{}</a>",
                    url(&r.key),
                    esc(&r.key)
                ),
                String::new(),
            ),
            c(&r.name),
            c(&r.source),
            k(r.jobs, &format!("jobs-{}", r.key)),
            k(r.nodes, &format!("nodes-{}", r.key)),
            k(r.traces, &format!("traces-{}", r.key)),
            k(r.pings, &format!("pings-{}", r.key)),
        ]
    });
    let b = table(
        &["run", "name", "source", "jobs", "nodes", "traces", "pings"],
        rows,
        "runs",
    );
    layout("Campaigns", Some(t), &b)
}

/// Horizontal bars: (label, value) pairs.
fn bars(items: &[(String, u64)]) -> String {
    let max = items.iter().map(|i| i.1).max().unwrap_or(0).max(1);
    let h = 22 * items.len() + 6;
    let mut s = format!("<svg width=\"520\" height=\"{h}\" role=\"img\">");
    for (i, (label, v)) in items.iter().enumerate() {
        let y = 4 + 22 * i;
        let w = 300 * v / max;
        let _ = write!(
            s,
            "<text x=\"0\" y=\"{}\" font-size=\"12\">{}</text><rect x=\"150\" y=\"{y}\" \
             width=\"{w}\" height=\"16\" fill=\"#4a7\"/><text x=\"{}\" y=\"{}\" \
             font-size=\"12\">{v}</text>",
            y + 13,
            esc(label),
            155 + w,
            y + 13
        );
    }
    s.push_str("</svg>");
    s
}

pub fn campaign(t: &Tenant, v: &Campaign) -> String {
    let r = &v.run;
    let progress = match v.records_declared {
        0 => "–".to_string(),
        d => format!("{:.0} %", 100.0 * v.records_stored as f64 / d as f64),
    };
    let mut b = table(
        &["", ""],
        [
            vec![c("jobs"), k(r.jobs, "jobs")],
            vec![c("nodes"), k(r.nodes, "nodes")],
            vec![c("targets done"), k(v.targets_done, "targets_done")],
            vec![c("traces"), k(r.traces, "traces")],
            vec![c("pings"), k(r.pings, "pings")],
            vec![c("probes spent"), k(v.probes, "probes")],
            vec![c("tunnels"), k(v.tunnels, "tunnels")],
            vec![c("LSRs revealed"), k(v.lsrs_revealed, "lsrs_revealed")],
            vec![
                c("records declared"),
                k(v.records_declared, "records_declared"),
            ],
            vec![c("records stored"), k(v.records_stored, "records_stored")],
            vec![c("progress"), c(progress)],
        ],
        "campaign",
    );
    b.push_str("<h2>Tunnels per class</h2>");
    b.push_str(&counts(&v.tunnels_per_class, "class-"));
    let items: Vec<(String, u64)> = v
        .tunnels_per_class
        .iter()
        .map(|(a, b)| (a.clone(), *b))
        .collect();
    b.push_str(&bars(&items));
    b.push_str("<h2>Jobs per status</h2>");
    b.push_str(&counts(&v.jobs_by_status, "status-"));
    let _ = write!(
        b,
        "<p><a href=\"/t/{t}/traces?run={}\">its traces</a></p>",
        url(&r.key)
    );
    layout(&format!("Campaign {}", r.key), Some(t), &b)
}

pub fn traces(t: &Tenant, v: &TracesView) -> String {
    let rows = v.traces.iter().map(|r| {
        vec![
            (
                format!("<a href=\"/t/{t}/paths/{}\">{}</a>", r.id, r.id),
                String::new(),
            ),
            c(&r.run),
            c(&r.node),
            (opt(&r.role), String::new()),
            c(&r.dst),
            c(&r.stop_reason),
            k(r.path.len(), &format!("hops-{}", r.id)),
        ]
    });
    let mut b = format!(
        "<p>The first <span data-k=\"shown\">{}</span> traces (at most {}) the filter selects \
         (query string: target, prefix, node, run, since_us, until_us).</p>",
        v.traces.len(),
        v.limit
    );
    b.push_str(&table(
        &["trace", "run", "node", "role", "target", "stop", "hops"],
        rows,
        "traces",
    ));
    layout("Traces", Some(t), &b)
}

/// One path: hops left to right, each tunnel a band from its ingress to its egress with
/// its LSRs (revealed ones dashed) under it.
fn path_svg(v: &PathView) -> String {
    let path = &v.trace.path;
    let n = path.len().max(1);
    let x = |i: usize| 50 + 120 * i;
    let w = x(n) + 20;
    let mut s = format!("<svg width=\"{w}\" height=\"260\" role=\"img\" id=\"path-svg\">");
    for (ti, tun) in v.tunnels.iter().enumerate() {
        let find = |a: &Option<String>| a.as_ref().and_then(|a| path.iter().position(|p| p == a));
        let (Some(i), e) = (find(&tun.ingress), find(&tun.egress)) else {
            continue;
        };
        let e = e.unwrap_or(i).max(i);
        let y = 30 + 8 * ti;
        let _ = write!(
            s,
            "<rect x=\"{}\" y=\"{y}\" width=\"{}\" height=\"50\" fill=\"#fc8\" opacity=\"0.5\"/>\
             <text x=\"{}\" y=\"{}\" font-size=\"11\">{}</text>",
            x(i) - 20,
            x(e) - x(i) + 40,
            x(i) - 18,
            y + 12,
            esc(&tun.class)
        );
        for (li, l) in tun.lsrs.iter().enumerate() {
            let lx = x(i) + 40 + 90 * li;
            let dash = if l.revealed {
                " stroke-dasharray=\"4 2\""
            } else {
                ""
            };
            let _ = write!(
                s,
                "<circle cx=\"{lx}\" cy=\"{}\" r=\"9\" fill=\"#fff\" stroke=\"#a40\"{dash}/>\
                 <text x=\"{}\" y=\"{}\" font-size=\"10\">{}{}</text>",
                150 + 30 * (ti % 3),
                lx - 30,
                172 + 30 * (ti % 3),
                opt(&l.addr),
                if l.revealed { " (revealed)" } else { "" }
            );
        }
    }
    for (i, a) in path.iter().enumerate() {
        if i + 1 < path.len() {
            let _ = write!(
                s,
                "<line x1=\"{}\" y1=\"80\" x2=\"{}\" y2=\"80\" stroke=\"#333\"/>",
                x(i),
                x(i + 1)
            );
        }
        let fill = if a == "*" { "#ddd" } else { "#4a7" };
        let _ = write!(
            s,
            "<circle cx=\"{}\" cy=\"80\" r=\"10\" fill=\"{fill}\"/><text x=\"{}\" y=\"108\" \
             font-size=\"11\">{}</text><text x=\"{}\" y=\"62\" font-size=\"10\">{}</text>",
            x(i),
            x(i) - 40,
            esc(a),
            x(i) - 4,
            usize::from(v.trace.firsthop) + i
        );
    }
    s.push_str("</svg>");
    s
}

pub fn path(t: &Tenant, v: &PathView) -> String {
    let r = &v.trace;
    let mut b = format!(
        "<p>{} → {} from {} ({}, run <a href=\"/t/{t}/campaigns/{}\">{}</a>), {} stopped: {}</p>",
        esc(&r.src),
        esc(&r.dst),
        esc(&r.node),
        esc(&r.method),
        url(&r.run),
        esc(&r.run),
        opt(&r.role),
        esc(&r.stop_reason)
    );
    b.push_str(&path_svg(v));
    b.push_str("<h2>Hops</h2>");
    let rows = v.hops.iter().map(|h| {
        let sig = h.signature.map_or("–".into(), |(te, er)| {
            format!("&lt;{},{}&gt;", opt(&te), opt(&er))
        });
        vec![
            k(h.ttl, ""),
            c(&h.addr),
            c(format!("{:.3}", h.rtt_us as f64 / 1000.0)),
            k(h.reply_ttl, ""),
            (opt(&h.q_ttl), String::new()),
            (opt(&h.labels), String::new()),
            (sig, String::new()),
            (opt(&h.vendor), String::new()),
            (opt(&h.asn), String::new()),
        ]
    });
    b.push_str(&table(
        &[
            "ttl",
            "address",
            "rtt ms",
            "reply ttl",
            "q-ttl",
            "MPLS labels",
            "TTL signature",
            "vendor",
            "AS",
        ],
        rows,
        "hops",
    ));
    b.push_str("<h2>Tunnels</h2>");
    let rows = v.tunnels.iter().map(|tu| {
        let lsrs: Vec<String> = tu
            .lsrs
            .iter()
            .map(|l| match l.revealed {
                true => format!(
                    "<span class=\"revealed\">{} (revealed)</span>",
                    opt(&l.addr)
                ),
                false => opt(&l.addr),
            })
            .collect();
        vec![
            c(&tu.class),
            (opt(&tu.ingress), String::new()),
            (opt(&tu.egress), String::new()),
            (lsrs.join(", "), String::new()),
            k(tu.lsrs.iter().filter(|l| l.revealed).count(), "revealed"),
            c(&tu.ingress_vendor),
            (opt(&tu.evidence), String::new()),
            (opt(&tu.revelation), String::new()),
        ]
    });
    b.push_str(&table(
        &[
            "class",
            "ingress",
            "egress",
            "LSRs",
            "revealed",
            "ingress vendor",
            "evidence",
            "revelation",
        ],
        rows,
        "tunnels",
    ));
    layout(&format!("Trace {}", r.id), Some(t), &b)
}

pub fn questions(t: &Tenant) -> String {
    let mut b = String::from("<ul>");
    for (name, title) in QUESTIONS {
        let _ = write!(
            b,
            "<li><a href=\"/t/{t}/questions/{name}\">{title}</a></li>"
        );
    }
    let _ = write!(
        b,
        "</ul><p>What changed between two campaigns: <code>/t/{t}/diff?a=RUN&amp;b=RUN</code></p>"
    );
    layout("Questions", Some(t), &b)
}

pub fn question(t: &Tenant, v: &QuestionView) -> String {
    let title = QUESTIONS
        .iter()
        .find(|q| q.0 == v.question)
        .map_or("Question", |q| q.1);
    let group = |g: &Option<String>| g.clone().unwrap_or_else(|| "(none)".into());
    let mut b = String::new();
    match &v.answer {
        Answer::Tunnels(rows) => {
            let classes: Vec<String> = rows
                .first()
                .map(|r| r.classes.keys().cloned().collect())
                .unwrap_or_default();
            let mut head = vec!["group", "tunnels", "observations"];
            head.extend(classes.iter().map(String::as_str));
            let body = rows.iter().map(|r| {
                let g = group(&r.group);
                let mut cells = vec![
                    c(&g),
                    k(r.tunnels, &format!("tunnels-{g}")),
                    k(r.observations, &format!("observations-{g}")),
                ];
                cells.extend(r.classes.iter().map(|(cl, n)| k(n, &format!("{cl}-{g}"))));
                cells
            });
            b.push_str(&table(&head, body, "answer"));
            let items: Vec<(String, u64)> =
                rows.iter().map(|r| (group(&r.group), r.tunnels)).collect();
            b.push_str(&bars(&items));
        }
        Answer::Lsrs(rows) => {
            let body = rows.iter().map(|r| {
                let g = group(&r.asn);
                vec![
                    c(&g),
                    k(r.lsrs, &format!("lsrs-{g}")),
                    k(r.tunnels, &format!("tunnels-{g}")),
                ]
            });
            b.push_str(&table(&["AS", "revealed LSRs", "tunnels"], body, "answer"));
            let items: Vec<(String, u64)> = rows.iter().map(|r| (group(&r.asn), r.lsrs)).collect();
            b.push_str(&bars(&items));
        }
    }
    layout(title, Some(t), &b)
}

pub fn diff(t: &Tenant, v: &Diff) -> String {
    let mut b = table(
        &["", ""],
        [
            vec![c("compared"), k(v.compared, "compared")],
            vec![c("unchanged"), k(v.unchanged, "unchanged")],
            vec![c("changed"), k(v.changed.len(), "changed")],
            vec![c("only in a"), k(v.only_in_a.len(), "only_in_a")],
            vec![c("only in b"), k(v.only_in_b.len(), "only_in_b")],
        ],
        "diff",
    );
    let rows = v.changed.iter().map(|ch| {
        vec![
            c(&ch.key.node),
            c(&ch.key.target),
            c(ch.segment.as_ref().map_or("–".into(), |s| {
                format!("ttl {}: {} → {}", s.ttl, s.a.join(" "), s.b.join(" "))
            })),
            k(ch.tunnels_gone.len(), ""),
            k(ch.tunnels_new.len(), ""),
        ]
    });
    b.push_str(&table(
        &[
            "node",
            "target",
            "changed segment",
            "tunnels gone",
            "tunnels new",
        ],
        rows,
        "changes",
    ));
    layout(&format!("{} → {}", v.a, v.b), Some(t), &b)
}

pub fn reports(v: &Listing) -> String {
    let mut b = String::from("<ul>");
    for f in &v.files {
        let href: Vec<String> = f.split('/').map(url).collect();
        let _ = write!(
            b,
            "<li><a href=\"/reports/{}\">{}</a></li>",
            href.join("/"),
            esc(f)
        );
    }
    b.push_str("</ul>");
    layout("Reports", None, &b)
}

/// A report's markdown as a page (raw HTML in it shown as text).
pub fn markdown(name: &str, text: &str) -> String {
    let events =
        pulldown_cmark::Parser::new_ext(text, pulldown_cmark::Options::ENABLE_TABLES).map(|e| {
            match e {
                pulldown_cmark::Event::Html(h) | pulldown_cmark::Event::InlineHtml(h) => {
                    pulldown_cmark::Event::Text(h)
                }
                e => e,
            }
        });
    let mut out = String::new();
    pulldown_cmark::html::push_html(&mut out, events);
    layout(name, None, &out)
}
