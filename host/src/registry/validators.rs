//! One compiled validator per distinct schema text, shared by every tool
//! that declares that text, for as long as one of them is loaded.
//!
//! Compiling a JSON Schema (checking it against its meta-schema, resolving
//! its references, building the validator's tree) was 12 % of the CPU of
//! a warm restart of 1,000 plugins whose 10,000 tools declare the same
//! small input schema, and each copy held its own tree. A validator
//! depends on nothing but the schema's text (remote references are never
//! fetched), so the same text gets the same compiled validator. Entries
//! are held weakly: a schema no loaded tool declares any more is freed
//! with its last tool, and the map sheds such entries as it grows.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use jsonschema::Validator;
use serde_json::Value;

/// Compiled validators by schema text.
struct Memo {
    by_text: HashMap<Box<str>, Weak<Validator>>,
    /// The map's size at which dead entries are swept next.
    sweep_at: usize,
}

static MEMO: Mutex<Option<Memo>> = Mutex::new(None);

/// The validator of `schema`, whose text is `text`: the one already
/// compiled for the same text if a loaded tool still holds it, else a new
/// one. A schema that does not compile is never remembered.
pub(crate) fn validator(
    text: &str,
    schema: &Value,
) -> Result<Arc<Validator>, jsonschema::ValidationError<'static>> {
    if let Some(shared) = lookup(text) {
        return Ok(shared);
    }
    // Compiled outside the lock: two loads of one new schema may both
    // compile it, and the second one's copy is the one remembered.
    let compiled = Arc::new(jsonschema::validator_for(schema)?);
    let mut memo = MEMO.lock().unwrap_or_else(|e| e.into_inner());
    let memo = memo.get_or_insert_with(|| Memo {
        by_text: HashMap::new(),
        sweep_at: 64,
    });
    memo.by_text.insert(text.into(), Arc::downgrade(&compiled));
    if memo.by_text.len() >= memo.sweep_at {
        memo.by_text.retain(|_, held| held.strong_count() > 0);
        memo.sweep_at = (memo.by_text.len() * 2).max(64);
    }
    Ok(compiled)
}

fn lookup(text: &str) -> Option<Arc<Validator>> {
    let memo = MEMO.lock().unwrap_or_else(|e| e.into_inner());
    memo.as_ref()?.by_text.get(text)?.upgrade()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_text_one_validator_while_held() {
        let text = r#"{"type":"object","properties":{"memo-test":{"type":"string"}}}"#;
        let schema: Value = serde_json::from_str(text).unwrap();
        let first = validator(text, &schema).unwrap();
        let second = validator(text, &schema).unwrap();
        assert!(Arc::ptr_eq(&first, &second), "the same text shares one");
        assert!(second.is_valid(&serde_json::json!({"memo-test": "x"})));
        assert!(!second.is_valid(&serde_json::json!({"memo-test": 1})));

        // Another text (even the same schema written otherwise) is its own.
        let spaced = r#"{ "type":"object","properties":{"memo-test":{"type":"string"}}}"#;
        let other = validator(spaced, &schema).unwrap();
        assert!(!Arc::ptr_eq(&first, &other));

        // Once no tool holds it, it is freed, and compiled afresh later.
        let weak = Arc::downgrade(&first);
        drop((first, second));
        assert!(
            weak.upgrade().is_none(),
            "the memo holds no validator alive"
        );
        let again = validator(text, &schema).unwrap();
        assert!(again.is_valid(&serde_json::json!({"memo-test": "y"})));

        // A schema that does not compile is an error each time.
        let bad = r#"{"type":"object","properties":{"a":{"type":"nonsense"}}}"#;
        let bad_schema: Value = serde_json::from_str(bad).unwrap();
        assert!(validator(bad, &bad_schema).is_err());
        assert!(validator(bad, &bad_schema).is_err());
    }
}
