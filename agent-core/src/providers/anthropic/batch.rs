//! Anthropic Message Batches (<https://docs.anthropic.com/en/docs/build-with-claude/batch-processing>,
//! API reference <https://docs.anthropic.com/en/api/creating-message-batches>): the
//! requests go as one `POST /v1/messages/batches` (`{"requests": [{"custom_id", "params"}]}`,
//! `params` the Messages body), the batch is polled with
//! `GET /v1/messages/batches/{id}` until `processing_status` is `ended`, its results
//! are JSONL at its `results_url`; `POST /v1/messages/batches/{id}/cancel` cancels it.

use std::sync::Arc;

use reqwest::Url;
use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde_json::Value;

use super::AnthropicClient;
use crate::llm::{LlmError, LlmRequest};
use crate::providers::batch::{
    BatchFuture, BatchWire, Fetcher, JobState, ResultLine, jsonl_lines, request_line,
};
use crate::providers::glue::{self, Wire};
use crate::providers::http::Reply;

/// The cap on a JSON reply of the batches endpoint (bytes).
const META_BYTES: usize = 1024 * 1024;

/// Anthropic's batch endpoints beside a Messages client.
pub(crate) struct AnthropicBatch {
    client: Arc<AnthropicClient>,
    /// `.../v1/messages/batches`.
    batches: Url,
}

#[derive(Deserialize)]
struct Created {
    id: String,
}

#[derive(Deserialize)]
struct Batch {
    processing_status: String,
    #[serde(default)]
    results_url: Option<String>,
}

#[derive(Deserialize)]
struct Line {
    #[serde(default)]
    custom_id: Option<String>,
    #[serde(default)]
    result: Option<LineResult>,
}

#[derive(Deserialize)]
struct LineResult {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    message: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

impl AnthropicBatch {
    /// The batch endpoints of `client` (its Messages URL plus `/batches`).
    pub(crate) fn new(client: Arc<AnthropicClient>) -> Result<Self, String> {
        let endpoint = client.transport.url().as_str();
        let batches = Url::parse(&format!("{endpoint}/batches")).map_err(|e| e.to_string())?;
        Ok(Self { client, batches })
    }

    fn url(&self, segments: &[&str]) -> Result<Url, LlmError> {
        let mut url = self.batches.clone();
        url.path_segments_mut()
            .map_err(|()| LlmError::permanent("the Anthropic API root cannot take a path"))?
            .extend(segments);
        Ok(url)
    }

    fn fetcher(&self) -> Fetcher<'_> {
        Fetcher {
            transport: &self.client.transport,
        }
    }

    /// Where a batch's results are: its `results_url` when it is on the API's own
    /// origin (the key is never sent elsewhere), else `{batches}/{id}/results`.
    fn results_url(&self, job: &str, given: Option<String>) -> Result<Url, LlmError> {
        let own = given
            .and_then(|u| Url::parse(&u).ok())
            .filter(|u| u.origin() == self.batches.origin());
        match own {
            Some(url) => Ok(url),
            None => self.url(&[job, "results"]),
        }
    }

    fn result(&self, raw: &[u8]) -> ResultLine {
        let provider = self.client.transport.provider();
        let line: Line = match serde_json::from_slice(raw) {
            Ok(line) => line,
            Err(e) => {
                return ResultLine {
                    custom_id: String::new(),
                    outcome: Err(LlmError::transient(format!(
                        "{provider} batch result line is not JSON: {e}"
                    ))),
                };
            }
        };
        let custom_id = line.custom_id.unwrap_or_default();
        let outcome = match line.result {
            Some(LineResult {
                kind,
                message: Some(message),
                ..
            }) if kind == "succeeded" => {
                let reply = Reply {
                    status: 200,
                    headers: HeaderMap::new(),
                    body: serde_json::to_vec(&message).unwrap_or_default(),
                };
                glue::decode_whole(&*self.client, &reply)
            }
            Some(LineResult { kind, error, .. }) => Err(line_error(provider, &kind, error)),
            None => Err(LlmError::transient(format!(
                "{provider} batch result line has no result"
            ))),
        };
        ResultLine { custom_id, outcome }
    }
}

/// A result that is not a message: `errored` with an `invalid_request_error` is the
/// request's own fault (permanent); any other error, `canceled` and `expired` are
/// transient (the same request may succeed sent again).
fn line_error(provider: &str, kind: &str, error: Option<Value>) -> LlmError {
    // `{"type": "error", "error": {"type": "...", "message": "..."}}`.
    let inner = error.as_ref().map(|e| e.get("error").unwrap_or(e));
    let field = |name: &str| {
        inner
            .and_then(|e| e.get(name))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let (error_type, message) = (field("type"), field("message"));
    let text = format!("{provider} batch request {kind}: {error_type}: {message}");
    if kind == "errored" && error_type == "invalid_request_error" {
        LlmError::permanent(text).with_status(400)
    } else {
        LlmError::transient(text)
    }
}

impl BatchWire for AnthropicBatch {
    fn provider(&self) -> &str {
        self.client.transport.provider()
    }

    fn line(&self, custom_id: &str, request: &LlmRequest) -> Result<Vec<u8>, LlmError> {
        let body = self.client.encode(request, false)?;
        request_line(custom_id, "\"params\"", &body)
    }

    fn submit<'a>(&'a self, lines: &'a [Vec<u8>]) -> BatchFuture<'a, String> {
        Box::pin(async move {
            let mut body =
                Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum::<usize>() + 16);
            body.extend_from_slice(b"{\"requests\":[");
            for (i, line) in lines.iter().enumerate() {
                if i > 0 {
                    body.push(b',');
                }
                body.extend_from_slice(line);
            }
            body.extend_from_slice(b"]}");
            let reply = self
                .fetcher()
                .post(&self.batches, body, None, META_BYTES)
                .await?;
            let created: Created = serde_json::from_slice(&reply).map_err(|e| {
                LlmError::transient(format!(
                    "{} batch API: the created batch is not the expected JSON: {e}",
                    self.provider()
                ))
            })?;
            Ok(created.id)
        })
    }

    fn poll<'a>(&'a self, job: &'a str) -> BatchFuture<'a, JobState> {
        Box::pin(async move {
            let body = self.fetcher().get(&self.url(&[job])?, META_BYTES).await?;
            let batch: Batch = serde_json::from_slice(&body).map_err(|e| {
                LlmError::transient(format!(
                    "{} batch API: the batch is not the expected JSON: {e}",
                    self.provider()
                ))
            })?;
            if batch.processing_status != "ended" {
                return Ok(JobState::Running);
            }
            let url = self.results_url(job, batch.results_url)?;
            Ok(JobState::Ended {
                results: vec![url.to_string()],
                note: None,
            })
        })
    }

    fn results<'a>(
        &'a self,
        results: &'a [String],
        cap: usize,
    ) -> BatchFuture<'a, Vec<ResultLine>> {
        Box::pin(async move {
            let mut out = Vec::new();
            for url in results {
                let url = Url::parse(url)
                    .map_err(|e| LlmError::permanent(format!("results URL: {e}")))?;
                let body = self.fetcher().get(&url, cap).await?;
                out.extend(jsonl_lines(&body).map(|line| self.result(line)));
            }
            Ok(out)
        })
    }

    fn cancel<'a>(&'a self, job: &'a str) -> BatchFuture<'a, ()> {
        Box::pin(async move {
            let url = self.url(&[job, "cancel"])?;
            self.fetcher()
                .post(&url, Vec::new(), None, META_BYTES)
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
        let client = AnthropicClient::new(&ProviderOptions::default().with_api_key("sk-test"));
        let batch = AnthropicBatch::new(Arc::new(client.unwrap())).unwrap();
        let message = serde_json::json!({"id": "", "type": "message", "role": "assistant",
            "model": "", "content": [{"type": "text", "text": "hi"}],
            "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": 1}});
        let line = serde_json::json!({"custom_id": "g-s0-q0",
            "result": {"type": "succeeded", "message": message}});
        let result = batch.result(line.to_string().as_bytes());
        assert_eq!(result.custom_id, "g-s0-q0");
        let response = result.outcome.unwrap();
        assert_eq!(response.text, "hi");
        assert_eq!((response.model, response.request_id), (None, None));
    }
}
