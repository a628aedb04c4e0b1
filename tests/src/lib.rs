//! Cross-crate tests live in `tests/tests/`; this library only compiles the Rust blocks of
//! the README and of every page of the guide (`docs/*.md`) as doc tests, so neither can
//! drift from the API (`no_run` blocks are compiled only; `docs_guide.rs` checks that every
//! page is here and in the guide's index, and that no Rust block is `ignore` but the one it
//! names with its reason).

#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/README.md")]
pub struct GuideIndexDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/architecture.md")]
pub struct ArchitectureDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/batch.md")]
pub struct BatchDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/cases.md")]
pub struct CasesDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/compaction.md")]
pub struct CompactionDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/content.md")]
pub struct ContentDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/dashboard.md")]
pub struct DashboardDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/durable.md")]
pub struct DurableDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/evaluation.md")]
pub struct EvaluationDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/interop.md")]
pub struct InteropDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/local-models.md")]
pub struct LocalModelsDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/loop.md")]
pub struct LoopDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/mcp.md")]
pub struct McpDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/multi-agent.md")]
pub struct MultiAgentDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/observability.md")]
pub struct ObservabilityDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/output-modes.md")]
pub struct OutputModesDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/pricing.md")]
pub struct PricingDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/providers.md")]
pub struct ProvidersDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/running.md")]
pub struct RunningDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/scale-out.md")]
pub struct ScaleOutDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/stores.md")]
pub struct StoresDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../docs/streaming.md")]
pub struct StreamingDoctests;
