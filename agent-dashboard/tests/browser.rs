//! The dashboard in a real browser: headless Chromium (Debian's `/usr/bin/chromium`, or
//! `CHROMIUM`) driven over the DevTools protocol. The overview's chart shows the seeded
//! counts, a run page shows its transcript with hostile text as text, the feedback form
//! round-trips into the store, a run's image is a thumbnail loaded from the store (and
//! refused from another origin by the CSP), an approval form records a decision, and every page is
//! screenshotted into `target/tmp/dashboard-screens/` (with `DASHBOARD_PNG=1`, the
//! overview also into `docs/dashboard.png`). Without Chromium the test prints a message
//! and passes, except under `CI=true`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use agent_core::durable::paused_runs;
use agent_core::store::FeedbackStore;
use base64::Engine;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_tungstenite::tungstenite::Message as Ws;

use common::*;

fn chromium() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    for dir in std::env::var("PATH").unwrap_or_default().split(':') {
        for name in ["chromium", "chromium-browser"] {
            let candidate = Path::new(dir).join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    None
}

/// A headless Chromium and the DevTools connection to its first page.
struct Browser {
    child: tokio::process::Child,
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    next_id: u64,
    profile: PathBuf,
}

impl Browser {
    async fn launch(binary: &Path) -> Self {
        let profile = std::env::temp_dir().join(unique("agent_dashboard_chromium"));
        std::fs::create_dir_all(&profile).unwrap();
        let mut child = tokio::process::Command::new(binary)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--remote-debugging-port=0",
                "--window-size=1100,1300",
                "--hide-scrollbars",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let browser_ws = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(at) = line.find("ws://") {
                    return line[at..].trim().to_owned();
                }
            }
            panic!("chromium exited without a DevTools address");
        })
        .await
        .expect("chromium printed no DevTools address in 30 s");
        // Keep reading stderr so chromium never blocks on it.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let port = browser_ws
            .trim_start_matches("ws://")
            .split('/')
            .next()
            .unwrap()
            .to_owned();
        let list: Vec<Value> = serde_json::from_str(
            &reqwest::get(format!("http://{port}/json/list"))
                .await
                .unwrap()
                .text()
                .await
                .unwrap(),
        )
        .unwrap();
        let page_ws = list
            .iter()
            .find(|t| t["type"] == "page")
            .and_then(|t| t["webSocketDebuggerUrl"].as_str())
            .expect("a page target")
            .to_owned();
        let (ws, _) = tokio_tungstenite::connect_async(page_ws).await.unwrap();
        let mut browser = Self {
            child,
            ws,
            next_id: 0,
            profile,
        };
        browser
            .call(
                "Emulation.setDeviceMetricsOverride",
                json!({"width": 1100, "height": 1300, "deviceScaleFactor": 1, "mobile": false}),
            )
            .await;
        browser
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let message = json!({"id": id, "method": method, "params": params}).to_string();
        self.ws.send(Ws::Text(message.into())).await.unwrap();
        loop {
            let frame = tokio::time::timeout(Duration::from_secs(30), self.ws.next())
                .await
                .unwrap_or_else(|_| panic!("{method}: no answer in 30 s"))
                .expect("the DevTools connection closed")
                .unwrap();
            let Ws::Text(text) = frame else { continue };
            let value: Value = serde_json::from_str(&text).unwrap();
            if value["id"] == id {
                assert!(value.get("error").is_none(), "{method}: {value}");
                return value["result"].clone();
            }
        }
    }

    /// Evaluates `js` in the page; its value.
    async fn eval(&mut self, js: &str) -> Value {
        let result = self
            .call(
                "Runtime.evaluate",
                json!({"expression": js, "returnByValue": true, "awaitPromise": true}),
            )
            .await;
        assert!(result.get("exceptionDetails").is_none(), "{js}: {result}");
        result["result"]["value"].clone()
    }

    /// Waits (up to 10 s) until the loaded page makes `condition` true.
    async fn wait_until(&mut self, condition: &str) {
        let js = format!("document.readyState === 'complete' && !!({condition})");
        for _ in 0..200 {
            if self.eval(&js).await == json!(true) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let at = self
            .eval("location.href + ': ' + document.body.innerText")
            .await;
        panic!("{condition} not true in 10 s (at {at})");
    }

    /// Waits until the page at a URL containing `part` has loaded.
    async fn wait_for(&mut self, part: &str) {
        let condition = format!(
            "location.href.includes({})",
            serde_json::to_string(part).unwrap()
        );
        self.wait_until(&condition).await;
    }

    async fn goto(&mut self, url: &str) {
        self.call("Page.navigate", json!({"url": url})).await;
        self.wait_for(url).await;
    }

    async fn screenshot(&mut self, path: &Path) {
        let shot = self
            .call("Page.captureScreenshot", json!({"format": "png"}))
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_in_headless_chromium() {
    let Some(binary) = chromium() else {
        skip_or_fail("chromium (apt-get install -y chromium, or CHROMIUM=/path/to/chromium)");
        return;
    };
    let temp = TempStore::new();
    let store = temp.open().await;
    let seeded = seed(&store).await;
    let run = real_run(&store).await;
    let image = image_run(&store).await;
    paused_run(&store, "refund-NW-7").await;
    let sweeps = temp.dir.join("sweeps");
    std::fs::create_dir_all(&sweeps).unwrap();
    stored_sweep(&sweeps, "test-model").await;
    let mut config = config_with_token("unused", "browser-token");
    config.sweeps = Some(sweeps);
    config.trace_url = Some("https://otel.example/trace/{trace_id}".into());
    let app = start(store.clone(), config).await;
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard-screens");
    std::fs::create_dir_all(&shots).unwrap();

    let mut browser = Browser::launch(&binary).await;
    let base = app.base.clone();
    // Log in through the form (the session cookie is HttpOnly: the page cannot read it).
    browser.goto(&format!("{base}/login")).await;
    browser
        .eval("document.querySelector('[name=token]').value = 'browser-token'; document.querySelector('#login').submit(); true")
        .await;
    browser
        .wait_until("document.querySelector('header .mode form')")
        .await;

    // The overview of the seeded days: the chart's bars carry the seeded counts.
    browser
        .goto(&format!("{base}/?agent=triage&{SEEDED_DAYS}"))
        .await;
    let bars = browser
        .eval(
            "[...document.querySelectorAll('rect[data-series]')].map(r => \
             [r.dataset.series, r.dataset.label, Number(r.dataset.value), r.getBBox().height > 0])",
        )
        .await;
    let bars = bars.as_array().unwrap();
    let total = |series: &str| -> u64 {
        bars.iter()
            .filter(|b| b[0] == series)
            .map(|b| b[2].as_u64().unwrap())
            .sum()
    };
    assert_eq!(total("answered") + total("partial"), seeded.answered);
    assert_eq!(total("partial"), seeded.partial);
    assert_eq!(total("escalated"), seeded.escalated);
    assert_eq!(total("exhausted"), seeded.exhausted);
    assert_eq!(total("stuck"), seeded.stuck);
    assert_eq!(total("failed"), seeded.failed);
    assert!(
        bars.iter().all(|b| b[3] == json!(true)),
        "every bar is drawn: {bars:?}"
    );
    assert_eq!(
        browser
            .eval("document.querySelector('#total-runs').textContent")
            .await,
        json!("20")
    );
    assert_eq!(
        browser
            .eval("document.querySelector('#pager-stuck').className")
            .await,
        json!("alert"),
        "stuck 10% is over its 5% threshold"
    );
    assert_eq!(
        browser
            .eval("document.querySelectorAll('line.threshold').length")
            .await,
        json!(2)
    );
    browser.screenshot(&shots.join("overview.png")).await;
    if std::env::var("DASHBOARD_PNG").as_deref() == Ok("1") {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/dashboard.png");
        std::fs::copy(shots.join("overview.png"), docs).unwrap();
    }

    browser
        .goto(&format!("{base}/turns?agent=triage&{SEEDED_DAYS}"))
        .await;
    assert_eq!(
        browser
            .eval("document.querySelector('#suggested').textContent")
            .await,
        json!("5")
    );
    browser.screenshot(&shots.join("turns.png")).await;

    browser.goto(&format!("{base}/runs?agent=triage")).await;
    let rows = browser
        .eval("document.querySelectorAll('tr.run').length")
        .await;
    assert!(rows.as_u64().unwrap() >= 21, "{rows}");
    browser.screenshot(&shots.join("runs.png")).await;

    // A run: the hostile input and answer are text, no script element exists.
    browser.goto(&format!("{base}/runs/{}", run.trace_id)).await;
    assert_eq!(
        browser
            .eval("document.querySelector('#input').textContent")
            .await,
        json!(HOSTILE_INPUT)
    );
    let output = browser
        .eval("document.querySelector('#output').textContent")
        .await;
    assert!(output.as_str().unwrap().contains(HOSTILE_QUEUE), "{output}");
    assert_eq!(
        browser
            .eval("document.querySelectorAll('script, img').length")
            .await,
        json!(0)
    );
    assert_eq!(
        browser
            .eval("document.querySelector('#trace-id a').href")
            .await,
        json!(format!("https://otel.example/trace/{}", run.trace_id))
    );
    let calls = browser
        .eval("[...document.querySelectorAll('#transcript .call code')].map(c => c.textContent)")
        .await;
    assert_eq!(calls, json!(["lookup_order", "submit_output"]));
    // The feedback form round-trips into the store.
    browser
        .eval(
            "const f = document.querySelector('#feedback-form'); \
             f.querySelector('[name=rating]').value = '1'; \
             f.querySelector('[name=corrected_output]').value = '{\"queue\": \"shipping\", \"severity\": 1}'; \
             f.querySelector('[name=note]').value = 'from the browser'; f.submit(); true",
        )
        .await;
    browser.wait_for("saved=1").await;
    assert_eq!(
        browser
            .eval("document.querySelector('#rating').textContent")
            .await,
        json!("1")
    );
    let feedback = store
        .run(&run.trace_id)
        .await
        .unwrap()
        .unwrap()
        .feedback
        .unwrap();
    assert_eq!(feedback.rating, Some(1));
    assert_eq!(
        feedback.corrected_output,
        Some(json!({"queue": "shipping", "severity": 1}))
    );
    assert_eq!(feedback.note.as_deref(), Some("from the browser"));
    browser.screenshot(&shots.join("run.png")).await;

    // A run with an image and a PDF: the image is a thumbnail loaded from the store
    // (`img-src 'self'`), the PDF a named, sized link; the same image from another
    // origin (the same server as `localhost`) is refused by the page's CSP.
    browser
        .goto(&format!("{base}/runs/{}", image.trace_id))
        .await;
    browser
        .wait_until(
            "document.querySelector('img.thumb') && document.querySelector('img.thumb').complete",
        )
        .await;
    let png = agent_core::content::Bytes::from(PNG_8X8).sha256();
    assert_eq!(
        browser
            .eval("[...document.querySelectorAll('img.thumb')].map(i => [i.getAttribute('src'), i.naturalWidth, i.naturalHeight])")
            .await,
        json!([[format!("/blobs/{png}"), 8, 8]])
    );
    assert_eq!(
        browser
            .eval("document.querySelector('a.part.file').textContent")
            .await,
        json!(format!(
            "invoice <b>7</b>.pdf (application/pdf, {} bytes)",
            PDF.len()
        ))
    );
    let text = browser.eval("document.body.innerText").await;
    assert!(
        !text
            .as_str()
            .unwrap()
            .contains(&agent_core::content::Bytes::from(PNG_8X8).to_base64()),
        "no base64 on the page"
    );
    let other_origin = base.replace("127.0.0.1", "localhost");
    let loads = |src: String| {
        format!(
            "new Promise(done => {{ const i = new Image();              i.onload = () => done('loaded ' + i.naturalWidth); i.onerror = () => done('refused');              i.src = {}; }})",
            serde_json::to_string(&src).unwrap()
        )
    };
    assert_eq!(
        browser.eval(&loads(format!("{base}/blobs/{png}"))).await,
        json!("loaded 8")
    );
    assert_eq!(
        browser
            .eval(&loads(format!("{other_origin}/blobs/{png}")))
            .await,
        json!("refused")
    );
    browser.screenshot(&shots.join("run-image.png")).await;

    // Pending approvals: approve the paused refund; the decision is in the checkpoint.
    browser.goto(&format!("{base}/pending")).await;
    browser
        .eval("document.querySelector('section[data-run-id=\"refund-NW-7\"] form.decide').submit(); true")
        .await;
    browser
        .wait_until("document.body.textContent.includes('approve recorded')")
        .await;
    let paused = paused_runs(&store, 10).await.unwrap();
    let refund = paused.iter().find(|r| r.run_id == "refund-NW-7").unwrap();
    let call_id = &refund.pending[0].call_id;
    assert_eq!(
        refund.decided.get(call_id).map(|d| d.as_str()),
        Some("approve")
    );
    browser.screenshot(&shots.join("pending.png")).await;

    // A stored sweep: the sweep's own table and its SVG chart as an image.
    browser.goto(&format!("{base}/sweeps/test-model")).await;
    browser
        .wait_until("document.querySelector('#sweep-chart').complete")
        .await;
    let width = browser
        .eval("document.querySelector('#sweep-chart').naturalWidth")
        .await;
    assert!(width.as_u64().unwrap() > 100, "the chart loaded: {width}");
    let table = browser
        .eval("document.querySelector('#sweep-table').textContent")
        .await;
    assert!(table.as_str().unwrap().contains("capped"), "{table}");
    browser.screenshot(&shots.join("sweep.png")).await;
    eprintln!("screenshots in {}", shots.display());
}
