//! Which model a run uses: a flag, the environment, a provider key found, or the
//! built-in test model.

use agent_core::testing::TestModel;
use agent_core::{AgentConfigBuilder, AgentOutput};

/// Which model a run uses, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelChoice {
    /// A routed model name (see agent-core's providers table).
    Named {
        /// The model name, e.g. `claude-sonnet-4-5` or `dispatch/gemma`.
        model: String,
        /// Where the name came from: `--model`, `AGENT_MODEL`, or the key found.
        source: &'static str,
    },
    /// No provider configured: the built-in test model, which calls each tool once and
    /// then submits a schema-valid example.
    Fallback,
}

impl ModelChoice {
    /// `--model`, else `AGENT_MODEL`, else the first configured provider key
    /// (`ANTHROPIC_API_KEY` → `claude-sonnet-4-5`, `OPENAI_API_KEY` → `gpt-5-mini`,
    /// `GEMINI_API_KEY` → `gemini-2.5-flash`), else the built-in test model.
    pub fn resolve(flag: Option<String>) -> Self {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        if let Some(model) = flag {
            return Self::Named {
                model,
                source: "--model",
            };
        }
        if let Some(model) = env("AGENT_MODEL") {
            return Self::Named {
                model,
                source: "AGENT_MODEL",
            };
        }
        if env("ANTHROPIC_API_KEY").is_some() {
            return Self::Named {
                model: "claude-sonnet-4-5".into(),
                source: "ANTHROPIC_API_KEY",
            };
        }
        if env("OPENAI_API_KEY").is_some() {
            return Self::Named {
                model: "gpt-5-mini".into(),
                source: "OPENAI_API_KEY",
            };
        }
        if env("GEMINI_API_KEY").is_some() {
            return Self::Named {
                model: "gemini-2.5-flash".into(),
                source: "GEMINI_API_KEY",
            };
        }
        Self::Fallback
    }

    /// Sets the model on a builder.
    pub fn apply<T: AgentOutput>(&self, builder: AgentConfigBuilder<T>) -> AgentConfigBuilder<T> {
        match self {
            // The test model, named or fallen back to, calls each tool first, so a run
            // replayed with `--model test` makes the same calls as the recorded one.
            Self::Named { model, .. } if model == "test" => builder
                .model("test")
                .llm(TestModel::new().calling_tools_first()),
            Self::Named { model, .. } => builder.model(model.clone()),
            Self::Fallback => builder
                .model("test")
                .llm(TestModel::new().calling_tools_first()),
        }
    }

    /// Whether the runs use the built-in test model (named `test` or fallen back to).
    pub fn is_test(&self) -> bool {
        match self {
            Self::Named { model, .. } => model == "test",
            Self::Fallback => true,
        }
    }

    /// The line to print on stderr before running.
    pub fn banner(&self) -> String {
        match self {
            Self::Named { model, source } => format!("model: {model} (from {source})"),
            Self::Fallback => {
                "note: no model configured (--model, AGENT_MODEL, ANTHROPIC_API_KEY, \
                OPENAI_API_KEY or GEMINI_API_KEY); using the built-in test model, which answers with schema-valid \
                placeholders, not real triage"
                    .to_owned()
            }
        }
    }
}
