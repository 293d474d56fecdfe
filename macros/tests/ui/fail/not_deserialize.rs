use ferrobot::tool;

struct Opaque;

#[derive(serde::Deserialize)]
struct OnlyDeserialize {
    _n: u32,
}

fn sane(_: &Opaque, _: &OnlyDeserialize, n: &u32) -> Result<(), String> {
    if *n > 9 { Err("too many".into()) } else { Ok(()) }
}

/// Use it.
#[tool(check = sane)]
async fn use_it(value: Opaque, other: OnlyDeserialize, n: u32) -> String {
    let _ = (value, other);
    n.to_string()
}

fn main() {
    let _ = use_it;
}
