//! The session against scamper's words, for both generations of the protocol.

use super::*;
use vtnt_formats::{Item, NoAnnotations, WartsReader};

fn session_of(protocol: Protocol, queue: u32) -> Session {
    Session::new(SessionInfo {
        list_name: "/run/vtnt.sock:0".into(),
        hostname: Some("vm".into()),
        start_time: 1_795_677_211,
        pps: 100,
        window: 10,
        queue,
        protocol,
        vtnt: "0.1.0 (commit 1a2b3c4d)".into(),
    })
}

fn session() -> Session {
    session_of(Protocol::Scamper20211212, 10)
}

/// Feeds `text`, accepting every measurement command and starting it at once.
fn say(s: &mut Session, text: &str) -> (String, Vec<Vec<String>>) {
    s.receive(text.as_bytes());
    let mut cmds = Vec::new();
    while let Some(c) = s.next_command() {
        match c {
            Command::Measure(w) => {
                let id = s.accept();
                s.started(id);
                cmds.push(w);
            }
            Command::Halt(id) => s.halted(id),
        }
    }
    (String::from_utf8(s.take_output()).unwrap(), cmds)
}

fn out_of(s: &mut Session) -> String {
    String::from_utf8(s.take_output()).unwrap()
}

/// A ping as `vtnt ping -c 1 127.0.0.1` printed it.
fn ping() -> Record {
    let line = r#"{"type":"ping", "version":"0.4", "method":"icmp-echo", "src":"127.0.0.1", "dst":"127.0.0.1", "start":{"sec":1795677856,"usec":456357}, "ping_sent":1, "probe_size":84, "userid":0, "ttl":64, "wait":1, "timeout":1, "responses":[{"from":"127.0.0.1", "seq":0, "reply_size":84, "reply_ttl":64, "reply_proto":"icmp", "tx":{"sec":1795677856, "usec":456729}, "rx":{"sec":1795677856, "usec":456739}, "rtt":0.010, "probe_ipid":58609, "reply_ipid":381, "icmp_type":0, "icmp_code":0}],"statistics":{"replies":1, "loss":0, "min":0.010, "max":0.010, "avg":0.010, "stddev":0.000}}"#;
    match vtnt_formats::parse_json_line(line, 1).unwrap() {
        Item::Record(r) => r,
        other => panic!("{other:?}"),
    }
}

/// The warts bytes of every `DATA` block in `text`, checking each length.
fn data_blocks(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut lines = text.split_inclusive('\n');
    while let Some(l) = lines.next() {
        let Some(n) = l.strip_prefix("DATA ") else {
            continue;
        };
        let n = n.split(' ').next().unwrap();
        let mut left: usize = n.trim().parse().unwrap();
        while left > 0 {
            let l = lines.next().expect("DATA shorter than its length");
            left -= l.len();
            let v: Vec<u8> = l.trim_end().bytes().map(|c| (c - b' ') & 0x3f).collect();
            for g in v[1..].chunks(4) {
                out.extend([
                    (g[0] << 2) | (g[1] >> 4),
                    (g[1] << 4) | (g[2] >> 2),
                    (g[2] << 6) | g[3],
                ]);
            }
            let keep = out.len() - v[1..].len() / 4 * 3 + usize::from(v[0]);
            out.truncate(keep);
        }
    }
    out
}

/// The `DATA` header lines of `text`.
fn heads(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.starts_with("DATA ")).collect()
}

#[test]
fn interactive_commands_answer_as_scamper_does() {
    let mut s = session();
    let (out, cmds) = say(
        &mut s,
        "get version\r\nget pps\nget window\n\nbogus 1\ndone\ntrace 192.0.2.1\nhelp\n\x01\n",
    );
    assert!(cmds.is_empty());
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0], "OK version 20211212 (vtnt 0.1.0 (commit 1a2b3c4d))",
        "{out}"
    );
    assert_eq!(
        lines[1..6],
        [
            "OK pps 100",
            "OK window 0/10",
            "ERR unhandled command 'bogus'",
            "ERR unhandled command 'done'",
            "ERR unhandled command 'trace'",
        ]
    );
    assert!(lines[6].starts_with("OK commands: attach"), "{out}");
    assert_eq!(lines[7], "ERR invalid character in line");
    assert!(!s.is_closed());
    let (out, _) = say(&mut s, "exit\nget pps\n");
    assert_eq!(out, "");
    assert!(s.is_closed());
    let mut s = session_of(Protocol::Current, 10);
    assert!(say(&mut s, "get version\n")
        .0
        .starts_with("OK version 20260420 "));
}

#[test]
fn bad_attach_parameters_are_refused_like_scamper() {
    let mut s = session();
    let (out, _) = say(&mut s, "attach bogus 1\nattach format text\n");
    assert_eq!(
        out,
        "ERR command attach param 'bogus' failed\nERR format must be warts or json\n"
    );
    assert!(!s.attached());
}

#[test]
fn an_attached_warts_session_streams_objects_sc_attach_can_decode() {
    let mut s = session();
    let (out, _) = say(&mut s, "attach priority 1\n");
    assert!(out.starts_with("OK\nMORE\nDATA "), "{out}");
    assert_eq!(heads(&out).len(), 2, "the list and the cycle start");
    let mut all = out;
    let (out, cmds) = say(&mut s, "trace -q 1 192.0.2.9\nbogus\ndone\n");
    assert_eq!(cmds, [["trace", "-q", "1", "192.0.2.9"]]);
    assert_eq!(
        out,
        "OK id-1\nMORE\nERR command not accepted: unknown command 'bogus' (trace, ping, tnt, halt, done)\nOK\n"
    );
    assert!(!s.is_closed(), "a result is outstanding");
    s.result(1, &ping(), &NoAnnotations);
    s.finished(1);
    assert!(s.is_closed());
    let out = out_of(&mut s);
    // 20211212's sc_attach takes nothing after the length
    assert!(
        heads(&out).iter().all(|h| h.split(' ').count() == 2),
        "{out}"
    );
    assert_eq!(heads(&out).len(), 2, "the ping and the cycle stop");
    assert!(!out.contains("MORE"), "no MORE after done");
    all.push_str(&out);
    let items: Vec<Item> = WartsReader::new(&data_blocks(&all)[..])
        .map(|i| i.unwrap())
        .collect();
    assert_eq!(items.len(), 3, "{items:?}");
    let Item::CycleStart(c) = &items[0] else {
        panic!("{items:?}")
    };
    assert_eq!((c.list_name.as_str(), c.id), ("/run/vtnt.sock:0", 1));
    assert_eq!(c.vtnt.as_deref(), Some("0.1.0 (commit 1a2b3c4d)"));
    assert_eq!(items[1], Item::Record(ping()));
    assert!(matches!(items[2], Item::CycleStop(_)));
}

#[test]
fn today_s_protocol_tags_the_object_that_ends_a_task() {
    let mut s = session_of(Protocol::Current, 10);
    let (out, _) = say(&mut s, "attach name \"my list\" list_id 4 cycle_id 9\n");
    let header = out.clone();
    assert!(
        heads(&out).iter().all(|h| !h.contains("id-")),
        "the cycle's objects are no task's: {out}"
    );
    let (out, _) = say(&mut s, "ping 192.0.2.9\ntnt 192.0.2.8\n");
    assert_eq!(out, "OK id-1\nMORE\nOK id-2\nMORE\n");
    // task 2 (a tnt) gives three records: the first two go untagged, the last tagged
    for _ in 0..3 {
        s.result(2, &ping(), &NoAnnotations);
    }
    let early = out_of(&mut s);
    assert_eq!(heads(&early).len(), 2, "{early}");
    assert!(heads(&early).iter().all(|h| !h.contains("id-")), "{early}");
    s.finished(2);
    let last = out_of(&mut s);
    assert!(heads(&last)[0].ends_with(" id-2"), "{last}");
    s.result(1, &ping(), &NoAnnotations);
    assert_eq!(out_of(&mut s), "", "held until the task ends");
    s.finished(1);
    let one = out_of(&mut s);
    assert_eq!(heads(&one).len(), 1);
    let h = heads(&one)[0];
    let len: usize = h.split(' ').nth(1).unwrap().parse().unwrap();
    assert_eq!(
        one.len(),
        h.len() + 1 + len,
        "the length counts the body: {one}"
    );
    assert!(h.ends_with(" id-1"), "{one}");
    // a task with no record ends with nothing to send
    say(&mut s, "ping 192.0.2.7\n");
    s.finished(3);
    assert_eq!(out_of(&mut s), "");
    let (out, _) = say(&mut s, "done\n");
    assert!(out.starts_with("OK\nDATA "), "{out}");
    assert!(!heads(&out)[0].contains("id-"), "the cycle stop: {out}");
    let items: Vec<Item> = WartsReader::new(&data_blocks(&(header + &out))[..])
        .map(|i| i.unwrap())
        .collect();
    let Item::CycleStop(c) = &items[1] else {
        panic!("{items:?}")
    };
    assert_eq!((c.list_name.as_str(), c.list_id, c.id), ("my list", 4, 9));
}

#[test]
fn more_comes_once_nothing_waits_to_start() {
    let mut s = session_of(Protocol::Current, 2);
    say(&mut s, "attach\n");
    s.receive(b"ping 192.0.2.9\nping 192.0.2.8\nping 192.0.2.7\nping 8.8.8.8\n");
    let mut ids = Vec::new();
    for _ in 0..2 {
        assert!(matches!(s.next_command(), Some(Command::Measure(_))));
        ids.push(s.accept());
    }
    // a third waits beyond the client's queue: refused by the session itself
    assert!(s.next_command().is_none());
    assert_eq!(
        out_of(&mut s),
        "OK id-1\nOK id-2\nERR command not accepted: 2 commands of this client wait to start, \
         the most it may queue (the daemon's --client-queue); send the next after MORE\n\
         ERR command not accepted: 2 commands of this client wait to start, the most it may \
         queue (the daemon's --client-queue); send the next after MORE\n"
    );
    s.started(1);
    assert_eq!(out_of(&mut s), "", "one still waits");
    s.started(2);
    assert_eq!(out_of(&mut s), "MORE\n");
    s.receive(b"ping 8.8.8.8\n");
    assert!(s.next_command().is_some());
    s.refuse("8.8.8.8 needs\n--allow-public");
    assert_eq!(
        out_of(&mut s),
        "ERR command not accepted: 8.8.8.8 needs --allow-public\n"
    );
    assert_eq!(s.outstanding(), 2);
    s.end();
    let out = out_of(&mut s);
    assert!(out.starts_with("DATA ") && s.is_closed(), "{out}");
}

#[test]
fn halt_answers_as_scamper_does() {
    let mut s = session_of(Protocol::Current, 10);
    say(&mut s, "attach\n");
    s.receive(b"ping 192.0.2.9\n");
    assert!(s.next_command().is_some());
    let id = s.accept();
    out_of(&mut s);
    s.receive(b"halt\nhalt x\nhalt 1 2\nhalt 0\nhalt 99999999999\nhalt 7\nhalt 1\n");
    assert_eq!(s.next_command(), Some(Command::Halt(id)));
    assert_eq!(
        out_of(&mut s),
        "ERR usage: halt [id]\nERR usage: halt [id]\nERR usage: halt [id]\n\
         ERR halt number invalid\nERR halt number invalid\nERR no task id-7\n"
    );
    s.result(id, &ping(), &NoAnnotations);
    s.halted(id);
    let out = out_of(&mut s);
    assert!(out.starts_with("OK halted 1\nDATA "), "{out}");
    assert!(heads(&out)[0].ends_with(" id-1"), "{out}");
    assert_eq!(s.outstanding(), 0);
    // a halted task that never started gives back its place in the queue
    let mut s = session_of(Protocol::Current, 1);
    say(&mut s, "attach\n");
    s.receive(b"ping 192.0.2.9\n");
    assert!(s.next_command().is_some());
    s.accept();
    s.halted(1);
    s.receive(b"ping 192.0.2.9\n");
    assert!(matches!(s.next_command(), Some(Command::Measure(_))));
}

#[test]
fn json_objects_are_sent_as_lines() {
    let mut s = session();
    let (out, _) = say(&mut s, "attach format json\n");
    let line = r#"{"type":"cycle-start", "list_name":"/run/vtnt.sock:0", "id":1, "hostname":"vm", "start_time":1795677211, "vtnt":"0.1.0 (commit 1a2b3c4d)"}"#;
    assert_eq!(out, format!("OK\nMORE\nDATA {}\n{line}\n", line.len() + 1));
    s.end();
    let out = out_of(&mut s);
    assert!(out.contains(r#"{"type":"cycle-stop""#), "{out}");
}

#[test]
fn long_lines_are_refused_once_and_skipped() {
    let mut s = session();
    s.receive(&vec![b'a'; MAX_LINE + 10]);
    assert!(s.next_command().is_none());
    s.receive(&vec![b'a'; MAX_LINE + 10]);
    assert!(s.next_command().is_none());
    s.receive(b"aaa\nget pps\n");
    assert!(s.next_command().is_none());
    assert_eq!(
        out_of(&mut s),
        format!("ERR line longer than {MAX_LINE} bytes\nOK pps 100\n")
    );
}
