//! A fake of OpenAI's Batch API and Anthropic's Message Batches (and their live
//! endpoints), over wiremock: it keeps every uploaded file and job, answers each
//! request with a scripted model (two `lookup` calls, then `done: {input}`), and can
//! expire a job, add unknown result lines, never finish, hang a job's creation, hold a
//! job in progress, or forget a job (404).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// What the fake does with jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Every job completes at its first poll, every request answered.
    Normal,
    /// The first job expires with only its first `answered` requests answered.
    ExpireFirst { answered: usize },
    /// Every job's results add a line for an unknown id and a repeat of the first
    /// line's id (after the real one).
    Unknown,
    /// No job ever finishes.
    Never,
    /// Creating job number `at` (1-based) never returns.
    HangCreate { at: u32 },
    /// Job number `at` (1-based) stays in progress while the mode holds.
    Hold { at: usize },
    /// Job number `at` (1-based) is unknown to the server: its status reads 404.
    Lost { at: usize },
    /// Job number `at` (1-based) ends with only its first `answered` requests
    /// answered, the others expired (either wire).
    Expire { at: usize, answered: usize },
}

/// How many of job `index`'s (0-based) first requests are answered in `mode`.
fn answered_in(mode: Mode, index: usize) -> usize {
    match mode {
        Mode::ExpireFirst { answered } if index == 0 => answered,
        Mode::Expire { at, answered } if index + 1 == at => answered,
        _ => usize::MAX,
    }
}

/// Whether the status of job `index` (0-based) reads in progress in `mode`.
fn in_progress(mode: Option<Mode>, index: usize) -> bool {
    match mode {
        Some(Mode::Never) => true,
        Some(Mode::Hold { at }) => index + 1 == at,
        _ => false,
    }
}

/// One job the fake holds.
#[derive(Clone, Debug)]
pub(crate) struct Job {
    pub(crate) id: String,
    /// The lines as sent (OpenAI: `{custom_id, method, url, body}`; Anthropic:
    /// `{custom_id, params}`).
    pub(crate) lines: Vec<Value>,
}

#[derive(Default)]
pub(crate) struct State {
    pub(crate) uri: String,
    pub(crate) mode: Option<Mode>,
    pub(crate) files: HashMap<String, Vec<u8>>,
    pub(crate) jobs: Vec<Job>,
    /// Job creations received (a hung one included).
    pub(crate) creates: u32,
    pub(crate) live_calls: u32,
    pub(crate) cancels: Vec<String>,
}

/// The fake server and its state.
pub(crate) struct BatchServer {
    pub(crate) server: MockServer,
    state: Arc<Mutex<State>>,
}

struct Fake(Arc<Mutex<State>>);

impl BatchServer {
    /// A fake in `mode`.
    pub(crate) async fn start(mode: Mode) -> Self {
        let server = MockServer::start().await;
        let state = Arc::new(Mutex::new(State {
            uri: server.uri(),
            mode: Some(mode),
            ..State::default()
        }));
        Mock::given(wiremock::matchers::any())
            .respond_with(Fake(Arc::clone(&state)))
            .mount(&server)
            .await;
        Self { server, state }
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }

    pub(crate) fn set_mode(&self, mode: Mode) {
        self.state().mode = Some(mode);
    }

    /// The OpenAI base URL (`.../v1`).
    pub(crate) fn openai_url(&self) -> String {
        format!("{}/v1", self.server.uri())
    }

    /// Waits until a job creation was received `n` times.
    pub(crate) async fn creates_reach(&self, n: u32) {
        while self.state().creates < n {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

/// The first user message's text and the tool results in a request body (either wire).
fn read(body: &Value) -> (String, usize) {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let mut user = None;
    let mut results = 0;
    for m in &messages {
        match m["role"].as_str() {
            Some("tool") => results += 1,
            Some("user") => {
                let content = &m["content"];
                if let Some(blocks) = content.as_array() {
                    results += blocks.iter().filter(|b| b["type"] == "tool_result").count();
                    if user.is_none() {
                        user = blocks
                            .iter()
                            .find_map(|b| b["text"].as_str())
                            .map(str::to_owned);
                    }
                } else if user.is_none() {
                    user = content.as_str().map(str::to_owned);
                }
            }
            _ => {}
        }
    }
    (user.unwrap_or_default(), results)
}

/// The scripted model's OpenAI response: `lookup` twice, then `done: {input}`.
pub(crate) fn openai_reply(body: &Value) -> Value {
    let (user, results) = read(body);
    let message = if results < 2 {
        let args = json!({"order_id": format!("{user}-{results}")}).to_string();
        json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": format!("call_{results}"), "type": "function",
            "function": {"name": "lookup", "arguments": args}}]})
    } else {
        json!({"role": "assistant", "content": format!("done: {user}")})
    };
    let finish = if results < 2 { "tool_calls" } else { "stop" };
    json!({"id": "chatcmpl-1", "object": "chat.completion", "model": body["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}})
}

/// The scripted model's Anthropic response.
pub(crate) fn anthropic_reply(body: &Value) -> Value {
    let (user, results) = read(body);
    let (content, stop) = if results < 2 {
        (
            json!([{"type": "tool_use", "id": format!("toolu_{results}"), "name": "lookup",
                "input": {"order_id": format!("{user}-{results}")}}]),
            "tool_use",
        )
    } else {
        (
            json!([{"type": "text", "text": format!("done: {user}")}]),
            "end_turn",
        )
    };
    json!({"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
        "content": content, "stop_reason": stop,
        "usage": {"input_tokens": 1000, "output_tokens": 100}})
}

fn ok(body: &Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(body)
}

fn jsonl(lines: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for line in lines {
        out.extend_from_slice(line.to_string().as_bytes());
        out.push(b'\n');
    }
    out
}

/// The JSONL file of a multipart upload.
fn uploaded(body: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(body);
    let start = text.find("filename=\"batch.jsonl\"").unwrap();
    let from = start + text[start..].find("\r\n\r\n").unwrap() + 4;
    let to = from + text[from..].find("\r\n--").unwrap();
    text[from..to].as_bytes().to_vec()
}

impl Fake {
    fn openai_results(&self, s: &mut State, index: usize) -> Value {
        let job = s.jobs[index].clone();
        let mode = s.mode.unwrap();
        let mut output = Vec::new();
        let mut errors = Vec::new();
        let answered = answered_in(mode, index);
        for (i, line) in job.lines.iter().enumerate() {
            let id = &line["custom_id"];
            if i < answered {
                output.push(json!({"id": format!("batch_req_{i}"), "custom_id": id,
                    "response": {"status_code": 200, "request_id": format!("req_{i}"),
                        "body": openai_reply(&line["body"])}, "error": null}));
            } else {
                errors.push(json!({"id": format!("batch_req_{i}"), "custom_id": id,
                    "response": null, "error": {"code": "batch_expired",
                        "message": "not executed before the completion window expired"}}));
            }
        }
        if mode == Mode::Unknown {
            let mut fake = output[0].clone();
            fake["response"]["body"]["choices"][0]["message"] =
                json!({"role": "assistant", "content": "done: not yours"});
            output.push(fake);
            let mut ghost = output[0].clone();
            ghost["custom_id"] = json!("ghost-1");
            output.push(ghost);
        }
        let out_id = format!("file-out-{index}");
        s.files.insert(out_id.clone(), jsonl(&output));
        let mut job_json = json!({"id": job.id, "object": "batch", "status": "completed",
            "output_file_id": out_id});
        if !errors.is_empty() {
            let err_id = format!("file-err-{index}");
            s.files.insert(err_id.clone(), jsonl(&errors));
            job_json["error_file_id"] = json!(err_id);
            job_json["status"] = json!("expired");
        }
        job_json
    }

    fn anthropic_results(&self, s: &State, index: usize) -> Vec<u8> {
        let answered = answered_in(s.mode.unwrap(), index);
        let lines: Vec<Value> = s.jobs[index]
            .lines
            .iter()
            .enumerate()
            .map(|(i, line)| {
                if i >= answered {
                    return json!({"custom_id": line["custom_id"], "result": {"type": "expired"}});
                }
                json!({"custom_id": line["custom_id"], "result": {"type": "succeeded",
                    "message": anthropic_reply(&line["params"])}})
            })
            .collect();
        jsonl(&lines)
    }
}

/// The 404 of a job the server does not know, in `Mode::Lost`.
fn lost(s: &State, index: usize) -> Option<ResponseTemplate> {
    (s.mode == Some(Mode::Lost { at: index + 1 })).then(|| {
        ResponseTemplate::new(404).set_body_json(json!({"error": {
            "type": "not_found_error", "message": "no such batch"}}))
    })
}

impl Respond for Fake {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let mut s = self.0.lock().unwrap();
        let path = request.url.path().to_owned();
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let post = request.method.as_str() == "POST";
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let job_index = |s: &State, id: &str| s.jobs.iter().position(|j| j.id == id).unwrap();
        match (post, segments.as_slice()) {
            (true, ["v1", "chat", "completions"]) => {
                s.live_calls += 1;
                ok(&openai_reply(&body))
            }
            (true, ["v1", "messages"]) => {
                s.live_calls += 1;
                ok(&anthropic_reply(&body))
            }
            (true, ["v1", "files"]) => {
                let id = format!("file-in-{}", s.files.len());
                s.files.insert(id.clone(), uploaded(&request.body));
                ok(&json!({"id": id, "object": "file", "purpose": "batch"}))
            }
            (true, ["v1", "batches"] | ["v1", "messages", "batches"]) => {
                s.creates += 1;
                if s.mode == Some(Mode::HangCreate { at: s.creates }) {
                    return ResponseTemplate::new(200).set_delay(Duration::from_secs(3600));
                }
                let lines: Vec<Value> = match body["input_file_id"].as_str() {
                    Some(file) => String::from_utf8_lossy(&s.files[file])
                        .lines()
                        .map(|l| serde_json::from_str(l).unwrap())
                        .collect(),
                    None => body["requests"].as_array().unwrap().clone(),
                };
                let id = format!("batch_{}", s.jobs.len());
                s.jobs.push(Job {
                    id: id.clone(),
                    lines,
                });
                ok(&json!({"id": id, "status": "validating", "processing_status": "in_progress"}))
            }
            (false, ["v1", "batches", id]) => {
                let index = job_index(&s, id);
                if let Some(lost) = lost(&s, index) {
                    return lost;
                }
                if in_progress(s.mode, index) {
                    return ok(&json!({"id": id, "status": "in_progress"}));
                }
                ok(&self.openai_results(&mut s, index))
            }
            (false, ["v1", "files", id, "content"]) => {
                ResponseTemplate::new(200).set_body_raw(s.files[*id].clone(), "application/jsonl")
            }
            (false, ["v1", "messages", "batches", id]) => {
                let index = job_index(&s, id);
                if let Some(lost) = lost(&s, index) {
                    return lost;
                }
                if in_progress(s.mode, index) {
                    return ok(&json!({"id": id, "processing_status": "in_progress"}));
                }
                let url = format!("{}/v1/messages/batches/{id}/results", s.uri);
                ok(&json!({"id": id, "processing_status": "ended", "results_url": url}))
            }
            (false, ["v1", "messages", "batches", id, "results"]) => {
                let index = job_index(&s, id);
                ResponseTemplate::new(200)
                    .set_body_raw(self.anthropic_results(&s, index), "application/binary")
            }
            (
                true,
                ["v1", "batches", id, "cancel"] | ["v1", "messages", "batches", id, "cancel"],
            ) => {
                s.cancels.push((*id).to_owned());
                ok(&json!({"id": id, "status": "cancelling"}))
            }
            _ => ResponseTemplate::new(404).set_body_string(format!("no route {path}")),
        }
    }
}
