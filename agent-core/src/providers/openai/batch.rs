//! The OpenAI Batch API (<https://platform.openai.com/docs/guides/batch>, API reference
//! <https://platform.openai.com/docs/api-reference/batch> and
//! <https://platform.openai.com/docs/api-reference/files>): the lines go up as one JSONL
//! file (`POST /v1/files`, `purpose=batch`), the job is `POST /v1/batches` on
//! `/v1/chat/completions` with the `24h` completion window, polled with
//! `GET /v1/batches/{id}`; its output and error files are read with
//! `GET /v1/files/{id}/content`; `POST /v1/batches/{id}/cancel` cancels it.

use std::sync::Arc;

use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderValue};
use serde::Deserialize;
use serde_json::Value;

use super::OpenAiClient;
use crate::llm::{LlmError, LlmRequest};
use crate::providers::batch::{
    BatchFuture, BatchWire, Fetcher, JobState, ResultLine, jsonl_lines, request_line,
};
use crate::providers::classify::status_error;
use crate::providers::glue::{self, Wire};
use crate::providers::http::Reply;

/// The endpoint every line names (the Batch API takes the path from `/v1`).
const ENDPOINT: &str = "/v1/chat/completions";

/// The cap on a JSON reply of the files and batches endpoints (bytes).
const META_BYTES: usize = 1024 * 1024;

/// OpenAI's batch endpoints beside a Chat Completions client.
pub(crate) struct OpenAiBatch {
    client: Arc<OpenAiClient>,
    /// The API root (`https://api.openai.com/v1`).
    base: Url,
}

#[derive(Deserialize)]
struct Created {
    id: String,
}

#[derive(Deserialize)]
struct Job {
    status: String,
    #[serde(default)]
    output_file_id: Option<String>,
    #[serde(default)]
    error_file_id: Option<String>,
    #[serde(default)]
    errors: Option<Value>,
}

#[derive(Deserialize)]
struct Line {
    #[serde(default)]
    custom_id: Option<String>,
    #[serde(default)]
    response: Option<LineResponse>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct LineResponse {
    status_code: u16,
    #[serde(default)]
    request_id: Option<String>,
    #[serde(default)]
    body: Value,
}

impl OpenAiBatch {
    /// The batch endpoints of `client` (OpenAI itself: its API root is the Chat
    /// Completions URL without `/chat/completions`).
    pub(crate) fn new(client: Arc<OpenAiClient>) -> Result<Self, String> {
        let endpoint = client.transport.url().as_str();
        let root = endpoint
            .strip_suffix("/chat/completions")
            .ok_or_else(|| format!("no API root in {endpoint:?}"))?;
        let base = Url::parse(root).map_err(|e| e.to_string())?;
        Ok(Self { client, base })
    }

    /// The API root with `segments` appended (each percent-encoded: an id from the
    /// server never becomes a path of its own).
    fn url(&self, segments: &[&str]) -> Result<Url, LlmError> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|()| LlmError::permanent("the OpenAI API root cannot take a path"))?
            .pop_if_empty()
            .extend(segments);
        Ok(url)
    }

    fn fetcher(&self) -> Fetcher<'_> {
        Fetcher {
            transport: &self.client.transport,
        }
    }

    /// One output or error file line as a result.
    fn result(&self, raw: &[u8]) -> ResultLine {
        let provider = self.client.transport.provider();
        let line: Line = match serde_json::from_slice(raw) {
            Ok(line) => line,
            Err(e) => return unreadable(provider, &e),
        };
        let custom_id = line.custom_id.unwrap_or_default();
        let outcome = match (line.response, line.error) {
            (Some(response), _) => {
                let mut headers = HeaderMap::new();
                if let Some(id) = response
                    .request_id
                    .as_deref()
                    .and_then(|id| HeaderValue::from_str(id).ok())
                {
                    headers.insert("x-request-id", id);
                }
                let body = serde_json::to_vec(&response.body).unwrap_or_default();
                let status = response.status_code;
                if (200..300).contains(&status) {
                    let reply = Reply {
                        status,
                        headers,
                        body,
                    };
                    glue::decode_whole(&*self.client, &reply)
                } else {
                    let key = self.client.transport.key();
                    Err(status_error(provider, status, &headers, &body, key))
                }
            }
            (None, error) => Err(line_error(provider, error.as_ref())),
        };
        ResultLine { custom_id, outcome }
    }
}

/// A result line that does not parse: counted as naming no request.
fn unreadable(provider: &str, e: &serde_json::Error) -> ResultLine {
    ResultLine {
        custom_id: String::new(),
        outcome: Err(LlmError::transient(format!(
            "{provider} batch result line is not JSON: {e}"
        ))),
    }
}

/// A line's `error` object (`batch_expired`, `batch_cancelled`, ...): transient, since
/// the same request may succeed when sent again.
fn line_error(provider: &str, error: Option<&Value>) -> LlmError {
    let field = |name: &str| {
        error
            .and_then(|e| e.get(name))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let (code, message) = (field("code"), field("message"));
    LlmError::transient(format!(
        "{provider} batch request not answered: {code}: {message}"
    ))
}

/// The multipart body of a file upload: `purpose=batch` and the JSONL file.
fn multipart(lines: &[Vec<u8>]) -> (Vec<u8>, String) {
    let boundary = format!("agent-core-{:032x}", fastrand::u128(..));
    let mut body = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum::<usize>() + 512);
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"batch.jsonl\"\r\n\
             Content-Type: application/jsonl\r\n\r\n"
        )
        .as_bytes(),
    );
    for line in lines {
        body.extend_from_slice(line);
        body.push(b'\n');
    }
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (body, boundary)
}

fn parse<'a, T: Deserialize<'a>>(
    provider: &str,
    what: &str,
    body: &'a [u8],
) -> Result<T, LlmError> {
    serde_json::from_slice(body).map_err(|e| {
        LlmError::transient(format!(
            "{provider} batch API: {what} is not the expected JSON: {e}"
        ))
    })
}

impl BatchWire for OpenAiBatch {
    fn provider(&self) -> &str {
        self.client.transport.provider()
    }

    fn line(&self, custom_id: &str, request: &LlmRequest) -> Result<Vec<u8>, LlmError> {
        let body = self.client.encode(request, false)?;
        let envelope = format!("\"method\":\"POST\",\"url\":\"{ENDPOINT}\",\"body\"");
        request_line(custom_id, &envelope, &body)
    }

    fn submit<'a>(&'a self, lines: &'a [Vec<u8>]) -> BatchFuture<'a, String> {
        Box::pin(async move {
            let provider = self.provider();
            let (body, boundary) = multipart(lines);
            let content_type =
                HeaderValue::from_str(&format!("multipart/form-data; boundary={boundary}"))
                    .map_err(|e| LlmError::permanent(e.to_string()))?;
            let fetch = self.fetcher();
            let file = fetch
                .post(&self.url(&["files"])?, body, Some(content_type), META_BYTES)
                .await?;
            let file: Created = parse(provider, "the uploaded file", &file)?;
            let create = serde_json::json!({
                "input_file_id": file.id,
                "endpoint": ENDPOINT,
                "completion_window": "24h",
            });
            let job = fetch
                .post(
                    &self.url(&["batches"])?,
                    create.to_string().into_bytes(),
                    None,
                    META_BYTES,
                )
                .await?;
            let job: Created = parse(provider, "the created batch", &job)?;
            Ok(job.id)
        })
    }

    fn poll<'a>(&'a self, job: &'a str) -> BatchFuture<'a, JobState> {
        Box::pin(async move {
            let url = self.url(&["batches", job])?;
            let body = self.fetcher().get(&url, META_BYTES).await?;
            let job: Job = parse(self.provider(), "the batch", &body)?;
            let note = match job.status.as_str() {
                "completed" => None,
                "expired" => Some("the job expired: its 24h completion window passed".to_owned()),
                "cancelled" => Some("the job was cancelled".to_owned()),
                "failed" => Some(format!(
                    "the job failed: {}",
                    job.errors.map(|e| e.to_string()).unwrap_or_default()
                )),
                _ => return Ok(JobState::Running),
            };
            let results = [job.output_file_id, job.error_file_id]
                .into_iter()
                .flatten()
                .collect();
            Ok(JobState::Ended { results, note })
        })
    }

    fn results<'a>(
        &'a self,
        results: &'a [String],
        cap: usize,
    ) -> BatchFuture<'a, Vec<ResultLine>> {
        Box::pin(async move {
            let mut out = Vec::new();
            for file in results {
                let url = self.url(&["files", file, "content"])?;
                let body = self.fetcher().get(&url, cap).await?;
                out.extend(jsonl_lines(&body).map(|line| self.result(line)));
            }
            Ok(out)
        })
    }

    fn cancel<'a>(&'a self, job: &'a str) -> BatchFuture<'a, ()> {
        Box::pin(async move {
            let url = self.url(&["batches", job, "cancel"])?;
            self.fetcher()
                .post(&url, b"{}".to_vec(), None, META_BYTES)
                .await?;
            Ok(())
        })
    }

    fn max_response_bytes(&self) -> usize {
        self.client.transport.max_response_bytes()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::providers::ProviderOptions;

    /// A result line is normalized as a live reply is: a blank id or model is none.
    #[test]
    fn a_result_lines_blank_id_and_model_are_none_as_in_a_live_reply() {
        let client = OpenAiClient::openai(&ProviderOptions::default().with_api_key("sk-test"));
        let batch = OpenAiBatch::new(Arc::new(client.unwrap())).unwrap();
        let body = serde_json::json!({"id": "", "object": "chat.completion", "model": "",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": "hi"}}]});
        let line = serde_json::json!({"id": "batch_req_1", "custom_id": "g-s0-q0",
            "response": {"status_code": 200, "body": body}, "error": null});
        let result = batch.result(line.to_string().as_bytes());
        assert_eq!(result.custom_id, "g-s0-q0");
        let response = result.outcome.unwrap();
        assert_eq!(response.text, "hi");
        assert_eq!((response.model, response.request_id), (None, None));
    }
}
