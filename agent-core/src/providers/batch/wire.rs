//! [`BatchWire`]: a provider's batch endpoints, as the gate drives them.

use std::future::Future;
use std::pin::Pin;

use crate::llm::{LlmError, LlmRequest, LlmResponse};

/// The future of a batch endpoint call.
pub(crate) type BatchFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, LlmError>> + Send + 'a>>;

/// One job line: `{"custom_id":ID,ENVELOPE:BODY}`, the encoded request `body` placed
/// after `envelope` (the provider's keys before the body, ending in the body's key:
/// Anthropic `"params"`, OpenAI `"method":"POST","url":..,"body"`).
///
/// # Errors
/// A permanent [`LlmError`] when the id cannot be written as JSON.
pub(crate) fn request_line(
    custom_id: &str,
    envelope: &str,
    body: &[u8],
) -> Result<Vec<u8>, LlmError> {
    let id = serde_json::to_string(custom_id)
        .map_err(|e| LlmError::permanent(format!("custom_id: {e}")))?;
    let mut line = Vec::with_capacity(body.len() + id.len() + envelope.len() + 16);
    line.extend_from_slice(format!("{{\"custom_id\":{id},{envelope}:").as_bytes());
    line.extend_from_slice(body);
    line.push(b'}');
    Ok(line)
}

/// Where a job stands.
pub(crate) enum JobState {
    /// Still being processed (or cancelled, not yet ended).
    Running,
    /// Processing ended: where its results are, and, when the job as a whole failed or
    /// expired, the provider's word on why (given to the requests it did not answer).
    Ended {
        /// The result files (OpenAI: output then error file ids; Anthropic: the
        /// results URL).
        results: Vec<String>,
        /// Why requests went unanswered, when the job says.
        note: Option<String>,
    },
}

/// One result line: the request it answers and its outcome.
pub(crate) struct ResultLine {
    pub(crate) custom_id: String,
    pub(crate) outcome: Result<LlmResponse, LlmError>,
}

/// A provider's batch endpoints, over the same transport, key and request encoding as
/// its live calls (a line's body is exactly the live request's body, a result's body
/// exactly the live response's).
pub(crate) trait BatchWire: Send + Sync {
    /// The provider's name (`gen_ai.provider.name`).
    fn provider(&self) -> &str;

    /// One request as a line of the job (`custom_id`: 1 to 64 of `[A-Za-z0-9_-]`).
    ///
    /// # Errors
    /// A permanent [`LlmError`] when the request cannot be encoded.
    fn line(&self, custom_id: &str, request: &LlmRequest) -> Result<Vec<u8>, LlmError>;

    /// Submits the lines as one job; returns its id.
    fn submit<'a>(&'a self, lines: &'a [Vec<u8>]) -> BatchFuture<'a, String>;

    /// The job's state.
    fn poll<'a>(&'a self, job: &'a str) -> BatchFuture<'a, JobState>;

    /// Reads the results of an ended job (`results` from [`JobState::Ended`]);
    /// `cap` bounds each file read (bytes).
    fn results<'a>(&'a self, results: &'a [String], cap: usize)
    -> BatchFuture<'a, Vec<ResultLine>>;

    /// Asks the provider to cancel the job (best effort).
    fn cancel<'a>(&'a self, job: &'a str) -> BatchFuture<'a, ()>;

    /// The cap on one response body of the live API (bytes).
    fn max_response_bytes(&self) -> usize;
}
