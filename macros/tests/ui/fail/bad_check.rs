use ferrobot::tool;

fn sane(celsius: &f64) -> Result<(), String> {
    if *celsius > 30.0 { Err("too hot".into()) } else { Ok(()) }
}

/// Set the heating.
#[tool(check = sane)]
async fn heat(celsius: f64, room: String) -> String {
    format!("{celsius} in {room}")
}

/// Set the heating.
#[tool(check = "sane")]
async fn heat_quoted(celsius: f64) -> String {
    format!("{celsius}")
}

fn main() {}
