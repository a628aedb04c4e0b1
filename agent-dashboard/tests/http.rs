//! The dashboard over HTTP (no browser): counts from a seeded store, escaping, the
//! token, sessions and CSRF, feedback written to the store, bad input, a store that is
//! down and comes back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use std::time::Duration;

use agent_core::json;
use agent_core::store::FeedbackStore;
use agent_dashboard::Config;
use agent_store::{Store, StoreOptions};
use common::*;

async fn get(client: &reqwest::Client, url: &str, cookie: Option<&str>) -> (u16, String) {
    let mut request = client.get(url);
    if let Some(c) = cookie {
        request = request.header("cookie", c);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overview_and_turns_count_the_seeded_runs() {
    let temp = TempStore::new();
    let store = temp.open().await;
    let seeded = seed(&store).await;
    let app = start(store, Config::new("unused")).await;
    let c = client();
    let (status, page) = get(
        &c,
        &format!("{}/?agent=triage&{SEEDED_DAYS}", app.base),
        None,
    )
    .await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains(r#"<strong id="total-runs">20</strong>"#),
        "{page}"
    );
    for (ending, n) in [
        ("answered", seeded.answered),
        ("escalated", seeded.escalated),
        ("exhausted", seeded.exhausted),
        ("stuck", seeded.stuck),
        ("failed", seeded.failed),
        ("paused", 0),
        ("partial", seeded.partial),
    ] {
        let cell = format!(r#"data-ending="{ending}">{n}</td>"#);
        assert!(page.contains(&cell), "{cell} in {page}");
    }
    // The chart: day 1 of answered (7, of which 2 partial) and day 2 (5).
    assert!(page.contains(r#"data-series="answered" data-label="2024-10-04" data-value="5""#));
    assert!(page.contains(r#"data-series="partial" data-label="2024-10-04" data-value="2""#));
    assert!(page.contains(r#"data-series="answered" data-label="2024-10-05" data-value="5""#));
    // Escalated 3/20 = 15% is within the default 20%; stuck 2/20 = 10% is over 5%.
    assert!(
        page.contains(r#"<p class="ok" id="pager-escalated">"#),
        "{page}"
    );
    assert!(
        page.contains(r#"<p class="alert" id="pager-stuck">"#),
        "{page}"
    );
    assert!(page.contains("10.0%, above its threshold 5.0%"), "{page}");

    let (status, turns) = get(
        &c,
        &format!("{}/turns?agent=triage&{SEEDED_DAYS}", app.base),
        None,
    )
    .await;
    assert_eq!(status, 200, "{turns}");
    // Answered runs: 4x2, 3x3 (day 1: 2,3 alternating), 3x3, 2x4 (day 2) -> p95 = 4.
    assert!(
        turns.contains(r#"<strong id="suggested">5</strong>"#),
        "{turns}"
    );
    assert!(
        turns.contains(r#"<strong id="hit-cap">2</strong>"#),
        "{turns}"
    );
    assert!(
        turns.contains("answered</td><td>2x4 3x6 4x2</td>"),
        "{turns}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_page_escapes_model_and_user_text_and_hides_secrets() {
    let temp = TempStore::new();
    let store = temp.open().await;
    let run = real_run(&store).await;
    let app = start(store, Config::new("unused")).await;
    let (status, page) = get(
        &client(),
        &format!("{}/runs/{}", app.base, run.trace_id),
        None,
    )
    .await;
    assert_eq!(status, 200, "{page}");
    assert!(!page.contains("<script>"), "{page}");
    assert!(!page.contains("<img src=x"), "{page}");
    assert!(
        page.contains("&lt;script&gt;alert('ticket')&lt;/script&gt; where is NW-1?"),
        "{page}"
    );
    // The first turn's reasoning is shown, folded, as text.
    assert!(
        page.contains(
            "<details class=\"reasoning\"><summary>reasoning</summary><pre>Look it up. &lt;script&gt;alert('thought')&lt;/script&gt;</pre></details>"
        ),
        "{page}"
    );
    assert!(
        page.contains("&lt;script&gt;alert('answer')&lt;/script&gt;"),
        "{page}"
    );
    assert!(page.contains("&lt;b&gt;today&lt;/b&gt;"), "{page}");
    assert!(page.contains("call <code>lookup_order</code>"), "{page}");
    assert!(page.contains("ran in "), "{page}");
    assert!(page.contains("T-1"));
    assert!(
        !page.contains("sk-SECRET-123"),
        "a secret-looking metadata value is shown"
    );
    assert!(page.contains("&lt;redacted&gt;"));
    // The runs list escapes too, and links to the run.
    let (status, list) = get(&client(), &format!("{}/runs?q=NW-1", app.base), None).await;
    assert_eq!(status, 200);
    assert!(
        list.contains(&format!("href=\"/runs/{}\"", run.trace_id)),
        "{list}"
    );
    assert!(!list.contains("<script>"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feedback_needs_the_token_and_csrf_and_lands_in_the_store() {
    let temp = TempStore::new();
    let store = temp.open().await;
    let run = real_run(&store).await;
    let app = start(store.clone(), config_with_token("unused", "t0ken")).await;
    let c = client();
    // Locked: pages ask for the login.
    let response = c
        .get(format!("{}/runs/{}", app.base, run.trace_id))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303);
    assert!(
        response.headers()["location"]
            .to_str()
            .unwrap()
            .starts_with("/login?next=")
    );
    let wrong = c
        .post(format!("{}/login", app.base))
        .form(&[("token", "nope")])
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 403);
    let cookie = login(&c, &app.base, "t0ken").await;
    let (status, page) = get(
        &c,
        &format!("{}/runs/{}", app.base, run.trace_id),
        Some(&cookie),
    )
    .await;
    assert_eq!(status, 200);
    assert!(!page.contains("t0ken"), "the token is never in a page");
    let csrf = csrf_of(&page);
    let url = format!("{}/runs/{}/feedback", app.base, run.trace_id);
    let form = [
        ("csrf", csrf.as_str()),
        ("rating", "-1"),
        ("corrected_output", r#"{"queue": "billing", "severity": 3}"#),
        ("note", "<i>wrong</i>"),
    ];
    // No session, a wrong CSRF token, another origin: refused, nothing written.
    let no_session = c.post(&url).form(&form).send().await.unwrap();
    assert_eq!(no_session.status(), 401);
    let bad_csrf = c
        .post(&url)
        .header("cookie", &cookie)
        .form(&[("csrf", "0"), ("rating", "1")])
        .send()
        .await
        .unwrap();
    assert_eq!(bad_csrf.status(), 403);
    let cross = c
        .post(&url)
        .header("cookie", &cookie)
        .header("origin", "http://evil.example")
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(cross.status(), 403);
    assert!(
        store
            .run(&run.trace_id)
            .await
            .unwrap()
            .unwrap()
            .feedback
            .is_none()
    );
    // The real thing.
    let saved = c
        .post(&url)
        .header("cookie", &cookie)
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(saved.status(), 303);
    let feedback = store
        .run(&run.trace_id)
        .await
        .unwrap()
        .unwrap()
        .feedback
        .unwrap();
    assert_eq!(feedback.rating, Some(-1));
    assert_eq!(
        feedback.corrected_output,
        Some(json!({"queue": "billing", "severity": 3}))
    );
    assert_eq!(feedback.note.as_deref(), Some("<i>wrong</i>"));
    let (_, page) = get(
        &c,
        &format!("{}/runs/{}?saved=1", app.base, run.trace_id),
        Some(&cookie),
    )
    .await;
    assert!(page.contains(r#"<td id="rating">-1</td>"#), "{page}");
    assert!(page.contains("&lt;i&gt;wrong&lt;/i&gt;"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_dashboards_refuse_writes() {
    let temp = TempStore::new();
    let store = temp.open().await;
    let run = real_run(&store).await;
    let mut config = config_with_token("unused", "t0ken");
    config.read_only = true;
    let app = start(store.clone(), config).await;
    let c = client();
    let cookie = login(&c, &app.base, "t0ken").await;
    let (_, page) = get(
        &c,
        &format!("{}/runs/{}", app.base, run.trace_id),
        Some(&cookie),
    )
    .await;
    assert!(!page.contains("feedback-form"), "no form when read-only");
    let response = c
        .post(format!("{}/runs/{}/feedback", app.base, run.trace_id))
        .header("cookie", &cookie)
        .form(&[("csrf", "x"), ("rating", "1")])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    assert!(response.text().await.unwrap().contains("read-only"));
    // No token at all: open pages, no forms, writes refused.
    let open = start(store.clone(), Config::new("unused")).await;
    let (status, page) = get(&c, &format!("{}/runs/{}", open.base, run.trace_id), None).await;
    assert_eq!(status, 200);
    assert!(!page.contains("feedback-form"));
    assert!(
        store
            .run(&run.trace_id)
            .await
            .unwrap()
            .unwrap()
            .feedback
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_clear_4xx() {
    let temp = TempStore::new();
    let store = temp.open().await;
    seed(&store).await;
    let app = start(store, Config::new("unused")).await;
    let c = client();
    for (path, status, says) in [
        (
            "/runs/ffffffffffffffffffffffffffffffff".to_owned(),
            404,
            "no run ffffffffffffffffffffffffffffffff",
        ),
        ("/?from=2024-13-01".to_owned(), 400, "is not a date"),
        (
            "/?from=2024-10-05&to=2024-10-04".to_owned(),
            400,
            "is after to",
        ),
        (
            "/runs?ending=happy".to_owned(),
            400,
            "is not one of answered",
        ),
        ("/runs?after=xyz".to_owned(), 400, "is not MS.TRACE_ID"),
        ("/runs?limit=100000".to_owned(), 400, "limit"),
        ("/turns?cap=many".to_owned(), 400, "is not a whole number"),
        ("/sweeps".to_owned(), 404, "--sweeps DIR"),
        ("/nowhere".to_owned(), 404, "no such page"),
        (
            format!("/runs/{}", "x".repeat(300)),
            400,
            "1 to 128 characters",
        ),
    ] {
        let (got, page) = get(&c, &format!("{}{path}", app.base), None).await;
        assert_eq!(got, status, "{path}: {page}");
        assert!(page.contains(says), "{path}: {page}");
    }
}

#[test]
fn a_public_address_without_a_token_is_refused() {
    let mut config = Config::new("runs.db");
    config.listen = "0.0.0.0:8080".parse().unwrap();
    let error = config.check().unwrap_err();
    assert!(
        error
            .message
            .starts_with("refusing to listen on 0.0.0.0:8080 without a token"),
        "{error}"
    );
    config.token = Some("t".into());
    assert!(config.check().is_ok());
    let parsed = Config::parse(
        [
            "--store",
            "runs.db",
            "--listen",
            "0.0.0.0:9000",
            "--stuck-max",
            "triage=0.1",
            "--escalated-max",
            "0.3",
        ]
        .map(Into::into),
        None,
    )
    .unwrap()
    .unwrap();
    assert!(parsed.check().is_err());
    assert_eq!(parsed.thresholds.stuck_for("triage"), 0.1);
    assert_eq!(parsed.thresholds.stuck_for("other"), 0.05);
    assert_eq!(parsed.thresholds.escalated_for("triage"), 0.3);
    assert!(Config::parse(["--store", "x", "--stuck-max", "2"].map(Into::into), None).is_err());
    assert!(Config::parse(["--listen", "x"].map(Into::into), None).is_err());
}

/// Forwards connections on `listener` to PostgreSQL (a server that "comes back").
async fn proxy(listener: tokio::net::TcpListener, to: String) {
    loop {
        let Ok((mut inbound, _)) = listener.accept().await else {
            return;
        };
        let to = to.clone();
        tokio::spawn(async move {
            if let Ok(mut outbound) = tokio::net::TcpStream::connect(to).await {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_is_down_is_shown_and_the_dashboard_recovers() {
    if !postgres_up().await {
        skip_or_fail("PostgreSQL at DATABASE_URL");
        return;
    }
    let url = pg_url();
    let server = url
        .split('@')
        .nth(1)
        .and_then(|h| h.split('/').next())
        .unwrap()
        .to_owned();
    // A port with nothing behind it yet.
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = probe.local_addr().unwrap().port();
    drop(probe);
    let down_url = url.replacen(&server, &format!("127.0.0.1:{port}"), 1);
    let schema = unique("agent_dashboard_down");
    let store = Store::open_with(
        &down_url,
        StoreOptions::new()
            .schema(schema.clone())
            .lazy(true)
            .connect_timeout(Duration::from_secs(1)),
    )
    .await
    .unwrap();
    let app = start(store, Config::new("unused")).await;
    let c = client();
    let (status, page) = get(&c, &format!("{}/runs", app.base), None).await;
    assert_eq!(status, 503, "{page}");
    assert!(page.contains("The store is unavailable"), "{page}");
    assert!(
        page.contains("reload this page when the store is back"),
        "{page}"
    );
    // The server comes back.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    let forward = tokio::spawn(proxy(listener, server));
    let (status, page) = get(&c, &format!("{}/runs", app.base), None).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("No runs match."), "{page}");
    let (status, _) = get(&c, &format!("{}/", app.base), None).await;
    assert_eq!(status, 200);
    forward.abort();
    drop_schema(&schema).await;
}

/// A run whose input carries an image and a PDF: the run page shows the image as a
/// thumbnail from `/blobs/{sha256}` and the PDF as a named, sized link, never their
/// bytes; the blob route serves the bytes with their type (the image inline, the PDF
/// as a download), nosniff and the CSP; bad and unknown hashes are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_are_thumbnails_served_from_the_store_by_hash() {
    use agent_core::content::Bytes;
    let temp = TempStore::new();
    let store = temp.open().await;
    let run = image_run(&store).await;
    let app = start(store, Config::new("unused")).await;
    let c = client();
    let png = Bytes::from(PNG_8X8).sha256();
    let (_, overview) = get(&c, &format!("{}/?agent=vision", app.base), None).await;
    assert!(
        overview.contains(&format!(
            "audio) of the whole store: 2 blobs, {} bytes,",
            PNG_8X8.len() + PDF.len()
        )),
        "{overview}"
    );
    let pdf = Bytes::from(PDF).sha256();

    let (status, page) = get(&c, &format!("{}/runs/{}", app.base, run.trace_id), None).await;
    assert_eq!(status, 200, "{page}");
    let thumb = format!(
        "<a class=\"part image\" href=\"/blobs/{png}\" title=\"image (image/png, 81 bytes)\">\
         <img class=\"thumb\" src=\"/blobs/{png}\" alt=\"image (image/png, 81 bytes)\" loading=\"lazy\"></a>"
    );
    assert!(page.contains(&thumb), "{page}");
    let link = format!(
        "<a class=\"part file\" href=\"/blobs/{pdf}\" download=\"invoice &lt;b&gt;7&lt;/b&gt;.pdf\" \
         data-kind=\"document\">invoice &lt;b&gt;7&lt;/b&gt;.pdf (application/pdf, {} bytes)</a>",
        PDF.len()
    );
    assert!(page.contains(&link), "{page}");
    // Neither the bytes nor their base64 are on the page.
    assert!(!page.contains(&Bytes::from(PNG_8X8).to_base64()));
    assert!(!page.contains(&Bytes::from(PDF).to_base64()));
    assert!(!page.contains("<script>"), "{page}");

    let response = c
        .get(format!("{}/blobs/{png}", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let h = response.headers().clone();
    assert_eq!(h["content-type"], "image/png");
    assert_eq!(h["content-disposition"], "inline");
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert!(
        h["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("img-src 'self';"),
        "{h:?}"
    );
    assert_eq!(response.bytes().await.unwrap().as_ref(), PNG_8X8);

    let response = c
        .get(format!("{}/blobs/{pdf}", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers()["content-type"], "application/pdf");
    assert_eq!(response.headers()["content-disposition"], "attachment");
    assert_eq!(response.bytes().await.unwrap().as_ref(), PDF);

    let (status, page) = get(&c, &format!("{}/blobs/{}", app.base, "0".repeat(64)), None).await;
    assert_eq!(status, 404, "{page}");
    assert!(page.contains("no such blob in the store"), "{page}");
    let (status, page) = get(&c, &format!("{}/blobs/..%2F..%2Fetc", app.base), None).await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("64 lowercase hex digits"), "{page}");
}
