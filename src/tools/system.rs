//! System readings with `sysinfo`.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sysinfo::{
    Components, Disks, MINIMUM_CPU_UPDATE_INTERVAL, Networks, ProcessesToUpdate, System,
};

use crate::tool;

/// Bytes as a short human figure: `42.0 GiB`.
fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A reading this machine refused, as a sentence for the model.
fn readable<T>(what: &str, reading: Result<T, sysinfo::Error>) -> Result<T, String> {
    reading.map_err(|e| format!("{what} can't be read on this machine ({e})"))
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        (part as f64 * 1000.0 / whole as f64).round() / 10.0
    }
}

/// One mounted filesystem.
#[derive(Debug, Serialize)]
pub struct DiskReport {
    mount: String,
    filesystem: String,
    total: String,
    available: String,
    used_percent: f64,
}

/// Free and used space of mounted filesystems: all of them, or the one
/// holding a path.
#[tool(read_only)]
pub async fn disk_usage(
    /// A path (e.g. "/" or "/home/ann"): report only the filesystem holding it.
    path: Option<String>,
) -> Result<Vec<DiskReport>, String> {
    let disks = readable("the disks", Disks::new_with_refreshed_list())?;
    let mut reports: Vec<(&sysinfo::Disk, DiskReport)> = disks
        .iter()
        .map(|d| {
            let used = d.total_space().saturating_sub(d.available_space());
            (
                d,
                DiskReport {
                    mount: d.mount_point().display().to_string(),
                    filesystem: d.file_system().to_string_lossy().into_owned(),
                    total: human(d.total_space()),
                    available: human(d.available_space()),
                    used_percent: percent(used, d.total_space()),
                },
            )
        })
        .collect();
    if let Some(path) = path {
        let target =
            std::fs::canonicalize(&path).map_err(|e| format!("can't resolve {path}: {e}"))?;
        // The longest mount point that contains the path holds it.
        let best = reports
            .iter()
            .enumerate()
            .filter(|(_, (d, _))| target.starts_with(d.mount_point()))
            .max_by_key(|(_, (d, _))| d.mount_point().as_os_str().len())
            .map(|(i, _)| i);
        let Some(best) = best else {
            return Err(format!(
                "no mounted filesystem holding {path} is visible here"
            ));
        };
        let chosen = reports.swap_remove(best);
        reports = vec![chosen];
    }
    if reports.is_empty() {
        return Err("no mounted filesystems are visible here (a sandbox may hide them)".into());
    }
    Ok(reports.into_iter().map(|(_, r)| r).collect())
}

/// Memory and swap use.
#[derive(Debug, Serialize)]
pub struct MemoryReport {
    total: String,
    used: String,
    available: String,
    used_percent: f64,
    swap_total: String,
    swap_used: String,
}

/// Memory and swap: total, used and available.
#[tool(read_only)]
pub async fn memory() -> Result<MemoryReport, String> {
    let mut system = readable("memory", System::new())?;
    system.refresh_memory();
    Ok(MemoryReport {
        total: human(system.total_memory()),
        used: human(system.used_memory()),
        available: human(system.available_memory()),
        used_percent: percent(system.used_memory(), system.total_memory()),
        swap_total: human(system.total_swap()),
        swap_used: human(system.used_swap()),
    })
}

/// CPU load.
#[derive(Debug, Serialize)]
pub struct CpuReport {
    cpus: usize,
    usage_percent: f32,
    load_average: Option<[f64; 3]>,
}

/// Current CPU usage (measured over a moment) and the load averages.
#[tool(read_only)]
pub async fn cpu_load() -> Result<CpuReport, String> {
    let mut system = readable("the CPUs", System::new())?;
    system.refresh_cpu_usage();
    tokio::time::sleep(MINIMUM_CPU_UPDATE_INTERVAL.max(Duration::from_millis(200))).await;
    system.refresh_cpu_usage();
    let load = System::load_average().ok();
    Ok(CpuReport {
        cpus: system.cpus().len(),
        usage_percent: (system.global_cpu_usage() * 10.0).round() / 10.0,
        load_average: load.map(|l| [l.one, l.five, l.fifteen]),
    })
}

/// One temperature sensor.
#[derive(Debug, Serialize)]
pub struct Temperature {
    sensor: String,
    celsius: f32,
    critical: Option<f32>,
}

/// Temperatures of the CPU and other sensors, where this machine exposes them.
#[tool(read_only)]
pub async fn temperatures() -> Result<Vec<Temperature>, String> {
    let components = readable(
        "the temperature sensors",
        Components::new_with_refreshed_list(),
    )?;
    let readings: Vec<Temperature> = components
        .iter()
        .filter_map(|c| {
            Some(Temperature {
                sensor: c.label().to_owned(),
                celsius: c.temperature()?,
                critical: c.critical(),
            })
        })
        .collect();
    if readings.is_empty() {
        return Err(
            "no temperature sensors are readable on this machine (common in VMs and containers)"
                .into(),
        );
    }
    Ok(readings)
}

/// How long this machine has been up.
#[tool(read_only)]
pub async fn uptime() -> Result<String, String> {
    let seconds = readable("the uptime", System::uptime())?;
    let (days, hours, minutes) = (
        seconds / 86_400,
        seconds % 86_400 / 3_600,
        seconds % 3_600 / 60,
    );
    Ok(format!(
        "up {days} days, {hours} hours, {minutes} minutes ({seconds} seconds)"
    ))
}

/// What to rank processes by.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Ranking {
    /// CPU use.
    #[default]
    Cpu,
    /// Resident memory.
    Memory,
}

/// One process.
#[derive(Debug, Serialize)]
pub struct ProcessReport {
    pid: u32,
    name: String,
    cpu_percent: f32,
    memory: String,
}

/// The processes using the most CPU or memory.
#[tool(read_only)]
pub async fn top_processes(
    /// Rank by "cpu" (the default) or "memory".
    by: Option<Ranking>,
    /// How many to list; by default 10, at most 50.
    limit: Option<u32>,
) -> Result<Vec<ProcessReport>, String> {
    let mut system = readable("the processes", System::new())?;
    system.refresh_processes(ProcessesToUpdate::All, true);
    tokio::time::sleep(MINIMUM_CPU_UPDATE_INTERVAL.max(Duration::from_millis(200))).await;
    system.refresh_processes(ProcessesToUpdate::All, true);
    let mut processes: Vec<&sysinfo::Process> = system.processes().values().collect();
    match by.unwrap_or_default() {
        Ranking::Cpu => processes.sort_by(|a, b| b.cpu_usage().total_cmp(&a.cpu_usage())),
        Ranking::Memory => processes.sort_by_key(|p| std::cmp::Reverse(p.memory())),
    }
    Ok(processes
        .into_iter()
        .take(limit.unwrap_or(10).clamp(1, 50) as usize)
        .map(|p| ProcessReport {
            pid: p.pid().as_u32(),
            name: p.name().to_string_lossy().into_owned(),
            cpu_percent: (p.cpu_usage() * 10.0).round() / 10.0,
            memory: human(p.memory()),
        })
        .collect())
}

/// One network interface.
#[derive(Debug, Serialize)]
pub struct InterfaceReport {
    name: String,
    addresses: Vec<String>,
    mac: String,
    received: String,
    transmitted: String,
}

/// Network interfaces: addresses and traffic since boot.
#[tool(read_only)]
pub async fn network_interfaces() -> Result<Vec<InterfaceReport>, String> {
    let networks = readable(
        "the network interfaces",
        Networks::new_with_refreshed_list(),
    )?;
    let mut reports: Vec<InterfaceReport> = networks
        .iter()
        .map(|(name, data)| InterfaceReport {
            name: name.to_string_lossy().into_owned(),
            addresses: data
                .ip_networks()
                .iter()
                .map(|n| format!("{}/{}", n.addr, n.prefix))
                .collect(),
            mac: data.mac_address().to_string(),
            received: human(data.total_received()),
            transmitted: human(data.total_transmitted()),
        })
        .collect();
    reports.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(reports)
}

/// The operating system.
#[derive(Debug, Serialize)]
pub struct OsReport {
    name: Option<String>,
    version: Option<String>,
    kernel: Option<String>,
    hostname: Option<String>,
    architecture: String,
}

/// The operating system, kernel, hostname and architecture.
#[tool(read_only)]
pub async fn os_info() -> OsReport {
    OsReport {
        name: System::name().ok(),
        version: System::os_version().ok(),
        kernel: System::kernel_version().ok(),
        hostname: System::host_name().ok(),
        architecture: std::env::consts::ARCH.to_owned(),
    }
}

/// A few lines on this machine, for a bot's start-up notice: host and
/// system, uptime, CPU, memory, the root filesystem and the hottest sensor.
/// Readings the machine refuses are left out.
pub async fn report() -> String {
    let os = os_info::run().await;
    let mut lines = vec![format!(
        "{} is up: {} {} ({})",
        os.hostname.as_deref().unwrap_or("this machine"),
        os.name.as_deref().unwrap_or("unknown system"),
        os.version.as_deref().unwrap_or_default(),
        os.architecture,
    )];
    if let Ok(up) = uptime::run().await {
        lines.push(format!("Uptime: {}", up.split(" (").next().unwrap_or(&up)));
    }
    if let Ok(cpu) = cpu_load::run().await {
        lines.push(format!("CPU: {}% of {} cores", cpu.usage_percent, cpu.cpus));
    }
    if let Ok(mem) = memory::run().await {
        lines.push(format!(
            "Memory: {} used of {} ({}%)",
            mem.used, mem.total, mem.used_percent
        ));
    }
    if let Ok(disks) = disk_usage::run(Some("/".into())).await {
        for disk in disks {
            lines.push(format!(
                "Disk {}: {} free of {}",
                disk.mount, disk.available, disk.total
            ));
        }
    }
    let hottest = temperatures::run().await.ok().and_then(|readings| {
        readings
            .into_iter()
            .max_by(|a, b| a.celsius.total_cmp(&b.celsius))
    });
    if let Some(hottest) = hottest {
        lines.push(format!(
            "Temperature: {:.0} °C ({})",
            hottest.celsius, hottest.sensor
        ));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_a_person_would_write_them() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(42 * 1024 * 1024 * 1024), "42.0 GiB");
        assert_eq!(percent(1, 3), 33.3);
        assert_eq!(percent(1, 0), 0.0);
    }

    #[tokio::test]
    async fn the_report_names_the_machine_and_its_readings() {
        let report = report().await;
        assert!(report.contains(" is up: "), "{report}");
        assert!(report.contains("\nMemory: "), "{report}");
    }
}
