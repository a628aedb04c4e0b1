//! Provider-legal tool names for MCP tools.

use std::collections::HashSet;

/// The longest tool name every provider accepts (OpenAI's rule, `^[A-Za-z0-9_-]{1,64}$`).
pub(crate) const MAX_NAME_LEN: usize = 64;

/// The name the model sees for an MCP tool: `prefix_` (if any) and the MCP name, with
/// every character outside `[A-Za-z0-9_-]` replaced by `_`, cut to 64 characters, and
/// made unique among `taken` with a `_2`, `_3`, .. suffix.
pub(crate) fn model_name(prefix: Option<&str>, mcp_name: &str, taken: &HashSet<String>) -> String {
    let joined = match prefix {
        Some(prefix) if !prefix.is_empty() => format!("{prefix}_{mcp_name}"),
        _ => mcp_name.to_owned(),
    };
    let mut base: String = joined
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_NAME_LEN)
        .collect();
    if base.is_empty() {
        base.push_str("tool");
    }
    if !taken.contains(&base) {
        return base;
    }
    (2_usize..)
        .map(|n| {
            let suffix = format!("_{n}");
            let keep = MAX_NAME_LEN.saturating_sub(suffix.len()).min(base.len());
            format!("{}{suffix}", &base[..keep])
        })
        .find(|candidate| !taken.contains(candidate))
        .unwrap_or(base)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    fn legal(name: &str) -> bool {
        (1..=MAX_NAME_LEN).contains(&name.len())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn names_are_sanitised_prefixed_and_cut() {
        let none = HashSet::new();
        assert_eq!(model_name(None, "read_file", &none), "read_file");
        assert_eq!(model_name(Some("fs"), "read.file", &none), "fs_read_file");
        assert_eq!(
            model_name(None, "get weather/now", &none),
            "get_weather_now"
        );
        assert_eq!(model_name(None, "", &none), "tool");
        assert_eq!(model_name(None, "héllo", &none), "h_llo");
        let long = "x".repeat(100);
        let cut = model_name(Some("p"), &long, &none);
        assert_eq!(cut.len(), 64);
        assert!(cut.starts_with("p_xxx"));
    }

    #[test]
    fn clashing_names_get_a_numbered_suffix_within_the_limit() {
        let mut taken = HashSet::new();
        taken.insert("a_b".to_owned());
        assert_eq!(model_name(None, "a.b", &taken), "a_b_2");
        taken.insert("a_b_2".to_owned());
        assert_eq!(model_name(None, "a/b", &taken), "a_b_3");
        let long = "y".repeat(64);
        taken.insert(long.clone());
        let unique = model_name(None, &long, &taken);
        assert_eq!(unique.len(), 64);
        assert!(unique.ends_with("_2"));
        assert!(legal(&unique));
    }
}
