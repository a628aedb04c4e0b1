//! Validation of JSON values against a JSON Schema, with path-qualified messages.
//!
//! The schema is compiled once (by the `jsonschema` crate, draft 2020-12) and reused.

use std::fmt;

use serde::de::DeserializeOwned;
use serde_json::Value;

/// A compiled JSON Schema.
#[derive(Clone, Debug)]
pub struct SchemaValidator {
    inner: jsonschema::Validator,
}

impl SchemaValidator {
    /// Compiles a schema (draft 2020-12; no remote references are fetched).
    ///
    /// # Errors
    /// A message saying why the schema is not a valid JSON Schema.
    pub fn new(schema: &Value) -> Result<Self, String> {
        jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .build(schema)
            .map(|inner| Self { inner })
            .map_err(|e| format!("invalid JSON Schema: {e}"))
    }

    /// Checks `instance` against the schema.
    ///
    /// # Errors
    /// Every violation, each as `"<JSON pointer>: <rule>"`, for example
    /// `"/severity: 9 is greater than the maximum of 4"` (the root is `"/"`).
    pub fn validate(&self, instance: &Value) -> Result<(), ValidationErrors> {
        if self.inner.is_valid(instance) {
            return Ok(());
        }
        let errors: Vec<String> = self
            .inner
            .iter_errors(instance)
            .map(|e| format!("{}: {}", pointer_or_root(e.instance_path().as_str()), e))
            .collect();
        Err(ValidationErrors::new(errors))
    }

    /// Checks `instance` against the schema as [`validate`](Self::validate) does, with
    /// every value the messages would quote written `value` (for answers a person
    /// typed, which may be private): `"/guests: value is not of type \"integer\""`.
    ///
    /// # Errors
    /// Every violation, each as `"<JSON pointer>: <rule>"`.
    pub fn validate_masked(&self, instance: &Value) -> Result<(), ValidationErrors> {
        if self.inner.is_valid(instance) {
            return Ok(());
        }
        let errors: Vec<String> = self
            .inner
            .iter_errors(instance)
            .map(|e| {
                format!(
                    "{}: {}",
                    pointer_or_root(e.instance_path().as_str()),
                    e.masked()
                )
            })
            .collect();
        Err(ValidationErrors::new(errors))
    }

    /// Checks `instance` against the schema, then deserializes it.
    ///
    /// # Errors
    /// The schema violations, or serde's error (with its path) when the value is
    /// schema-valid but does not deserialize.
    pub fn validate_into<T: DeserializeOwned>(
        &self,
        instance: &Value,
    ) -> Result<T, ValidationErrors> {
        self.validate(instance)?;
        deserialize(instance)
    }
}

/// Deserializes a value, turning serde's error into a [`ValidationErrors`].
///
/// # Errors
/// One message naming what did not deserialize.
pub(crate) fn deserialize<T: DeserializeOwned>(instance: &Value) -> Result<T, ValidationErrors> {
    T::deserialize(instance).map_err(|e| ValidationErrors::one(format!("/: {e}")))
}

/// Rewrites every JSON number that is a whole float (`3.0`, `2e0`) as the integer it
/// equals, in place, when it fits in an `i64` or `u64`.
///
/// Models (and some servers' JSON encoders) write `3.0` where the schema says
/// `integer`. JSON Schema already counts `3.0` as an integer, but serde refuses it for a
/// `u32`; the runner applies this to every tool call's arguments and every answer,
/// whatever the wire, before validation and deserialization. A float field still gets
/// its value (serde reads an integer into an `f64`); a non-whole number (`3.5`) is left
/// as it is, so validation names its path.
pub fn whole_numbers_as_integers(value: &mut Value) {
    // Iterative: arguments may nest deeply (up to the sanitizer's depth limit). Only
    // nested arrays and objects go on the stack, so flat arguments allocate nothing.
    let mut stack: Vec<&mut Value> = Vec::new();
    let mut node = value;
    loop {
        match node {
            Value::Array(items) => items.iter_mut().for_each(|v| visit(v, &mut stack)),
            Value::Object(map) => map.values_mut().for_each(|v| visit(v, &mut stack)),
            other => integer_if_whole(other),
        }
        match stack.pop() {
            Some(next) => node = next,
            None => break,
        }
    }
}

/// A container goes on the stack; anything else is fixed where it is.
fn visit<'a>(value: &'a mut Value, stack: &mut Vec<&'a mut Value>) {
    if matches!(value, Value::Array(_) | Value::Object(_)) {
        stack.push(value);
    } else {
        integer_if_whole(value);
    }
}

/// A whole float (`3.0`) becomes the integer (`3`) when one represents it.
fn integer_if_whole(value: &mut Value) {
    let Value::Number(n) = value else { return };
    if !n.is_f64() {
        return;
    }
    if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.is_finite()) {
        if f >= i64::MIN as f64 && f < i64::MAX as f64 {
            *value = Value::from(f as i64);
        } else if f >= 0.0 && f < u64::MAX as f64 {
            *value = Value::from(f as u64);
        }
    }
}

fn pointer_or_root(pointer: &str) -> &str {
    if pointer.is_empty() { "/" } else { pointer }
}

/// Why a value was rejected: one message per violation, each naming the JSON path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidationErrors {
    messages: Vec<String>,
}

impl ValidationErrors {
    /// Errors from a list of messages.
    pub fn new(messages: Vec<String>) -> Self {
        Self { messages }
    }

    /// A single error.
    pub fn one(message: impl Into<String>) -> Self {
        Self {
            messages: vec![message.into()],
        }
    }

    /// The messages, one per violation.
    pub fn messages(&self) -> &[String] {
        &self.messages
    }
}

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.messages.join("; "))
    }
}

impl std::error::Error for ValidationErrors {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn whole_numbers_become_integers_at_every_depth() {
        let mut value = json!({
            "a": 3.0,
            "b": [1.0, 2.5, {"c": -4.0, "d": [[7.0e0]]}],
            "e": "3.0",
            "f": 1e300,
            "g": 18446744073709549568.0,
            "h": 5
        });
        whole_numbers_as_integers(&mut value);
        assert_eq!(value["a"], json!(3));
        assert!(value["a"].is_i64());
        assert_eq!(value["b"], json!([1, 2.5, {"c": -4, "d": [[7]]}]));
        assert!(value["b"][2]["d"][0][0].is_i64());
        assert_eq!(value["e"], json!("3.0"));
        // Too large for any integer type: left a float.
        assert!(value["f"].is_f64());
        // Above i64, below u64::MAX: an unsigned integer.
        assert!(value["g"].is_u64());
        assert_eq!(value["h"], json!(5));
        // A bare number, and a scalar that is not one.
        let mut root = json!(2.0);
        whole_numbers_as_integers(&mut root);
        assert!(root.is_i64());
        let mut text = json!("x");
        whole_numbers_as_integers(&mut text);
        assert_eq!(text, json!("x"));
    }

    fn triage_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "severity": {"type": "integer", "minimum": 1, "maximum": 4},
                "summary": {"type": "string", "minLength": 3}
            },
            "required": ["severity", "summary"],
            "additionalProperties": false
        })
    }

    #[test]
    fn messages_name_the_path_and_the_rule() {
        let v = SchemaValidator::new(&triage_schema()).unwrap();
        let err = v
            .validate(&json!({"severity": 9, "summary": "ok!"}))
            .unwrap_err();
        assert_eq!(
            err.messages(),
            ["/severity: 9 is greater than the maximum of 4"]
        );
    }

    #[test]
    fn every_violation_is_reported_and_the_root_is_slash() {
        let v = SchemaValidator::new(&triage_schema()).unwrap();
        let err = v.validate(&json!({"severity": 0})).unwrap_err();
        let msgs = err.messages();
        assert_eq!(msgs.len(), 2, "{msgs:?}");
        assert!(
            msgs.iter()
                .any(|m| m.starts_with("/: ") && m.contains("summary"))
        );
        assert!(msgs.iter().any(|m| m.starts_with("/severity: ")));
    }

    #[test]
    fn valid_values_deserialize() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct T {
            severity: u8,
            summary: String,
        }
        let v = SchemaValidator::new(&triage_schema()).unwrap();
        let t: T = v
            .validate_into(&json!({"severity": 2, "summary": "abc"}))
            .unwrap();
        assert_eq!(
            t,
            T {
                severity: 2,
                summary: "abc".into()
            }
        );
    }

    #[test]
    fn an_invalid_schema_is_an_error_not_a_panic() {
        let err = SchemaValidator::new(&json!({"type": 12})).unwrap_err();
        assert!(err.starts_with("invalid JSON Schema"), "{err}");
    }
}
