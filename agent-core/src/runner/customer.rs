//! The customer message of a result: the config's fn, its template for the ending, or
//! a default that never claims a success that did not happen.

use std::panic::AssertUnwindSafe;

use crate::config::Hooks;
use crate::error::Ending;
use crate::error::panic_message;
use crate::result::AgentResult;

/// The default template per ending (see the builder's `customer_message`).
pub(crate) fn default_template(ending: Ending) -> &'static str {
    match ending {
        Ending::Answered => "Thank you, we have received your request and it is being processed.",
        Ending::Escalated => {
            "Thank you. Your request has been passed to a member of our team, who will get \
             back to you."
        }
        Ending::Exhausted | Ending::Stuck => {
            "We could not complete your request automatically. Please contact support and \
             quote reference {trace_id}."
        }
        Ending::Failed => {
            "We could not process your request because of a technical problem. Please try \
             again later, or contact support and quote reference {trace_id}."
        }
        Ending::Paused => {
            "Thank you. Your request needs a review before we can go on; we will get back \
             to you. Your reference is {trace_id}."
        }
    }
}

/// The message for `result`: the config's fn when it gives one, else the config's
/// template for the ending, else the default; `{trace_id}` filled in.
pub(crate) fn message<T>(hooks: &Hooks<T>, result: &AgentResult<T>) -> String {
    if let Some(f) = &hooks.customer_message_fn {
        match std::panic::catch_unwind(AssertUnwindSafe(|| f(result))) {
            Ok(Some(text)) => return text,
            Ok(None) => {}
            Err(payload) => tracing::warn!(
                panic = %panic_message(payload.as_ref()),
                "customer_message_fn panicked; the template is used"
            ),
        }
    }
    let ending = result.ending();
    let template = hooks
        .customer_messages
        .get(&ending)
        .map_or(default_template(ending), String::as_str);
    // Most templates hold no placeholder: a copy, without the substring search.
    if template.contains('{') {
        template.replace("{trace_id}", &result.trace_id)
    } else {
        template.to_owned()
    }
}
