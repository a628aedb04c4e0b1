//! The page frame: head, navigation, the read-only notice, the style sheet.

use axum::response::{Html, IntoResponse, Response};
use maud::{DOCTYPE, Markup, PreEscaped, html};

use crate::auth::Viewer;
use crate::page_error::PageError;

const STYLE: &str = "
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#233;color:#fff;padding:8px 16px;display:flex;gap:16px;align-items:center}
header a{color:#dfe;text-decoration:none} header a.here{color:#fff;font-weight:bold}
header .mode{margin-left:auto;font-size:12px;opacity:.85}
main{padding:12px 16px;max-width:1100px}
table{border-collapse:collapse;margin:8px 0} td,th{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f0f0f0} td.n{text-align:right;font-variant-numeric:tabular-nums}
pre{white-space:pre-wrap;word-break:break-word;background:#fff;border:1px solid #ddd;padding:6px;margin:4px 0}
.alert{background:#fdd;border:1px solid #c00;padding:6px 10px;margin:6px 0;font-weight:bold}
.ok{background:#dfd;border:1px solid #393;padding:6px 10px;margin:6px 0}
.note{background:#ffd;border:1px solid #cc6;padding:6px 10px;margin:6px 0}
svg.chart{width:100%;max-width:760px;height:auto;background:#fff;border:1px solid #ddd}
figure{margin:8px 0} figcaption{font-weight:bold}
.legend span{margin-right:12px} .swatch{display:inline-block;width:10px;height:10px;margin-right:4px}
.msg{border-left:4px solid #99a;padding:2px 8px;margin:6px 0;background:#fff}
.parts{display:flex;flex-wrap:wrap;gap:8px;align-items:flex-start;margin:4px 0}
img.thumb{height:96px;width:auto;max-width:160px;object-fit:contain;border:1px solid #ddd;background:#fff;display:block}
a.part.file{display:inline-block;padding:3px 7px;border:1px solid #ddd;background:#fff}
.msg.user{border-color:#36c} .msg.assistant{border-color:#393} .msg.tool{border-color:#c93}
form.inline{display:inline} label{margin-right:8px} input,select,textarea{font:inherit}
";

/// The pages of the navigation: (path, name).
const NAV: [(&str, &str); 5] = [
    ("/", "Overview"),
    ("/turns", "Turns"),
    ("/runs", "Runs"),
    ("/sweeps", "Sweeps"),
    ("/pending", "Pending approvals"),
];

/// A whole page: `here` is the navigation entry to mark.
pub(crate) fn frame(title: &str, here: &str, viewer: &Viewer, body: Markup) -> Html<String> {
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " - agent dashboard" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                header {
                    strong { "agent dashboard" }
                    @for (path, name) in NAV {
                        a.here[path == here] href=(path) { (name) }
                    }
                    span.mode {
                        @if viewer.csrf.is_some() {
                            "writes on "
                            form.inline method="post" action="/logout" {
                                input type="hidden" name="csrf" value=(viewer.csrf.as_deref().unwrap_or(""));
                                button type="submit" { "log out" }
                            }
                        } @else {
                            "read-only"
                        }
                    }
                }
                main {
                    h1 { (title) }
                    (body)
                }
            }
        }
    };
    Html(page.into_string())
}

/// The page of an error: its title and message.
pub(crate) fn error_page(title: &str, message: &str) -> Html<String> {
    frame(
        title,
        "",
        &Viewer::default(),
        html! { p.alert { (message) } p { a href="/" { "back to the overview" } } },
    )
}

/// A [`PageError`] as its status and [`error_page`].
impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let body = error_page(self.title, &self.message);
        (self.status, body).into_response()
    }
}

/// A number with thousands separators (`1,234,567`).
pub(crate) fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A fraction as a percentage with one decimal (`12.5%`).
pub(crate) fn percent(rate: f64) -> String {
    format!("{:.1}%", rate * 100.0)
}

/// USD with 4 decimals below one dollar, else 2.
pub(crate) fn usd(amount: f64) -> String {
    if amount.abs() < 1.0 {
        format!("${amount:.4}")
    } else {
        format!("${amount:.2}")
    }
}

/// The colour of each ending in charts.
pub(crate) fn ending_color(ending: agent_core::Ending) -> &'static str {
    use agent_core::Ending;
    match ending {
        Ending::Answered => "#393",
        Ending::Escalated => "#36c",
        Ending::Exhausted => "#c93",
        Ending::Stuck => "#c33",
        Ending::Failed => "#666",
        Ending::Paused => "#96c",
        _ => "#999",
    }
}
