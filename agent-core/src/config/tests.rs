//! Unit tests of config compilation: pools shared by variants.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::providers::ProviderOptions;

use super::*;
use std::time::Duration;

fn pool_of(config: &AgentConfig<String>) -> crate::providers::http::HttpPool {
    config
        .inner
        .settings
        .provider
        .pool
        .clone()
        .expect("an HTTP route has a pool")
}

#[test]
fn variants_share_the_parent_pool_unless_the_timeouts_change() {
    let parent: AgentConfig<String> = AgentConfig::builder("p")
        .model("dispatch/a")
        .provider(ProviderOptions::default().with_base_url("http://127.0.0.1:9/v1"))
        .build()
        .unwrap();
    let same_model = parent.with_(|b| b.max_llm_calls(3)).unwrap();
    assert!(Arc::ptr_eq(
        &parent.inner.primary().client,
        &same_model.inner.primary().client
    ));
    let other_model = parent.with_(|b| b.model("dispatch/b")).unwrap();
    assert!(!Arc::ptr_eq(
        &parent.inner.primary().client,
        &other_model.inner.primary().client
    ));
    assert!(pool_of(&parent).is_same(&pool_of(&other_model)));
    let other_url = parent
        .with_(|b| b.provider(ProviderOptions::default().with_base_url("http://127.0.0.1:10/v1")))
        .unwrap();
    assert!(pool_of(&parent).is_same(&pool_of(&other_url)));
    let other_timeout = parent
        .with_(|b| {
            b.provider(
                ProviderOptions::default()
                    .with_base_url("http://127.0.0.1:9/v1")
                    .with_request_timeout(Duration::from_secs(5)),
            )
        })
        .unwrap();
    assert!(!pool_of(&parent).is_same(&pool_of(&other_timeout)));
    let sibling: AgentConfig<String> = AgentConfig::builder("s")
        .model("dispatch/a")
        .provider(ProviderOptions::default().with_base_url("http://127.0.0.1:9/v1"))
        .build()
        .unwrap();
    assert!(
        !pool_of(&parent).is_same(&pool_of(&sibling)),
        "separate configs, separate pools"
    );
}
