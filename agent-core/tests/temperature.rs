//! Temperatures a provider does not take are never dropped or clamped silently: the
//! adapters say what they send, and `build()` logs a warning when it differs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::io;
use std::sync::{Arc, Mutex};

use agent_core::providers::{AnthropicClient, OpenAiClient, ProviderOptions};
use agent_core::{AgentConfig, llm::LlmClient};

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn warnings_of_build(model: &str, temperature: f32) -> String {
    let captured = Captured::default();
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .finish();
    let _guard = crate::common::traced::set_default(subscriber);
    AgentConfig::<String>::builder("t")
        .model(model)
        .provider(
            ProviderOptions::default()
                .with_api_key("sk-test")
                .with_base_url("http://127.0.0.1:9"),
        )
        .temperature(temperature)
        .build()
        .unwrap();
    String::from_utf8_lossy(&captured.0.lock().unwrap()).into_owned()
}

#[test]
fn adapters_say_what_temperature_they_send() {
    let options = ProviderOptions::default()
        .with_api_key("sk-test")
        .with_base_url("http://127.0.0.1:9");
    let anthropic = AnthropicClient::new(&options).unwrap();
    assert_eq!(
        anthropic.effective_temperature("claude-sonnet-4-5", 1.5),
        Some(1.0)
    );
    assert_eq!(
        anthropic.effective_temperature("claude-sonnet-4-5", 0.3),
        Some(0.3)
    );
    let openai = OpenAiClient::openai(&options).unwrap();
    assert_eq!(openai.effective_temperature("o3", 0.3), None);
    assert_eq!(openai.effective_temperature("gpt-5-mini", 0.3), None);
    assert_eq!(openai.effective_temperature("gpt-4.1", 1.5), Some(1.5));
    let compatible = OpenAiClient::compatible("dispatch", &options).unwrap();
    assert_eq!(compatible.effective_temperature("o3", 0.3), Some(0.3));
}

#[test]
fn build_warns_when_the_temperature_is_clamped_or_dropped() {
    let clamped = warnings_of_build("claude-sonnet-4-5", 1.5);
    assert!(
        clamped.contains(
            "temperature 1.5 is not what this model gets: the provider's range caps it at 1"
        ),
        "{clamped}"
    );
    let dropped = warnings_of_build("o3", 0.2);
    assert!(
        dropped.contains("the model takes no temperature, so none is sent"),
        "{dropped}"
    );
    assert_eq!(
        warnings_of_build("gpt-4.1", 0.2),
        "",
        "sent as set: no warning"
    );
}
