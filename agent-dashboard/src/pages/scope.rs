//! The agent, variant and day range of the overview and turns pages, from the query
//! string, and the form that picks them.

use agent_store::RunScope;
use maud::{Markup, html};
use serde::Deserialize;

use crate::app::App;
use crate::dates::{day_of, day_start_ms, format_day, now_ms, parse_day};
use crate::page_error::PageError;

/// The query string: `agent`, `variant`, `from` and `to` (`YYYY-MM-DD`, UTC, both
/// included). Empty values are absent.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct ScopeParams {
    pub(crate) agent: Option<String>,
    pub(crate) variant: Option<String>,
    pub(crate) from: Option<String>,
    pub(crate) to: Option<String>,
}

/// The chosen scope: the agent (none when the store has no runs), the days.
#[derive(Clone, Debug)]
pub(crate) struct Scope {
    pub(crate) agents: Vec<String>,
    pub(crate) agent: Option<String>,
    pub(crate) variant: Option<String>,
    pub(crate) first_day: i64,
    pub(crate) last_day: i64,
}

/// The longest range a page covers (days).
const MAX_DAYS: i64 = 3660;

fn given(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

impl Scope {
    /// Reads the parameters; the agent defaults to the first with runs, the range to
    /// the last 30 days.
    pub(crate) async fn resolve(app: &App, params: &ScopeParams) -> Result<Self, PageError> {
        let today = day_of(now_ms());
        let last_day = match given(&params.to) {
            Some(t) => parse_day(t).map_err(|e| PageError::bad_request(format!("to: {e}")))?,
            None => today,
        };
        let first_day = match given(&params.from) {
            Some(f) => parse_day(f).map_err(|e| PageError::bad_request(format!("from: {e}")))?,
            None => last_day - 29,
        };
        if first_day > last_day {
            return Err(PageError::bad_request(format!(
                "from ({}) is after to ({})",
                format_day(first_day),
                format_day(last_day)
            )));
        }
        if last_day - first_day >= MAX_DAYS {
            return Err(PageError::bad_request(format!(
                "the range is longer than {MAX_DAYS} days"
            )));
        }
        let agents = app.store.agents().await?;
        let agent = match given(&params.agent) {
            Some(a) => Some(a.to_owned()),
            None => agents.first().cloned(),
        };
        Ok(Self {
            agents,
            agent,
            variant: given(&params.variant).map(str::to_owned),
            first_day,
            last_day,
        })
    }

    /// The store's scope (`None` without an agent).
    pub(crate) fn run_scope(&self) -> Option<RunScope> {
        let agent = self.agent.as_ref()?;
        let mut scope = RunScope::new(
            agent.clone(),
            day_start_ms(self.first_day),
            day_start_ms(self.last_day + 1),
        );
        if let Some(v) = &self.variant {
            scope = scope.variant(v.clone());
        }
        Some(scope)
    }

    /// The days of the range, as labels.
    pub(crate) fn day_labels(&self) -> Vec<String> {
        (self.first_day..=self.last_day).map(format_day).collect()
    }

    /// This scope as a query string (for links to other pages).
    pub(crate) fn query(&self) -> String {
        let mut parts = Vec::new();
        if let Some(a) = &self.agent {
            parts.push(format!("agent={}", encode(a)));
        }
        if let Some(v) = &self.variant {
            parts.push(format!("variant={}", encode(v)));
        }
        parts.push(format!("from={}", format_day(self.first_day)));
        parts.push(format!("to={}", format_day(self.last_day)));
        parts.join("&")
    }

    /// The form that changes the scope (GET to `action`).
    pub(crate) fn form(&self, action: &str, extra: Markup) -> Markup {
        html! {
            form method="get" action=(action) {
                label { "agent "
                    select name="agent" {
                        @for a in &self.agents {
                            option value=(a) selected[self.agent.as_deref() == Some(a)] { (a) }
                        }
                    }
                }
                label { "variant " input name="variant" value=(self.variant.as_deref().unwrap_or("")) placeholder="all"; }
                label { "from " input name="from" value=(format_day(self.first_day)) size="10"; }
                label { "to " input name="to" value=(format_day(self.last_day)) size="10"; }
                (extra)
                button type="submit" { "show" }
            }
        }
    }
}

/// Percent-encodes a query-string value.
pub(crate) fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
