//! Content parts by each provider's rules: token estimates of real images of known
//! sizes per provider's published formula (and the run's budget counting them by the
//! rule of the model it is on), pixel limits checked before any request with the
//! limit and its source (bytes only: a URL or a file id is the provider's to check),
//! and a handoff target that cannot take the run's parts refused before any request.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::{Arc, Mutex};

use agent_core::content::{Detail, Input, Kind, MediaResolution, Part, TokenRule};
use agent_core::llm::{
    COMMON_IMAGES, ContentCapabilities, LlmClient, LlmFuture, LlmRequest, LlmResponse,
};
use agent_core::providers::{
    AnthropicClient, BedrockClient, GeminiClient, OpenAiClient, OpenAiResponsesClient,
    ProviderOptions,
};
use agent_core::{AgentConfig, AgentError, run_agent};
use wiremock::MockServer;

use crate::common::{Triage, valid};
use crate::providers_support::{KEY, json_fixture, mount_post, requests, triage};

/// A real PNG from `tests/fixtures/images/` (`WxH.png`: all black, 1-bit grey).
fn image(name: &str) -> Part {
    let path = format!(
        "{}/tests/fixtures/images/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    Part::from_path(path).unwrap()
}

/// The triage example's photo of a dented bottle: a real 160 x 120 PNG.
fn bottle() -> Part {
    let path = format!(
        "{}/../examples/data/tickets/002-dented-bottle.png",
        env!("CARGO_MANIFEST_DIR")
    );
    Part::from_path(path).unwrap()
}

#[test]
fn each_providers_estimate_of_real_images_follows_its_published_formula() {
    // (image, Anthropic, OpenAI high/auto, OpenAI low, Gemini, conservative)
    let table: [(Part, u64, u64, u64, u64, u64); 5] = [
        // 19,200 px / 750 = 25.6; one 512-px tile; up to 384 px: 258.
        (bottle(), 26, 255, 85, 258, 85),
        // Anthropic's table: ~54; one tile; 258.
        (image("200x200.png"), 54, 255, 85, 258, 85),
        // ~1,334; shortest side to 768: 2 x 2 tiles = 765; 2 x 2 Gemini tiles.
        (image("1000x1000.png"), 1_334, 765, 85, 1_032, 1_334),
        // ~1,590 (Anthropic's largest 1:1 without resizing); 765; 2 x 2 tiles.
        (image("1092x1092.png"), 1_590, 765, 85, 1_032, 1_590),
        // Anthropic scales to 784 x 1568 (1,640 tokens), over ~1,600: 1,600. OpenAI's
        // own example: 1024 x 2048, then 768 x 1536, 6 tiles = 1,105. Gemini: 3 x 6
        // tiles.
        (image("2048x4096.png"), 1_600, 1_105, 85, 258 * 18, 1_600),
    ];
    for (part, anthropic, openai, low, gemini, conservative) in table {
        let name = part.describe();
        assert_eq!(TokenRule::Anthropic.tokens(&part), anthropic, "{name}");
        assert_eq!(TokenRule::OPENAI_GPT_4O.tokens(&part), openai, "{name}");
        let high = part.clone().with_detail(Detail::High);
        assert_eq!(TokenRule::OPENAI_GPT_4O.tokens(&high), openai, "{name}");
        let low_part = part.clone().with_detail(Detail::Low);
        assert_eq!(TokenRule::OPENAI_GPT_4O.tokens(&low_part), low, "{name}");
        assert_eq!(TokenRule::Gemini.tokens(&part), gemini, "{name}");
        assert_eq!(
            TokenRule::Conservative.tokens(&part),
            conservative,
            "{name}"
        );
    }
    // A size that cannot be read (a URL): each rule's ceiling.
    let url = Part::from_url("https://example.test/a.png", "image/png").unwrap();
    assert_eq!(TokenRule::Anthropic.tokens(&url), 1_600);
    assert_eq!(TokenRule::OPENAI_GPT_4O.tokens(&url), 85 + 170 * 8);
    assert_eq!(TokenRule::Gemini.tokens(&url), 1_600);
    // PDFs: Gemini 258 a page, the others 3,000; pages not readable: 3,000.
    let two_pages = Part::from_bytes_as(
        b"%PDF-1.4\n1 0 obj << /Type /Pages /Count 2 >>\n2 0 obj << /Type /Page >>\n\
          3 0 obj << /Type /Page >>\n%%EOF\n"
            .to_vec(),
        "application/pdf",
    )
    .unwrap();
    assert_eq!(TokenRule::Gemini.tokens(&two_pages), 516);
    assert_eq!(TokenRule::Anthropic.tokens(&two_pages), 6_000);
    assert_eq!(TokenRule::OPENAI_GPT_4O.tokens(&two_pages), 6_000);
    let opaque = Part::from_bytes_as(b"%PDF-1.7\n%%EOF\n".to_vec(), "application/pdf").unwrap();
    assert_eq!(TokenRule::Gemini.tokens(&opaque), 3_000);
}

/// OpenAI's per-model rows ("Calculating costs",
/// <https://platform.openai.com/docs/guides/images-vision#calculating-costs>), for real
/// images, through the clients' capabilities by model name.
#[test]
fn openais_models_count_images_by_their_own_rows() {
    let options = ProviderOptions::default().with_api_key(KEY);
    let chat = OpenAiClient::openai(&options).unwrap();
    let responses = OpenAiResponsesClient::openai(&options).unwrap();
    // (model, 1000x1000, 2048x4096, 1000x1000 at detail low)
    let table: [(&str, u64, u64, u64); 9] = [
        // Tiles: 1000x1000 is 768x768, 2 x 2 tiles; 2048x4096 is 768x1536, 2 x 3.
        ("gpt-4o", 85 + 4 * 170, 85 + 6 * 170, 85),
        ("gpt-4.1", 85 + 4 * 170, 85 + 6 * 170, 85),
        ("gpt-4o-mini", 2_833 + 4 * 5_667, 2_833 + 6 * 5_667, 2_833),
        ("gpt-5", 70 + 4 * 140, 70 + 6 * 140, 70),
        ("o3", 75 + 4 * 150, 75 + 6 * 150, 75),
        // Patches: 1000x1000 is 32 x 32 = 1,024; 2048x4096 is 8,192, over 1,536, so
        // scaled to 27 x 54 = 1,458; times the multiplier, rounded; detail is ignored.
        ("gpt-4.1-mini", 1_659, 2_362, 1_659),
        ("gpt-5-mini", 1_659, 2_362, 1_659),
        ("gpt-4.1-nano", 2_519, 3_587, 2_519),
        ("o4-mini", 1_761, 2_508, 1_761),
    ];
    for (model, square, tall, low) in table {
        for rule in [
            chat.content_capabilities(model).tokens,
            responses.content_capabilities(model).tokens,
        ] {
            assert_eq!(rule.tokens(&image("1000x1000.png")), square, "{model}");
            assert_eq!(rule.tokens(&image("2048x4096.png")), tall, "{model}");
            let low_part = image("1000x1000.png").with_detail(Detail::Low);
            assert_eq!(rule.tokens(&low_part), low, "{model}");
        }
    }
    // A size that cannot be read: the most tiles (2 x 4), or 1,536 patches.
    let url = Part::from_url("https://example.test/a.png", "image/png").unwrap();
    let rule = |model| chat.content_capabilities(model).tokens;
    assert_eq!(rule("gpt-4o-mini").tokens(&url), 2_833 + 8 * 5_667);
    assert_eq!(rule("gpt-5-nano").tokens(&url), 3_779);
}

/// Gemini 3's media resolutions ("Media resolution", Token counts,
/// <https://ai.google.dev/gemini-api/docs/media-resolution>): a fixed count per image
/// and per PDF page whatever the size, the part's resolution or the default; earlier
/// models keep the tile rule and do not count a resolution they are not sent.
#[test]
fn gemini_3_counts_images_and_pages_by_their_media_resolution() {
    let options = ProviderOptions::default().with_api_key(KEY);
    let gemini = GeminiClient::new(&options).unwrap();
    let rule = gemini.content_capabilities("gemini-3-pro-preview").tokens;
    assert_eq!(rule, TokenRule::Gemini3);
    let big = image("2048x4096.png");
    assert_eq!(rule.tokens(&bottle()), 1_120);
    assert_eq!(rule.tokens(&big), 1_120);
    for (resolution, tokens) in [
        (MediaResolution::Low, 280),
        (MediaResolution::Medium, 560),
        (MediaResolution::High, 1_120),
        (MediaResolution::UltraHigh, 2_240),
    ] {
        assert_eq!(
            rule.tokens(&big.clone().with_media_resolution(resolution)),
            tokens
        );
    }
    let two_pages = Part::from_bytes_as(
        b"%PDF-1.4\n2 0 obj << /Type /Page >>\n3 0 obj << /Type /Page >>\n".to_vec(),
        "application/pdf",
    )
    .unwrap();
    assert_eq!(rule.tokens(&two_pages), 2 * 560);
    let low = two_pages
        .clone()
        .with_media_resolution(MediaResolution::Low);
    assert_eq!(rule.tokens(&low), 2 * 280);
    // Gemini 2.5: tiles, the resolution not counted.
    let older = gemini.content_capabilities("gemini-2.5-flash").tokens;
    assert_eq!(older, TokenRule::Gemini);
    let tiled = image("1000x1000.png").with_media_resolution(MediaResolution::Low);
    assert_eq!(older.tokens(&tiled), 258 * 4);
    assert_eq!(older.tokens(&low), 2 * 258);
}

/// Pixel limits are read from an image's bytes alone: a URL (or a file id) is not
/// fetched by this crate, so it passes the check and goes to the provider as given,
/// for the provider to check.
#[tokio::test]
async fn a_url_image_passes_the_pixel_check_untouched() {
    let options = ProviderOptions::default().with_api_key(KEY);
    let caps = AnthropicClient::new(&options)
        .unwrap()
        .content_capabilities("claude-sonnet-4-5");
    assert_eq!(caps.max_image_dimensions, Some((8_000, 8_000)));
    let url = "https://example.test/scan-9000x9000.png";
    let part = Part::from_url(url, "image/png").unwrap();
    assert_eq!(caps.check(&part), Ok(()));
    assert!(
        caps.check(&image("8001x100.png")).is_err(),
        "bytes are checked"
    );
    // In a run of more than 20 images (the smaller limit's count), the URL is sent as
    // given.
    let server = anthropic_server().await;
    let config = triage("claude-sonnet-4-5", &server.uri()).build().unwrap();
    let mut input = Input::text("look").part(part);
    for _ in 0..20 {
        input = input.part(image("200x200.png"));
    }
    let result = run_agent(&config, input).await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    let sent = requests(&server).await;
    assert_eq!(sent.len(), 1);
    let body: serde_json::Value = serde_json::from_slice(&sent[0].body).unwrap();
    let content = &body["messages"][0]["content"];
    assert_eq!(
        content[1],
        serde_json::json!({"type": "image", "source": {"type": "url", "url": url}}),
        "{content}"
    );
}

#[test]
fn each_provider_names_its_rule() {
    let options = ProviderOptions::default().with_api_key(KEY);
    let anthropic = AnthropicClient::new(&options).unwrap();
    assert_eq!(
        anthropic.content_capabilities("claude-sonnet-4-5").tokens,
        TokenRule::Anthropic
    );
    let gemini = GeminiClient::new(&options).unwrap();
    assert_eq!(
        gemini.content_capabilities("gemini-2.5-flash").tokens,
        TokenRule::Gemini
    );
    let bedrock = BedrockClient::new(
        &ProviderOptions::default()
            .with_aws_credentials(agent_core::providers::AwsCredentials::new(
                "AKIDEXAMPLE",
                "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            ))
            .with_aws_region("us-east-1"),
    )
    .unwrap();
    let claude = bedrock.content_capabilities("anthropic.claude-3-5-sonnet-20241022-v2:0");
    assert_eq!(claude.tokens, TokenRule::Anthropic);
    let nova = bedrock.content_capabilities("amazon.nova-pro-v1:0");
    assert_eq!(nova.tokens, TokenRule::Conservative);
    // Bedrock's pixel limit (the `Message` page): 8,000 px wide and high.
    assert_eq!(nova.max_image_dimensions, Some((8_000, 8_000)));
    assert_eq!(
        nova.check(&image("8001x100.png")).unwrap_err(),
        "8001x100 px is more than the 8000x8000 px an image may have (source: \
         https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Message.html)"
    );
    assert_eq!(nova.check(&image("2048x4096.png")), Ok(()));
}

/// A client with `caps` that answers at once with a valid submission and no usage (so
/// the run estimates the call's tokens), recording what it was sent.
#[derive(Clone)]
struct NoUsage {
    caps: ContentCapabilities,
    sent: Arc<Mutex<Vec<LlmRequest>>>,
}

impl NoUsage {
    fn new(caps: ContentCapabilities) -> Self {
        Self {
            caps,
            sent: Arc::default(),
        }
    }
}

impl LlmClient for NoUsage {
    fn complete<'a>(&'a self, request: &'a LlmRequest) -> LlmFuture<'a> {
        self.sent.lock().unwrap().push(request.clone());
        Box::pin(async {
            Ok(LlmResponse::tool_calls(vec![
                agent_core::llm::ToolCall::new("s1", "submit_output", valid()),
            ]))
        })
    }

    fn content_capabilities(&self, _model: &str) -> ContentCapabilities {
        self.caps
    }
}

fn images(rule: TokenRule) -> ContentCapabilities {
    let mut caps = ContentCapabilities::TEXT_ONLY;
    caps.image_types = COMMON_IMAGES;
    caps.tokens = rule;
    caps
}

#[tokio::test]
async fn the_runs_token_count_uses_the_rule_of_the_model_it_is_on() {
    let mut input_tokens = Vec::new();
    for rule in [
        TokenRule::Anthropic,
        TokenRule::OPENAI_GPT_4O,
        TokenRule::Gemini,
    ] {
        let config = AgentConfig::<Triage>::builder("see")
            .llm(NoUsage::new(images(rule)))
            .build()
            .unwrap();
        let input = Input::text("The unit arrived cracked.").part(image("1000x1000.png"));
        let result = run_agent(&config, input).await;
        assert!(result.outcome.is_ok(), "{:?}", result.outcome);
        assert_eq!(result.usage.estimated_llm_calls, 1);
        input_tokens.push(result.usage.input_tokens);
    }
    // The same request but for the image: the differences are the rules' (1,334, 765
    // and 1,032 tokens for a 1000 x 1000 image).
    assert_eq!(input_tokens[0] - input_tokens[1], 1_334 - 765);
    assert_eq!(input_tokens[2] - input_tokens[1], 1_032 - 765);
}

async fn anthropic_server() -> MockServer {
    let server = MockServer::start().await;
    mount_post(
        &server,
        "/v1/messages",
        json_fixture(200, "anthropic/submit.json"),
        None,
    )
    .await;
    server
}

#[tokio::test]
async fn anthropics_pixel_limits_are_checked_before_any_request() {
    let server = anthropic_server().await;
    let config = triage("claude-sonnet-4-5", &server.uri()).build().unwrap();
    let source = "(source: https://docs.anthropic.com/en/docs/build-with-claude/vision and \
                  https://docs.anthropic.com/en/docs/build-with-claude/pdf-support)";
    // Over 8,000 px wide.
    let result = run_agent(&config, Input::text("look").part(image("8001x100.png"))).await;
    match &result.outcome {
        Err(AgentError::UnsupportedContent {
            index: 0,
            kind: Kind::Image,
            reason,
            ..
        }) => assert_eq!(
            reason,
            &format!("8001x100 px is more than the 8000x8000 px an image may have {source}")
        ),
        other => panic!("{other:?}"),
    }
    // 2001 x 1000 px is taken alone, but not among more than 20 images.
    let mut input = Input::text("look").part(image("2001x1000.png"));
    for _ in 0..20 {
        input = input.part(image("200x200.png"));
    }
    let result = run_agent(&config, input).await;
    match &result.outcome {
        Err(AgentError::UnsupportedContent {
            index: 0, reason, ..
        }) => assert_eq!(
            reason,
            &format!(
                "2001x1000 px is more than the 2000x2000 px an image may have when a \
                 request carries more than 20 images (this one carries 21) {source}"
            )
        ),
        other => panic!("{other:?}"),
    }
    assert!(requests(&server).await.is_empty(), "no request was sent");
    let result = run_agent(&config, Input::text("look").part(image("2001x1000.png"))).await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    assert_eq!(requests(&server).await.len(), 1);
}

#[tokio::test]
async fn a_handoff_target_that_cannot_take_the_runs_parts_is_refused_before_any_request() {
    let text_only = NoUsage::new(ContentCapabilities::TEXT_ONLY);
    let billing = AgentConfig::<Triage>::builder("billing")
        .llm(text_only.clone())
        .model("text-model")
        .build()
        .unwrap();
    let front = NoUsage::new(images(TokenRule::Conservative));
    let config = AgentConfig::<Triage>::builder("front")
        .llm(front.clone())
        .handoff(billing)
        .build()
        .unwrap();
    let result = run_agent(&config, Input::text("invoice photo").part(bottle())).await;
    match &result.outcome {
        Err(
            error @ AgentError::UnsupportedHandoffContent {
                agent,
                model,
                index,
                kind,
                media_type,
                reason,
            },
        ) => {
            assert_eq!(
                (
                    agent.as_str(),
                    model.as_str(),
                    *index,
                    *kind,
                    media_type.as_str()
                ),
                ("billing", "text-model", 0, Kind::Image, "image/png")
            );
            assert_eq!(reason, "the model takes no images");
            assert_eq!(error.category(), "invalid_run");
            assert_eq!(
                error.to_string(),
                "the handoff target billing cannot take part 0 (image image/png) on model \
                 text-model: the model takes no images"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(front.sent.lock().unwrap().is_empty(), "no request was sent");
    // A text-only run is not checked: the same config answers.
    let result = run_agent(&config, "no attachment").await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
    // A target whose fallback model takes the parts is fine (the chain skips the
    // text-only model at the handoff).
    let billing = AgentConfig::<Triage>::builder("billing")
        .llm(text_only)
        .model("text-model")
        .fallback_model_with(
            "claude-sonnet-4-5",
            ProviderOptions::default()
                .with_api_key(KEY)
                .with_base_url("http://127.0.0.1:9"),
        )
        .build()
        .unwrap();
    let config = AgentConfig::<Triage>::builder("front")
        .llm(front)
        .handoff(billing)
        .build()
        .unwrap();
    let result = run_agent(&config, Input::text("invoice photo").part(bottle())).await;
    assert!(result.outcome.is_ok(), "{:?}", result.outcome);
}

/// The `ollama/` route is Ollama's OpenAI-compatible endpoint: with the model's
/// capabilities declared (Ollama knows which of its models see; this crate does not),
/// an image goes as an `image_url` part holding a base64 data URL, the form Ollama's
/// compatibility page lists; undeclared, the image is refused before any request.
#[tokio::test]
async fn the_ollama_route_sends_images_as_data_urls_once_declared() {
    let server = MockServer::start().await;
    mount_post(
        &server,
        "/v1/chat/completions",
        json_fixture(200, "openai/text.json"),
        None,
    )
    .await;
    let ollama = |caps: Option<ContentCapabilities>| {
        let mut options = ProviderOptions::default().with_base_url(server.uri());
        if let Some(caps) = caps {
            options = options.with_content_capabilities(caps);
        }
        AgentConfig::<Triage>::builder("local")
            .model("ollama/llava")
            .provider(options)
            .output_mode(agent_core::OutputMode::Prompted)
            .max_llm_calls(1)
            .build()
            .unwrap()
    };
    let photo = || Input::text("What is wrong with the bottle?").part(bottle());
    // Undeclared: text alone, refused before any request.
    let result = run_agent(&ollama(None), photo()).await;
    assert!(
        matches!(
            &result.outcome,
            Err(AgentError::UnsupportedContent { model, kind: Kind::Image, .. })
                if model == "ollama/llava"
        ),
        "{:?}",
        result.outcome
    );
    assert!(requests(&server).await.is_empty());
    // Declared: images as bytes (Ollama fetches no URL).
    let mut vision = ContentCapabilities::TEXT_ONLY;
    vision.image_types = &["image/png", "image/jpeg"];
    let _ = run_agent(&ollama(Some(vision)), photo()).await;
    let bodies = crate::providers_support::bodies(&server).await;
    assert_eq!(bodies.len(), 1);
    assert_eq!(bodies[0]["model"], "llava");
    let bytes = std::fs::read(format!(
        "{}/../examples/data/tickets/002-dented-bottle.png",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    use base64::Engine;
    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
    let messages = bodies[0]["messages"].as_array().unwrap();
    assert_eq!(
        messages.last().unwrap(),
        &serde_json::json!({"role": "user", "content": [
            {"type": "text", "text": "What is wrong with the bottle?"},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{data}")}}
        ]})
    );
    // A URL is refused for such a declaration (no `urls`), before any request.
    let url = Part::from_url("https://example.test/bottle.png", "image/png").unwrap();
    let result = run_agent(&ollama(Some(vision)), Input::text("see").part(url)).await;
    assert!(
        matches!(&result.outcome, Err(AgentError::UnsupportedContent { reason, .. })
            if reason.contains("takes no URL")),
        "{:?}",
        result.outcome
    );
    assert_eq!(requests(&server).await.len(), 1);
}
