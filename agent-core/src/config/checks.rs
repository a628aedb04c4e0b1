//! The checks `build()` makes: settings, tool names and schemas, the output tool; and
//! the compiled tool table.

use std::fmt;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::error::ConfigError;
use crate::output::{ESCALATE_TO_HUMAN, SUBMIT_OUTPUT};
use crate::tool::ToolDefinition;
use crate::validate::SchemaValidator;

use super::{CompiledTool, Settings, stores};

pub(super) fn invalid(
    setting: &'static str,
    value: impl fmt::Display,
    reason: &'static str,
) -> ConfigError {
    ConfigError::InvalidSetting {
        setting,
        value: value.to_string(),
        reason,
    }
}

pub(super) fn check_settings<T>(s: &Settings<T>) -> Result<(), ConfigError> {
    s.limits.check()?;
    s.params.check()?;
    if s.provider.request_timeout.is_zero() {
        return Err(invalid("request_timeout", "0 s", "a request needs time"));
    }
    if s.provider.max_response_bytes == 0 {
        return Err(invalid(
            "max_response_bytes",
            0,
            "a response needs some bytes",
        ));
    }
    if s.prompt_cache_key
        .as_deref()
        .is_some_and(|k| k.trim().is_empty())
    {
        return Err(invalid(
            "prompt_cache_key",
            "\"\"",
            "a cache key must not be empty",
        ));
    }
    stores::check(&s.stores)?;
    if s.stores.checkpoints.is_none() {
        let what = if s.approval.is_some() {
            Some("the approval policy".to_owned())
        } else {
            s.tools
                .entries()
                .iter()
                .find(|e| e.tool.requires_approval())
                .map(|e| format!("tool {:?}", e.definition.name))
        };
        if let Some(what) = what {
            return Err(ConfigError::ApprovalWithoutCheckpoints { what });
        }
    }
    Ok(())
}

/// Whether `name` matches `^[A-Za-z0-9_-]{1,64}$`.
pub(crate) fn is_legal_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

pub(super) fn check_object_schema(
    tool: &str,
    schema: &Value,
) -> Result<SchemaValidator, ConfigError> {
    let is_object = schema.get("type").and_then(Value::as_str) == Some("object");
    if !is_object {
        return Err(ConfigError::InvalidSchema {
            tool: tool.to_owned(),
            message: "the root must be {\"type\": \"object\", ..}".to_owned(),
        });
    }
    SchemaValidator::new(schema).map_err(|message| ConfigError::InvalidSchema {
        tool: tool.to_owned(),
        message,
    })
}

pub(super) fn check_output_tool(def: &ToolDefinition) -> Result<(), ConfigError> {
    if def.name != SUBMIT_OUTPUT {
        return Err(ConfigError::InvalidSchema {
            tool: def.name.clone(),
            message: format!("the output tool must be named {SUBMIT_OUTPUT}"),
        });
    }
    check_object_schema(SUBMIT_OUTPUT, &def.parameters).map(drop)
}

type ToolTable = (Vec<CompiledTool>, foldhash::HashMap<String, usize>);

pub(super) fn compile_tools<T>(s: &Settings<T>) -> Result<ToolTable, ConfigError> {
    let mut tools = Vec::with_capacity(s.tools.len());
    let mut index = foldhash::HashMap::with_capacity_and_hasher(s.tools.len(), Default::default());
    for entry in s.tools.entries() {
        let name = &entry.definition.name;
        if !is_legal_tool_name(name) {
            return Err(ConfigError::InvalidToolName { name: name.clone() });
        }
        if name == SUBMIT_OUTPUT || name == ESCALATE_TO_HUMAN {
            return Err(ConfigError::ReservedToolName { name: name.clone() });
        }
        if index.insert(name.clone(), tools.len()).is_some() {
            return Err(ConfigError::DuplicateTool { name: name.clone() });
        }
        for need in entry.tool.required_state() {
            let per_run = s.run_state.iter().any(|r| r.type_id == need.type_id);
            if !s.state.contains(need.type_id) && !per_run {
                return Err(ConfigError::MissingState {
                    tool: name.clone(),
                    type_name: need.type_name,
                });
            }
        }
        let validator = check_object_schema(name, &entry.definition.parameters)?;
        tools.push(CompiledTool {
            irreversible: entry.tool.irreversible(),
            requires_approval: entry.tool.requires_approval(),
            max_result_bytes: result_cap(name, entry.tool.max_result_tokens())?,
            tool: Arc::clone(&entry.tool),
            definition: entry.definition.clone(),
            validator,
        });
    }
    Ok((tools, index))
}

/// A tool's own result cap (`Tool::max_result_tokens`) in bytes (4 per token, the
/// runner's estimate).
///
/// # Errors
/// [`ConfigError::InvalidSetting`] for a cap of 0 tokens.
pub(crate) fn result_cap(tool: &str, tokens: Option<u32>) -> Result<Option<usize>, ConfigError> {
    match tokens {
        Some(0) => Err(ConfigError::InvalidSetting {
            setting: "max_result_tokens",
            value: format!("0 (tool {tool})"),
            reason: "a result of no tokens tells the model nothing; use at least 1",
        }),
        Some(n) => Ok(Some((n as usize).saturating_mul(4))),
        None => Ok(None),
    }
}

/// The definition of the built-in `escalate_to_human` tool.
pub(super) fn escalation_tool() -> ToolDefinition {
    ToolDefinition::new(
        ESCALATE_TO_HUMAN,
        "Hand this case to a human when you cannot or must not decide it yourself. Ends the run.",
        json!({
            "type": "object",
            "properties": {
                "reason": {"type": "string", "minLength": 1, "description": "Why a human must take over."},
                "summary": {"type": "string", "minLength": 1, "description": "What the human needs to know about the case."}
            },
            "required": ["reason", "summary"],
            "additionalProperties": false
        }),
    )
}
