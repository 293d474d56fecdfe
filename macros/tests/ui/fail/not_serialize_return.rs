use ferrobot::tool;

struct Report {
    free: u64,
}

/// Report free disk space.
#[tool]
async fn report() -> Report {
    Report { free: 1 }
}

/// Report free disk space, or fail.
#[tool]
async fn fallible_report() -> Result<Report, std::io::Error> {
    Ok(Report { free: 1 })
}

fn main() {}
