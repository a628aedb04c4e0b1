//! An LLM call through a provider batch gate (a batched `run_batch`): queued for the
//! round's job, or, for a run resumed while its call was in a job, waiting on that job.
//! A durable run records the job and line in its checkpoint once the provider accepted
//! the job (`durable/batched.rs`), so a crash while it is in flight resumes to the same
//! job rather than sending the call again (see `docs/batch.md`).

use crate::llm::{LlmClient, LlmError, LlmRequest};
use crate::providers::batch::{BatchedCall, Gated, Seat};

use super::durable::{Durable, Reporter};

/// One call through `seat`: waits on `stored` (the job and line a resumed run's
/// checkpoint names) when the gate's provider is its provider, else queued; `live`
/// serves it when its job does not answer and the fallback says so. `durable` records
/// where the call is once its job is accepted.
pub(super) async fn call(
    seat: &Seat,
    request: &LlmRequest,
    live: &dyn LlmClient,
    stored: Option<&BatchedCall>,
    durable: Option<&mut Durable>,
    reporter: Reporter<'_>,
) -> Gated {
    let mut ticket = match seat.send(request, stored) {
        Ok(ticket) => ticket,
        Err(error) => return Ok(Err::<_, LlmError>(error)),
    };
    if let Some(durable) = durable
        && let Some(call) = ticket.accepted().await
    {
        durable.save_batched(&call, reporter).await;
    }
    ticket.answer(request, live).await
}
