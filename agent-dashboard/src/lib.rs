//! # agent-dashboard
//!
//! A web dashboard over the runs an [`agent_store::Store`] holds (SQLite file or
//! PostgreSQL): endings per day with the escalated and stuck rates against their
//! thresholds, round trips per run and the suggested `max_llm_calls`, a filtered list of
//! runs, each run's transcript with a feedback form, stored sweep comparisons, and the
//! paused runs waiting for approval.
//!
//! ```text
//! cargo run -p agent-dashboard -- --store runs.db
//! cargo run -p agent-dashboard -- --store postgres://postgres@127.0.0.1:5432/test --schema app
//! ```
//!
//! Pages are HTML rendered on the server with maud (every interpolated value escaped),
//! charts are inline SVG drawn on the server, and nothing is fetched from elsewhere: the
//! pages work without internet and without JavaScript.
//!
//! ## Security
//!
//! - Listening on an address other than loopback needs a token (`--token` or
//!   `AGENT_DASHBOARD_TOKEN`); [`Config::check`] refuses to start otherwise.
//! - With a token, every page asks for it once (`/login`); the browser then holds a
//!   random session id in an `HttpOnly; SameSite=Strict` cookie. The token itself is
//!   never put in a page or a cookie.
//! - Writes (feedback, approval decisions) need a session: without a token, or with
//!   `--read-only`, the dashboard is read-only. Every form carries the session's random
//!   CSRF token, checked on POST, and a POST whose `Origin` is not this server is
//!   refused.
//! - Metadata values whose key looks secret (`key`, `token`, `secret`, `password`,
//!   `authorization`, `cookie`) are shown as `<redacted>`; the store URL is never shown.

mod app;
mod auth;
mod chart;
mod cli;
mod dates;
mod page_error;
mod pages;
mod server;

pub use cli::{Config, ConfigError, TOKEN_ENV, Thresholds};
pub use server::{router, serve};
