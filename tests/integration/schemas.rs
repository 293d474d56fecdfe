//! The schemas `#[tool]` produces, in every provider's form, for many
//! signatures: snapshots, plus checks that each form only uses what its
//! provider accepts.
// The tools exist for their signatures; their bodies ignore the arguments.
#![allow(unused_variables, dead_code)]

use std::collections::{BTreeMap, HashMap};

use ferrobot::tool;
use ferrobot::tool::Tool;
use ferrobot::tool::schema::{gemini, openai_strict};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Priority {
    /// Whenever.
    Low,
    /// Soon.
    High,
    /// Now.
    RightNow,
}

#[derive(Deserialize, JsonSchema)]
struct Point {
    /// Horizontal.
    x: f64,
    /// Vertical.
    y: f64,
}

#[derive(Deserialize, JsonSchema)]
struct Rect {
    /// Top-left corner.
    origin: Point,
    /// Size, if known.
    size: Option<Point>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Options {
    /// Follow symbolic links.
    follow_links: bool,
    /// How deep to go.
    #[serde(default = "default_depth")]
    max_depth: u32,
}

fn default_depth() -> u32 {
    3
}

#[derive(Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum Shape {
    /// A circle.
    Circle { radius: f64 },
    /// A square.
    Square { side: f64 },
}

#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum Amount {
    /// A count.
    Count(u32),
    /// A share, from 0 to 1.
    Share(f64),
    /// In words.
    Words(String),
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Action {
    /// Do nothing.
    Idle,
    /// Move by so much.
    Move { dx: i32, dy: i32 },
    /// Say something.
    Say(String),
}

#[derive(Deserialize, JsonSchema)]
#[serde(tag = "t", content = "c")]
enum Event {
    /// Started.
    Start(u64),
    /// Stopped.
    Stop,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Color {
    Red,
    Green,
}

/// No arguments.
#[tool]
async fn s01_none() {}

/// Integers.
#[tool]
async fn s02_integers(
    /** Signed. */
    a: i64,
    /** Unsigned. */
    b: u8,
) {
}

/// Floats and bools.
#[tool]
async fn s03_float_bool(
    /** A ratio. */
    ratio: f32,
    /** A flag. */
    flag: bool,
) {
}

/// Strings.
#[tool]
async fn s04_string(
    /** Some text. */
    text: String,
) {
}

/// Optional values.
#[tool]
async fn s05_options(
    /** Maybe a name. */
    name: Option<String>,
    /** Maybe a count. */
    count: Option<u32>,
) {
}

/// Lists.
#[tool]
async fn s06_vec(
    /** Paths. */
    paths: Vec<String>,
    /** Numbers. */
    numbers: Vec<i32>,
) {
}

/// A map.
#[tool]
async fn s07_map(
    /** Labels. */
    labels: HashMap<String, String>,
) {
}

/// A unit enum.
#[tool]
async fn s08_enum(
    /** How urgent. */
    priority: Priority,
) {
}

/// An optional enum.
#[tool]
async fn s09_optional_enum(
    /** How urgent, if it matters. */
    priority: Option<Priority>,
) {
}

/// A nested struct.
#[tool]
async fn s10_nested(
    /** Where. */
    point: Point,
) {
}

/// A struct inside a struct, with an optional one.
#[tool]
async fn s11_nested_twice(
    /** The area. */
    rect: Rect,
) {
}

/// Renamed fields and defaults.
#[tool]
async fn s12_rename_default(
    /** Walk options. */
    options: Options,
) {
}

/// A tagged enum with data.
#[tool]
async fn s13_tagged_enum(
    /** What to draw. */
    shape: Shape,
) {
}

/// A list of structs.
#[tool]
async fn s14_vec_of_structs(
    /** Points. */
    points: Vec<Point>,
) {
}

/// A list of enums.
#[tool]
async fn s15_vec_of_enums(
    /** Priorities. */
    priorities: Vec<Priority>,
) {
}

/// An optional list.
#[tool]
async fn s16_optional_vec(
    /** Tags, if any. */
    tags: Option<Vec<String>>,
) {
}

/// A map of structs.
#[tool]
async fn s17_map_of_structs(
    /** Named points. */
    points: BTreeMap<String, Point>,
) {
}

/// A defaulted argument.
#[tool]
async fn s18_serde_default(
    /** How many lines. */
    #[serde(default)]
    lines: u32,
) {
}

/// A renamed argument.
#[tool]
async fn s19_serde_rename(
    /** The type of thing. */
    #[serde(rename = "type")]
    kind: String,
) {
}

/// Free-form JSON.
#[tool]
async fn s20_value(
    /** Anything. */
    payload: Value,
) {
}

/// A tuple and a char.
#[tool]
async fn s21_tuple(
    /** A pair. */
    pair: (i32, String),
    /** One letter. */
    letter: char,
) {
}

/// An untagged enum.
#[tool]
async fn s23_untagged(
    /** How much. */
    amount: Amount,
) {
}

/// An externally tagged enum mixing unit and data variants.
#[tool]
async fn s24_external(
    /** What to do. */
    action: Action,
    /** Then, maybe. */
    then: Option<Action>,
) {
}

/// An adjacently tagged enum.
#[tool]
async fn s25_adjacent(
    /** What happened. */
    event: Event,
) {
}

/// An optional tagged enum and an undocumented unit enum.
#[tool]
async fn s26_optional_tagged(
    /** What to draw, if anything. */
    shape: Option<Shape>,
    /** Which color. */
    color: Color,
    /** Which colors. */
    palette: Vec<Color>,
) {
}

/// Everything at once.
#[tool]
async fn s22_mixed(
    /// Where.
    path: String,
    /// How urgent.
    priority: Option<Priority>,
    /// Options.
    options: Option<Options>,
    /// Points.
    points: Vec<Point>,
) {
}

fn all() -> Vec<Box<dyn Tool>> {
    vec![
        Box::new(s01_none),
        Box::new(s02_integers),
        Box::new(s03_float_bool),
        Box::new(s04_string),
        Box::new(s05_options),
        Box::new(s06_vec),
        Box::new(s07_map),
        Box::new(s08_enum),
        Box::new(s09_optional_enum),
        Box::new(s10_nested),
        Box::new(s11_nested_twice),
        Box::new(s12_rename_default),
        Box::new(s13_tagged_enum),
        Box::new(s14_vec_of_structs),
        Box::new(s15_vec_of_enums),
        Box::new(s16_optional_vec),
        Box::new(s17_map_of_structs),
        Box::new(s18_serde_default),
        Box::new(s19_serde_rename),
        Box::new(s20_value),
        Box::new(s21_tuple),
        Box::new(s22_mixed),
        Box::new(s23_untagged),
        Box::new(s24_external),
        Box::new(s25_adjacent),
        Box::new(s26_optional_tagged),
    ]
}

/// Every keyword anywhere in a schema, with the path where it is.
fn walk<'a>(value: &'a Value, path: &str, out: &mut Vec<(String, &'a str, &'a Value)>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                out.push((path.to_owned(), key.as_str(), v));
                // Property names are data, not keywords.
                if key == "properties" {
                    for (name, prop) in v.as_object().into_iter().flatten() {
                        walk(prop, &format!("{path}/properties/{name}"), out);
                    }
                } else {
                    walk(v, &format!("{path}/{key}"), out);
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(item, &format!("{path}/{i}"), out);
            }
        }
        _ => {}
    }
}

fn check_gemini(name: &str, schema: &Value) {
    let mut keywords = Vec::new();
    walk(schema, "", &mut keywords);
    for (path, key, value) in keywords {
        assert!(
            !matches!(
                key,
                "$ref"
                    | "$defs"
                    | "$schema"
                    | "additionalProperties"
                    | "const"
                    | "oneOf"
                    | "default"
            ),
            "{name}: Gemini rejects `{key}` at {path}"
        );
        if key == "type" {
            assert!(
                value.is_string(),
                "{name}: Gemini wants one type at {path}, got {value}"
            );
        }
        // Every schema is typed, or a choice of typed schemas; a choice of
        // constants is a typed `enum`.
        if key == "properties" || key == "items" {
            let schemas: Vec<&Value> = match value {
                Value::Object(props) if key == "properties" => props.values().collect(),
                other => vec![other],
            };
            for schema in schemas {
                assert!(
                    schema.get("type").is_some() || schema.get("anyOf").is_some(),
                    "{name}: Gemini wants a type under {path}/{key}: {schema}"
                );
                if let Some(Value::Array(variants)) = schema.get("anyOf") {
                    assert!(
                        !variants.iter().all(|v| v
                            .get("enum")
                            .and_then(Value::as_array)
                            .is_some_and(|e| e.len() == 1)),
                        "{name}: constants as `anyOf` under {path}/{key}; Gemini wants a typed `enum`"
                    );
                }
            }
        }
    }
}

fn check_strict(name: &str, schema: &Value) {
    let mut keywords = Vec::new();
    walk(schema, "", &mut keywords);
    for (path, key, value) in &keywords {
        assert!(
            !matches!(*key, "$ref" | "default" | "oneOf"),
            "{name}: strict mode rejects `{key}` at {path}"
        );
        if *key == "type"
            && (value == &&json!("object")
                || value
                    .as_array()
                    .is_some_and(|t| t.contains(&json!("object"))))
        {
            let object = keywords
                .iter()
                .filter(|(p, _, _)| p == path)
                .map(|(_, k, v)| (*k, *v))
                .collect::<HashMap<_, _>>();
            assert_eq!(
                object.get("additionalProperties"),
                Some(&&json!(false)),
                "{name}: open object at {path}"
            );
            let props: Vec<&String> = object["properties"].as_object().unwrap().keys().collect();
            let required: Vec<&str> = object["required"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            assert_eq!(
                props.len(),
                required.len(),
                "{name}: every property is required in strict mode at {path}"
            );
        }
    }
}

#[test]
fn every_signature_has_portable_schemas() {
    let tools = all();
    assert!(tools.len() >= 20);
    for tool in tools {
        let spec = tool.spec();
        let plain = &spec.parameters;
        assert_eq!(
            plain["type"], "object",
            "{}: arguments are an object",
            spec.name
        );
        assert!(
            plain.get("$schema").is_none() && plain.get("$defs").is_none(),
            "{}",
            spec.name
        );
        let strict = openai_strict(plain);
        if let Some(strict) = &strict {
            check_strict(&spec.name, strict);
        }
        let gemini = gemini(plain);
        check_gemini(&spec.name, &gemini);
        insta::assert_json_snapshot!(
            format!("schema_{}", spec.name),
            json!({"description": spec.description, "plain": plain, "openai_strict": strict, "gemini": gemini})
        );
    }
}

#[test]
fn maps_and_free_form_objects_have_no_strict_form() {
    assert!(openai_strict(&s07_map.spec().parameters).is_none());
    assert!(openai_strict(&s17_map_of_structs.spec().parameters).is_none());
    assert!(openai_strict(&s20_value.spec().parameters).is_none());
    assert!(openai_strict(&s22_mixed.spec().parameters).is_some());
}
