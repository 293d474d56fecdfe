//! The JSON Schema a tool's arguments are held to, checked: the keywords
//! tool schemas use (types, `properties`/`required`/`additionalProperties`,
//! `items`/`prefixItems`, `enum`/`const`, bounds, lengths, `pattern`,
//! `uniqueItems`, the common `format`s, `anyOf`/`oneOf`/`allOf`/`not`, local
//! `$ref`s). Keywords it doesn't know are left alone, as JSON Schema does.
//!
//! Written here rather than taken from a general validator crate: those
//! carry every draft, remote references and a full regex engine, which
//! tripled the size of a program using ferrobot, for the few keywords a
//! tool schema holds. Patterns use `regex-lite`.

use std::collections::HashMap;
use std::fmt::Write as _;

use regex_lite::Regex;
use serde_json::{Map, Value};

/// A schema ready to check values against: its patterns compiled.
pub(crate) struct Schema {
    root: Value,
    patterns: HashMap<String, Regex>,
}

/// One way a value breaks the schema: where (`rooms[1].size`, empty for
/// the whole value) and what.
pub(crate) struct Problem {
    pub(crate) path: String,
    pub(crate) kind: Kind,
}

pub(crate) enum Kind {
    /// A required property is absent.
    Missing(String),
    /// Anything else, said in words.
    Other(String),
}

impl Schema {
    /// Compiles `root`'s patterns.
    ///
    /// # Errors
    /// The first pattern that is no regular expression, or a `$ref` that
    /// leads nowhere.
    pub(crate) fn new(root: &Value) -> Result<Self, String> {
        let mut patterns = HashMap::new();
        collect_patterns(root, &mut patterns)?;
        let schema = Self {
            root: root.clone(),
            patterns,
        };
        schema.check_refs(root)?;
        Ok(schema)
    }

    /// Every way `value` breaks the schema.
    pub(crate) fn problems(&self, value: &Value) -> Vec<Problem> {
        let mut problems = Vec::new();
        self.check(&self.root, value, &mut String::new(), &mut problems, 0);
        problems
    }

    fn check_refs(&self, schema: &Value) -> Result<(), String> {
        match schema {
            Value::Object(map) => {
                if let Some(Value::String(reference)) = map.get("$ref") {
                    self.resolve(reference)
                        .ok_or_else(|| format!("`$ref` {reference:?} leads nowhere"))?;
                }
                map.values().try_for_each(|v| self.check_refs(v))
            }
            Value::Array(items) => items.iter().try_for_each(|v| self.check_refs(v)),
            _ => Ok(()),
        }
    }

    /// A local reference (`#/$defs/Point`) within the root schema.
    fn resolve(&self, reference: &str) -> Option<&Value> {
        let pointer = reference.strip_prefix('#')?;
        self.root.pointer(pointer)
    }

    fn check(
        &self,
        schema: &Value,
        value: &Value,
        path: &mut String,
        problems: &mut Vec<Problem>,
        depth: usize,
    ) {
        let map = match schema {
            Value::Bool(false) => {
                return other(problems, path, format!("{value} is not allowed here"));
            }
            Value::Object(map) => map,
            _ => return,
        };
        // A reference loop is the schema's fault, not the value's.
        if depth > 64 {
            return;
        }
        if let Some(Value::String(reference)) = map.get("$ref")
            && let Some(target) = self.resolve(reference)
        {
            self.check(target, value, path, problems, depth + 1);
        }
        if let Some(types) = map.get("type")
            && !type_matches(types, value)
        {
            let expected = match types {
                Value::Array(list) => list
                    .iter()
                    .map(|t| format!("\"{}\"", t.as_str().unwrap_or("?")))
                    .collect::<Vec<_>>()
                    .join(", "),
                t => format!("\"{}\"", t.as_str().unwrap_or("?")),
            };
            // The rest would only repeat that the value is of another kind.
            return other(problems, path, format!("{value} is not of type {expected}"));
        }
        if let Some(Value::Array(options)) = map.get("enum")
            && !options.iter().any(|o| same(o, value))
        {
            other(
                problems,
                path,
                format!("{value} is not one of {}", Value::Array(options.clone())),
            );
        }
        if let Some(expected) = map.get("const")
            && !same(expected, value)
        {
            other(problems, path, format!("{expected} was expected"));
        }
        match value {
            Value::Number(n) => self.check_number(map, n, path, problems),
            Value::String(s) => self.check_string(map, s, path, problems),
            Value::Array(items) => self.check_array(map, items, path, problems, depth),
            Value::Object(object) => self.check_object(map, object, path, problems, depth),
            _ => {}
        }
        self.check_combinations(map, value, path, problems, depth);
    }

    fn check_number(
        &self,
        map: &Map<String, Value>,
        n: &serde_json::Number,
        path: &str,
        problems: &mut Vec<Problem>,
    ) {
        let Some(x) = n.as_f64() else { return };
        let bound = |key: &str| map.get(key).and_then(Value::as_f64);
        if let Some(min) = bound("minimum")
            && x < min
        {
            other(
                problems,
                path,
                format!("{n} is less than the minimum of {}", map["minimum"]),
            );
        }
        if let Some(max) = bound("maximum")
            && x > max
        {
            other(
                problems,
                path,
                format!("{n} is greater than the maximum of {}", map["maximum"]),
            );
        }
        if let Some(min) = bound("exclusiveMinimum")
            && x <= min
        {
            let limit = &map["exclusiveMinimum"];
            other(
                problems,
                path,
                format!("{n} is less than or equal to the minimum of {limit}"),
            );
        }
        if let Some(max) = bound("exclusiveMaximum")
            && x >= max
        {
            let limit = &map["exclusiveMaximum"];
            other(
                problems,
                path,
                format!("{n} is greater than or equal to the maximum of {limit}"),
            );
        }
        if let Some(step) = bound("multipleOf").filter(|s| *s > 0.0) {
            let quotient = x / step;
            if (quotient - quotient.round()).abs() > 1e-9 {
                let step = &map["multipleOf"];
                other(problems, path, format!("{n} is not a multiple of {step}"));
            }
        }
    }

    fn check_string(
        &self,
        map: &Map<String, Value>,
        s: &str,
        path: &str,
        problems: &mut Vec<Problem>,
    ) {
        let chars = s.chars().count() as u64;
        let shown = Value::String(s.to_owned());
        if let Some(min) = map.get("minLength").and_then(Value::as_u64)
            && chars < min
        {
            other(
                problems,
                path,
                format!("{shown} is shorter than {min} characters"),
            );
        }
        if let Some(max) = map.get("maxLength").and_then(Value::as_u64)
            && chars > max
        {
            other(
                problems,
                path,
                format!("{shown} is longer than {max} characters"),
            );
        }
        if let Some(Value::String(pattern)) = map.get("pattern")
            && let Some(regex) = self.patterns.get(pattern)
            && !regex.is_match(s)
        {
            other(
                problems,
                path,
                format!("{shown} does not match {pattern:?}"),
            );
        }
        if let Some(Value::String(format)) = map.get("format")
            && !format_matches(format, s)
        {
            other(problems, path, format!("{shown} is not a \"{format}\""));
        }
    }

    fn check_array(
        &self,
        map: &Map<String, Value>,
        items: &[Value],
        path: &mut String,
        problems: &mut Vec<Problem>,
        depth: usize,
    ) {
        let len = items.len() as u64;
        let shown = || Value::Array(items.to_vec());
        if let Some(min) = map.get("minItems").and_then(Value::as_u64)
            && len < min
        {
            other(
                problems,
                path,
                format!("{} has fewer than {min} items", shown()),
            );
        }
        if let Some(max) = map.get("maxItems").and_then(Value::as_u64)
            && len > max
        {
            other(
                problems,
                path,
                format!("{} has more than {max} items", shown()),
            );
        }
        if map.get("uniqueItems") == Some(&Value::Bool(true))
            && items
                .iter()
                .enumerate()
                .any(|(i, a)| items[..i].iter().any(|b| same(a, b)))
        {
            other(
                problems,
                path,
                format!("{} has non-unique elements", shown()),
            );
        }
        let prefix = map.get("prefixItems").and_then(Value::as_array);
        for (i, item) in items.iter().enumerate() {
            let schema = match prefix.and_then(|p| p.get(i)) {
                Some(schema) => schema,
                None => match map.get("items") {
                    Some(schema) => schema,
                    None => continue,
                },
            };
            let len = path.len();
            let _ = write!(path, "[{i}]");
            self.check(schema, item, path, problems, depth + 1);
            path.truncate(len);
        }
    }

    fn check_object(
        &self,
        map: &Map<String, Value>,
        object: &Map<String, Value>,
        path: &mut String,
        problems: &mut Vec<Problem>,
        depth: usize,
    ) {
        if let Some(Value::Array(required)) = map.get("required") {
            for name in required.iter().filter_map(Value::as_str) {
                if !object.contains_key(name) {
                    problems.push(Problem {
                        path: path.clone(),
                        kind: Kind::Missing(name.to_owned()),
                    });
                }
            }
        }
        let count = object.len() as u64;
        if let Some(min) = map.get("minProperties").and_then(Value::as_u64)
            && count < min
        {
            other(problems, path, format!("has fewer than {min} properties"));
        }
        if let Some(max) = map.get("maxProperties").and_then(Value::as_u64)
            && count > max
        {
            other(problems, path, format!("has more than {max} properties"));
        }
        let properties = map.get("properties").and_then(Value::as_object);
        for (name, item) in object {
            let schema = match properties.and_then(|p| p.get(name)) {
                Some(schema) => schema,
                None => match map.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        other(problems, path, format!("`{name}` is not a known property"));
                        continue;
                    }
                    Some(schema) => schema,
                    None => continue,
                },
            };
            let len = path.len();
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(name);
            self.check(schema, item, path, problems, depth + 1);
            path.truncate(len);
        }
    }

    fn check_combinations(
        &self,
        map: &Map<String, Value>,
        value: &Value,
        path: &mut String,
        problems: &mut Vec<Problem>,
        depth: usize,
    ) {
        if let Some(Value::Array(all)) = map.get("allOf") {
            for schema in all {
                self.check(schema, value, path, problems, depth + 1);
            }
        }
        let fits = |schema: &Value| {
            let mut none = Vec::new();
            self.check(schema, value, &mut path.clone(), &mut none, depth + 1);
            none.is_empty()
        };
        if let Some(Value::Array(any)) = map.get("anyOf")
            && !any.iter().any(fits)
        {
            other(
                problems,
                path,
                format!("{value} fits none of the forms `anyOf` allows"),
            );
        }
        if let Some(Value::Array(one)) = map.get("oneOf") {
            match one.iter().filter(|s| fits(s)).count() {
                1 => {}
                0 => other(
                    problems,
                    path,
                    format!("{value} fits none of the forms `oneOf` allows"),
                ),
                _ => other(
                    problems,
                    path,
                    format!("{value} fits more than one of the forms `oneOf` allows"),
                ),
            }
        }
        if let Some(not) = map.get("not")
            && fits(not)
        {
            other(
                problems,
                path,
                format!("{value} is of a form `not` forbids"),
            );
        }
    }
}

/// Whether `schema` says anything a value's type can't: a bound, a length,
/// a pattern, an `enum`, a standard `format`, … (`type`, `properties`,
/// `required` and schemars' numeric formats are the type's to hold).
pub(crate) fn constrains(schema: &Value) -> bool {
    const CHECKS: [&str; 15] = [
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "const",
        "not",
    ];
    match schema {
        Value::Object(map) => map.iter().any(|(key, value)| match key.as_str() {
            key if CHECKS.contains(&key) => true,
            "enum" => true,
            "format" => value.as_str().is_some_and(|f| format_check(f).is_some()),
            "properties" => value
                .as_object()
                .is_some_and(|props| props.values().any(constrains)),
            _ => constrains(value),
        }),
        Value::Array(items) => items.iter().any(constrains),
        _ => false,
    }
}

fn other(problems: &mut Vec<Problem>, path: &str, what: String) {
    problems.push(Problem {
        path: path.to_owned(),
        kind: Kind::Other(what),
    });
}

fn collect_patterns(schema: &Value, into: &mut HashMap<String, Regex>) -> Result<(), String> {
    match schema {
        Value::Object(map) => {
            if let Some(Value::String(pattern)) = map.get("pattern")
                && !into.contains_key(pattern)
            {
                let regex = Regex::new(pattern).map_err(|e| {
                    format!("the pattern {pattern:?} is no regular expression: {e}")
                })?;
                into.insert(pattern.clone(), regex);
            }
            // Property names are data: a property called `pattern` is not
            // the keyword.
            for (key, value) in map {
                if key == "properties" {
                    for prop in value.as_object().into_iter().flat_map(Map::values) {
                        collect_patterns(prop, into)?;
                    }
                } else if key != "enum" && key != "const" {
                    collect_patterns(value, into)?;
                }
            }
            Ok(())
        }
        Value::Array(items) => items.iter().try_for_each(|v| collect_patterns(v, into)),
        _ => Ok(()),
    }
}

fn type_matches(types: &Value, value: &Value) -> bool {
    let one = |t: &Value| match t.as_str() {
        Some("string") => value.is_string(),
        Some("boolean") => value.is_boolean(),
        Some("null") => value.is_null(),
        Some("object") => value.is_object(),
        Some("array") => value.is_array(),
        Some("number") => value.is_number(),
        // 3.0 is an integer too, as JSON Schema counts.
        Some("integer") => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|x| x.fract() == 0.0)
        }
        _ => true,
    };
    match types {
        Value::Array(list) => list.iter().any(one),
        t => one(t),
    }
}

/// Equal as JSON Schema counts: numbers by value (`1` and `1.0` are the same).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, a)| y.get(k).is_some_and(|b| same(a, b)))
        }
        _ => a == b,
    }
}

/// Whether `s` is of `format`: true for formats left to the type.
fn format_matches(format: &str, s: &str) -> bool {
    format_check(format).is_none_or(|matches| matches(s))
}

/// The check of a standard format a tool's arguments use; `None` for
/// others (schemars' `uint8`, `double`, …), which are left to the type, as
/// JSON Schema allows.
fn format_check(format: &str) -> Option<fn(&str) -> bool> {
    Some(match format {
        "email" => email,
        "uri" | "url" => uri,
        "uuid" => uuid,
        "ipv4" => |s| s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => |s| s.parse::<std::net::Ipv6Addr>().is_ok(),
        "hostname" => hostname,
        "date" => date,
        "time" => time,
        "date-time" => |s| {
            s.split_once(['T', 't'])
                .is_some_and(|(d, t)| date(d) && time(t))
        },
        _ => return None,
    })
}

fn email(s: &str) -> bool {
    let Some((local, domain)) = s.rsplit_once('@') else {
        return false;
    };
    !local.is_empty()
        && !local.chars().any(char::is_whitespace)
        && (hostname(domain) || domain.starts_with('[') && domain.ends_with(']'))
}

fn uri(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && !rest.is_empty()
        && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

fn uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups
            .iter()
            .all(|g| g.chars().all(|c| c.is_ascii_hexdigit()))
}

fn hostname(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

/// `YYYY-MM-DD`, a real day.
fn date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let number = |r: std::ops::Range<usize>| s.get(r)?.parse::<u32>().ok();
    let (Some(year), Some(month), Some(day)) = (number(0..4), number(5..7), number(8..10)) else {
        return false;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// `HH:MM:SS[.frac](Z|±HH:MM)`, as RFC 3339 writes it.
fn time(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 9 || b[2] != b':' || b[5] != b':' {
        return false;
    }
    let two = |i: usize| s.get(i..i + 2).and_then(|d| d.parse::<u32>().ok());
    let (Some(h), Some(m), Some(sec)) = (two(0), two(3), two(6)) else {
        return false;
    };
    if h > 23 || m > 59 || sec > 60 {
        return false;
    }
    let mut rest = &s[8..];
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return false;
        }
        rest = &fraction[digits..];
    }
    match rest.as_bytes() {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', ..] if rest.len() == 6 && rest.as_bytes()[3] == b':' => {
            two_digits(&rest[1..3]).is_some_and(|h| h <= 23)
                && two_digits(&rest[4..6]).is_some_and(|m| m <= 59)
        }
        _ => false,
    }
}

fn two_digits(s: &str) -> Option<u32> {
    s.chars()
        .all(|c| c.is_ascii_digit())
        .then(|| s.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn said(schema: &Value, value: &Value) -> Vec<String> {
        Schema::new(schema)
            .unwrap()
            .problems(value)
            .into_iter()
            .map(|p| match p.kind {
                Kind::Missing(name) => format!("{}:missing {name}", p.path),
                Kind::Other(what) => format!("{}:{what}", p.path),
            })
            .collect()
    }

    #[test]
    fn numbers_strings_and_lists_keep_their_bounds() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer", "minimum": 1, "maximum": 5, "multipleOf": 2},
            "x": {"type": "number", "exclusiveMinimum": 0},
            "s": {"type": "string", "minLength": 2, "pattern": "^[a-z]+$"},
            "l": {"type": "array", "maxItems": 2, "uniqueItems": true, "items": {"enum": [1, 2]}}
        }, "additionalProperties": false});
        assert!(
            said(
                &schema,
                &json!({"n": 4, "x": 0.5, "s": "ab", "l": [1, 2.0]})
            )
            .is_empty()
        );
        assert_eq!(
            said(
                &schema,
                &json!({"n": 7, "x": 0, "s": "A", "l": [1, 1, 3], "z": true})
            ),
            [
                "l:[1,1,3] has more than 2 items",
                "l:[1,1,3] has non-unique elements",
                "l[2]:3 is not one of [1,2]",
                "n:7 is greater than the maximum of 5",
                "n:7 is not a multiple of 2",
                "s:\"A\" is shorter than 2 characters",
                "s:\"A\" does not match \"^[a-z]+$\"",
                "x:0 is less than or equal to the minimum of 0",
                ":`z` is not a known property",
            ]
        );
    }

    #[test]
    fn choices_references_and_types() {
        let schema = json!({
            "$defs": {"Point": {"type": "object", "required": ["x"], "properties": {"x": {"type": "number"}}}},
            "type": "object",
            "properties": {
                "at": {"$ref": "#/$defs/Point"},
                "either": {"oneOf": [{"type": "string"}, {"type": "integer", "minimum": 0}]},
                "maybe": {"type": ["string", "null"]}
            }
        });
        assert!(
            said(
                &schema,
                &json!({"at": {"x": 1}, "either": 3, "maybe": null})
            )
            .is_empty()
        );
        assert_eq!(
            said(&schema, &json!({"at": {}, "either": -1, "maybe": 2})),
            [
                "at:missing x",
                "either:-1 fits none of the forms `oneOf` allows",
                "maybe:2 is not of type \"string\", \"null\"",
            ]
        );
        assert!(Schema::new(&json!({"$ref": "#/$defs/Nothing"})).is_err());
        assert!(Schema::new(&json!({"pattern": "(["})).is_err());
    }

    #[test]
    fn a_schema_of_types_alone_constrains_nothing() {
        let typed = json!({"type": "object", "required": ["a"], "properties": {
            "a": {"type": "integer", "format": "int64"},
            "minimum": {"type": ["string", "null"], "description": "a property named like a keyword"},
            "p": {"anyOf": [{"type": "object", "properties": {"x": {"type": "number"}}}, {"type": "null"}]}
        }});
        assert!(!constrains(&typed));
        for extra in [
            json!({"type": "integer", "minimum": 0}),
            json!({"type": "string", "format": "email"}),
            json!({"enum": ["a", "b"]}),
            json!({"type": "array", "items": {"type": "string", "pattern": "^x"}}),
        ] {
            let mut schema = typed.clone();
            schema["properties"]["b"] = extra.clone();
            assert!(constrains(&schema), "{extra}");
        }
    }

    #[test]
    fn formats_take_what_their_standards_allow() {
        for (format, good, bad) in [
            ("email", "ann@example.com", "ann"),
            ("uri", "https://example.com/a?b", "not a url"),
            ("uuid", "67e55044-10b1-426f-9247-bb680e5fe0c8", "67e55044"),
            ("ipv4", "10.0.0.1", "10.0.0.256"),
            ("ipv6", "::1", "1::2::3"),
            ("hostname", "db-1.example.com", "-db"),
            ("date", "2024-02-29", "2023-02-29"),
            ("time", "23:59:60.5+01:00", "24:00:00Z"),
            ("date-time", "2026-12-01T18:37:28Z", "2026-12-01 18:37"),
        ] {
            assert!(format_matches(format, good), "{format}: {good}");
            assert!(!format_matches(format, bad), "{format}: {bad}");
        }
        assert!(format_matches("uint8", "anything"));
    }
}
