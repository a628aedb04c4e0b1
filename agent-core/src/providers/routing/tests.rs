//! Routing's unit tests: names to providers, settings from options and the environment,
//! provider features that are off.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use std::collections::HashMap;

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |var| map.get(var).cloned()
}

fn routed(model: &str, pairs: &[(&str, &str)]) -> Result<Route, ConfigError> {
    route_with(model, &ProviderOptions::default(), &env_of(pairs))
}

/// Routes `model` in a build where only `on` provider features are built.
fn routed_with_features(model: &str, on: &[&str]) -> Result<Route, ConfigError> {
    let env = env_of(&[
        ("OPENAI_API_KEY", "sk-xxxxxxxx"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key-xxxx"),
    ]);
    route_built(model, &ProviderOptions::default(), &env, &|f| {
        on.contains(&f)
    })
}

#[test]
fn a_provider_whose_feature_is_off_is_a_config_error_naming_the_feature() {
    let cases = [
        ("bedrock/anthropic.claude-3-haiku", "AWS Bedrock", "bedrock"),
        ("claude-sonnet-4-5", "Anthropic", "anthropic"),
        ("gemini-2.5-flash", "Google Gemini", "gemini"),
        ("gpt-5-mini", "OpenAI", "openai"),
        ("o3-pro", "OpenAI", "openai"),
        ("openai-responses/gpt-5", "OpenAI", "openai"),
        ("azure/prod", "Azure OpenAI", "openai"),
        ("azure-responses/prod", "Azure OpenAI", "openai"),
        ("ollama/llama3.2", "Ollama (OpenAI-compatible)", "openai"),
        ("dispatch/gemma", "an OpenAI-compatible server", "openai"),
    ];
    for (model, provider, feature) in cases {
        let error = match routed_with_features(model, &[]) {
            Err(error) => error,
            Ok(_) => panic!("{model} routed with no provider built"),
        };
        assert_eq!(
            error,
            ConfigError::ProviderFeatureOff {
                model: model.to_owned(),
                provider,
                feature,
            },
            "{model}"
        );
        let text = error.to_string();
        assert!(
            text.contains(&format!("Cargo feature \"{feature}\"")),
            "{text}"
        );
        assert!(
            text.contains(&format!("features = [\"{feature}\"]")),
            "{text}"
        );
    }
    // The other providers still route when one is off.
    let gpt = routed_with_features("gpt-5-mini", &["openai"]).unwrap();
    assert_eq!(gpt.client.provider(), "openai");
    let bedrock_off = routed_with_features("bedrock/m", &["openai"]).err();
    assert!(
        matches!(
            bedrock_off,
            Some(ConfigError::ProviderFeatureOff {
                feature: "bedrock",
                ..
            })
        ),
        "{bedrock_off:?}"
    );
    // An unknown name is still UnknownModel, not a feature error.
    assert!(matches!(
        routed_with_features("llama-3", &[]),
        Err(ConfigError::UnknownModel { .. })
    ));
}

#[test]
fn built_reports_this_builds_provider_features() {
    assert_eq!(built("openai"), cfg!(feature = "openai"));
    assert_eq!(built("anthropic"), cfg!(feature = "anthropic"));
    assert_eq!(built("gemini"), cfg!(feature = "gemini"));
    assert_eq!(built("bedrock"), cfg!(feature = "bedrock"));
    assert!(!built("plot"));
}

#[test]
fn prefixes_route_to_their_providers() {
    let full = [
        ("ANTHROPIC_API_KEY", "sk-ant-xxxxxxxx"),
        ("OPENAI_API_KEY", "sk-xxxxxxxx"),
        ("GEMINI_API_KEY", "AIza-xxxxxxxx"),
        ("AGENT_DISPATCH_URL", "http://10.0.0.1:8000/v1"),
        ("AZURE_OPENAI_ENDPOINT", "https://res.openai.azure.com"),
        ("AZURE_OPENAI_API_KEY", "azure-key-xxxxxxxx"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key-xxxx"),
        ("GOOGLE_CLOUD_PROJECT", "my-project"),
        ("GOOGLE_CLOUD_LOCATION", "us-central1"),
        ("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.test-token-xxxx"),
    ];
    let cases = [
        ("claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"),
        ("gpt-5-mini", "openai", "gpt-5-mini"),
        ("o1", "openai", "o1"),
        ("o3-mini", "openai", "o3-mini"),
        ("o4-mini", "openai", "o4-mini"),
        ("chatgpt-4o-latest", "openai", "chatgpt-4o-latest"),
        ("gemini-2.5-flash", "gemini", "gemini-2.5-flash"),
        ("gemini-3-pro-preview", "gemini", "gemini-3-pro-preview"),
        ("ollama/llama3.2", "ollama", "llama3.2"),
        ("dispatch/gemma", "dispatch", "gemma"),
        ("azure/prod-gpt-4o", "azure.ai.openai", "prod-gpt-4o"),
        ("openai-responses/gpt-5", "openai", "gpt-5"),
        ("o3-pro", "openai", "o3-pro"),
        (
            "azure-responses/prod-gpt-5",
            "azure.ai.openai",
            "prod-gpt-5",
        ),
        (
            "bedrock/us.amazon.nova-pro-v1:0",
            "aws.bedrock",
            "us.amazon.nova-pro-v1:0",
        ),
        (
            "vertex/gemini-2.5-flash",
            "gcp.vertex_ai",
            "gemini-2.5-flash",
        ),
        (
            "vertex/claude-sonnet-4-5@20250929",
            "gcp.vertex_ai",
            "claude-sonnet-4-5@20250929",
        ),
    ];
    for (model, provider, wire) in cases {
        let route = routed(model, &full).unwrap();
        assert_eq!(route.client.provider(), provider, "{model}");
        assert_eq!(route.wire_model, wire, "{model}");
    }
}

#[test]
fn responses_only_names_and_the_prefix_route_to_the_responses_api() {
    let env = [("OPENAI_API_KEY", "sk-xxxxxxxx")];
    assert_eq!(
        target("openai-responses/gpt-5-mini"),
        Some(Target::Responses("gpt-5-mini"))
    );
    for model in [
        "o1-pro",
        "o3-pro-2025-06-10",
        "gpt-5-pro",
        "gpt-5-codex",
        "o4-mini-deep-research",
    ] {
        assert_eq!(target(model), Some(Target::Responses(model)));
        assert_eq!(routed(model, &env).unwrap().wire_model, model);
    }
    for model in [
        "gpt-5",
        "gpt-4o",
        "o3",
        "o4-mini",
        "gpt-5-chat-latest",
        "o3-mini",
    ] {
        assert_eq!(target(model), Some(Target::OpenAi), "{model}");
    }
    assert!(matches!(
        routed("openai-responses/", &env),
        Err(ConfigError::InvalidProvider { .. })
    ));
    match routed("azure-responses/d", &[]) {
        Err(ConfigError::MissingEnv { var, .. }) => assert_eq!(var, "AZURE_OPENAI_ENDPOINT"),
        other => panic!("{:?}", other.map(|r| r.wire_model)),
    }
}

#[test]
fn unknown_names_list_the_prefixes() {
    for model in [
        "gemini",
        "google/gemini-2.5-pro",
        "o1x",
        "o5",
        "claude",
        "llama3",
    ] {
        match routed(model, &[]) {
            Err(ConfigError::UnknownModel { prefixes, .. }) => assert_eq!(prefixes, PREFIXES),
            other => panic!("{model}: {:?}", other.map(|r| r.wire_model)),
        }
    }
}

#[test]
fn missing_env_names_the_variable() {
    let var = |model: &str| match routed(model, &[]) {
        Err(ConfigError::MissingEnv { var, .. }) => var,
        other => panic!("{model}: {:?}", other.map(|r| r.wire_model)),
    };
    assert_eq!(var("claude-haiku-4-5"), "ANTHROPIC_API_KEY");
    assert_eq!(var("gpt-5"), "OPENAI_API_KEY");
    assert_eq!(var("gemini-2.5-flash"), "GEMINI_API_KEY");
    assert_eq!(var("dispatch/gemma"), "AGENT_DISPATCH_URL");
    assert_eq!(var("azure/d"), "AZURE_OPENAI_ENDPOINT");
    let endpoint = [("AZURE_OPENAI_ENDPOINT", "https://res.openai.azure.com")];
    match routed("azure/d", &endpoint) {
        Err(ConfigError::MissingEnv { var, .. }) => assert_eq!(var, "AZURE_OPENAI_API_KEY"),
        other => panic!("{:?}", other.map(|r| r.wire_model)),
    }
    // A bearer token stands in for the key.
    let options = ProviderOptions::default().with_bearer_token("entra-token-xxxx");
    assert!(route_with("azure/d", &options, &env_of(&endpoint)).is_ok());
    assert_eq!(var("bedrock/m"), "AWS_REGION");
    let region = [("AWS_DEFAULT_REGION", "eu-west-1")];
    match routed("bedrock/m", &region) {
        Err(ConfigError::MissingEnv { var, .. }) => assert_eq!(var, "AWS_ACCESS_KEY_ID"),
        other => panic!("{:?}", other.map(|r| r.wire_model)),
    }
    let id = [
        ("AWS_REGION", "eu-west-1"),
        ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
    ];
    match routed("bedrock/m", &id) {
        Err(ConfigError::MissingEnv { var, .. }) => assert_eq!(var, "AWS_SECRET_ACCESS_KEY"),
        other => panic!("{:?}", other.map(|r| r.wire_model)),
    }
    let keys = [
        ("AWS_REGION", "eu-west-1"),
        ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
        ("AWS_SECRET_ACCESS_KEY", "secret-xxxx"),
    ];
    assert_eq!(routed("bedrock/m", &keys).unwrap().wire_model, "m");
    assert_eq!(var("vertex/gemini-2.5-pro"), "GOOGLE_CLOUD_PROJECT");
    let project = [("GOOGLE_CLOUD_PROJECT", "p")];
    match routed("vertex/claude-opus-4-1", &project) {
        Err(ConfigError::MissingEnv { var, .. }) => assert_eq!(var, "GOOGLE_CLOUD_LOCATION"),
        other => panic!("{:?}", other.map(|r| r.wire_model)),
    }
    let place = [
        ("GOOGLE_CLOUD_PROJECT", "p"),
        ("GOOGLE_CLOUD_LOCATION", "global"),
    ];
    match routed("vertex/gemini-2.5-pro", &place) {
        Err(ConfigError::MissingEnv { var, .. }) => {
            assert_eq!(var, "GOOGLE_APPLICATION_CREDENTIALS");
        }
        other => panic!("{:?}", other.map(|r| r.wire_model)),
    }
    let unreadable = [
        ("GOOGLE_CLOUD_PROJECT", "p"),
        ("GOOGLE_CLOUD_LOCATION", "global"),
        ("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/key.json"),
    ];
    match routed("vertex/gemini-2.5-pro", &unreadable) {
        Err(ConfigError::InvalidProvider { message, .. }) => {
            assert!(message.contains("/nonexistent/key.json"), "{message}");
        }
        other => panic!("{:?}", other.map(|r| r.wire_model)),
    }
    // Only Gemini and Claude names: no other publisher is wired.
    let token = [
        ("GOOGLE_CLOUD_PROJECT", "p"),
        ("GOOGLE_CLOUD_LOCATION", "global"),
        ("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.x"),
    ];
    assert!(matches!(
        routed("vertex/llama-3.3-70b", &token),
        Err(ConfigError::InvalidProvider { .. })
    ));
    assert!(routed("vertex/claude-haiku-4-5@20251001", &token).is_ok());
    // Ollama needs nothing: it has a default host.
    assert!(routed("ollama/qwen3", &[]).is_ok());
}

#[test]
fn explicit_options_replace_the_environment() {
    let options = ProviderOptions::default()
        .with_api_key("sk-explicit")
        .with_base_url("http://127.0.0.1:9/v1");
    let route = route_with("dispatch/m", &options, &env_of(&[])).unwrap();
    assert_eq!(route.client.provider(), "dispatch");
    assert!(route_with("claude-x", &options, &env_of(&[])).is_ok());
}

#[test]
fn bad_urls_and_empty_names_are_invalid_provider_errors() {
    let bad = [("AGENT_DISPATCH_URL", "not a url")];
    assert!(matches!(
        routed("dispatch/m", &bad),
        Err(ConfigError::InvalidProvider { .. })
    ));
    let ok = [("AGENT_DISPATCH_URL", "http://h/v1")];
    assert!(matches!(
        routed("dispatch/", &ok),
        Err(ConfigError::InvalidProvider { .. })
    ));
    assert!(matches!(
        routed("ollama/ ", &[]),
        Err(ConfigError::InvalidProvider { .. })
    ));
    let ftp = [("OPENAI_API_KEY", "k"), ("OPENAI_BASE_URL", "ftp://x/v1")];
    assert!(matches!(
        routed("gpt-5", &ftp),
        Err(ConfigError::InvalidProvider { .. })
    ));
}

#[test]
fn ollama_hosts_become_api_roots() {
    assert_eq!(ollama_base("0.0.0.0:11434"), "http://0.0.0.0:11434/v1");
    assert_eq!(ollama_base("http://gpu:11434/"), "http://gpu:11434/v1");
    assert_eq!(ollama_base("https://o.example/v1"), "https://o.example/v1");
}
